"""Combiners: one TRL reward from the components (Trading-R1 weighted stages, Trade-R1 FSR/DSR).

- "weighted": G = sum_c w_c * component_c + loop_weight * loop_penalty. Trading-R1 trains in three
  stages (structure -> claims -> decision) but publishes no weights; our documented defaults
  (STAGE_WEIGHTS) move the mass along the curriculum:
      structure: structure 1.0
      evidence:  structure 0.3, evidence 0.7
      decision:  structure 0.2, evidence 0.3, decision 0.5        (default stage)
  Any of "structure", "evidence", "decision", "market" may be weighted via `weights=`.
- "fsr" (Trade-R1 fixed-scale):   paper G = fsr(r, s) = r + 2 s
- "dsr" (Trade-R1 dynamic-scale): paper G = dsr(r, s) = r (0.5 + s) if r > 0 else r (2 - s)
- "market_only":                  G = r (the baseline that reward-hacks)

fsr and dsr ship GUARDED (`formula="guarded"`, the default, what the fsr/dsr recipes train with):
    G = paper(r', q) + (E - 1) + S_WEIGHT (q - 1) + loop_weight * loop_penalty,   q = s * E
with E the verified evidence reward (evidence.py), loop_weight 1 by default, S_WEIGHT = 0.5, and
r' = r, except -clip (the worst call) when the decision is missing or invalid, or when the thesis
quotes an evidence item's instruction to the model as evidence (`EvidenceReport.obeys_instruction`:
its decision is the instruction's, not its own): under the paper's
missing penalty (-1) hiding the decision beats a wrong confident call (r down to -clip). Why: the
paper's s comes from a judge that a policy can flatter, and r ignores the text entirely, so under
the paper formulas copying evidence, repeating bullets or fabricating grounding could tie or beat
an honest thesis (`thesisgym audit` measures it). Gating s by E and adding E - 1 makes G strictly
increasing in E for a fixed decision and s (both r (0.5 + sE) and r (2 - sE) grow with E), so an
edit that lowers the verified evidence lowers G; the S_WEIGHT term keeps s counting when r = 0 (a
HOLD, where the paper's dsr ignores s); the loop term charges repetition. E = 1 and s = 1 leave
the paper value unchanged. `formula="paper"` gives the paper formulas exactly as published
(loop_weight 0).

r is the market reward (market.py), s in [0, 1] the consistency score. `consistency` is any
TRL-signature callable returning s per completion (`thesisgym.consistency.make_consistency_reward`;
`async def` ones make the combined reward async too). Without one, s is a PLACEHOLDER: the evidence
report's `grounding` (mean over bullets of verified-quote x citation precision, 0 for hallucinated
bullets), which measures only the evidence <-> reasoning leg of Trade-R1's triangle. Each
completion whose s is the placeholder is logged in the `<name>/s_is_placeholder` metric (the same
name as `score_completion`'s key). A consistency callable that raises, returns a batch of the wrong
length or a value that is not a number in [0, 1] (non-finite, a string) is an error: counted and
logged through `rewards.base.record_error` (re-raised in strict mode), and the placeholder stands in;
None for a row means "not applicable" and gives the placeholder without an error. Values are
clipped to [0, 1].

The paper formulas (fsr/dsr with formula="paper", market_only) use loop_weight = 0 by default;
pass `loop_penalty` as a separate TRL reward function, or `loop_weight=1.0`, to add it. G is None when r is not
applicable (no forward return) or, for "weighted", when a weighted component is None.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thesisgym.rewards.base import column, evidence_index, log_metric, parsed, per_completion, record_error
from thesisgym.rewards.decision import DecisionMatrix, load_decision_matrix, truth_label
from thesisgym.rewards.evidence import evidence_report, obeys_instruction
from thesisgym.rewards.loops import loop_stats
from thesisgym.rewards.market import DEFAULT_CLIP, DEFAULT_MISSING_PENALTY, market_value
from thesisgym.rewards.structure import structure_score
from thesisgym.thesis import Thesis, completion_text

__all__ = ["COMBINER_KINDS", "FORMULAS", "STAGE_WEIGHTS", "S_WEIGHT", "dsr", "fsr", "guarded", "make_combined_reward"]

COMBINER_KINDS = ("weighted", "fsr", "dsr", "market_only")
FORMULAS = ("guarded", "paper")
STAGE_WEIGHTS: dict[str, dict[str, float]] = {
    "structure": {"structure": 1.0},
    "evidence": {"structure": 0.3, "evidence": 0.7},
    "decision": {"structure": 0.2, "evidence": 0.3, "decision": 0.5},
}
_COMPONENTS = ("structure", "evidence", "decision", "market")


def fsr(r: float, s: float) -> float:
    """Trade-R1 fixed-scale semantic reward G = r + 2 s."""
    return r + 2.0 * s


def dsr(r: float, s: float) -> float:
    """Trade-R1 dynamic-scale semantic reward: r (0.5 + s) if r > 0 else r (2 - s)."""
    return r * (0.5 + s) if r > 0 else r * (2.0 - s)


S_WEIGHT = 0.5


def guarded(
    kind: str,
    r: float,
    s: float,
    evidence: float,
    loop: float,
    loop_weight: float = 1.0,
    *,
    decision_valid: bool = True,
    clip: float = DEFAULT_CLIP,
) -> float:
    """The shipped fsr/dsr recipe total (module docstring):
    paper(r', q) + (E - 1) + S_WEIGHT (q - 1) + loop_weight * loop,  q = s * E,
    r' = r for a valid decision and -clip (the worst call) without one."""
    paper = fsr if kind == "fsr" else dsr
    q = s * evidence
    r = r if decision_valid else -clip
    return paper(r, q) + (evidence - 1.0) + S_WEIGHT * (q - 1.0) + loop_weight * loop


def _clean_s(value: Any, where: str) -> float | None:
    """s clipped to [0, 1]; None for None (not applicable) and, counted as an error, for junk."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        record_error(where, ValueError(f"consistency returned {value!r}, not a number in [0, 1]"))
        return None
    return min(1.0, max(0.0, float(value)))


def _weights(kind: str, weights: Mapping[str, float] | None, stage: str) -> dict[str, float]:
    """The component weights of a "weighted" combiner ({} for the others), validated."""
    if kind != "weighted":
        return {}
    if weights is None:
        if stage not in STAGE_WEIGHTS:
            raise ValueError(f"stage: expected one of {tuple(STAGE_WEIGHTS)}, got {stage!r}")
        weights = STAGE_WEIGHTS[stage]
    bad = set(weights) - set(_COMPONENTS)
    if bad:
        raise ValueError(f"weights: unknown components {sorted(bad)}; allowed {_COMPONENTS}")
    w = {c: float(weights.get(c, 0.0)) for c in _COMPONENTS}
    if not all(math.isfinite(v) for v in w.values()):
        raise ValueError(f"weights: must be finite numbers, got {dict(weights)}")
    return w


def _range(kind: str, w: dict[str, float], lw: float, guard: bool, matrix: DecisionMatrix, clip: float) -> tuple[float, float]:
    """The documented range [lo, hi] of a combined reward."""
    if kind == "weighted":
        ranges = {"structure": (0.0, 1.0), "evidence": (0.0, 1.0), "decision": (matrix.lo, matrix.hi),
                  "market": (-clip, clip)}
        lo = sum(min(w[c] * a, w[c] * b) for c, (a, b) in ranges.items()) + min(0.0, -lw)
        hi = sum(max(w[c] * a, w[c] * b) for c, (a, b) in ranges.items()) + max(0.0, -lw)
        return lo, hi
    lo, hi = {"fsr": (-clip, clip + 2.0), "dsr": (-2.0 * clip, 1.5 * clip), "market_only": (-clip, clip)}[kind]
    return lo - max(0.0, lw) - (1.0 + S_WEIGHT if guard else 0.0), hi + max(0.0, -lw)


def _check_options(kind: str, formula: str, clip: float, missing_penalty: float, consistency: Any) -> None:
    if kind not in COMBINER_KINDS:
        raise ValueError(f"kind: expected one of {COMBINER_KINDS}, got {kind!r}")
    if formula not in FORMULAS:
        raise ValueError(f"formula: expected one of {FORMULAS}, got {formula!r}")
    if not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip: must be a positive finite number, got {clip!r}")
    if not -clip <= missing_penalty <= clip:
        raise ValueError(f"missing_penalty: must lie in [-clip, clip], got {missing_penalty!r}")
    if consistency is not None and not callable(consistency):
        raise TypeError(f"consistency: expected a TRL reward callable, got {type(consistency).__name__}")


@dataclass(frozen=True)
class _Recipe:
    """Everything a combined reward needs per completion, fixed when it is built."""

    kind: str
    w: dict[str, float]
    lw: float
    guard: bool
    matrix: DecisionMatrix
    clip: float
    missing_penalty: float
    name: str

    @staticmethod
    def decision(thesis: Thesis, kwargs: dict[str, Any], i: int) -> str | None:
        """The thesis's decision, None when it quotes an instruction to the model as evidence (its
        decision is then the instruction's, `evidence.obeys_instruction`)."""
        if thesis.decision is None or kwargs.get("evidence") is None:
            return thesis.decision
        return None if obeys_instruction(thesis, evidence_index(column(kwargs, "evidence", i))) else thesis.decision

    def market(self, thesis: Thesis, kwargs: dict[str, Any], i: int) -> float | None:
        return market_value(self.decision(thesis, kwargs, i), column(kwargs, "fwd_return", i),
                            column(kwargs, "fwd_vol", i), clip=self.clip, missing_penalty=self.missing_penalty)

    def weighted(self, thesis: Thesis, kwargs: dict[str, Any], i: int, memo: dict) -> float | None:
        """sum_c w_c * component_c (without the loop term); None when a weighted component is."""
        w = self.w
        total = 0.0
        if w["structure"]:
            total += w["structure"] * structure_score(thesis, prompt_sections=column(kwargs, "sections", i))
        if w["evidence"]:
            total += w["evidence"] * evidence_report(thesis, evidence_index(column(kwargs, "evidence", i), memo)).score
        if w["decision"]:
            truth = truth_label(column(kwargs, "label", i))
            if truth is None:
                return None
            total += w["decision"] * self.matrix(self.decision(thesis, kwargs, i), truth)
        if w["market"]:
            r = self.market(thesis, kwargs, i)
            if r is None:
                return None
            total += w["market"] * r
        return total

    def semantic(self, thesis: Thesis, r: float, s: float | None, loop: float, evidence: Any,
                 logs: dict[str, list[float]]) -> float:
        """fsr / dsr of one completion: guarded, or the paper formula; s None -> the placeholder."""
        report = evidence() if s is None or self.guard else None
        logs["s_is_placeholder"].append(float(s is None))
        if s is None:
            s = report.grounding
        logs["s"].append(s)
        if self.guard:
            logs["evidence"].append(report.score)
            # a thesis that quotes an instruction to the model as evidence has no decision of its own
            valid = thesis.decision is not None and not report.obeys_instruction
            return guarded(self.kind, r, s, report.score, loop, self.lw, decision_valid=valid, clip=self.clip)
        return (fsr(r, s) if self.kind == "fsr" else dsr(r, s)) + self.lw * loop

    def combine(self, completions: Sequence[Any], kwargs: dict[str, Any], s_values: Sequence[Any] | None) -> list[float | None]:
        memo: dict = {}
        logs: dict[str, list[float]] = {"s": [], "s_is_placeholder": [], "r": [], "evidence": []}

        def score(i: int, completion: Any) -> float | None:
            thesis = parsed(completion)
            loop = loop_stats(completion_text(completion))[1] if self.lw else 0.0
            if self.kind == "weighted":
                total = self.weighted(thesis, kwargs, i, memo)
                return None if total is None else total + self.lw * loop
            r = self.market(thesis, kwargs, i)
            if r is None:
                return None
            logs["r"].append(r)
            if self.kind == "market_only":
                return r + self.lw * loop
            s = _clean_s(s_values[i], f"{self.name}/consistency") if s_values is not None else None
            return self.semantic(thesis, r, s, loop,
                                 lambda: evidence_report(thesis, evidence_index(column(kwargs, "evidence", i), memo)), logs)

        lo, hi = _range(self.kind, self.w, self.lw, self.guard, self.matrix, self.clip)
        out = per_completion(completions, score, minimum=lo, lo=lo, hi=hi, name=self.name, kwargs=kwargs)
        for key, values in logs.items():
            log_metric(kwargs, f"{self.name}/{key}", values)
        return out


def _s_batch(values: Any, n: int, where: str) -> list[Any] | None:
    """A consistency batch as a list of n values, or None (counted as an error) when it is not one."""
    try:
        out = list(values)
    except TypeError as exc:
        record_error(where, exc)
        return None
    if len(out) != n:
        record_error(where, ValueError(f"consistency returned {len(out)} values for {n} completions"))
        return None
    return out


def make_combined_reward(
    kind: str = "weighted",
    *,
    weights: Mapping[str, float] | None = None,
    stage: str = "decision",
    consistency: Callable[..., Any] | None = None,
    clip: float = DEFAULT_CLIP,
    missing_penalty: float = DEFAULT_MISSING_PENALTY,
    loop_weight: float | None = None,
    decision_variant: str | None = None,
    name: str | None = None,
    formula: str = "guarded",
) -> Callable[..., Any]:
    """Build a combined TRL reward with a unique `__name__` (default "<kind>_reward", "weighted_<stage>_reward").

    `formula` ("guarded" | "paper") applies to fsr and dsr only; see the module docstring.
    """
    _check_options(kind, formula, clip, missing_penalty, consistency)
    guard = formula == "guarded" and kind in ("fsr", "dsr")
    w = _weights(kind, weights, stage)
    lw = float(loop_weight if loop_weight is not None else (1.0 if kind == "weighted" or guard else 0.0))
    reward_name = name or (
        f"weighted_{stage}_reward"
        if kind == "weighted" and (weights is None or weights is STAGE_WEIGHTS.get(stage))
        else f"{kind}_reward"
    )
    recipe = _Recipe(kind, w, lw, guard, load_decision_matrix(decision_variant), clip, missing_penalty, reward_name)
    needs_s = kind in ("fsr", "dsr") and consistency is not None
    where = f"{reward_name}/consistency"

    if needs_s and inspect.iscoroutinefunction(consistency):

        async def reward(
            prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
        ) -> list[float | None]:
            completions = list(completions or [])
            try:
                values = await consistency(prompts=prompts, completions=completions, **kwargs)
            except Exception as exc:  # counted; the placeholder stands in (re-raised in strict mode)
                record_error(where, exc)
                values = None
            s_values = _s_batch(values, len(completions), where) if values is not None else None
            return recipe.combine(completions, kwargs, s_values)

    else:

        def reward(
            prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
        ) -> list[float | None]:
            completions = list(completions or [])
            values = None
            if needs_s:
                try:
                    values = consistency(prompts=prompts, completions=completions, **kwargs)
                except Exception as exc:  # counted; the placeholder stands in (re-raised in strict mode)
                    record_error(where, exc)
            s_values = _s_batch(values, len(completions), where) if values is not None else None
            return recipe.combine(completions, kwargs, s_values)

    lo, hi = _range(kind, w, lw, guard, recipe.matrix, clip)
    reward.__name__ = reward_name
    reward.__qualname__ = reward_name
    reward.__doc__ = (
        f"Combined thesisgym reward ({kind}); range [{lo:g}, {hi:g}]. See thesisgym.rewards.combine."
    )
    reward.range = (lo, hi)  # type: ignore[attr-defined]
    return reward
