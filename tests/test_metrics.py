"""Metrics agree with quantstats 0.0.86 to 1e-6 on real and synthetic daily returns.

Convention notes (see thesisgym/evaluate/metrics.py): quantstats de-annualises rf geometrically,
(1 + rf) ** (1/252) - 1, with `periods=252` — we do the same, so Sharpe/Sortino match with rf=4 %.
Its Sortino divides the squared negative excess returns by the count of ALL days; so do we. Its
max drawdown starts from an equity of 1.0 before the first return; so does ours. Its `cagr` is
geometric over count/252 years and ignores rf; so is our annualised return.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thesisgym.evaluate import metrics as M
from thesisgym.evaluate.backtest import Backtest

qs = pytest.importorskip("quantstats")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "prices"
TOL = 1e-6


def _check_against_quantstats(r: pd.Series, rf: float) -> None:
    assert M.sharpe(r, rf=rf) == pytest.approx(qs.stats.sharpe(r, rf=rf, periods=252), abs=TOL, rel=TOL)
    assert M.sortino(r, rf=rf) == pytest.approx(qs.stats.sortino(r, rf=rf, periods=252), abs=TOL, rel=TOL)
    assert M.max_drawdown(r) == pytest.approx(qs.stats.max_drawdown(r), abs=TOL)
    assert M.annualized_return(r) == pytest.approx(qs.stats.cagr(r, periods=252), abs=TOL, rel=TOL)
    assert M.annualized_volatility(r) == pytest.approx(qs.stats.volatility(r, periods=252), abs=TOL, rel=TOL)
    assert M.cumulative_return(r) == pytest.approx(qs.stats.comp(r), abs=TOL, rel=TOL)
    assert M.calmar(r) == pytest.approx(qs.stats.calmar(r, periods=252), abs=TOL, rel=TOL)


@pytest.mark.parametrize("rf", [0.0, 0.04])
@pytest.mark.parametrize("seed, mu, sigma", [(0, 0.0004, 0.012), (1, -0.0003, 0.02), (2, 0.001, 0.005)])
def test_synthetic_returns_match_quantstats(seed, mu, sigma, rf):
    rng = np.random.default_rng(seed)
    idx = pd.bdate_range("2015-01-01", periods=1500)
    r = pd.Series(rng.normal(mu, sigma, len(idx)), index=idx)
    _check_against_quantstats(r, rf)


def test_first_day_loss_is_a_drawdown():
    r = pd.Series([-0.1, 0.05, -0.2, 0.3], index=pd.bdate_range("2024-01-01", periods=4))
    nav = np.cumprod(1 + r.to_numpy())
    assert M.max_drawdown(r) == pytest.approx(nav[2] / 1.0 - 1)
    assert M.max_drawdown(r) == pytest.approx(qs.stats.max_drawdown(r), abs=TOL)


def test_hand_values():
    r = np.array([0.01, -0.02, 0.03])
    assert M.cumulative_return(r) == pytest.approx(1.01 * 0.98 * 1.03 - 1)
    rfd = 1.04 ** (1 / 252) - 1
    ex = r - rfd
    assert M.sharpe(r) == pytest.approx(ex.mean() / ex.std(ddof=1) * np.sqrt(252))
    assert M.sortino(r) == pytest.approx(
        ex.mean() / np.sqrt((np.minimum(ex, 0) ** 2).sum() / 3) * np.sqrt(252)
    )
    pos, ret = np.array([[1.0], [0.0], [-1.0], [1.0]]), np.array([[0.1], [0.2], [0.1], [0.0]])
    # docs/spec.md, section 8: every covered day counts, the flat one too (it misses: the price moved)
    assert M.hit_rate(pos, ret) == pytest.approx(1 / 4)
    assert M.hit_rate(pos, ret, traded=True) == pytest.approx(1 / 3)


def test_hit_rate_edge_cases():
    flat = np.zeros((4, 1))
    moves = np.array([[0.01], [0.0], [-0.02], [0.0]])
    # a flat policy hits exactly on the days the price did not move
    assert M.hit_rate(flat, moves) == pytest.approx(0.5)
    assert np.isnan(M.hit_rate(flat, moves, traded=True))  # it never traded
    # cells no decision covers are not days of the policy at all
    covered = np.array([[True], [False], [True], [False]])
    assert M.hit_rate(np.ones((4, 1)), moves, covered) == pytest.approx(0.5)
    assert np.isnan(M.hit_rate(np.ones((4, 1)), moves, np.zeros((4, 1), bool)))


def test_sortino_is_undefined_without_a_losing_day():
    # a flat policy: excess returns are -rf every day, but nothing was ever lost
    assert np.isnan(M.sortino(np.zeros(50)))
    assert np.isnan(M.sortino(np.full(50, 0.001)))
    assert np.isfinite(M.sortino(np.array([0.01, -0.001, 0.02])))


def test_nan_returns_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        M.sharpe(pd.Series([0.01, np.nan, 0.02]))


def _real_returns(name: str) -> pd.Series:
    path = DATA / f"{name}.csv"
    if not path.exists():
        pytest.skip(f"real data not found at {path}")
    df = pd.read_csv(path, parse_dates=["Date"]).set_index("Date")
    return df["Close"].pct_change().dropna()


@pytest.mark.parametrize("name", ["SPY", "AAPL", "NVDA", "TSLA"])
@pytest.mark.parametrize("rf", [0.0, 0.04])
def test_real_returns_match_quantstats(name, rf):
    _check_against_quantstats(_real_returns(name), rf)


def test_real_backtest_portfolio_matches_quantstats():
    frames = []
    for name in ("AAPL", "MSFT", "SPY"):
        path = DATA / f"{name}.csv"
        if not path.exists():
            pytest.skip(f"real data not found at {path}")
        df = pd.read_csv(path, parse_dates=["Date"])
        frames.append(pd.DataFrame({"ticker": name, "date": df["Date"], "close": df["Close"]}))
    prices = pd.concat(frames)
    # a momentum-like signal computed from past closes only, decided weekly
    wide = prices.pivot(index="date", columns="ticker", values="close")
    trail = (wide / wide.shift(20) - 1).iloc[20::5]
    dec = trail.stack().rename("s").reset_index()
    dec["decision"] = np.where(dec["s"] > 0, "STRONG_BUY", "SELL")
    res = Backtest(dec[["ticker", "date", "decision"]], prices, cost_bps=5).run()
    stats = res.stats()
    r = res.returns
    assert stats["sharpe"] == pytest.approx(qs.stats.sharpe(r, rf=0.04, periods=252), abs=TOL)
    assert stats["sortino"] == pytest.approx(qs.stats.sortino(r, rf=0.04, periods=252), abs=TOL)
    assert stats["max_drawdown"] == pytest.approx(qs.stats.max_drawdown(r), abs=TOL)
    assert stats["annualized_return"] == pytest.approx(qs.stats.cagr(r, periods=252), abs=TOL)
    assert stats["annualized_volatility"] == pytest.approx(qs.stats.volatility(r, periods=252), abs=TOL)
    assert 0.3 < stats["hit_rate"] < 0.7 and stats["turnover"] > 0
