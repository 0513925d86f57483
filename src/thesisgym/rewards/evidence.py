"""Evidence reward (Trading-R1 Stage II formula) with real grounding checks instead of format checks.

The paper's Stage II reward pays a bullet for *having* a quote and a source. That is trivially
hackable: invent a quote, cite any id. We keep the formula exactly (SPEC section 6) and change what
the quote and source terms mean:

- A citation counts only if its id exists in this prompt's evidence. Citing an unknown id is a
  hallucination.
- A quote counts only if it occurs in a cited item's text after normalisation (case, whitespace,
  quote characters; "..." splits a quote into fragments that must each occur). Verbatim first;
  when no cited item has it verbatim, fuzzy matching (rapidfuzz partial_ratio >= 90, difflib
  fallback) forgives small copying slips in words but not in numbers (every number in a fuzzily
  matched quote must occur in the item). A quote found in no cited item is a hallucination.
  Quotes shorter than MIN_QUOTE_CHARS are ignored (a two-word "quote" proves nothing). A quote
  without any citation is not credited; if it occurs nowhere in the prompt it is a hallucination.
- Every number in the opinion (outside quotes and citations) must match a number of a cited item
  (its `numbers` plus the numbers shown in its text, date and source): equal magnitudes within
  relative tolerance REL_TOL, or equal after rounding the evidence to the decimals the claim
  shows ("12%" matches 12.4). Magnitudes, because prose carries the sign in words ("fell 3.2%"
  for -3.2). A number with no cited match is a hallucination. Bracketed text is never a claim.
- Citation precision = supporting cited ids / cited ids, where an id supports the bullet when it
  contains one of its quotes or one of its claim numbers (verbatim matches first; fuzzy only if
  no cited id has the quote verbatim). A bullet with nothing to verify gets credit for one
  citation at most (precision = 1/len(citations)). Both the quote term and the source term are
  multiplied by it, so citing every id on every bullet ("citation stuffing") pays ~1/N.

A hallucinated bullet scores 0; with the harmonic means of the formula one fabricated bullet
drags its section and the thesis down hard, which is the intent. Range: [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from thesisgym.rewards.base import (
    EvidenceIndex,
    column,
    evidence_index,
    log_extra,
    log_metric,
    parsed,
    per_completion,
)
from thesisgym.thesis import Bullet, Thesis, normalize_text, scan_numbers

try:  # rapidfuzz is C++ and ~100x faster than difflib for the fuzzy path
    from rapidfuzz.fuzz import partial_ratio as _partial_ratio
except ImportError:  # pragma: no cover - exercised only where rapidfuzz is missing
    _partial_ratio = None

__all__ = [
    "FUZZY_THRESHOLD",
    "MIN_QUOTE_CHARS",
    "REL_TOL",
    "BulletCheck",
    "EvidenceReport",
    "check_bullet",
    "evidence_report",
    "evidence_reward",
    "quote_in_text",
]

MIN_QUOTE_CHARS = 8
FUZZY_THRESHOLD = 90.0
REL_TOL = 0.005
_QUOTE_STRIP = " .,;:!?'\"-\u2026"


def _fuzzy_contains(needle: str, hay: str) -> bool:
    if len(needle) > len(hay) + 2:  # partial_ratio would align the text inside the quote instead
        return False
    if _partial_ratio is not None:
        return _partial_ratio(needle, hay, score_cutoff=FUZZY_THRESHOLD) > 0
    import difflib  # fallback: windows of the quote's length, step a quarter of it

    n = len(needle)
    step = max(1, n // 4)
    for start in range(0, max(1, len(hay) - n + step), step):
        if (
            difflib.SequenceMatcher(None, needle, hay[start : start + n + step], autojunk=False).ratio() * 100
            >= FUZZY_THRESHOLD
        ):
            return True
    return False


def _fragments(quote_norm: str) -> list[str]:
    if "..." not in quote_norm and "\u2026" not in quote_norm:
        f = quote_norm.strip(_QUOTE_STRIP)
        return [f] if f else []
    parts = quote_norm.replace("\u2026", "...").split("...")
    return [p.strip(_QUOTE_STRIP) for p in parts if p.strip(_QUOTE_STRIP)]


def quote_in_text(quote: str, text: str, *, fuzzy: bool = True, normalized: bool = False) -> bool:
    """Whether `quote` occurs in `text` (normalised; "..." separates fragments; fuzzy >= 90 if allowed)."""
    q = quote if normalized else normalize_text(quote)
    t = text if normalized else normalize_text(text)
    frags = _fragments(q)
    if not frags:
        return False
    if all(f in t for f in frags):
        return True
    if not fuzzy:
        return False
    # fuzzy matching forgives copying slips in words, never in numbers: "up 9.3%" is not "up 2.3%"
    text_numbers: list[float] | None = None
    for f in frags:
        if f in t:
            continue
        if not _fuzzy_contains(f, t):
            return False
        wanted = scan_numbers(f)
        if wanted:
            text_numbers = [v for v, _ in scan_numbers(t)] if text_numbers is None else text_numbers
            if not all(any(abs(v - x) <= 1e-9 * max(1.0, abs(x)) for x in text_numbers) for v, _ in wanted):
                return False
    return True


def _number_supported(value: float, decimals: int, numbers: Sequence[float]) -> bool:
    x = abs(value)
    for y in numbers:
        y = abs(y)
        if abs(x - y) <= REL_TOL * max(x, y) or abs(round(y, decimals) - x) < 1e-9:
            return True
    return False


def _opinion_score(words: int, has_quote: bool, has_source: bool) -> float:
    if not (has_quote and has_source):
        return min(0.3, 0.3 * words / 15)
    if words < 15:
        return words / 15
    if words <= 90:
        return 1.0
    return max(0.5, 1 - 0.02 * (words - 90))


def bullet_count_score(n: int) -> float:
    """1 for 4-7 bullets, n/4 below, max(0.3, 1 - 0.1 (n - 7)) above (Trading-R1)."""
    if n < 4:
        return n / 4
    if n <= 7:
        return 1.0
    return max(0.3, 1 - 0.1 * (n - 7))


def harmonic_mean(values: Sequence[float], *, floor: float = 0.01) -> float:
    """Harmonic mean with each value floored (so a zero is a heavy penalty, not a division error)."""
    if not values:
        return 0.0
    return len(values) / sum(1.0 / max(floor, v) for v in values)


@dataclass(frozen=True, slots=True)
class BulletCheck:
    """Verification and score of one bullet; `reasons` says why it is a hallucination."""

    score: float
    hallucinated: bool
    reasons: tuple[str, ...]
    precision: float  # nan when the bullet cites nothing
    quote_verified: bool
    r_opinion: float


@dataclass(frozen=True, slots=True)
class EvidenceReport:
    """Stage II score of a thesis plus the diagnostics logged next to it."""

    score: float
    n_bullets: int
    n_hallucinated: int
    hallucination_rate: float  # nan without bullets
    citation_precision: float  # mean over citing bullets; nan when none cites
    grounding: float  # mean over bullets of verified-quote * precision (0 if hallucinated); in [0, 1]
    section_scores: tuple[tuple[str, float], ...]
    bullets: tuple[BulletCheck, ...]


# BulletCheck(...) without the frozen-dataclass __init__ (one object.__setattr__ per field, ~2x
# slower), as thesis._make_bullet does for Bullet: one check per bullet is the hot path of the
# evidence reward. Same object, equality, hash and repr; unpacking from fields() fails at import
# if a field is ever added without updating this.
_new_object = object.__new__
_set_score, _set_hallucinated, _set_reasons, _set_precision, _set_quote_verified, _set_r_opinion = (
    BulletCheck.__dict__[f.name].__set__ for f in fields(BulletCheck)
)


def _make_check(
    score: float,
    hallucinated: bool,
    reasons: tuple[str, ...],
    precision: float,
    quote_verified: bool,
    r_opinion: float,
) -> BulletCheck:
    check = _new_object(BulletCheck)
    _set_score(check, score)
    _set_hallucinated(check, hallucinated)
    _set_reasons(check, reasons)
    _set_precision(check, precision)
    _set_quote_verified(check, quote_verified)
    _set_r_opinion(check, r_opinion)
    return check


_verified_checks: dict[int, BulletCheck] = {}


def _verified_check(word_count: int) -> BulletCheck:
    """The check of a bullet with one verified quote from its one cited id and no claim numbers.

    It depends on the word count alone, and BulletCheck is immutable, so one shared instance per
    word count serves every such bullet (most honest bullets take this path).
    """
    check = _verified_checks.get(word_count)
    if check is None:
        r_opinion = _opinion_score(word_count, True, True)
        check = _make_check(0.4 * r_opinion + 0.6, False, (), 1.0, True, r_opinion)
        if len(_verified_checks) < 4096:  # word counts are bounded by MAX_BULLET_CHARS anyway
            _verified_checks[word_count] = check
    return check


def check_bullet(bullet: Bullet, index: EvidenceIndex) -> BulletCheck:
    """Verify one bullet against the prompt's evidence and score it with the Stage II formula."""
    items = index.items
    cited = bullet.citations
    # fast path for the common honest shape: one citation, one verbatim quote, no claim numbers
    if len(cited) == 1 and len(bullet.quotes) == 1 and not bullet.numbers:
        item = items.get(cited[0])
        q = bullet.quotes[0]
        if item is not None and q.isascii() and "..." not in q:
            f = q.lower().strip(_QUOTE_STRIP)
            if len(f) >= MIN_QUOTE_CHARS and f in item.norm_text:
                return _verified_check(bullet.word_count)
    reasons: list[str] = []
    existing = [items[c] for c in cited if c in items]
    if len(existing) < len(cited):
        reasons.append("cites unknown id " + ", ".join(c for c in cited if c not in items))
    quotes = []
    for q in bullet.quotes:
        # the parser already collapsed whitespace and mapped curly quotes: ASCII only needs lower()
        q = q.lower() if q.isascii() else normalize_text(q)
        if len(q.strip(_QUOTE_STRIP)) >= MIN_QUOTE_CHARS:
            quotes.append(q)
    supporting: set[str] = set()
    quote_verified = False
    if quotes:
        if existing:
            all_found = True
            for q in quotes:
                frags = _fragments(q)
                # verbatim first (cheap `in`); fuzzy only when no cited item has the quote verbatim
                if len(frags) == 1:
                    f = frags[0]
                    exact = {it.id for it in existing if f in it.norm_text}
                else:
                    exact = {it.id for it in existing if frags and all(f in it.norm_text for f in frags)}
                if not exact:
                    exact = {it.id for it in existing if quote_in_text(q, it.norm_text, normalized=True)}
                if exact:
                    supporting |= exact
                else:
                    all_found = False
                    reasons.append("quote not in cited evidence")
            quote_verified = all_found
        elif not any(
            quote_in_text(q, it.norm_text, normalized=True) for q in quotes for it in items.values()
        ):
            reasons.append("quote not in the evidence")
    for value, decimals in bullet.numbers:
        backers = [it.id for it in existing if _number_supported(value, decimals, it.numbers)]
        if backers:
            supporting.update(backers)
        else:
            reasons.append(f"number {value:g} not in cited evidence")
    if cited:
        if quotes or bullet.numbers:
            precision = len(supporting) / len(cited)
        else:
            precision = (1.0 / len(cited)) if existing else 0.0
    else:
        precision = math.nan
    has_source = bool(existing)
    r_opinion = _opinion_score(bullet.word_count, quote_verified, has_source)
    if reasons:
        return _make_check(0.0, True, tuple(reasons), precision, False, r_opinion)
    p = precision if has_source else 0.0
    score = 0.4 * r_opinion + 0.35 * (1.0 if quote_verified else 0.0) * p + 0.25 * p
    return _make_check(score, False, (), precision, quote_verified, r_opinion)


