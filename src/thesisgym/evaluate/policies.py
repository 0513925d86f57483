"""Policies (anything that writes theses for dataset rows) and the reasoning metrics of their output.

A policy is `decide(rows) -> list[str]`: one completion per dataset row, in order. Evaluation is
then the same whatever produced the text:

- `JsonlPolicy(path)`: completions precomputed elsewhere, read and joined to the split by
  `thesisgym.evaluate.completions` (by the split's row `index` or by `ticker` + `asof` +
  `variation` [+ `probe`]); `evaluate` binds it to the split first, and a row without a
  completion raises with the count and an example of the missing rows.
- `HFPolicy(model_path, ...)`: transformers `generate` (chat template when the tokenizer has one,
  left padding, batched); uses vLLM instead when it is installed, a GPU is present and
  `use_vllm` is not False. A missing local path, or a hub name not in the cache while
  `HF_HUB_OFFLINE` is set, is a one-line ValueError before anything is loaded.
- `OpenAIPolicy(base_url, model, ...)`: any OpenAI-compatible endpoint through `thesisgym.llm.LLMClient`
  (cache, retries, timeouts, concurrency). A request that fails for good becomes an empty completion
  AND is recorded in `last_errors` (aligned with the rows of the last `decide`), so evaluation counts
  transport errors apart from the model's format errors.
- `CallablePolicy(fn)`: `fn(row) -> str`, for tests and quick experiments.
- `RememberingPolicy(policy)`: writes once per prompt, so a checkpoint compared and then backtested on
  the same prompts is not asked twice.

Policies that can sample again with another seed have `reseeded(seed)` (the probes' noise baseline).

`score_rows(completions, rows)` scores each completion with the one verifier,
`thesisgym.rewards.score_completion`, feeding it the Trade-R1 consistency s of the configured judge
(`thesisgym.consistency.ConsistencyVerifier`, local by default), so the fsr/dsr columns are the
training rewards; `reasoning_metrics` aggregates: hallucination rate, grounding, decision accuracy,
5x5 confusion matrix (rows = truth, columns = prediction, schema.LABELS order), loop rate,
invalid-decision rate.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from thesisgym.evaluate.completions import Key, join_completions, read_completions, row_key
from thesisgym.rewards import score_completion
from thesisgym.schema import LABELS, ArgumentError
from thesisgym.thesis import completion_text, parse_thesis

INVALID = "INVALID"


@runtime_checkable
class Policy(Protocol):
    """Writes one completion per dataset row."""

    name: str

    def decide(self, rows: Sequence[dict]) -> list[str]: ...


def decision_of(completion: Any) -> str:
    """The valid decision of a completion (the thesis parser's), or INVALID."""
    dec = parse_thesis(completion_text(completion)).decision
    return dec if dec in LABELS else INVALID


# --- policies ------------------------------------------------------------------------------------------
class CallablePolicy:
    def __init__(self, fn: Callable[[dict], str], *, name: str = "callable") -> None:
        self.fn = fn
        self.name = name

    def decide(self, rows: Sequence[dict]) -> list[str]:
        return [completion_text(self.fn(row)) for row in rows]


class JsonlPolicy:
    """Completions read from a JSONL file (e.g. the completions.jsonl of an earlier `evaluate`)."""

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self.records = read_completions(self.path)
        self.by_key: dict[Key, str] | None = None
        if all(r.index is None for r in self.records):
            # keyed files need no split to be read; index-keyed ones wait for `bind`
            self.bind(None)

    def bind(self, keys: Sequence[Key] | None) -> None:
        """Join the records to the split whose row keys (in row order) are `keys`."""
        if keys is None:
            keys = sorted({(str(r.ticker), str(r.asof), r.variation, "") for r in self.records})
        joined, _ = join_completions(self.records, keys, path=self.path)
        self.by_key = {k: rec.text for k, rec in joined.items()}

    @property
    def probes(self) -> set[str]:
        return {r.probe for r in self.records}

    def supports_probe(self, probe: str) -> bool:
        return probe in self.probes

    def decide(self, rows: Sequence[dict]) -> list[str]:
        if self.by_key is None:
            raise ValueError(f"{self.path}: completions keyed by 'index' need the split: call bind(split_keys(split))")
        missing = [(i, row_key(r)) for i, r in enumerate(rows) if row_key(r) not in self.by_key]
        if missing:
            i, key = missing[0]
            raise ValueError(
                f"{self.path}: no completion for {len(missing)} of {len(rows)} rows (first: row {i} {key})"
            )
        return [self.by_key[row_key(r)] for r in rows]


def check_model_source(model: str) -> None:
    """Fail at once, in one line, for a model that cannot be loaded without a network wait.

    A path that looks local (./x, ../x, /x, ~/x, or a name with more than one '/') must exist;
    a hub id (name or org/name) must be in the local cache when HF_HUB_OFFLINE is set. Errors are
    `ArgumentError`s naming the `model` argument (`--model` on the command line).
    """
    from thesisgym.train.presets import is_preset

    p = Path(model).expanduser()
    if is_preset(model):  # resolved (and fetched if need be) when the model is loaded
        return
    if p.exists():
        if p.is_dir() and not (p / "config.json").exists():
            raise ArgumentError("{arg} {model}: the directory has no config.json (not a saved model)",
                                argument="model", model=model)
        return
    looks_local = model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local:
        raise ArgumentError("{arg} {model}: no such directory", argument="model", model=model)
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(model, "config.json"), str):
            raise ArgumentError("{arg} {model}: not a local directory and not in the Hugging Face cache "
                                "(HF_HUB_OFFLINE is set)", argument="model", model=model)


