"""The verifiable reward stack (docs/spec.md, section 6 (rewards)): parse once, then score each component.

Every reward has TRL's signature `fn(prompts, completions, **columns) -> list[float | None]`, is
pure and deterministic, and never raises: a completion that cannot be scored gets the reward's
documented minimum; None means only "not applicable" (e.g. the row has no label).

    component          range            reads columns
    structure_reward   [0, 1]           sections
    evidence_reward    [0, 1]           evidence
    decision_reward    [-1.5, 1]        label   (default matrix "calibrated"; [-2.25, 1] for the paper's)
    market_reward      [-3, 3]          fwd_return, fwd_vol
    loop_penalty       [-1, 0]          -
    make_combined_reward("weighted" | "fsr" | "dsr" | "market_only", consistency=...)

`score_completion(completion, row)` returns every component plus diagnostics for one row;
`rewards.skill` traces a recipe's expected reward against a reader's skill (docs/verifier.md).
"""

from thesisgym.rewards.combine import COMBINER_KINDS, STAGE_WEIGHTS, dsr, fsr, make_combined_reward
from thesisgym.rewards.decision import (
    DecisionMatrix,
    decision_reward,
    load_decision_matrix,
    make_decision_reward,
)
from thesisgym.rewards.evidence import (
    EvidenceReport,
    check_bullet,
    evidence_report,
    evidence_reward,
    quote_in_text,
)
from thesisgym.rewards.loops import loop_penalty, loop_rate, loop_stats
from thesisgym.rewards.market import make_market_reward, market_reward, market_value
from thesisgym.rewards.score import SCORE_KEYS, score_completion, validate
from thesisgym.rewards.structure import make_structure_reward, structure_reward, structure_score

__all__ = [
    "COMBINER_KINDS",
    "SCORE_KEYS",
    "STAGE_WEIGHTS",
    "DecisionMatrix",
    "EvidenceReport",
    "check_bullet",
    "decision_reward",
    "dsr",
    "evidence_report",
    "evidence_reward",
    "fsr",
    "load_decision_matrix",
    "loop_penalty",
    "loop_rate",
    "loop_stats",
    "make_combined_reward",
    "make_decision_reward",
    "make_market_reward",
    "make_structure_reward",
    "market_reward",
    "market_value",
    "quote_in_text",
    "score_completion",
    "structure_reward",
    "structure_score",
    "validate",
]
