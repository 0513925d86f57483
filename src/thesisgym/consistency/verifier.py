"""ConsistencyVerifier and the TRL reward `make_consistency_reward`: Trade-R1's s in [0, 1].

s combines the three triangular scores of a judge (factuality, deduction, consistency):
`combine="mean"` (default, Trade-R1), `"min"` (a chain is as strong as its weakest edge) or
`"geometric"` (geometric mean: one broken edge drags s to ~0 but not exactly 0 unless it is 0).

The reward reads the `evidence` column that TRL passes through kwargs, scores the whole batch at once
(one index per distinct evidence list; the LLM judge sends the batch concurrently), logs the mean of
each part through TRL's `log_metric` when given, and never raises: a completion that cannot be scored
(the evidence column missing or of the wrong length, a row without an evidence list, a judge or
retriever that raises) gets s = 0.0, an explicit penalty rather than None, and every such failure
goes through the verifier's one counted error path (`rewards.base.record_error`: counted in
`reward_errors`, logged once per distinct error, re-raised in strict mode), as do the parser's.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from thesisgym.consistency.judges import LLMJudge, LocalJudge, Verdict, make_judge
from thesisgym.consistency.retrieval import (
    JudgeContext,
    Retriever,
    ThesisClaims,
    context_queries,
    count_tokens,
    make_retriever,
    select_context,
    split_claims,
)
from thesisgym.rewards.base import record_error

logger = logging.getLogger(__name__)

COMBINES = ("mean", "min", "geometric")


def combine_scores(f: float, d: float, c: float, how: str = "mean") -> float:
    if how == "mean":
        return (f + d + c) / 3.0
    if how == "min":
        return min(f, d, c)
    if how == "geometric":
        return math.prod(max(x, 0.0) for x in (f, d, c)) ** (1.0 / 3.0)
    raise ValueError(f"combine must be one of {COMBINES}, got {how!r}")


@dataclass(frozen=True)
class ConsistencyResult:
    """s and its parts for one completion, plus what the judge saw."""

    s: float
    factuality: float
    deduction: float
    consistency: float
    decision: str | None
    n_claims: int
    judge_tokens: int  # tokens of the compressed evidence context the judge saw
    full_tokens: int  # tokens of the full prompt (or the full rendered evidence)
    source: str = "local"
    rationale: str = ""

    @property
    def compression(self) -> float:
        return self.full_tokens / max(self.judge_tokens, 1)

    def as_dict(self) -> dict[str, float | str | None]:
        return {
            "s": self.s, "factuality": self.factuality, "deduction": self.deduction,
            "consistency": self.consistency, "decision": self.decision, "n_claims": self.n_claims,
            "judge_tokens": self.judge_tokens, "full_tokens": self.full_tokens,
            "compression": self.compression, "source": self.source, "rationale": self.rationale,
        }


ZERO = ConsistencyResult(0.0, 0.0, 0.0, 0.0, None, 0, 0, 0, "error", "could not be scored")


def _prompt_tokens(prompt: Any) -> int | None:
    if isinstance(prompt, str):
        return count_tokens(prompt)
    if isinstance(prompt, (list, tuple)):
        return sum(count_tokens(str(m.get("content", ""))) for m in prompt if isinstance(m, dict))
    return None


class ConsistencyVerifier:
    """Two-stage verifier: retrieve the evidence of each claim, then judge the triangle.

    judge:     "local" (default) | "llm" | a judge object; `judge_options` go to LLMJudge
               (model=, base_url=, client=, fallback=, ...)
    retriever: "bm25" (default) | "embedding" | a retriever object; `retriever_options` go to it
    top_k:     retrieved passages per claim besides the cited ones
    decision_k: passages retrieved for the decision
    max_context_tokens: token budget of the compressed judge context (default 256: >= 5x compression
               of the synthetic prompts with 40+ items; None = unbounded)
    combine:   "mean" | "min" | "geometric"
    """

    def __init__(
        self,
        *,
        judge: str | Any = "local",
        retriever: str | Retriever = "bm25",
        top_k: int = 1,
        decision_k: int = 4,
        max_context_tokens: int | None = 256,
        combine: str = "mean",
        judge_options: dict[str, Any] | None = None,
        retriever_options: dict[str, Any] | None = None,
    ) -> None:
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
        if top_k < 0 or decision_k < 0:
            raise ValueError(f"top_k and decision_k must be >= 0, got {top_k}, {decision_k}")
        if max_context_tokens is not None and max_context_tokens < 1:
            raise ValueError(f"max_context_tokens must be >= 1 or None, got {max_context_tokens}")
        self.judge = make_judge(judge, **(judge_options or {}))
        self.retriever = make_retriever(retriever, **(retriever_options or {}))
        self.top_k, self.decision_k = top_k, decision_k
        self.max_context_tokens = max_context_tokens
        self.combine = combine

    # --- stage 1 -----------------------------------------------------------------------------------
    def prepare(self, completion: Any, evidence: Sequence[dict]) -> tuple[ThesisClaims, JudgeContext]:
        """Claims of one completion and its compressed judge context."""
        return self.prepare_batch([completion], [evidence])[0]

    def prepare_batch(
        self, completions: Sequence[Any], evidences: Sequence[Sequence[dict]]
    ) -> list[tuple[ThesisClaims, JudgeContext]]:
        """Like `prepare` for a batch: completions that share a prompt share one index and are scored
        by the retriever in one call (GRPO puts a prompt's num_generations completions together)."""
        theses = [split_claims(c) for c in completions]
        indexes = [self.retriever.index(e) for e in evidences]
        # the decision's passages (what an LLM judge reads first) are retrieved by the direction-neutral
        # DECISION_QUERY alone: neither the thesis's conclusion nor its label may choose them (the
        # local judge's evidence<->decision edge reads every passage of the context)
        dtexts = [""] * len(theses)
        queries = [context_queries(t.claims, d) for t, d in zip(theses, dtexts, strict=True)]
        groups: dict[int, list[int]] = {}
        for i, idx in enumerate(indexes):
            groups.setdefault(id(idx), []).append(i)
        scores: list[np.ndarray | None] = [None] * len(theses)
        for members in groups.values():
            index = indexes[members[0]]
            if not index.passages:
                continue
            block = self.retriever.scores(index, [q for i in members for q in queries[i]])
            lo = 0
            for i in members:
                scores[i] = block[lo : lo + len(queries[i])]
                lo += len(queries[i])
        return [
            (t, select_context(idx, t.claims, self.retriever, top_k=self.top_k, decision_k=self.decision_k,
                               decision_text=d, max_context_tokens=self.max_context_tokens, scores=sc))
            for t, idx, d, sc in zip(theses, indexes, dtexts, scores, strict=True)
        ]

    def _result(self, thesis: ThesisClaims, ctx: JudgeContext, v: Verdict, prompt: Any) -> ConsistencyResult:
        full = _prompt_tokens(prompt)
        return ConsistencyResult(
            s=combine_scores(v.factuality, v.deduction, v.consistency, self.combine),
            factuality=v.factuality, deduction=v.deduction, consistency=v.consistency,
            decision=thesis.decision, n_claims=len(thesis.claims), judge_tokens=ctx.tokens,
            full_tokens=full if full is not None else ctx.index.full_tokens,
            source=v.source, rationale=v.rationale,
        )

    # --- public API ----------------------------------------------------------------------------------
    def score(self, completion: Any, evidence: Sequence[dict], *, prompt: Any = None) -> ConsistencyResult:
        """Score one completion (str or TRL conversational) against its prompt's evidence items."""
        return self.score_batch([completion], [evidence], prompts=[prompt])[0]

    def score_batch(
        self,
        completions: Sequence[Any],
        evidences: Sequence[Sequence[dict]],
        *,
        prompts: Sequence[Any] | None = None,
    ) -> list[ConsistencyResult]:
        """Score a batch; raises ValueError on mismatched lengths or a malformed evidence list."""
        if len(completions) != len(evidences):
            raise ValueError(f"{len(completions)} completions but {len(evidences)} evidence lists")
        prompts = list(prompts) if prompts is not None else [None] * len(completions)
        if len(prompts) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(prompts)} prompts")
        prepared = self.prepare_batch(completions, evidences)
        if isinstance(self.judge, LocalJudge):
            verdicts = [self.judge.judge(t, c) for t, c in prepared]
        elif hasattr(self.judge, "judge_batch"):
            verdicts = self.judge.judge_batch(prepared)
        else:
            verdicts = [self.judge.judge(t, c) for t, c in prepared]
        return [self._result(t, c, v, p) for (t, c), v, p in zip(prepared, verdicts, prompts, strict=False)]

    async def ascore_batch(
        self, completions: Sequence[Any], evidences: Sequence[Sequence[dict]], *, prompts: Sequence[Any] | None = None
    ) -> list[ConsistencyResult]:
        """Async variant (the LLM judge's requests run on the caller's loop)."""
        if len(completions) != len(evidences):
            raise ValueError(f"{len(completions)} completions but {len(evidences)} evidence lists")
        prompts = list(prompts) if prompts is not None else [None] * len(completions)
        prepared = self.prepare_batch(completions, evidences)
        if isinstance(self.judge, LLMJudge):
            verdicts = await self.judge.ajudge_batch(prepared)
        else:
            verdicts = [self.judge.judge(t, c) for t, c in prepared]
        return [self._result(t, c, v, p) for (t, c), v, p in zip(prepared, verdicts, prompts, strict=False)]


