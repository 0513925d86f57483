"""Benchmark: vectorised Backtest vs an event-driven per-bar Python loop on the same signals.

500 tickers x 2,520 trading days (10 years) of daily decisions (1.26 M decisions, 1.26 M bars)
-> Backtest(...).run().stats(). TARGET: under 1 s for the vectorised backtest (input checks,
pivot, positions, costs, portfolio and metrics included).

The naive loop is the obvious event-driven backtester (for each day, for each ticker: mark to
market, apply the decision, charge costs, equal-weight the active tickers). At full size it would
take minutes, so it runs on a subsample of SUB_TICKERS x SUB_DAYS and its time is extrapolated
linearly in tickers x days (its cost is one constant-time step per ticker-bar); the subsample is
also used to check that both give the same portfolio returns.

Run: python bench/bench_backtest.py [--tickers 500] [--days 2520]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from thesisgym.evaluate.backtest import Backtest
from thesisgym.schema import DEFAULT_POSITIONS, LABELS

SUB_TICKERS, SUB_DAYS = 40, 252


def make_market(n_tickers: int, n_days: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2014-01-02", periods=n_days)
    tickers = np.array([f"SYN{i:03d}" for i in range(n_tickers)])
    close = 100 * np.exp(np.cumsum(rng.normal(0.0002, 0.015, (n_days, n_tickers)), axis=0))
    prices = pd.DataFrame(
        {"ticker": np.tile(tickers, n_days), "date": np.repeat(dates, n_tickers), "close": close.ravel()}
    )
    # sticky decisions: change with probability 0.2 per day, so turnover is realistic
    codes = np.empty((n_days, n_tickers), dtype=np.int64)
    codes[0] = rng.integers(0, 5, n_tickers)
    change = rng.random((n_days, n_tickers)) < 0.2
    new = rng.integers(0, 5, (n_days, n_tickers))
    for i in range(1, n_days):  # data generation only, not part of any timing
        codes[i] = np.where(change[i], new[i], codes[i - 1])
    decisions = pd.DataFrame(
        {"ticker": prices["ticker"], "date": prices["date"], "decision": np.asarray(LABELS)[codes.ravel()]}
    )
    return prices, decisions


def naive_backtest(decisions: pd.DataFrame, prices: pd.DataFrame, *, cost_bps: float) -> np.ndarray:
    """Event-driven reference: one Python step per (day, ticker)."""
    close = {(t, d): c for t, d, c in zip(prices["ticker"], prices["date"], prices["close"], strict=True)}
    dec = {
        (t, d): DEFAULT_POSITIONS[x]
        for t, d, x in zip(decisions["ticker"], decisions["date"], decisions["decision"], strict=True)
    }
    dates = sorted(set(prices["date"]))
    tickers = sorted(set(decisions["ticker"]))
    pos = dict.fromkeys(tickers, 0.0)
    last = dict.fromkeys(tickers, np.nan)
    live = dict.fromkeys(tickers, False)
    out = np.zeros(len(dates))
    for i, d in enumerate(dates):
        total, n = 0.0, 0
        for t in tickers:
            c = close.get((t, d), last[t])
            r = c / last[t] - 1.0 if i > 0 and np.isfinite(last[t]) else 0.0
            last[t] = c
            pnl = pos[t] * r
            was = live[t]
            new = dec.get((t, d), pos[t])
            live[t] = was or (t, d) in dec
            pnl -= cost_bps / 1e4 * abs(new - pos[t])
            if was or live[t]:
                total += pnl
                n += 1
            pos[t] = new
        out[i] = total / n if n else 0.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tickers", type=int, default=500)
    ap.add_argument("--days", type=int, default=2520)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    prices, decisions = make_market(args.tickers, args.days)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = Backtest(decisions, prices, cost_bps=5).run()
        stats = res.stats()
        times.append(time.perf_counter() - t0)
    vec = min(times)
    print(
        f"vectorised backtest: {args.tickers} tickers x {args.days} days ({len(decisions):,} decisions) "
        f"-> run + stats in {vec:.3f} s (best of {args.repeats}; all: {', '.join(f'{t:.3f}' for t in times)})"
    )
    print(
        f"  portfolio Sharpe {stats['sharpe']:.3f}, max drawdown {stats['max_drawdown']:.3%}, turnover/day {stats['turnover']:.3f}"
    )

    sub_t = sorted(prices["ticker"].unique())[:SUB_TICKERS]
    sub_d = sorted(prices["date"].unique())[:SUB_DAYS]
    sp = prices[prices["ticker"].isin(sub_t) & prices["date"].isin(sub_d)]
    sd = decisions[decisions["ticker"].isin(sub_t) & decisions["date"].isin(sub_d)]
    t0 = time.perf_counter()
    ref = naive_backtest(sd, sp, cost_bps=5)
    loop_sub = time.perf_counter() - t0
    t0 = time.perf_counter()
    vec_sub = Backtest(sd, sp, cost_bps=5).run().returns.to_numpy()
    vec_sub_t = time.perf_counter() - t0
    err = float(np.max(np.abs(ref - vec_sub)))
    scale = (args.tickers * args.days) / (SUB_TICKERS * SUB_DAYS)
    loop_full = loop_sub * scale
    print(
        f"event-driven loop: {SUB_TICKERS} x {SUB_DAYS} subsample in {loop_sub:.3f} s (vectorised on it: {vec_sub_t:.3f} s; "
        f"max |difference| of daily returns {err:.1e})"
    )
    print(f"  extrapolated linearly to {args.tickers} x {args.days}: {loop_full:.1f} s")
    print(
        f"speed-up vectorised vs loop: {loop_full / vec:.0f}x  (target: vectorised < 1 s -> {'MET' if vec < 1 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
