"""Uncertainty of evaluation figures: date-block bootstrap intervals and the sample behind them.

A Sharpe ratio from a few weeks of decisions is mostly noise, so every headline figure comes with
a percentile confidence interval from a circular block bootstrap over DATES (arch's
`CircularBlockBootstrap`): daily portfolio returns are resampled in blocks of `block` consecutive
days (default: the holding period, because a position held for h days makes h consecutive daily
returns depend on one decision), and per-date outcomes (hits, correct decisions) likewise. Pairs of
strategies are resampled with the same dates, so a difference has its own interval, and "A beats
B at 95 %" means the interval of the difference excludes 0.

Resamples whose statistic is undefined (nan, e.g. a Sharpe ratio of a constant series) are left out
of the percentiles; with fewer than `min_days` observations, or fewer than two blocks, no interval
is given (nan, shown without brackets) rather than a falsely narrow one.

The sample helpers live here too: `subset_indices` (whole consecutive dates from the start of a split)
and `rate_block` (the block length, in decision dates, that spans one holding period).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

DEFAULT_REPS = 1000
DEFAULT_CONFIDENCE = 0.95
MIN_DATES = 20  # fewer decision dates than this: the figure is flagged as resting on too few dates
NA = "n/a"  # the one symbol for an undefined figure, in the report, the CLI and the tables


def block_bootstrap(
    stat: Callable[..., float],
    *series: Sequence[float] | np.ndarray,
    block: int,
    reps: int = DEFAULT_REPS,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    min_days: int = 5,
) -> tuple[float, float]:
    """Percentile interval of `stat(*series)` under a circular block bootstrap of the rows.

    All series are resampled with the same block indices (paired). Returns (nan, nan) when the
    series are shorter than `min_days` or than two blocks (a resample of one block is the sample
    itself, and its interval a false certainty), or when most resamples are undefined.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence}")
    if block < 1:
        raise ValueError(f"block: expected >= 1, got {block}")
    arrays = [np.asarray(s, dtype=float) for s in series]
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"block_bootstrap: series of different lengths {[len(a) for a in arrays]}")
    if n < max(min_days, 2, 2 * block):
        return float("nan"), float("nan")
    draws = np.array(
        [stat(*(a[ix] for a in arrays)) for ix in bootstrap_indices(n, block=block, reps=reps, seed=seed)],
        dtype=float,
    )
    draws = draws[np.isfinite(draws)]
    if len(draws) < reps // 2:
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_indices(n: int, *, block: int, reps: int = DEFAULT_REPS, seed: int = 0) -> np.ndarray:
    """(reps, n) row indices of circular block-bootstrap resamples, drawn by arch."""
    from arch.bootstrap import CircularBlockBootstrap

    bs = CircularBlockBootstrap(min(block, n), np.arange(n), seed=seed)
    return np.array([bs.update_indices() for _ in range(reps)])


def ratio_of_sums(num: np.ndarray, den: np.ndarray) -> float:
    """sum(num) / sum(den) (a pooled rate from per-date counts); nan when the denominator is 0."""
    d = float(np.sum(den))
    return float(np.sum(num)) / d if d > 0 else float("nan")


def per_date_counts(dates: Sequence[str], hits: Sequence[float]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(hits per date, rows per date, sorted dates): the units a rate is resampled in."""
    order: dict[str, list[float]] = {}
    for d, h in zip(dates, hits, strict=True):
        order.setdefault(str(d)[:10], []).append(float(h))
    keys = sorted(order)
    return (
        np.array([sum(order[k]) for k in keys], dtype=float),
        np.array([len(order[k]) for k in keys], dtype=float),
        keys,
    )


def rate_interval(
    dates: Sequence[str],
    hits: Sequence[float],
    *,
    block: int = 1,
    reps: int = DEFAULT_REPS,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float, float, int, int]:
    """(rate, lo, hi, rows, dates) of a 0/1 outcome per row, resampled by date blocks."""
    num, den, keys = per_date_counts(dates, hits)
    rate = ratio_of_sums(num, den)
    lo, hi = block_bootstrap(
        ratio_of_sums, num, den, block=block, reps=reps, confidence=confidence, seed=seed, min_days=3
    )
    return rate, lo, hi, int(den.sum()), len(keys)


def fmt_interval(value: float, lo: float, hi: float, *, pct: bool = False, digits: int = 2) -> str:
    """'1.23 [-0.40, 2.85]' or '52.0% [47.1%, 56.9%]'; NA ('n/a') for an undefined value."""

    def one(x: float) -> str:
        return f"{100 * x:.1f}%" if pct else f"{x:.{digits}f}"

    if value is None or not np.isfinite(value):
        return NA
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return one(value)
    return f"{one(value)} [{one(lo)}, {one(hi)}]"


# --- the sample: which dates, in which blocks ------------------------------------------------------
def subset_indices(asofs: Sequence[str], max_rows: int) -> list[int]:
    """Row indices of whole, consecutive as-of dates from the start of the split.

    Consecutive, because a backtest of dates spread over months holds each position across a gap
    it was never trained for; whole dates, because every ticker of a day belongs to the same
    cross-section. As many dates as fit in `max_rows` (at least one; a single date with more rows
    than that is cut to its first rows).
    """
    by_date: dict[str, list[int]] = {}
    for i, d in enumerate(asofs):
        by_date.setdefault(str(d)[:10], []).append(i)
    out: list[int] = []
    for d in sorted(by_date):
        if out and len(out) + len(by_date[d]) > max_rows:
            break
        out.extend(by_date[d])
    return sorted(out)[:max_rows]


def rate_block(dates: Sequence[Any], hold: int) -> int:
    """Block length (in decision dates) spanning one holding period."""
    ds = pd.DatetimeIndex(sorted({pd.Timestamp(str(d)[:10]) for d in dates}))
    if len(ds) < 2:
        return 1
    # whole days whatever the index's unit (pandas 3 parses dates to microseconds, not nanoseconds)
    days = ds.values.astype("datetime64[D]").astype(np.int64)
    gap = float(np.median(np.diff(days))) * 5 / 7  # calendar -> trading days
    return max(1, int(math.ceil(hold / max(gap, 1.0))))
