"""Plumbing shared by every reward: cached parsing, per-prompt evidence indexes, safe columns and logging.

TRL calls each reward function on the whole batch with the dataset columns as keyword lists. The
same completion text reaches structure, evidence, decision and loop rewards in turn, and the
`num_generations` completions of one prompt share one evidence list; both are cached here
(bounded LRU caches keyed by content, so results stay pure and deterministic) because this is
the hot path of GRPO. Reward bodies are wrapped by `per_completion` so that one bad completion
gets the documented minimum instead of raising or silently becoming None.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from thesisgym.thesis import Thesis, completion_text, normalize_text, parse_thesis, scan_numbers
from thesisgym.thesis import _clear_caches as _clear_parser_caches

__all__ = [
    "EvidenceIndex",
    "clear_caches",
    "column",
    "evidence_index",
    "log_extra",
    "log_metric",
    "parsed",
    "per_completion",
]

_PARSE_CACHE_SIZE = 4096
_PARSE_CACHE_MAX_CHARS = 65_536  # never pin megabyte-sized garbage in memory
_parse_cache: OrderedDict[str, Thesis] = OrderedDict()
# TRL runs async rewards on its own event-loop thread; the lock keeps the LRU bookkeeping consistent
_cache_lock = threading.Lock()


def parsed(completion: Any) -> Thesis:
    """`parse_thesis(completion_text(completion))`, memoised on the text (Thesis is immutable)."""
    text = completion_text(completion)
    if len(text) > _PARSE_CACHE_MAX_CHARS:
        return parse_thesis(text)
    with _cache_lock:
        hit = _parse_cache.get(text)
        if hit is not None:
            _parse_cache.move_to_end(text)
            return hit
    thesis = parse_thesis(text)
    with _cache_lock:
        _parse_cache[text] = thesis
        if len(_parse_cache) > _PARSE_CACHE_SIZE:
            _parse_cache.popitem(last=False)
    return thesis


@dataclass(frozen=True, slots=True)
class EvidenceItemView:
    """What verification needs from one EvidenceItem, precomputed once per prompt."""

    id: str
    norm_text: str
    numbers: tuple[float, ...]


def _scanned_values(text: str) -> tuple[float, ...]:
    return tuple(v for v, _ in scan_numbers(text))


_SCAN_CACHE_SIZE = 16_384
_scan_cache: dict[str, tuple[float, ...]] = {}


def _shown_numbers(text: str) -> tuple[float, ...]:
    """Values of `scan_numbers(text)`, memoised: every item of a prompt repeats the same date and
    source, and the same news or filing text recurs across prompts (bounded, cleared when full)."""
    hit = _scan_cache.get(text)
    if hit is None:
        hit = _scanned_values(text)
        if len(text) <= 512:  # dates, sources and short items; bounds the cache to a few MB
            if len(_scan_cache) >= _SCAN_CACHE_SIZE:
                _scan_cache.clear()
            _scan_cache[text] = hit
    return hit


class EvidenceIndex:
    """id -> normalised text and numbers for one prompt's evidence list (built once, then shared)."""

    __slots__ = ("items",)

    def __init__(self, evidence: Sequence[Any] | None, *, memo_scans: bool = False) -> None:
        # memo_scans: share number scans of dates, sources and texts across builds (what the
        # cached `evidence_index` does); off by default so a direct build does all of its own work
        scan = _shown_numbers if memo_scans else _scanned_values
        self.items: dict[str, EvidenceItemView] = {}
        for item in evidence or ():
            if not isinstance(item, dict):
                continue
            raw_id = item.get("id")
            if not isinstance(raw_id, str) or not raw_id.strip():
                continue
            text = item.get("text") if isinstance(item.get("text"), str) else ""
            numbers = set()
            given = item.get("numbers")
            if isinstance(given, (list, tuple)):
                for x in given:
                    if isinstance(x, (int, float)) and math.isfinite(x):
                        numbers.add(float(x))
            # union with our own scan of everything the prompt shows for this item (text, and the
            # date/source header): a context built by another tool may have left `numbers` empty,
            # and "on 2024-03-08" or "the 10-Q" are honest claims about a cited item
            for shown in (text, item.get("date"), item.get("source")):
                if isinstance(shown, str):
                    numbers.update(scan(shown))
            key = raw_id.strip().upper()
            self.items[key] = EvidenceItemView(key, normalize_text(text), tuple(sorted(numbers)))

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.items

    def __len__(self) -> int:
        return len(self.items)


