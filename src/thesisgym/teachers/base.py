"""The teacher interface: anything that writes theses for a context row.

Distillation (`thesisgym.teachers.distill`) only needs `write(row, *, n, seed) -> list[str]`, so a rule-based
analyst (`TemplateTeacher`), an OpenAI-compatible LLM (`OpenAITeacher`) or a trained policy can be
swapped without touching the filter. A row is one dataset row as a dict with the columns of
`schema.CONTEXT_COLUMNS` (prompt, evidence, sections, label, ...).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Teacher(Protocol):
    """Writes `n` candidate theses (canonical format, docs/spec.md, section 5) for one context row.

    Implementations must be deterministic for a given (row, n, seed) when their backend allows it,
    and return exactly `n` strings (an empty string for a sample that failed, never raise on one
    bad sample) so the caller can count rejects honestly.
    """

    def write(self, row: dict, *, n: int = 1, seed: int = 0) -> list[str]: ...


def check_row(row: dict, *, who: str, needs: tuple[str, ...] = ("evidence", "sections")) -> None:
    """Raise a ValueError naming the missing column when `row` cannot be read by a teacher."""
    if not isinstance(row, dict):
        raise TypeError(f"{who}: row must be a dict (one dataset row), got {type(row).__name__}")
    missing = [c for c in needs if c not in row]
    if missing:
        raise ValueError(f"{who}: row is missing column(s) {missing}; expected schema.CONTEXT_COLUMNS")
    if not isinstance(row["evidence"], list):
        raise TypeError(f"{who}: column 'evidence' must be a list of EvidenceItem dicts")
