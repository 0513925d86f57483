"""Backtest: hand-computed NAVs, costs, flips, long-only, missing bars, holding limits, leakage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from thesisgym.evaluate.backtest import Backtest
from thesisgym.schema import DEFAULT_POSITIONS

DATES = pd.bdate_range("2024-01-01", periods=6)


def _prices(closes: dict[str, list[float | None]], dates=DATES) -> pd.DataFrame:
    rows = [
        {"ticker": t, "date": d, "close": c}
        for t, cs in closes.items()
        for d, c in zip(dates, cs, strict=True)
        if c is not None
    ]
    return pd.DataFrame(rows)


def _dec(items: list[tuple[str, int, str]], dates=DATES) -> pd.DataFrame:
    return pd.DataFrame([{"ticker": t, "date": dates[i], "decision": d} for t, i, d in items])


def test_hand_computed_nav_with_flip_and_costs():
    prices = _prices({"A": [100, 101, 99, 102, 102, 105]})
    res = Backtest(_dec([("A", 1, "STRONG_BUY"), ("A", 3, "SELL")]), prices, cost_bps=10).run()
    c = 10 / 1e4
    expected = [
        -1.0 * c,  # day 1: enter +1 at the close, pay costs, earn nothing yet
        99 / 101 - 1,  # day 2: +1 earns close(1)->close(2)
        (102 / 99 - 1) - 1.5 * c,  # day 3: +1 earns the move into day 3, then flips to -0.5
        0.0,  # day 4: flat price
        -0.5 * (105 / 102 - 1),  # day 5: short half
    ]
    np.testing.assert_allclose(res.returns.to_numpy(), expected, atol=1e-15)
    np.testing.assert_allclose(res.nav.iloc[-1], np.prod(1 + np.array(expected)), rtol=1e-12)
    assert res.positions["A"].tolist() == [1.0, 1.0, -0.5, -0.5, -0.5]
    np.testing.assert_allclose(res.portfolio_turnover.to_numpy(), [1.0, 0, 1.5, 0, 0])
    assert res.returns.index[0] == DATES[1]  # the window starts at the first decision


def test_long_only_turns_shorts_flat():
    prices = _prices({"A": [100, 101, 99, 102, 102, 105]})
    res = Backtest(_dec([("A", 1, "STRONG_BUY"), ("A", 3, "SELL")]), prices, cost_bps=0, long_only=True).run()
    assert res.positions["A"].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(res.nav.iloc[-1], 102 / 101)


def test_custom_positions_map():
    prices = _prices({"A": [100, 110, 121, 121, 121, 121]})
    pos = {**DEFAULT_POSITIONS, "BUY": 2.0}
    res = Backtest(_dec([("A", 0, "BUY")]), prices, cost_bps=0, positions=pos).run()
    np.testing.assert_allclose(res.returns.iloc[1:3].to_numpy(), [0.2, 0.2])


def test_missing_bar_earns_zero_and_the_gap_move_later():
    # B has no bar on day 2: it earns 0 that day and the whole 100 -> 90 move on day 3
    prices = _prices({"A": [50, 50, 50, 50, 50, 50], "B": [100, 100, None, 90, 90, 90]})
    res = Backtest(_dec([("B", 0, "STRONG_BUY")]), prices, cost_bps=0).run()
    assert res.asset_returns.loc[DATES[2], "B"] == 0.0
    np.testing.assert_allclose(res.asset_returns.loc[DATES[3], "B"], -0.1)
    np.testing.assert_allclose(res.nav.iloc[-1], 0.9)


def test_decision_without_a_bar_is_rejected():
    prices = _prices({"B": [100, 100, None, 90, 90, 90]})
    with pytest.raises(ValueError, match="no bar on 2024-01-03"):
        Backtest(_dec([("B", 2, "BUY")]), prices)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (_dec([("A", 0, "MOON")]), "not one of"),
        (_dec([("A", 0, "BUY"), ("A", 0, "SELL")]), "more than one decision"),
        (_dec([("Z", 0, "BUY")]), "has no prices"),
        (pd.DataFrame({"ticker": ["A"], "date": [DATES[0]]}), "missing column"),
    ],
)
def test_bad_decisions_raise(bad, msg):
    prices = _prices({"A": [100, 101, 99, 102, 102, 105]})
    with pytest.raises(ValueError, match=msg):
        Backtest(bad, prices)


def test_bad_prices_raise():
    with pytest.raises(ValueError, match="close must be a positive"):
        Backtest(_dec([("A", 0, "BUY")]), _prices({"A": [100, -1, 99, 102, 102, 105]}))


def test_hold_days_closes_the_position():
    prices = _prices({"A": [100, 110, 121, 133.1, 146.41, 161.051]})
    res = Backtest(_dec([("A", 0, "STRONG_BUY")]), prices, cost_bps=10, hold_days=2).run()
    assert res.positions["A"].tolist() == [1, 1, 0, 0, 0, 0]
    c = 10 / 1e4
    np.testing.assert_allclose(res.returns.to_numpy()[:3], [-c, 0.1, 0.1 - c])
    # after the close the ticker leaves the portfolio: the portfolio earns nothing
    assert res.returns.iloc[3:].eq(0).all() and not res.active["A"].iloc[3:].any()


def test_equal_weight_averages_active_tickers_only():
    prices = _prices({"A": [100, 110, 121, 121, 121, 121], "B": [100, 100, 50, 50, 50, 50]})
    res = Backtest(_dec([("A", 0, "STRONG_BUY"), ("B", 1, "STRONG_BUY")]), prices, cost_bps=0).run()
    # day 1: only A is live (B enters at its close, costless here) -> mean(0.1, 0) over 2 active
    np.testing.assert_allclose(res.returns.loc[DATES[1]], 0.05)
    np.testing.assert_allclose(res.returns.loc[DATES[2]], (0.1 - 0.5) / 2)
    uni = Backtest(_dec([("A", 0, "STRONG_BUY")]), prices, cost_bps=0, weighting="universe").run()
    np.testing.assert_allclose(uni.returns.loc[DATES[1]], 0.1)  # universe = the decided tickers


def _naive(decisions: pd.DataFrame, prices: pd.DataFrame, cost: float) -> pd.Series:
    """An event-driven per-bar reference (the obvious loop) for the vectorised version."""
    close = prices.pivot(index="date", columns="ticker", values="close").ffill()
    dec = {(r.ticker, r.date): DEFAULT_POSITIONS[r.decision] for r in decisions.itertuples()}
    dates = [d for d in close.index if d >= decisions["date"].min()]
    pos = dict.fromkeys(close.columns, 0.0)
    live = dict.fromkeys(close.columns, False)
    out = []
    for i, d in enumerate(dates):
        total, n = 0.0, 0
        for t in close.columns:
            r = 0.0 if i == 0 else close.loc[d, t] / close.loc[dates[i - 1], t] - 1
            r = 0.0 if np.isnan(r) else r
            pnl = pos[t] * r
            was_live = live[t]
            new = dec.get((t, d), pos[t])
            live[t] = live[t] or (t, d) in dec
            pnl -= cost * abs(new - pos[t])
            if was_live or live[t]:
                total, n = total + pnl, n + 1
            pos[t] = new
        out.append(total / n if n else 0.0)
    return pd.Series(out, index=dates)


def test_vectorised_equals_event_driven_loop():
    rng = np.random.default_rng(1)
    dates = pd.bdate_range("2023-01-02", periods=60)
    closes = {f"T{i}": list(100 * np.exp(np.cumsum(rng.normal(0, 0.02, len(dates))))) for i in range(4)}
    prices = _prices(closes, dates)
    items = [
        (t, i, str(rng.choice(list(DEFAULT_POSITIONS)))) for t in closes for i in range(5 + int(t[1]), 60, 3)
    ]
    decisions = _dec(items, dates)
    res = Backtest(decisions, prices, cost_bps=7).run()
    ref = _naive(decisions, prices, 7 / 1e4)
    np.testing.assert_allclose(res.returns.to_numpy(), ref.to_numpy(), atol=1e-14)


def _random_walk(n=400, seed=0):
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2020-01-01", periods=n)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    return dates, close


def test_leakage_decision_at_d_earns_d_to_d_plus_1_only():
    dates, close = _random_walk()
    prices = pd.DataFrame({"ticker": "A", "date": dates, "close": close})
    r = close[1:] / close[:-1] - 1  # r[i] = close(i) -> close(i+1)
    # clairvoyant about the NEXT return: decided at d with sign(close(d+1)/close(d) - 1)
    nxt = ["STRONG_BUY" if x > 0 else "STRONG_SELL" for x in r]
    fut = Backtest(_dec([("A", i, nxt[i]) for i in range(len(r))], dates), prices, cost_bps=0).run()
    np.testing.assert_allclose(fut.returns.iloc[1:].to_numpy(), np.abs(r))  # earns |return| every day
    assert fut.stats()["hit_rate"] == 1.0
    # knowing day d's OWN return (already public at its close) must not earn it
    same = ["STRONG_BUY" if x > 0 else "STRONG_SELL" for x in r]
    past = Backtest(_dec([("A", i + 1, same[i]) for i in range(len(r))], dates), prices, cost_bps=0).run()
    assert 0.4 < past.stats()["hit_rate"] < 0.6
    assert abs(past.returns.mean()) < np.abs(r).mean() / 5


def test_leakage_prices_up_to_first_decision_close_do_not_matter():
    dates, close = _random_walk(seed=3)
    d0 = 200
    changed = close.copy()
    changed[: d0 + 1] *= np.linspace(0.5, 2.0, d0 + 1)  # rewrite history up to and including close(d0)
    changed[d0 + 1 :] *= changed[d0] / close[d0]  # same returns afterwards
    dec = _dec([("A", i, "STRONG_BUY" if i % 7 else "SELL") for i in range(d0, 380)], dates)
    a = Backtest(dec, pd.DataFrame({"ticker": "A", "date": dates, "close": close})).run()
    b = Backtest(dec, pd.DataFrame({"ticker": "A", "date": dates, "close": changed})).run()
    np.testing.assert_allclose(a.returns.to_numpy(), b.returns.to_numpy(), atol=1e-12)


def test_leakage_prices_after_the_window_do_not_matter():
    dates, close = _random_walk(seed=4)
    dec = _dec([("A", i, "BUY") for i in range(10, 100)], dates)
    changed = close.copy()
    changed[150:] *= 3.0
    kw = dict(hold_days=7)
    a = Backtest(
        dec, pd.DataFrame({"ticker": "A", "date": dates, "close": close}), end=dates[149], **kw
    ).run()
    b = Backtest(dec, pd.DataFrame({"ticker": "A", "date": dates, "close": changed}), **kw).run()
    np.testing.assert_allclose(a.returns.to_numpy(), b.returns.loc[: dates[149]].to_numpy(), atol=1e-14)
    assert b.returns.loc[dates[107] :].eq(0).all()  # the last decision (day 99) is closed after 7 days


def test_ticker_stats_and_stats_keys():
    dates, close = _random_walk(seed=5)
    prices = pd.concat(
        [pd.DataFrame({"ticker": t, "date": dates, "close": close * k}) for t, k in (("A", 1), ("B", 2))]
    )
    dec = _dec([(t, i, "BUY") for t in "AB" for i in range(0, 300, 5)], dates)
    res = Backtest(dec, prices).run()
    ts = res.ticker_stats()
    assert list(ts.index) == ["A", "B"]
    assert {"sharpe", "sortino", "max_drawdown", "hit_rate", "turnover", "calmar"} <= set(ts.columns)
    # identical returns on both tickers -> identical per-ticker and portfolio Sharpe
    np.testing.assert_allclose(ts.loc["A", "sharpe"], ts.loc["B", "sharpe"])
    np.testing.assert_allclose(ts.loc["A", "sharpe"], res.stats()["sharpe"], rtol=1e-9)


# --- baselines --------------------------------------------------------------------------------------
def test_momentum_baseline_uses_only_past_closes():
    from thesisgym.evaluate.baselines import momentum

    dates, close = _random_walk(n=120, seed=8)
    prices = pd.DataFrame({"ticker": "A", "date": dates, "close": close})
    keys = pd.DataFrame({"ticker": "A", "date": dates[30:100]})
    base = momentum(keys, prices, lookback=20)
    expected = np.where(close[30:100] > close[10:80], "STRONG_BUY", "STRONG_SELL")
    assert base["decision"].tolist() == expected.tolist()
    # rewriting every close after day 60 cannot change a decision dated on or before day 60
    changed = prices.assign(close=np.where(np.arange(120) > 60, close[::-1], close))
    again = momentum(keys, changed, lookback=20)
    assert again["decision"].iloc[: 60 - 30 + 1].tolist() == base["decision"].iloc[: 60 - 30 + 1].tolist()
    assert momentum(pd.DataFrame({"ticker": ["A"], "date": [dates[5]]}), prices)["decision"].item() == "HOLD"


def test_other_baselines():
    from thesisgym.evaluate.baselines import (
        buy_and_hold,
        equal_weight_long,
        label_oracle,
        random_decisions,
        truth_oracle,
    )

    keys = pd.DataFrame({"ticker": ["A", "A", "B"], "date": DATES[:3].tolist()[:2] + [DATES[0]]})
    assert equal_weight_long(keys)["decision"].eq("STRONG_BUY").all() and len(equal_weight_long(keys)) == 3
    # the true buy-and-hold buys each ticker once, at its first date
    once = buy_and_hold(keys)
    assert once["decision"].eq("STRONG_BUY").all() and once["ticker"].tolist() == ["A", "B"]
    assert once["date"].tolist() == [DATES[0], DATES[0]]
    r1, r2 = random_decisions(keys, seed=3), random_decisions(keys, seed=3)
    assert r1.equals(r2) and set(r1["decision"]) <= set(DEFAULT_POSITIONS)
    assert label_oracle(keys, ["BUY", None, "SELL"])["decision"].tolist() == ["BUY", "HOLD", "SELL"]
    with pytest.raises(ValueError, match="row 1"):
        label_oracle(keys, ["BUY", "MOON", "SELL"])
    truth = pd.DataFrame(
        {"ticker": ["A", "A", "B"], "date": keys["date"], "expected_return": [0.02, -0.001, 0.0]}
    )
    assert truth_oracle(keys, truth)["decision"].tolist() == ["STRONG_BUY", "STRONG_SELL", "HOLD"]
    cuts = [-0.01, -0.002, 0.002, 0.01]
    assert truth_oracle(keys, truth, thresholds=cuts)["decision"].tolist() == ["STRONG_BUY", "HOLD", "HOLD"]
    with pytest.raises(ValueError, match="no expected_return"):
        truth_oracle(pd.DataFrame({"ticker": ["C"], "date": [DATES[0]]}), truth)