WHERE = "consistency_reward"


def _rows_to_score(prompts: Any, completions: Sequence[Any], evidence: Any) -> tuple[list[int], list[Any]] | None:
    """(rows to score, prompts) of a batch; a missing or short column and rows without an evidence
    list are counted errors (s = 0 for them)."""
    n = len(completions)
    if not isinstance(evidence, (list, tuple)) or len(evidence) != n:
        got = "missing" if evidence is None else f"{type(evidence).__name__} of length {len(evidence) if hasattr(evidence, '__len__') else '?'}"
        record_error(WHERE, ValueError(f"column 'evidence': expected a list of {n} evidence lists, got {got}; s = 0"))
        return None
    todo = [i for i in range(n) if isinstance(evidence[i], (list, tuple))]
    for i in range(n):
        if i not in todo:
            record_error(WHERE, ValueError(f"row {i}: 'evidence' is {type(evidence[i]).__name__}, not a list; s = 0"))
    plist = list(prompts) if prompts is not None and len(prompts) == n else [None] * n
    return todo, plist


def _score_rows(v: ConsistencyVerifier, prompts: Any, completions: Sequence[Any], evidence: Any) -> list[ConsistencyResult]:
    """Score a batch; if the batch fails, score row by row so one bad row costs only its own s (and
    is a counted error)."""
    results = [ZERO] * len(completions)
    plan = _rows_to_score(prompts, completions, evidence)
    if plan is None:
        return results
    todo, plist = plan
    try:
        scored = v.score_batch([completions[i] for i in todo], [evidence[i] for i in todo],
                               prompts=[plist[i] for i in todo])
        for i, r in zip(todo, scored, strict=True):
            results[i] = r
        return results
    except Exception:  # noqa: BLE001 - isolate the failing row below, where it is counted
        pass
    for i in todo:
        try:
            results[i] = v.score_batch([completions[i]], [evidence[i]], prompts=[plist[i]])[0]
        except Exception as exc:  # a reward must never kill a training run: counted, s = 0
            record_error(WHERE, exc)
    return results


