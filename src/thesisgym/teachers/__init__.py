"""Teachers write theses for context rows: rule-based (`TemplateTeacher`) or an LLM (`OpenAITeacher`).

`OpenAITeacher` is imported lazily so `import thesisgym.teachers` never needs the openai client.
"""

from __future__ import annotations

from typing import Any

from thesisgym.teachers.base import Teacher
from thesisgym.teachers.template import TemplateTeacher, decide, item_stance

__all__ = ["Teacher", "TemplateTeacher", "OpenAITeacher", "decide", "item_stance", "make_teacher"]


def __getattr__(name: str) -> Any:
    if name == "OpenAITeacher":
        from thesisgym.teachers.openai import OpenAITeacher

        return OpenAITeacher
    raise AttributeError(f"module 'thesisgym.teachers' has no attribute {name!r}")


def make_teacher(kind: str = "template", **options: Any) -> Teacher:
    """Build a teacher by name ("template" | "openai") with its keyword options."""
    if kind == "template":
        return TemplateTeacher(**options)
    if kind == "openai":
        from thesisgym.teachers.openai import OpenAITeacher

        return OpenAITeacher(**options)
    raise ValueError(f"unknown teacher {kind!r}; expected 'template' or 'openai'")
