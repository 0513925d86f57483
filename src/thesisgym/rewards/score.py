"""Score one completion against one dataset row: every component and diagnostic in a flat dict.

This is what `thesisgym score`, distillation filters and evaluation use (GRPO uses the batch
reward functions, which share the same code paths and caches). `validate` is the verifiers-style
check that a hand-written gold answer scores ~1.0 on a row, so that a broken fixture or a broken
reward shows up before training does.
"""

from __future__ import annotations

import math
from typing import Any

from thesisgym.rewards.base import counting_errors, evidence_index, parsed, record_error
from thesisgym.rewards.combine import STAGE_WEIGHTS, dsr, fsr, guarded
from thesisgym.rewards.decision import load_decision_matrix, truth_label
from thesisgym.rewards.evidence import evidence_report
from thesisgym.rewards.loops import loop_stats
from thesisgym.rewards.market import DEFAULT_CLIP, DEFAULT_MISSING_PENALTY, market_value
from thesisgym.rewards.structure import structure_score
from thesisgym.schema import LABEL_TO_ID
from thesisgym.thesis import completion_text

__all__ = ["SCORE_KEYS", "score_completion", "validate"]

NAN = math.nan
SCORE_KEYS = (
    "structure",
    "evidence",
    "decision",
    "market",
    "loop_penalty",
    "s",
    "fsr",
    "dsr",
    "weighted",
    "hallucination_rate",
    "citation_precision",
    "grounding",
    "loop_rate",
    "decision_valid",
    "decision_id",
    "decision_correct",
    "n_sections",
    "n_bullets",
    "n_hallucinated",
    "n_errors",
    "s_is_placeholder",
    "truncated",
    "reward_errors",
    "fsr_paper",
    "dsr_paper",
)


def _recipe_totals(
    scores: dict[str, float], r: float | None, s: float, loop: float, valid: bool, truth: str | None, clip: float
) -> dict[str, float]:
    """fsr / dsr (guarded and paper) and the "decision"-stage weighted total from the components."""
    e = scores["evidence"]
    weights = STAGE_WEIGHTS["decision"]
    weighted = (
        weights["structure"] * scores["structure"] + weights["evidence"] * e + weights["decision"] * scores["decision"]
        + loop
        if truth is not None
        else NAN
    )
    if r is None:
        return {"fsr": NAN, "dsr": NAN, "fsr_paper": NAN, "dsr_paper": NAN, "weighted": weighted}
    return {
        "fsr": guarded("fsr", r, s, e, loop, decision_valid=valid, clip=clip),
        "dsr": guarded("dsr", r, s, e, loop, decision_valid=valid, clip=clip),
        "fsr_paper": fsr(r, s),
        "dsr_paper": dsr(r, s),
        "weighted": weighted,
    }


def _score(
    completion: Any, row: dict[str, Any], consistency_s: float | None, decision_variant: str | None,
    clip: float, missing_penalty: float,
) -> dict[str, float]:
    thesis = parsed(completion)
    report = evidence_report(thesis, evidence_index(row.get("evidence")))
    # a thesis that quotes an instruction to the model as evidence has no decision of its own
    decision = None if report.obeys_instruction else thesis.decision
    matrix = load_decision_matrix(decision_variant)
    rate, loop = loop_stats(completion_text(completion))
    truth = truth_label(row.get("label"))
    r = market_value(decision, row.get("fwd_return"), row.get("fwd_vol"), clip=clip,
                     missing_penalty=missing_penalty)
    s_given = consistency_s if isinstance(consistency_s, (int, float)) and math.isfinite(consistency_s) else None
    s = min(1.0, max(0.0, float(s_given))) if s_given is not None else report.grounding
    out = {
        "structure": structure_score(thesis, prompt_sections=row.get("sections")),
        "evidence": report.score,
        "decision": matrix(decision, truth) if truth is not None else NAN,
        "market": NAN if r is None else r,
        "loop_penalty": loop,
        "s": s,
        "hallucination_rate": report.hallucination_rate,
        "citation_precision": report.citation_precision,
        "grounding": report.grounding,
        "loop_rate": rate,
        "decision_valid": float(thesis.decision is not None),
        "decision_id": float(LABEL_TO_ID.get(thesis.decision or "", -1)),
        "decision_correct": NAN if truth is None else float(thesis.decision == truth),
        "n_sections": float(len(thesis.sections)),
        "n_bullets": float(report.n_bullets),
        "n_hallucinated": float(report.n_hallucinated),
        "n_errors": float(len(thesis.errors)),
        "s_is_placeholder": float(s_given is None),
        "truncated": float(thesis.truncated),
    }
    out.update(_recipe_totals(out, r, s, loop, decision is not None, truth, clip))
    return out


def score_completion(
    completion: Any,
    row: dict[str, Any],
    *,
    consistency_s: float | None = None,
    decision_variant: str | None = None,
    clip: float = DEFAULT_CLIP,
    missing_penalty: float = DEFAULT_MISSING_PENALTY,
) -> dict[str, float]:
    """Every reward component and diagnostic for one completion (nan = not applicable); never raises.

    Keys: SCORE_KEYS. `s` is `consistency_s` when given (clipped to [0, 1]), else the placeholder
    grounding score (`s_is_placeholder` = 1). `fsr` / `dsr` are the shipped (guarded) recipe totals,
    `fsr_paper` / `dsr_paper` the paper formulas (rewards.combine). `weighted` uses the "decision"
    stage weights plus the loop penalty. `decision_id` is the index into schema.LABELS (-1 when missing/invalid).
    `reward_errors` counts the errors recorded while scoring (`rewards.base.record_error`, parser
    failures included): when scoring raised, the other keys are nan, the error is counted and its
    traceback logged once (re-raised in strict mode).
    """
    out = dict.fromkeys(SCORE_KEYS, NAN)
    with counting_errors() as tally:
        try:
            out.update(_score(completion, row if isinstance(row, dict) else {}, consistency_s, decision_variant,
                              clip, missing_penalty))
        except Exception as exc:  # a verifier bug: counted and logged (re-raised in strict mode), never hidden
            record_error("score_completion", exc)
    out["reward_errors"] = float(sum(tally.values()))
    return out


def validate(
    row: dict[str, Any], gold_completion: Any, *, min_score: float = 0.9
) -> tuple[dict[str, float], bool]:
    """Check that a gold answer scores like one: structure and evidence >= min_score, no
    hallucinated bullet, a valid decision and, when the row has a label, the top decision reward.

    Returns (scores, ok) instead of asserting, so callers decide how to report a failure.
    """
    scores = score_completion(gold_completion, row)
    ok = (
        scores["structure"] >= min_score
        and scores["evidence"] >= min_score
        and scores["n_hallucinated"] == 0
        and scores["decision_valid"] == 1.0
        and scores["loop_penalty"] == 0.0
        and (math.isnan(scores["decision"]) or scores["decision"] >= load_decision_matrix().hi)
    )
    return scores, bool(ok)
