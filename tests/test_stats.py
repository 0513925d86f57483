"""Date-block bootstrap intervals: coverage on a series whose Sharpe ratio is known, and the rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thesisgym.evaluate.metrics import sharpe
from thesisgym.evaluate.stats import block_bootstrap, bootstrap_indices, fmt_interval, rate_interval


def test_sharpe_interval_covers_the_true_value_about_95_percent_of_the_time():
    mu, sigma, n = 0.0008, 0.01, 500
    true = mu / sigma * math.sqrt(252)  # rf = 0: the population Sharpe ratio of the generator
    rng = np.random.default_rng(42)
    reps, hits = 150, 0
    for i in range(reps):
        r = rng.normal(mu, sigma, n)
        lo, hi = block_bootstrap(lambda x: sharpe(x, rf=0.0), r, block=5, reps=400, seed=i)
        hits += lo <= true <= hi
    coverage = hits / reps
    # binomial sd at 150 repetitions is ~1.8 points; the percentile bootstrap runs slightly narrow
    assert 0.88 <= coverage <= 0.99, coverage


def test_block_indices_keep_runs_of_consecutive_days():
    idx = bootstrap_indices(100, block=7, reps=20, seed=0)
    assert idx.shape == (20, 100)
    steps = np.diff(idx, axis=1)
    # inside a block the next day follows (circularly); a new block starts anywhere
    assert ((steps == 1) | (steps == -99)).mean() > 0.8


def test_too_short_or_constant_series_give_no_interval():
    assert all(math.isnan(x) for x in block_bootstrap(np.mean, np.ones(3), block=1))
    # 3 dates in blocks of 3: every resample is the sample itself; no interval, not a zero-width one
    assert all(math.isnan(x) for x in rate_interval(["a", "b", "c"], [1.0, 0.0, 1.0], block=3)[1:3])
    assert all(math.isnan(x) for x in block_bootstrap(lambda x: sharpe(x), np.zeros(50), block=5, reps=100))


def test_rate_interval_counts_rows_and_dates():
    dates = [f"2024-01-{d:02d}" for d in range(1, 31) for _ in range(4)]
    hits = [float(i % 2 == 0) for i in range(len(dates))]
    rate, lo, hi, rows, n_dates = rate_interval(dates, hits, reps=300)
    assert (rate, rows, n_dates) == (0.5, 120, 30)
    assert lo <= 0.5 <= hi  # every date is exactly 2 of 4: the interval is degenerate at 0.5
    rate, lo, hi, *_ = rate_interval(dates, [float(d < "2024-01-16") for d in dates], reps=300)
    assert rate == 0.5 and lo < 0.4 and hi > 0.6  # half the dates all right, half all wrong: wide


def test_fmt_interval():
    assert fmt_interval(1.234, -0.5, 2.0) == "1.23 [-0.50, 2.00]"
    assert fmt_interval(0.52, 0.471, 0.569, pct=True) == "52.0% [47.1%, 56.9%]"
    assert fmt_interval(float("nan"), 0, 1) == "n/a" and fmt_interval(None, 0, 1) == "n/a"
    assert fmt_interval(0.3, float("nan"), float("nan")) == "0.30"
    with pytest.raises(ValueError, match="confidence"):
        block_bootstrap(np.mean, np.ones(10), block=1, confidence=95)
