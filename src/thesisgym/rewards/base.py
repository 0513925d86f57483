"""Plumbing shared by every reward: cached parsing, per-prompt evidence indexes, safe columns and logging.

TRL calls each reward function on the whole batch with the dataset columns as keyword lists. The
same completion text reaches structure, evidence, decision and loop rewards in turn, and the
`num_generations` completions of one prompt share one evidence list; both are cached here
(bounded LRU caches keyed by content, so results stay pure and deterministic) because this is
the hot path of GRPO. Reward bodies are wrapped by `per_completion` so that one bad completion
gets the documented minimum instead of raising or silently becoming None. Every error of the
verifier goes through one counted path, `record_error`: exceptions inside rewards, parser
failures (registered with `thesis.on_parser_error`), and the failures that the consistency path
turns into a score. `record_error` adds to the process-wide count (`reward_errors`) and to every
tally open in the calling context (`counting_errors`): the per-batch `<reward>/reward_errors`
metric, `score_completion`'s `reward_errors` and a service request's count are such tallies, so a
concurrent call in another thread never lands in them (a difference of the process-wide count would).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import logging
import math
import os
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from thesisgym.rewards.reading import is_instruction
from thesisgym.schema import PREFIX_TO_SECTION, SECTIONS
from thesisgym.thesis import (
    Quantity,
    Thesis,
    clear_parser_caches,
    completion_text,
    normalize_text,
    on_parser_error,
    parse_thesis,
    scan_quantities,
)

__all__ = [
    "EvidenceIndex",
    "clear_caches",
    "collector_paused",
    "column",
    "counting_errors",
    "evidence_index",
    "log_extra",
    "log_metric",
    "parsed",
    "per_completion",
    "record_error",
    "register_cache",
    "reset_reward_errors",
    "reward_errors",
    "strict_rewards",
]

# The memos below are functools.lru_cache (thread-safe: TRL runs async rewards on its own event-loop
# thread), each keyed on everything its value depends on, and bounded.
_PARSE_CACHE_MAX_CHARS = 65_536  # never pin megabyte-sized garbage in memory
_parse_text = functools.lru_cache(maxsize=4096)(parse_thesis)


def parsed(completion: Any) -> Thesis:
    """`parse_thesis(completion_text(completion))`, memoised on the text (Thesis is immutable)."""
    text = completion_text(completion)
    return parse_thesis(text) if len(text) > _PARSE_CACHE_MAX_CHARS else _parse_text(text)


@dataclass(frozen=True, slots=True)
class EvidenceItemView:
    """What verification needs from one EvidenceItem, precomputed once per prompt.

    Everything comes from the item's body (`text`), never from its date or source header: "14 %
    growth" must not be backed by an item dated the 14th.
    """

    id: str
    section: str
    norm_text: str
    text: str
    date: str = ""  # the item's date (time claims are checked against it), never a source of numbers

    @property
    def instruction(self) -> bool:
        """Whether the item instructs the model instead of reporting (`reading.is_instruction`):
        not evidence."""
        return is_instruction(self.text)

    @property
    def quantities(self) -> tuple[Quantity, ...]:
        """The body's quantities (thesis.scan_quantities), scanned on first use: only a bullet whose
        opinion states a number needs them."""
        return item_quantities(self.text)


@functools.lru_cache(maxsize=16_384)
def _scan_text(text: str) -> tuple[Quantity, ...]:
    return tuple(scan_quantities(text))


def item_quantities(text: str) -> tuple[Quantity, ...]:
    """`scan_quantities(text)`, memoised: the same item text is asked again by every generation of a
    prompt and recurs across prompts (texts over 4096 characters are not kept: a few MB in all)."""
    return tuple(scan_quantities(text)) if len(text) > 4096 else _scan_text(text)


def _item_section(item: dict, key: str) -> str:
    section = item.get("section")
    if isinstance(section, str) and section in SECTIONS:
        return section
    return PREFIX_TO_SECTION.get(key.rstrip("0123456789"), "")


class EvidenceIndex:
    """id -> normalised body text, section and quantities of one prompt's evidence (built once, shared).

    `features` is a per-index scratch dict for derived data verification computes lazily (the
    word n-grams of all bodies, memoised per-quote results), so it lives as long as the index.
    """

    __slots__ = ("features", "items")

    def __init__(self, evidence: Sequence[Any] | None) -> None:
        self.features: dict[str, Any] = {}
        self.items: dict[str, EvidenceItemView] = {}
        for item in evidence or ():
            if not isinstance(item, dict):
                continue
            raw_id = item.get("id")
            if not isinstance(raw_id, str) or not raw_id.strip():
                continue
            text: str = item["text"] if isinstance(item.get("text"), str) else ""
            # numbers come from our own scan of the body (EvidenceItemView.quantities): the
            # `numbers` field carries neither sign, unit nor scale, and a context built by another
            # tool may have filled it from the header too
            key = raw_id.strip().upper()
            date = item.get("date")
            self.items[key] = EvidenceItemView(key, _item_section(item, key), normalize_text(text), text,
                                               str(date)[:10] if date is not None else "")

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.items

    def __len__(self) -> int:
        return len(self.items)


@functools.lru_cache(maxsize=512)
def _index_of(key: tuple) -> EvidenceIndex:
    """The EvidenceIndex of the content key `evidence_index` builds: (id, text, section, date) per
    item, the four fields an index reads (the date backs or belies a time claim), None for an item
    that is not a dict (the index skips it)."""
    return EvidenceIndex([{"id": k[0], "text": k[1], "section": k[2], "date": k[3]} for k in key if k is not None])


def evidence_index(
    evidence: Sequence[Any] | None, memo: dict[int, tuple[Any, EvidenceIndex]] | None = None
) -> EvidenceIndex:
    """The EvidenceIndex of an evidence list, cached by content (id, text, section, date).

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
                item.get("section"),
                item.get("date"),
            )
            if isinstance(item, dict)
            else None
            for item in evidence
        )
        hash(key)
    except Exception:
        return EvidenceIndex(evidence)
    index = _index_of(key)
    if memo is not None:
        memo[id(evidence)] = (evidence, index)
    return index