_INDEX_CACHE_SIZE = 512
_index_cache: OrderedDict[tuple, EvidenceIndex] = OrderedDict()


def evidence_index(
    evidence: Sequence[Any] | None, memo: dict[int, tuple[Any, EvidenceIndex]] | None = None
) -> EvidenceIndex:
    """The EvidenceIndex of an evidence list, cached by content (id, text, date, source, numbers).

    `memo` is a per-call dict keyed by object identity (the object is kept alive in it, so ids
    cannot be reused): TRL's adjacent generations of one prompt then skip even the content key.
    """
    if evidence is None:
        return EvidenceIndex(None)
    if memo is not None:
        hit = memo.get(id(evidence))
        if hit is not None and hit[0] is evidence:
            return hit[1]
    try:
        key = tuple(
            (
                item.get("id"),
                item.get("text"),
                item.get("date"),
                item.get("source"),
                tuple(item.get("numbers") or ()),
            )
            if isinstance(item, dict)
            else None
            for item in evidence
        )
        hash(key)
    except Exception:
        return EvidenceIndex(evidence)
    with _cache_lock:
        index = _index_cache.get(key)
        if index is not None:
            _index_cache.move_to_end(key)
    if index is None:
        index = EvidenceIndex(evidence, memo_scans=True)
        with _cache_lock:
            _index_cache[key] = index
            if len(_index_cache) > _INDEX_CACHE_SIZE:
                _index_cache.popitem(last=False)
    if memo is not None:
        memo[id(evidence)] = (evidence, index)
    return index


def clear_caches() -> None:
    """Forget every parsed completion, evidence index and memoised sub-result (for benchmarks,
    which must start cold, and memory pressure)."""
    from thesisgym.rewards import evidence  # evidence imports this module: import at call time

    with _cache_lock:
        _parse_cache.clear()
        _index_cache.clear()
        _scan_cache.clear()
    _clear_parser_caches()
    evidence._verified_checks.clear()


def column(kwargs: dict[str, Any], name: str, i: int, default: Any = None) -> Any:
    """Row i of dataset column `name` as TRL passes it (a list per batch); missing -> default."""
    values = kwargs.get(name)
    if values is None:
        return default
    try:
        return values[i]
    except (IndexError, KeyError, TypeError):
        return default


def log_metric(kwargs: dict[str, Any], name: str, values: Sequence[float]) -> None:
    """Log the finite mean of `values` through TRL's `log_metric` kwarg when present (zero-weight metric)."""
    fn = kwargs.get("log_metric")
    if not callable(fn):
        return
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return
    with contextlib.suppress(Exception):  # logging must never break a training step
        fn(name, sum(finite) / len(finite))


def log_extra(kwargs: dict[str, Any], column_name: str, values: Sequence[Any]) -> None:
    """Add a per-completion column to TRL's completions table through its `log_extra` kwarg when present."""
    fn = kwargs.get("log_extra")
    if callable(fn):
        with contextlib.suppress(Exception):
            fn(column_name, list(values))


def per_completion(
    completions: Sequence[Any],
    score: Callable[[int, Any], float | None],
    *,
    minimum: float,
    lo: float,
    hi: float,
) -> list[float | None]:
    """Apply `score(i, completion)` to each completion; exceptions and non-finite values -> `minimum`.

    None is passed through (it means "not applicable", e.g. no label); anything else is clamped to
    [lo, hi] so the documented range holds even if a formula misbehaves.
    """
    out: list[float | None] = []
    for i, completion in enumerate(completions or ()):
        try:
            value = score(i, completion)
        except Exception:
            value = minimum
        if value is None:
            out.append(None)
            continue
        try:
            value = float(value)
        except (TypeError, ValueError):
            value = minimum
        if not math.isfinite(value):
            value = minimum
        out.append(min(hi, max(lo, value)))
    return out
