"""Performance metrics of daily return series, with quantstats-compatible conventions.

Every figure the report shows comes from here, so the conventions are written down once and
tested against quantstats 0.0.86 to 1e-6 (tests/test_metrics.py):

- Daily returns, `periods=252` trading days per year.
- Risk-free rate: an ANNUAL rate (default 4 %, Trading-R1) converted to a daily rate geometrically,
  rf_d = (1 + rf) ** (1 / 252) - 1 — exactly what quantstats' `to_excess_returns(..., nperiods)` does.
- Sharpe = mean(r - rf_d) / std(r - rf_d, ddof=1) * sqrt(252).
- Sortino = mean(r - rf_d) / DD * sqrt(252), DD = sqrt(sum(min(r - rf_d, 0) ** 2) / n): the downside
  deviation against the risk-free target, averaged over ALL n days (Red Rock Capital / quantstats),
  not only over the losing days. Undefined (nan, shown "-") when no day lost money: a flat policy
  would otherwise score -sqrt(252), a figure made of the risk-free rate alone.
- Annualised return = geometric (CAGR on trading days): (prod(1 + r)) ** (252 / n) - 1, rf not
  subtracted (quantstats' `cagr` ignores rf too).
- Volatility = std(r, ddof=1) * sqrt(252) of raw (not excess) returns.
- Max drawdown: NAV starts at 1.0 before the first day (a loss on day one is a drawdown), returned
  as a negative fraction. Calmar = annualised return / |max drawdown|.
- Hit rate (docs/spec.md, section 8): share of days with sign(position) == sign(return) among the days a
  decision covers, flat (HOLD) days included: a flat day hits only when the price did not move.
  `hit_rate_traded`: the same among the days with a non-zero position only. Pooled over
  ticker-days for a panel.
- Turnover: mean over days of the one-way position change (fraction of capital traded per day).

Returns with NaN or inf are rejected (ValueError) instead of being skipped: a backtest never
produces them, so their presence means a caller bug that silently skipping would hide.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

TRADING_DAYS = 252
DEFAULT_RF = 0.04


def _clean(returns: pd.Series | np.ndarray, *, name: str = "returns") -> np.ndarray:
    arr = np.asarray(returns, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D series of daily returns, got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name}: {int(bad.sum())} NaN/inf value(s), first at position {int(np.argmax(bad))}"
        )
    return arr


def daily_rf(rf: float = DEFAULT_RF, *, periods: int = TRADING_DAYS) -> float:
    """Annual risk-free rate -> per-period rate, geometric (quantstats' de-annualisation)."""
    return (1.0 + rf) ** (1.0 / periods) - 1.0


def cumulative_return(returns: pd.Series | np.ndarray) -> float:
    r = _clean(returns)
    return float(np.prod(1.0 + r) - 1.0)


def annualized_return(returns: pd.Series | np.ndarray, *, periods: int = TRADING_DAYS) -> float:
    r = _clean(returns)
    if len(r) == 0:
        return float("nan")
    wealth = float(np.prod(1.0 + r))
    if wealth < 0:
        return float("nan")
    return wealth ** (periods / len(r)) - 1.0


def annualized_volatility(returns: pd.Series | np.ndarray, *, periods: int = TRADING_DAYS) -> float:
    r = _clean(returns)
    if len(r) < 2:
        return float("nan")
    return float(np.std(r, ddof=1) * math.sqrt(periods))


def sharpe(returns: pd.Series | np.ndarray, *, rf: float = DEFAULT_RF, periods: int = TRADING_DAYS) -> float:
    r = _clean(returns)
    if len(r) < 2:
        return float("nan")
    ex = r - daily_rf(rf, periods=periods)
    sd = np.std(ex, ddof=1)
    # a constant series has no risk to divide by; nan says "undefined" rather than +/-inf
    if sd == 0:
        return float("nan")
    return float(ex.mean() / sd * math.sqrt(periods))


def sortino(returns: pd.Series | np.ndarray, *, rf: float = DEFAULT_RF, periods: int = TRADING_DAYS) -> float:
    r = _clean(returns)
    if len(r) == 0:
        return float("nan")
    ex = r - daily_rf(rf, periods=periods)
    downside = math.sqrt(float(np.sum(np.minimum(ex, 0.0) ** 2)) / len(ex))
    if downside == 0 or not (r < 0).any():
        return float("nan")
    return float(ex.mean() / downside * math.sqrt(periods))


def drawdown_series(returns: pd.Series | np.ndarray) -> np.ndarray:
    """Drawdown of the NAV after each day, against a running peak that starts at NAV 1.0."""
    r = _clean(returns)
    nav = np.cumprod(1.0 + r)
    peak = np.maximum.accumulate(np.maximum(nav, 1.0)) if len(nav) else nav
    return nav / peak - 1.0


def max_drawdown(returns: pd.Series | np.ndarray) -> float:
    dd = drawdown_series(returns)
    return float(min(dd.min(), 0.0)) if len(dd) else 0.0


def calmar(returns: pd.Series | np.ndarray, *, periods: int = TRADING_DAYS) -> float:
    mdd = max_drawdown(returns)
    if mdd == 0:
        return float("nan")
    return annualized_return(returns, periods=periods) / abs(mdd)


def hit_cells(
    positions: pd.DataFrame | np.ndarray,
    asset_returns: pd.DataFrame | np.ndarray,
    covered: pd.DataFrame | np.ndarray | None = None,
    *,
    traded: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(hits, cells) per day: the counts behind `hit_rate`, for resampling by date."""
    p = np.asarray(positions, dtype=float)
    r = np.asarray(asset_returns, dtype=float)
    if p.shape != r.shape:
        raise ValueError(f"hit_rate: positions shape {p.shape} != returns shape {r.shape}")
    mask = np.ones_like(p, dtype=bool) if covered is None else np.asarray(covered, dtype=bool)
    if traded:
        mask = mask & (p != 0)
    hits = (np.sign(p) == np.sign(r)) & mask
    if p.ndim == 1:
        return hits.astype(float), mask.astype(float)
    return hits.sum(axis=1).astype(float), mask.sum(axis=1).astype(float)


def hit_rate(
    positions: pd.DataFrame | np.ndarray,
    asset_returns: pd.DataFrame | np.ndarray,
    covered: pd.DataFrame | np.ndarray | None = None,
    *,
    traded: bool = False,
) -> float:
    """Share of (day, ticker) cells whose position sign matches the return's sign.

    `positions` must already be aligned with the returns they earn (position held INTO the day);
    `covered` marks the cells a decision covers (default: all); `traded=True` keeps only the cells
    with a non-zero position.
    """
    hits, cells = hit_cells(positions, asset_returns, covered, traded=traded)
    n = float(cells.sum())
    return float(hits.sum() / n) if n else float("nan")


def summary(
    returns: pd.Series | np.ndarray,
    *,
    rf: float = DEFAULT_RF,
    periods: int = TRADING_DAYS,
    positions: pd.DataFrame | np.ndarray | None = None,
    asset_returns: pd.DataFrame | np.ndarray | None = None,
    turnover: pd.Series | np.ndarray | None = None,
    covered: pd.DataFrame | np.ndarray | None = None,
) -> dict[str, float]:
    """All headline metrics of one daily return series (plus hit rate / turnover when given)."""
    r = _clean(returns)
    out = {
        "cumulative_return": cumulative_return(r),
        "annualized_return": annualized_return(r, periods=periods),
        "annualized_volatility": annualized_volatility(r, periods=periods),
        "sharpe": sharpe(r, rf=rf, periods=periods),
        "sortino": sortino(r, rf=rf, periods=periods),
        "max_drawdown": max_drawdown(r),
        "calmar": calmar(r, periods=periods),
        "days": float(len(r)),
    }
    have = positions is not None and asset_returns is not None
    out["hit_rate"] = hit_rate(positions, asset_returns, covered) if have else float("nan")
    out["hit_rate_traded"] = hit_rate(positions, asset_returns, covered, traded=True) if have else float("nan")
    out["turnover"] = (
        float(np.mean(_clean(turnover, name="turnover")))
        if turnover is not None and len(turnover)
        else float("nan")
    )
    return out


METRIC_LABELS: dict[str, str] = {
    "cumulative_return": "Cumulative return",
    "annualized_return": "Annualised return",
    "annualized_volatility": "Annualised volatility",
    "sharpe": "Sharpe",
    "sortino": "Sortino",
    "max_drawdown": "Max drawdown",
    "calmar": "Calmar",
    "hit_rate": "Hit rate",
    "hit_rate_traded": "Hit rate (traded days)",
    "turnover": "Turnover / day",
    "days": "Days",
    "decisions": "Decisions",
    "dates": "Decision dates",
}
