"""Does a reward pay skill, or a constant decision? Reward-vs-skill curves and their checks.

A policy that collapses to one decision is the failure users of LLM traders report most, so every
shipped recipe must pay a reader of the evidence more than any constant decision, and more the
better it reads. The reader of skill p takes an oracle's decision with probability p and a
uniformly random label otherwise (the random label may be the right one). Its expected reward is
linear in p:

    R(p) = p * mean_rows G(row, oracle(row)) + (1 - p) * mean_rows mean_d G(row, d)

where G(row, d) is the recipe's reward for decision d on the row (the same thesis body, or the
best thesis the writer can give for d: the caller decides). A constant decision c earns
mean_rows G(row, c). Against the labels the reader's accuracy is p * a_oracle + (1 - p) / 5.

Checks (`SkillCurve.passes`):
- every recipe: R rises with p (R(1) > R(0));
- label-based recipes (the decision matrix): every constant is beaten once the reader's accuracy
  beats the majority class, i.e. R(p) >= max_c R_c at the p where the accuracy equals the
  majority share (R is linear, so it stays above from there on); vacuous when the oracle's own
  accuracy is below the majority share (reported);
- market-based recipes: p* = the skill at which the reader overtakes the best constant (None when
  it never does within [0, 1]) is reported, not judged: a market that drifts up pays always-BUY.

For a decision matrix alone there is a closed form (`reader_reward`, `constant_rewards`), which
tests and docs/verifier.md use: with uniformly random errors a reader of accuracy a earns
a * sum_y pi_y M[y][y] + (1 - a) * sum_y pi_y mean_{c != y} M[c][y].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from thesisgym.rewards.decision import DecisionMatrix
from thesisgym.schema import LABELS

__all__ = [
    "LABEL_BASED",
    "SkillCurve",
    "constant_rewards",
    "reader_reward",
    "skill_curve",
]

LABEL_BASED = ("weighted", "trading_r1")
P_GRID = tuple(round(0.1 * k, 1) for k in range(11))


def _mix(mix: Sequence[float]) -> list[float]:
    if len(mix) != len(LABELS) or any(x < 0 for x in mix) or sum(mix) <= 0:
        raise ValueError(f"mix: expected {len(LABELS)} non-negative label shares, got {list(mix)}")
    total = float(sum(mix))
    return [x / total for x in mix]


def constant_rewards(matrix: DecisionMatrix, mix: Sequence[float]) -> dict[str, float]:
    """Expected decision reward of each constant decision on a label mix (shares in LABELS order)."""
    pi = _mix(mix)
    return {c: sum(p * matrix(c, y) for p, y in zip(pi, LABELS, strict=True)) for c in LABELS}


def reader_reward(matrix: DecisionMatrix, mix: Sequence[float], *, accuracy: float) -> float:
    """Expected decision reward of a reader right with probability `accuracy` and otherwise wrong
    with a uniformly random other class, on a label mix."""
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"accuracy: expected a probability, got {accuracy!r}")
    pi = _mix(mix)
    wrong = sum(
        p * sum(matrix(c, y) for c in LABELS if c != y) / (len(LABELS) - 1) for p, y in zip(pi, LABELS, strict=True)
    )
    right = sum(p * matrix(y, y) for p, y in zip(pi, LABELS, strict=True))
    return accuracy * right + (1.0 - accuracy) * wrong


@dataclass
class SkillCurve:
    """The reward-vs-skill curve of one recipe and one oracle on a set of rows (module docstring)."""

    recipe: str
    oracle: str
    rows: int
    oracle_accuracy: float  # of the oracle's decisions against the labels
    majority: tuple[str, float]  # the majority label and its share
    reward_at: dict[float, float]  # p -> R(p) on P_GRID
    constants: dict[str, float]
    p_star: float | None  # skill where R(p) reaches the best constant; None if never within [0, 1]
    p_majority: float | None  # skill where the accuracy equals the majority share; None if never
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def passes(self) -> bool:
        return all(self.checks.values())

    def as_dict(self) -> dict:
        return {
            "recipe": self.recipe, "oracle": self.oracle, "rows": self.rows,
            "oracle_accuracy": self.oracle_accuracy, "majority": list(self.majority),
            "reward_at": {f"{p:.1f}": v for p, v in self.reward_at.items()}, "constants": self.constants,
            "p_star": self.p_star, "p_majority": self.p_majority, "checks": self.checks, "passes": self.passes,
        }


def skill_curve(
    recipe: str,
    oracle: str,
    table: Sequence[Mapping[str, float]],
    oracle_decisions: Sequence[str],
    labels: Sequence[str | None],
) -> SkillCurve:
    """The curve of a recipe from `table[i][d]` = its reward for decision d on row i, the oracle's
    decision per row and the rows' labels (for the accuracy and the majority class)."""
    if not (len(table) == len(oracle_decisions) == len(labels)) or not table:
        raise ValueError(f"skill_curve: {len(table)} rows, {len(oracle_decisions)} oracle decisions, {len(labels)} labels")
    n = len(table)
    at_oracle = sum(table[i][oracle_decisions[i]] for i in range(n)) / n
    at_random = sum(sum(row[d] for d in LABELS) / len(LABELS) for row in table) / n
    constants = {c: sum(row[c] for row in table) / n for c in LABELS}
    known = [(o, y) for o, y in zip(oracle_decisions, labels, strict=True) if y in LABELS]
    acc = sum(o == y for o, y in known) / len(known) if known else float("nan")
    shares = {c: sum(y == c for _, y in known) / len(known) for c in LABELS} if known else {}
    major = max(shares.items(), key=lambda kv: kv[1]) if shares else ("", float("nan"))
    slope = at_oracle - at_random
    best = max(constants.values())
    p_star = None if slope <= 0 else ((best - at_random) / slope if best > at_random else 0.0)
    p_star = p_star if p_star is not None and p_star <= 1.0 else None
    # accuracy(p) = p acc + (1 - p) / 5 reaches the majority share at p_majority
    chance = 1.0 / len(LABELS)
    p_maj = (major[1] - chance) / (acc - chance) if known and acc > chance else None
    p_maj = p_maj if p_maj is not None and 0.0 <= p_maj <= 1.0 else None
    curve = SkillCurve(recipe, oracle, n, acc, major, {p: at_random + p * slope for p in P_GRID},
                       constants, p_star, p_maj)
    curve.checks["rises_with_skill"] = slope > 1e-9
    if recipe in LABEL_BASED and p_maj is not None:
        curve.checks["beats_constants_above_majority_accuracy"] = at_random + p_maj * slope >= best - 1e-9
    return curve
