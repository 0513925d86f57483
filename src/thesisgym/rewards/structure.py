"""Structure reward (Trading-R1 Stage I): the right number of sections, each a proper bullet list.

Formula (docs/spec.md, section 6.1): R = 0.6 * R_count + 0.4 * mean(R_struct over sections), with
R_count = 1 when lo <= S <= hi, max(0.3, 0.7 * S / lo) below, max(0.3, 1 - 0.15 * (S - hi)) above.

Choices the paper leaves open, documented here:
- S counts distinct section tags (schema.SECTIONS). When the row's `sections` column is given,
  only sections that the prompt actually has are counted and lo = hi = their number (the system
  prompt asks for one tag per section); without it lo, hi = 5, 7 (Trading-R1's 5-7 sections).
  `make_structure_reward(lo=, hi=)` overrides both.
- R_struct(section) = 0.5 * bullet-count score (1 for 4-7 bullets, n/4 below, max(0.3, 1-0.1(n-7))
  above) + 0.5 * mean bullet-length score (words of the whole bullet: 1 for 15-90, w/15 below,
  max(0.5, 1 - 0.02 (w - 90)) above). A section without bullets scores 0.
- A completion with no recognised section scores 0 (the 0.3 floor of R_count is for "too few",
  not for "none"), so empty or unparseable output gets the minimum. Range: [0, 1].
- Stray text is a format defect that grows with its length: the words written in a section before
  its first bullet and outside every block (before, between and after the tags; <think> aside)
  multiply R by max(0, 1 - stray words / STRAY_WORDS_SCALE), so a 50 KB tail after the decision
  scores 0 and a three-word preamble costs 3 %.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thesisgym.rewards.base import column, log_metric, parsed, per_completion
from thesisgym.rewards.evidence import bullet_count_score
from thesisgym.schema import SECTIONS
from thesisgym.thesis import Thesis

__all__ = ["DEFAULT_SECTION_BOUNDS", "STRAY_WORDS_SCALE", "make_structure_reward", "stray_words", "structure_reward",
           "structure_score"]

DEFAULT_SECTION_BOUNDS = (5, 7)
STRAY_WORDS_SCALE = 100


def _length_score(words: int) -> float:
    if words < 15:
        return words / 15
    if words <= 90:
        return 1.0
    return max(0.5, 1 - 0.02 * (words - 90))


def _count_score(s: int, lo: int, hi: int) -> float:
    if s < lo:
        return max(0.3, 0.7 * s / lo)
    if s > hi:
        return max(0.3, 1 - 0.15 * (s - hi))
    return 1.0


def stray_words(thesis: Thesis) -> int:
    """Words outside bullets and blocks: section prose before the first bullet, text outside the tags."""
    return sum(s.prose.count(" ") + 1 for s in thesis.sections if s.prose) + (
        thesis.outside.count(" ") + 1 if thesis.outside else 0
    )


def structure_score(
    thesis: Thesis,
    *,
    prompt_sections: Sequence[str] | None = None,
    lo: int | None = None,
    hi: int | None = None,
) -> float:
    """Stage I score of a parsed thesis (see module docstring for the bounds rule)."""
    allowed = None
    if prompt_sections:
        allowed = {s for s in prompt_sections if isinstance(s, str) and s in SECTIONS}
    sections = [s for s in thesis.sections if allowed is None or s.name in allowed]
    if not sections:
        return 0.0
    if lo is None or hi is None:
        default_lo, default_hi = (len(allowed), len(allowed)) if allowed else DEFAULT_SECTION_BOUNDS
        lo = default_lo if lo is None else lo
        hi = default_hi if hi is None else hi
    lo = max(1, lo)
    hi = max(lo, hi)
    per_section = []
    for section in sections:
        if not section.bullets:
            per_section.append(0.0)
            continue
        # bullet text is whitespace-collapsed by the parser, so spaces + 1 = words (and C-fast)
        lengths = [_length_score(b.text.count(" ") + 1 if b.text else 0) for b in section.bullets]
        per_section.append(0.5 * bullet_count_score(len(section.bullets)) + 0.5 * sum(lengths) / len(lengths))
    score = 0.6 * _count_score(len(sections), lo, hi) + 0.4 * sum(per_section) / len(per_section)
    stray = stray_words(thesis)
    return score * max(0.0, 1.0 - stray / STRAY_WORDS_SCALE) if stray else score


def make_structure_reward(
    *, lo: int | None = None, hi: int | None = None, name: str = "structure_reward"
) -> Callable[..., list[float | None]]:
    """A TRL structure reward with fixed section bounds (None = from the row's `sections`, else 5-7)."""

    def reward(
        prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
    ) -> list[float | None]:
        theses: list[Thesis] = []

        def score(i: int, completion: Any) -> float:
            thesis = parsed(completion)
            theses.append(thesis)
            return structure_score(thesis, prompt_sections=column(kwargs, "sections", i), lo=lo, hi=hi)

        out = per_completion(completions, score, minimum=0.0, lo=0.0, hi=1.0, name=name, kwargs=kwargs)
        log_metric(kwargs, "structure/n_sections", [float(len(t.sections)) for t in theses])
        log_metric(kwargs, "structure/n_bullets", [float(len(t.bullets)) for t in theses])
        log_metric(kwargs, "structure/format_valid", [float(t.valid) for t in theses])
        return out

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


structure_reward = make_structure_reward()
structure_reward.__doc__ = (
    "Trading-R1 Stage I structure score in [0, 1]; reads the `sections` column for the bounds."
)