def _log_parts(results: Sequence[ConsistencyResult], log_metric: Any) -> None:
    if not callable(log_metric) or not results:
        return
    try:
        for part in ("factuality", "deduction", "consistency", "compression"):
            log_metric(f"consistency/{part}", float(np.mean([getattr(r, part) for r in results])))
        log_metric("consistency/fallback_rate", float(np.mean([r.source == "fallback" for r in results])))
    except Exception:  # noqa: BLE001 - logging is best effort
        pass


def make_consistency_reward(
    *,
    judge: str | Any = "local",
    retriever: str | Retriever = "bm25",
    name: str | None = None,
    verifier: ConsistencyVerifier | None = None,
    asynchronous: bool = False,
    **opts: Any,
) -> Callable[..., Any]:
    """A TRL reward `fn(prompts, completions, **kwargs) -> list[float]` returning s in [0, 1].

    `opts` go to ConsistencyVerifier (top_k, decision_k, max_context_tokens, combine) or, for the
    judge / retriever, as `judge_options={...}` / `retriever_options={...}`; LLM judge options may also
    be given flat (model=, base_url=, client=, fallback=, ...). The callable's `__name__` is
    "consistency_reward" (or "consistency_reward_<name>") so TRL logs it apart from other rewards;
    `fn.verifier` is the verifier and `fn.last_results` the ConsistencyResults of the last call.
    `asynchronous=True` returns an `async def` reward (TRL runs those concurrently with the other
    rewards: worth it for the LLM judge). The mean of each part is logged through TRL's `log_metric`.
    """
    verifier_keys = {"top_k", "decision_k", "max_context_tokens", "combine", "judge_options", "retriever_options"}
    vkw = {k: opts.pop(k) for k in list(opts) if k in verifier_keys}
    if opts:  # flat LLM-judge options
        if judge != "llm":
            raise TypeError(f"unknown option(s) {sorted(opts)} for judge={judge!r}")
        vkw["judge_options"] = {**vkw.get("judge_options", {}), **opts}
    v = verifier or ConsistencyVerifier(judge=judge, retriever=retriever, **vkw)

    def consistency_reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                           **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        results = _score_rows(v, prompts, completions, kwargs.get("evidence"))
        consistency_reward.last_results = results
        _log_parts(results, kwargs.get("log_metric"))
        return [float(r.s) for r in results]

    async def consistency_reward_async(prompts: Sequence[Any] | None = None,
                                       completions: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        evidence = kwargs.get("evidence")
        results = [ZERO] * len(completions)
        plan = _rows_to_score(prompts, completions, evidence)
        if plan is not None:
            todo, plist = plan
            try:
                scored = await v.ascore_batch([completions[i] for i in todo], [evidence[i] for i in todo],
                                              prompts=[plist[i] for i in todo])
                for i, r in zip(todo, scored, strict=True):
                    results[i] = r
            except Exception:  # noqa: BLE001 - the row-isolating sync path scores again and counts the failures
                results = _score_rows(v, prompts, completions, evidence)
        consistency_reward_async.last_results = results
        _log_parts(results, kwargs.get("log_metric"))
        return [float(r.s) for r in results]

    fn: Any = consistency_reward_async if asynchronous else consistency_reward
    fn.__name__ = f"consistency_reward_{name}" if name else "consistency_reward"
    fn.__qualname__ = fn.__name__
    fn.verifier = v
    fn.last_results = []
    return fn