_cache_clearers: list[Callable[[], None]] = [clear_parser_caches]


def register_cache(clear: Callable[[], None]) -> None:
    """Have `clear_caches` also call `clear` (a reward module's own memo, registered at import)."""
    _cache_clearers.append(clear)


def clear_caches() -> None:
    """Forget every parsed completion, evidence index and memoised sub-result (for benchmarks,
    which must start cold, and memory pressure)."""
    for memo in (_parse_text, _scan_text, _index_of):
        memo.cache_clear()
    for clear in _cache_clearers:
        clear()


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


# --- errors: counted and logged, never hidden ----------------------------------------------------
logger = logging.getLogger("thesisgym.rewards")
_error_counts: Counter[str] = Counter()
_logged_errors: set[tuple[str, str, int]] = set()
_errors_lock = threading.Lock()  # rewards are scored from TRL's event-loop thread too
_strict: contextvars.ContextVar[bool] = contextvars.ContextVar("thesisgym_strict_rewards", default=False)
# the tallies open in this context (innermost last); asyncio tasks and `asyncio.to_thread` carry
# the context along, so a call's worker threads count into its tallies
_tallies: contextvars.ContextVar[tuple[Counter[str], ...]] = contextvars.ContextVar("thesisgym_error_tallies",
                                                                                     default=())


def record_error(where: str, exc: BaseException) -> None:
    """Count an exception raised while scoring (per reward name) and log its traceback once per
    distinct error (type + the line that raised), so a verifier bug shows up in the logs and in the
    `reward_errors` metric instead of hiding as a constant penalty. Re-raises in strict mode."""
    with _errors_lock:
        _error_counts[where] += 1
        for tally in _tallies.get():
            tally[where] += 1
    tb = traceback.extract_tb(exc.__traceback__)
    last = tb[-1] if tb else None
    key = (type(exc).__name__, last.filename if last else "", last.lineno or 0 if last else 0)
    if key not in _logged_errors:
        _logged_errors.add(key)
        logger.error("reward %s raised %s (logged once per distinct error)", where, type(exc).__name__, exc_info=exc)
    if _strict.get() or os.environ.get("THESISGYM_STRICT_REWARDS") == "1":
        raise exc


def reward_errors(where: str | None = None) -> int:
    """Exceptions counted so far in this process: for one reward name, or all when `where` is None."""
    with _errors_lock:
        return _error_counts[where] if where is not None else sum(_error_counts.values())


@contextlib.contextmanager
def counting_errors() -> Iterator[Counter[str]]:
    """A fresh tally (reward name -> errors) of the errors recorded in this context while the block
    runs: this call and what it runs in tasks or `asyncio.to_thread`, never another thread's call.
    Blocks nest; each counts its own (a thread pool that does not copy the context is not counted:
    run its jobs with `contextvars.copy_context().run`)."""
    tally: Counter[str] = Counter()
    token = _tallies.set((*_tallies.get(), tally))
    try:
        yield tally
    finally:
        _tallies.reset(token)


