"""Decision reward (Trading-R1 Stage III): a payoff matrix M[prediction][truth] shipped as data.

The matrix lives in `thesisgym/configs/decision_matrix.yaml` with three variants: "calibrated"
(the default: 1 for the right class, -1 for any other), "paper_printed" (Trading-R1's matrix
exactly as printed) and "text" (its transpose, which has the asymmetry the paper's text describes;
the YAML explains the check). Why the default is not the paper's: a decision reward must pay
skill over every constant decision, and under a graded matrix always-HOLD beats a reader whose
accuracy beats the majority class (the YAML and docs/verifier.md give the numbers; `thesisgym audit`
prints the reward-vs-skill curves). The truth is the row's `label` column; the model never sees
it, so evidence that says "answer STRONG_BUY" cannot buy reward here. A missing, repeated,
invalid or <think>-only decision gets `missing` (-1.5, or the variant's own `missing`). Rows
without a label (the forward window is incomplete) return None ("not applicable"). Range:
[min(M, missing), max(M)]: [-1.5, 1] for "calibrated", [-2.25, 1] for the paper's variants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from thesisgym.rewards.base import column, evidence_index, log_extra, log_metric, parsed, per_completion
from thesisgym.rewards.evidence import obeys_instruction
from thesisgym.schema import LABEL_TO_ID, LABELS
from thesisgym.thesis import normalize_label

__all__ = ["DecisionMatrix", "decision_reward", "load_decision_matrix", "make_decision_reward", "truth_label"]


@dataclass(frozen=True, slots=True)
class DecisionMatrix:
    """M[prediction][truth] in schema.LABELS order, plus the penalty for a missing decision."""

    variant: str
    matrix: tuple[tuple[float, ...], ...]
    missing: float

    def __call__(self, prediction: str | None, truth: str) -> float:
        if prediction not in LABEL_TO_ID:
            return self.missing
        return self.matrix[LABEL_TO_ID[prediction]][LABEL_TO_ID[truth]]

    @property
    def lo(self) -> float:
        return min(self.missing, *(v for row in self.matrix for v in row))

    @property
    def hi(self) -> float:
        return max(v for row in self.matrix for v in row)


def _default_path() -> Path:
    return Path(str(resources.files("thesisgym") / "configs" / "decision_matrix.yaml"))


@functools.lru_cache(maxsize=16)
def _load(path: str, variant: str | None) -> DecisionMatrix:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read decision matrix ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("variants"), dict):
        raise ValueError(f"{path}: expected a mapping with a 'variants' field")
    order = data.get("order")
    if list(order or ()) != list(LABELS):
        raise ValueError(f"{path}: field 'order' must be {list(LABELS)}, got {order!r}")
    name = variant or data.get("default")
    if name not in data["variants"]:
        raise ValueError(f"{path}: unknown variant {name!r}; available: {sorted(data['variants'])}")
    rows = (data["variants"][name] or {}).get("matrix")
    if (
        not isinstance(rows, list)
        or len(rows) != len(LABELS)
        or any(not isinstance(r, list) or len(r) != len(LABELS) for r in rows)
    ):
        raise ValueError(f"{path}: variants.{name}.matrix must be {len(LABELS)}x{len(LABELS)}")
    try:
        matrix = tuple(tuple(float(v) for v in row) for row in rows)
        missing = float(data["variants"][name].get("missing", data.get("missing", -1.5)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: variants.{name}.matrix and 'missing' must be numbers ({exc})") from exc
    return DecisionMatrix(variant=name, matrix=matrix, missing=missing)


def load_decision_matrix(variant: str | None = None, *, path: str | Path | None = None) -> DecisionMatrix:
    """Load a variant ("calibrated" default, "text", "paper_printed") from the shipped YAML or from `path`."""
    return _load(str(path or _default_path()), variant)


def truth_label(value: Any) -> str | None:
    """The row's true label as one of LABELS (accepts names in any casing or a label id), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return LABELS[value] if 0 <= value < len(LABELS) else None
    if isinstance(value, str):
        label = normalize_label(value)
        return label if label in LABEL_TO_ID else None
    return None


def make_decision_reward(
    *, variant: str | None = None, path: str | Path | None = None, name: str = "decision_reward"
) -> Callable[..., list[float | None]]:
    """A TRL reward M[decision][label]; the matrix is loaded (and validated) now, not per call."""
    matrix = load_decision_matrix(variant, path=path)

    def reward(
        prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
    ) -> list[float | None]:
        valid: list[float] = []
        hits: list[float] = []
        predictions: list[str] = []

        def score(i: int, completion: Any) -> float | None:
            truth = truth_label(column(kwargs, "label", i))
            thesis = parsed(completion)
            prediction = thesis.decision
            evidence = kwargs.get("evidence")
            if prediction is not None and evidence is not None and obeys_instruction(
                    thesis, evidence_index(column(kwargs, "evidence", i))):
                prediction = None  # the decision of an instruction it quotes as evidence is not its own
            predictions.append(prediction or "INVALID")
            valid.append(float(prediction is not None))
            if truth is None:
                return None
            hits.append(float(prediction == truth))
            return matrix(prediction, truth)

        out = per_completion(
            completions, score, minimum=matrix.missing, lo=matrix.lo, hi=matrix.hi, name=name, kwargs=kwargs
        )
        log_metric(kwargs, "decision/valid", valid)
        log_metric(kwargs, "decision/accuracy", hits)
        if len(predictions) == len(out):
            log_extra(kwargs, "decision", predictions)
        return out

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


decision_reward = make_decision_reward()
decision_reward.__doc__ = (
    "Stage III M[decision][label] with the default ('calibrated') matrix; -1.5 if the decision is missing or "
    "invalid; None without label."
)