class HFPolicy:
    """Generate with a local/HF causal LM (transformers; vLLM when available on a GPU)."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        max_new_tokens: int = 1024,
        batch_size: int = 8,
        temperature: float = 0.0,
        device: str | None = None,
        use_vllm: bool | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        self.model_path = str(model_path)
        check_model_source(self.model_path)
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.temperature = temperature
        self.device = device
        self.use_vllm = use_vllm
        self.seed = seed
        self.name = name or Path(self.model_path).name
        self._model = None
        self._tok = None

    @property
    def deterministic(self) -> bool:
        """Greedy decoding with transformers on this machine: the same prompt always gives the same thesis."""
        return self.temperature == 0 and not self._want_vllm()

    def reseeded(self, seed: int) -> HFPolicy:
        """The same model (shared, not reloaded) sampling with another seed."""
        other = copy.copy(self)
        other.seed = seed
        return other

    def _want_vllm(self) -> bool:
        if self.use_vllm is False:
            return False
        try:
            import torch
            import vllm  # noqa: F401
        except ImportError:
            if self.use_vllm:
                raise ValueError("use_vllm=True but vllm is not installed (pip install vllm)") from None
            return False
        return bool(self.use_vllm) or torch.cuda.is_available()

    def _prompt_texts(self, rows: Sequence[dict], tok: Any) -> list[str]:
        texts = []
        for i, row in enumerate(rows):
            if getattr(tok, "chat_template", None) and row.get("prompt"):
                texts.append(
                    tok.apply_chat_template(list(row["prompt"]), tokenize=False, add_generation_prompt=True)
                )
            elif row.get("prompt_text"):
                texts.append(str(row["prompt_text"]))
            else:
                raise ValueError(
                    f"row {i}: neither a chat prompt (with a chat template) nor prompt_text to generate from"
                )
        return texts

    def _decide_vllm(self, rows: Sequence[dict]) -> list[str]:  # pragma: no cover - needs a GPU + vllm
        from vllm import LLM, SamplingParams

        if self._model is None:
            self._model = LLM(model=self.model_path, seed=self.seed)
        tok = self._model.get_tokenizer()
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_new_tokens, seed=self.seed)
        outs = self._model.generate(self._prompt_texts(rows, tok), params)
        return [o.outputs[0].text for o in outs]

    def decide(self, rows: Sequence[dict], *, drafts: Sequence[str] | None = None) -> list[str]:
        """One thesis per row. `drafts` (one per row, e.g. a parent checkpoint's theses) speed up greedy
        decoding with transformers (`thesisgym.train.generation.generate_texts`); vLLM ignores them."""
        if self._want_vllm():
            return self._decide_vllm(rows)
        import torch

        from thesisgym.train.generation import generate_theses
        from thesisgym.train.models import load_model

        if self._model is None:
            try:  # presets resolve here; the tiny preset keeps its own tokenizer pipeline
                model, self._tok = load_model(self.model_path)
            except (OSError, ValueError) as exc:
                # transformers' messages run to many lines; the first one says what is wrong
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ArgumentError("{arg} {model}: cannot load ({first})", argument="model",
                                    model=self.model_path, first=first) from None
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            self._model = model.to(device).eval()
        return generate_theses(self._model, self._tok, rows, max_new_tokens=self.max_new_tokens,
                               temperature=self.temperature, batch_size=self.batch_size, seed=self.seed,
                               drafts=drafts)


class RememberingPolicy:
    """A policy that writes once per prompt: the same checkpoint asked again for the same prompt (the
    change table, then the backtest) gets its first thesis back; new prompts (probes) go to the model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self._theses: dict[str, str] = {}

    @staticmethod
    def _key(row: dict) -> str:
        return json.dumps(row.get("prompt"), sort_keys=True, default=str)

    def decide(self, rows: Sequence[dict], *, drafts: Sequence[str] | None = None) -> list[str]:
        """`drafts` (one per row) go to the inner policy for the rows it has not written yet."""
        if drafts is not None and len(drafts) != len(rows):
            raise ValueError(f"drafts: {len(drafts)} drafts for {len(rows)} rows (one per row)")
        keys = [self._key(r) for r in rows]
        todo = {k: i for i, k in enumerate(keys) if k not in self._theses}
        if todo:
            new_rows = [rows[i] for i in todo.values()]
            written = (self.inner.decide(new_rows) if drafts is None
                       else self.inner.decide(new_rows, drafts=[drafts[i] for i in todo.values()]))
            self._theses.update(zip(todo, written, strict=True))
        return [self._theses[k] for k in keys]

    def reseeded(self, seed: int) -> Any:
        return self.inner.reseeded(seed)

    def __getattr__(self, name: str) -> Any:  # model_path, temperature, seed, ... for the report's model card
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class OpenAIPolicy:
    """Completions from an OpenAI-compatible endpoint (OpenAI, vLLM serve, Ollama, llama.cpp)."""

    def __init__(
        self,
        base_url: str | None,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 2048,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 4,
        cache_path: str | None = None,
        seed: int | None = None,
        name: str | None = None,
        client: Any = None,
    ) -> None:
        from thesisgym.llm import LLMClient

        self.client = client or LLMClient(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout=timeout,
            max_retries=max_retries,
            cache_path=cache_path,
        )
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.name = name or model
        self.last_errors: list[str | None] = []

    @property
    def endpoint(self) -> str:
        return f"{self.client.config.base_url or 'https://api.openai.com/v1'} (model {self.client.config.model})"

    def reseeded(self, seed: int) -> OpenAIPolicy:
        """The same client (cache, counters) asking with another seed: a new cache key, a new sample."""
        other = copy.copy(self)
        other.seed = seed
        other.last_errors = []
        return other

    def decide(self, rows: Sequence[dict]) -> list[str]:
        batch = []
        for i, row in enumerate(rows):
            if not row.get("prompt"):
                raise ValueError(f"row {i}: no chat prompt to send")
            batch.append(list(row["prompt"]))
        results = self.client.chat_batch(
            batch, temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed
        )
        out: list[str] = []
        self.last_errors = []
        for r in results:
            if isinstance(r, BaseException):
                out.append("")
                self.last_errors.append(str(r))
            else:
                out.append(r[0] if r else "")
                self.last_errors.append(None)
        return out


# --- reasoning metrics --------------------------------------------------------------------------------
JUDGES = ("local", "llm", "none")


def make_verifier(judge: str = "local", *, judge_model: str | None = None, judge_base_url: str | None = None,
                  **client_options: Any) -> Any:
    """The Trade-R1 consistency verifier that produces s: the local judge, or an LLM judge on any
    OpenAI-compatible endpoint (`judge="llm"`, `judge_model=`, `judge_base_url=`); "none" -> no s (nan)."""
    from thesisgym.consistency import ConsistencyVerifier

    if judge == "none":
        return None
    if judge == "local":
        return ConsistencyVerifier()
    if judge == "llm":
        if not judge_model:
            raise ArgumentError("{arg} is needed with the llm judge", argument="judge_model")
        return ConsistencyVerifier(judge="llm", judge_options={"model": judge_model, "base_url": judge_base_url,
                                                               **client_options})
    raise ArgumentError("{arg} {judge!r}: expected one of local, llm, none", argument="judge", judge=judge)


def consistency_scores(verifier: Any, completions: Sequence[Any], rows: Sequence[dict]) -> list[float]:
    """s of each completion against its row's evidence (nan without a verifier)."""
    if verifier is None:
        return [float("nan")] * len(completions)
    results = verifier.score_batch(
        list(completions), [list(r.get("evidence") or []) for r in rows], prompts=[r.get("prompt") for r in rows]
    )
    return [float(r.s) for r in results]


# the reward stack names its decision reward "decision"; in our frames "decision" is the label string
REWARD_RENAMES = {"decision": "decision_reward"}


def score_rows(
    completions: Sequence[Any],
    rows: Sequence[dict],
    *,
    scorer: Callable[[Any, dict], dict] | None = None,
    verifier: Any = "local",
    batch: int = 256,
    on_batch: Callable[[int], None] | None = None,
    **score_options: Any,
) -> pd.DataFrame:
    """One row per completion: ticker, asof, variation, decision (the label string or INVALID),
    label, plus every number the scorer reports (its "decision" reward as `decision_reward`).

    Default scorer: `score_completion(..., **score_options)` with s from `verifier` ("local", a
    ConsistencyVerifier, or None for no s), judged `batch` completions at a time (one request batch
    for an LLM judge); `on_batch(n)` is called after each batch of n. A custom `scorer(completion,
    row)` is used as given.
    """
    if len(completions) != len(rows):
        raise ValueError(f"{len(completions)} completions for {len(rows)} rows")
    judge = make_verifier(verifier) if isinstance(verifier, str) else verifier
    records = []
    for lo in range(0, len(rows), batch):
        comps, part = completions[lo : lo + batch], rows[lo : lo + batch]
        s_values = consistency_scores(judge, comps, part) if scorer is None else [None] * len(part)
        for comp, row, s in zip(comps, part, s_values, strict=True):
            rec: dict[str, Any] = {"ticker": row.get("ticker"), "asof": str(row.get("asof", ""))[:10],
                                   "variation": int(row.get("variation", 0) or 0), "decision": decision_of(comp),
                                   "label": row.get("label")}
            got = scorer(comp, row) if scorer is not None else score_completion(comp, row, consistency_s=s,
                                                                                 **score_options)
            for k, v in (got or {}).items():
                if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
                    name = REWARD_RENAMES.get(k, k)
                    rec[f"{name}_reward" if name in rec else name] = float(v)
            records.append(rec)
        if on_batch is not None:
            on_batch(len(part))
    return pd.DataFrame.from_records(records)


def confusion_matrix(scores: pd.DataFrame) -> pd.DataFrame:
    """Counts, rows = true label, columns = predicted decision (LABELS order + INVALID)."""
    cols = [*LABELS, INVALID]
    cm = pd.DataFrame(0, index=list(LABELS), columns=cols, dtype=int)
    known = scores[scores["label"].isin(LABELS)]
    for (truth, pred), n in known.groupby(["label", "decision"]).size().items():
        cm.loc[truth, pred] = int(n)
    cm.index.name, cm.columns.name = "truth", "prediction"
    return cm


def _mean(scores: pd.DataFrame, *names: str) -> float:
    for name in names:
        if name in scores.columns:
            vals = scores[name].to_numpy(dtype=float)
            vals = vals[np.isfinite(vals)]
            return float(vals.mean()) if len(vals) else float("nan")
    return float("nan")


def _placeholder_s(scores: pd.DataFrame) -> bool:
    if "s_is_placeholder" not in scores.columns:
        return False
    flags = scores["s_is_placeholder"].to_numpy(dtype=float)
    return bool(len(flags)) and bool(np.all(flags[np.isfinite(flags)] == 1))


def reasoning_metrics(scores: pd.DataFrame) -> dict[str, float]:
    """Aggregates of `score_rows`: the numbers a person checks before trusting a Sharpe ratio."""
    n = len(scores)
    labelled = scores[scores["label"].isin(LABELS)]
    valid = scores["decision"] != INVALID
    out = {
        "rows": float(n),
        "invalid_decision_rate": float((~valid).mean()) if n else float("nan"),
        "decision_accuracy": float((labelled["decision"] == labelled["label"]).mean())
        if len(labelled)
        else float("nan"),
        "hallucination_rate": _mean(scores, "hallucination_rate"),
        "grounding": _mean(scores, "grounding", "citation_precision", "evidence"),
        # `s` is only a consistency score when a judge produced it; the reward stack otherwise
        # fills it with the grounding placeholder (s_is_placeholder = 1), which is not reported as s
        "consistency": float("nan") if _placeholder_s(scores) else _mean(scores, "consistency", "s"),
        "loop_rate": _mean(scores, "loop_rate", "loop"),
    }
    if len(labelled):
        # direction accuracy: bullish/bearish/neutral side right, the coarser question a trader asks
        side = {lab: int(np.sign(i - 2)) for i, lab in enumerate(LABELS)}
        pred = labelled["decision"].map(side)
        truth = labelled["label"].map(side)
        out["direction_accuracy"] = float((pred == truth).mean())
    else:
        out["direction_accuracy"] = float("nan")
    return out