def reset_reward_errors() -> None:
    """Zero the error counters and forget which tracebacks were logged."""
    with _errors_lock:
        _error_counts.clear()
        _logged_errors.clear()


@contextlib.contextmanager
def strict_rewards() -> Iterator[None]:
    """Within this block an exception inside a reward propagates instead of scoring the floor
    (tests and audits use it so that a checker bug fails loudly). Also: THESISGYM_STRICT_REWARDS=1."""
    token = _strict.set(True)
    try:
        yield
    finally:
        _strict.reset(token)


def per_completion(
    completions: Sequence[Any] | None,
    score: Callable[[int, Any], float | None],
    *,
    minimum: float,
    lo: float,
    hi: float,
    name: str = "reward",
    kwargs: dict[str, Any] | None = None,
) -> list[float | None]:
    """Apply `score(i, completion)` to each completion; an exception gives `minimum` AND is counted.

    None is passed through (it means "not applicable", e.g. no label); anything else is clamped to
    [lo, hi] so the documented range holds even if a formula misbehaves. A raising or non-finite
    score is recorded (`record_error`) and, when TRL's `log_metric` is in `kwargs`, the errors
    recorded during the batch are logged as `<name>/reward_errors` (0 on a clean batch, so the
    curve is always there).
    """
    out: list[float | None] = []
    with counting_errors() as tally, collector_paused():
        for i, completion in enumerate(completions or ()):
            out.append(_clamped(score, i, completion, minimum, lo, hi, name))
    fn = (kwargs or {}).get("log_metric")
    if callable(fn):
        with contextlib.suppress(Exception):  # errors recorded during this batch, parser failures included
            fn(f"{name}/reward_errors", float(sum(tally.values())))
    return out


# Scoring allocates hundreds of small container objects per completion (bullets, checks, tuples) and
# frees nearly all of them by reference count; the cycle collector's passes over them took 7-11 % of
# the stack's CPU time (bench/bench_rewards.py prints the share). It is paused while a batch is
# scored and resumed after, so the cycles a batch leaves are collected then. One pause spans concurrent
# batches (the reward service's threads): the first to start pauses it, the last to finish resumes it,
# and a collector that was already off stays off. Under a load that always has a batch in flight the
# pause would never end, so every OVERLAP_COLLECT-th batch that ends inside it runs the collection the
# collector would have run: the oldest generation past its threshold. The depth is counted before the
# collector is switched off and undone in `finally`, so an interrupt cannot leave it off for good; a
# child forked during a pause starts unpaused.
OVERLAP_COLLECT = 64
_pause_lock = threading.RLock()  # reentrant: a signal handler may score while this thread holds it
_pause_depth = 0
_resume_after = False  # the collector was on when the outermost pause began
_overlapped = 0


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Within this block Python's cycle collector does not run (see above); reentrant and thread-safe."""
    global _pause_depth, _resume_after, _overlapped
    entered = False
    try:
        with _pause_lock:
            _pause_depth += 1
            entered = True
            if _pause_depth == 1:
                _resume_after, _overlapped = gc.isenabled(), 0
                gc.disable()
        yield
    finally:
        collect = False
        with _pause_lock:
            if entered:
                _pause_depth -= 1
                if _pause_depth == 0:
                    if _resume_after:
                        gc.enable()
                elif _resume_after:
                    _overlapped += 1
                    collect = _overlapped % OVERLAP_COLLECT == 0
        if collect:
            _collect_due()


def _collect_due() -> None:
    """The collection the automatic collector would run now: the oldest generation past its threshold."""
    _, t1, t2 = gc.get_threshold()
    _, c1, c2 = gc.get_count()
    gc.collect(2 if c2 > t2 else 1 if c1 > t1 else 0)


def _unpause_in_child() -> None:
    global _pause_lock, _pause_depth
    _pause_lock = threading.RLock()
    if _pause_depth and _resume_after:
        gc.enable()
    _pause_depth = 0


os.register_at_fork(after_in_child=_unpause_in_child)


def _clamped(score: Callable[[int, Any], float | None], i: int, completion: Any, minimum: float, lo: float,
             hi: float, name: str) -> float | None:
    try:
        value = score(i, completion)
    except Exception as exc:
        record_error(name, exc)
        value = minimum
    # the usual case, a float strictly inside the range, is its own clamped value (the strict
    # bounds keep -0.0, nan and the bounds themselves on the full path below, bit for bit)
    if type(value) is float and lo < value < hi:
        return value
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError) as exc:
        record_error(name, exc)
        value = minimum
    if not math.isfinite(value):
        record_error(name, ValueError(f"non-finite score {value!r}"))
        value = minimum
    return min(hi, max(lo, value))


on_parser_error(record_error)
