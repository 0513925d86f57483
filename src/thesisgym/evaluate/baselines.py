"""Baseline and oracle decision makers, on the same (ticker, date) grid as the policy.

A trained analyst is only interesting relative to what doing nothing clever earns. Each function
returns a decisions frame (ticker, date, decision) for the given `keys` (ticker, date) so that it
runs through exactly the same Backtest as the policy:

- buy_and_hold + bought_once: the true buy-and-hold ("buy_and_hold" in the report). Each ticker is
  bought (STRONG_BUY) at its first date and held to the end (run the Backtest with hold_days=None);
  `bought_once` turns that backtest into a portfolio that puts equal capital into each ticker at
  the start and never rebalances (weights drift with prices).
- equal_weight_long: STRONG_BUY on every decision date (full long; position 1.0 with the default
  map). Through the equal-weight Backtest this is an equal-weight long portfolio REBALANCED DAILY
  ("equal_weight_long" in the report).
- momentum: sign of the trailing `lookback`-day return close(d) / close(d - lookback) - 1, using
  only closes dated <= d (point-in-time). Positive -> STRONG_BUY, negative -> STRONG_SELL, zero or
  not enough history -> HOLD.
- random_decisions: uniform over LABELS with a seed (a noise floor for Sharpe and hit rate).
- label_oracle: the dataset's own labels (built from FUTURE prices: an upper bound, not a strategy).
  Rows without a label (incomplete forward window) become HOLD.
- truth_oracle: the synthetic market's true expected return at d (store.truth): by sign, or by
  four cut points into the five classes; the ceiling any policy is measured against.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from thesisgym.dataset.labels import class_names
from thesisgym.schema import LABELS

if TYPE_CHECKING:
    from thesisgym.evaluate.backtest import BacktestResult


def _keys_frame(keys: pd.DataFrame) -> pd.DataFrame:
    missing = {"ticker", "date"} - set(keys.columns)
    if missing:
        raise ValueError(f"keys: missing column(s) {sorted(missing)}")
    out = keys[["ticker", "date"]].copy()
    out["date"] = pd.to_datetime(out["date"])
    return out.reset_index(drop=True)


def equal_weight_long(keys: pd.DataFrame, *, decision: str = "STRONG_BUY") -> pd.DataFrame:
    """`decision` on every (ticker, date): long everything, rebalanced at each decision date."""
    if decision not in LABELS:
        raise ValueError(f"decision: {decision!r} is not one of {LABELS}")
    return _keys_frame(keys).assign(decision=decision)


def buy_and_hold(keys: pd.DataFrame) -> pd.DataFrame:
    """STRONG_BUY at each ticker's first date only (run it with hold_days=None: held to the end)."""
    k = _keys_frame(keys).sort_values(["date", "ticker"], kind="stable")
    return k.drop_duplicates("ticker").reset_index(drop=True).assign(decision="STRONG_BUY")


def bought_once(bt: BacktestResult) -> BacktestResult:
    """The portfolio of `bt` as equal capital per ticker at the start, never rebalanced.

    Each ticker's sleeve grows with its own net returns (cash until it is bought); the NAV is the
    mean of the sleeves, so weights drift with prices as in a real buy-and-hold.
    """
    n = max(bt.net.shape[1], 1)

    def port(per_ticker: pd.DataFrame, name: str) -> pd.Series:
        nav = (1.0 + per_ticker).cumprod().mean(axis=1)
        return (nav / nav.shift(1, fill_value=1.0) - 1.0).rename(name)

    return dataclasses.replace(
        bt,
        returns=port(bt.net, "net"),
        gross_returns=port(bt.gross, "gross"),
        portfolio_turnover=(bt.turnover.sum(axis=1) / n).rename("turnover"),
        meta={**bt.meta, "weighting": "bought once, never rebalanced"},
    )


def momentum(keys: pd.DataFrame, prices: pd.DataFrame, *, lookback: int = 20) -> pd.DataFrame:
    if lookback < 1:
        raise ValueError(f"lookback: expected >= 1, got {lookback}")
    k = _keys_frame(keys)
    p = prices[["ticker", "date", "close"]].copy()
    p["date"] = pd.to_datetime(p["date"])
    p = p.sort_values(["ticker", "date"], kind="stable")
    # per ticker, on its own bars: the shift only looks backwards, so nothing after d is used
    p["trail"] = p["close"] / p.groupby("ticker")["close"].shift(lookback) - 1.0
    merged = k.merge(
        p[["ticker", "date", "trail"]], on=["ticker", "date"], how="left", validate="many_to_one"
    )
    sig = np.sign(merged["trail"].to_numpy())
    dec = np.where(sig > 0, "STRONG_BUY", np.where(sig < 0, "STRONG_SELL", "HOLD"))
    return k.assign(decision=dec)


def random_decisions(keys: pd.DataFrame, *, seed: int = 0, labels: Sequence[str] = LABELS) -> pd.DataFrame:
    k = _keys_frame(keys)
    rng = np.random.default_rng(seed)
    return k.assign(decision=np.asarray(labels)[rng.integers(0, len(labels), size=len(k))])


def label_oracle(keys: pd.DataFrame, labels: Sequence[str | None]) -> pd.DataFrame:
    k = _keys_frame(keys)
    if len(labels) != len(k):
        raise ValueError(f"labels: {len(labels)} labels for {len(k)} keys")
    dec = []
    for i, lab in enumerate(labels):
        if lab is None or (isinstance(lab, float) and np.isnan(lab)):
            dec.append("HOLD")
        elif lab in LABELS:
            dec.append(lab)
        else:
            raise ValueError(f"labels: row {i}: {lab!r} is not one of {LABELS}")
    return k.assign(decision=dec)


def truth_oracle(
    keys: pd.DataFrame, truth: pd.DataFrame, *, thresholds: Sequence[float] | None = None
) -> pd.DataFrame:
    """Decisions from the true expected return at d (synthetic markets only).

    thresholds: None -> sign (STRONG_BUY / STRONG_SELL, HOLD at exactly 0); or four increasing cut
    points c1<c2<c3<c4 of expected_return: < c1 STRONG_SELL, < c2 SELL, < c3 HOLD, < c4 BUY, else
    STRONG_BUY.
    """
    if truth is None or "expected_return" not in truth.columns:
        raise ValueError("truth: the store has no truth frame with expected_return (synthetic markets only)")
    k = _keys_frame(keys)
    t = truth[["ticker", "date", "expected_return"]].copy()
    t["date"] = pd.to_datetime(t["date"])
    merged = k.merge(t, on=["ticker", "date"], how="left", validate="many_to_one")
    er = merged["expected_return"].to_numpy(dtype=float)
    if np.isnan(er).any():
        i = int(np.argmax(np.isnan(er)))
        raise ValueError(f"truth: no expected_return for ({k['ticker'].iloc[i]}, {k['date'].iloc[i].date()})")
    if thresholds is None:
        dec = np.where(er > 0, "STRONG_BUY", np.where(er < 0, "STRONG_SELL", "HOLD"))
    else:
        cuts = np.asarray(thresholds, dtype=float)
        if cuts.shape != (4,) or np.any(np.diff(cuts) <= 0):
            raise ValueError(f"thresholds: expected 4 increasing cut points, got {list(thresholds)}")
        dec = class_names(er, cuts)
    return k.assign(decision=dec)