def evidence_report(thesis: Thesis, index: EvidenceIndex) -> EvidenceReport:
    """Stage II: per bullet -> per section (0.3 count + 0.7 harmonic mean) -> harmonic mean of sections."""
    checks: list[BulletCheck] = []
    section_scores: list[tuple[str, float]] = []
    for section in thesis.sections:
        bullet_checks = [check_bullet(b, index) for b in section.bullets]
        checks.extend(bullet_checks)
        if bullet_checks:
            s = 0.3 * bullet_count_score(len(bullet_checks)) + 0.7 * harmonic_mean(
                [c.score for c in bullet_checks]
            )
        else:
            s = 0.0
        section_scores.append((section.name, s))
    score = harmonic_mean([s for _, s in section_scores]) if section_scores else 0.0
    if score <= 0.01 + 1e-12 and all(s == 0.0 for _, s in section_scores):
        score = 0.0
    n = len(checks)
    n_bad = sum(c.hallucinated for c in checks)
    precisions = [c.precision for c in checks if not math.isnan(c.precision)]
    return EvidenceReport(
        score=score,
        n_bullets=n,
        n_hallucinated=n_bad,
        hallucination_rate=(n_bad / n) if n else math.nan,
        citation_precision=(sum(precisions) / len(precisions)) if precisions else math.nan,
        grounding=(sum((c.precision if c.quote_verified else 0.0) for c in checks) / n) if n else 0.0,
        section_scores=tuple(section_scores),
        bullets=tuple(checks),
    )


def evidence_reward(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """Verified Stage II evidence score in [0, 1] (0 for unparseable output); reads the `evidence` column.

    Logs evidence/hallucination_rate, evidence/citation_precision and evidence/grounding through
    TRL's `log_metric` when it is passed.
    """
    memo: dict = {}
    reports: list[EvidenceReport | None] = []

    def score(i: int, completion: Any) -> float:
        reports.append(None)
        report = evidence_report(parsed(completion), evidence_index(column(kwargs, "evidence", i), memo))
        reports[-1] = report
        return report.score

    out = per_completion(completions, score, minimum=0.0, lo=0.0, hi=1.0)
    done = [r for r in reports if r is not None]
    log_metric(kwargs, "evidence/hallucination_rate", [r.hallucination_rate for r in done])
    log_metric(kwargs, "evidence/citation_precision", [r.citation_precision for r in done])
    log_metric(kwargs, "evidence/grounding", [r.grounding for r in done])
    if len(reports) == len(out):
        log_extra(
            kwargs,
            "hallucination_rate",
            [r.hallucination_rate if r is not None else math.nan for r in reports],
        )
    return out
