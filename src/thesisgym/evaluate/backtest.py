"""Vectorised, leakage-safe backtest of per-(ticker, day) decisions.

Timing (docs/spec.md, sections 2 and 8): a decision dated d is made with information up to the close of d
and the position is ENTERED AT THE CLOSE OF d. The first return it earns is close(d) -> close(d+1);
day d's own close-to-close return (d-1 -> d) is never earned by it. Internally `positions[t]` is the
position held after the close of t, and the return of day t is `positions[t-1] * r[t]`.

Holding: a position is held until the ticker's next decision, or for at most `hold_days` trading
days (it earns returns d->d+1 ... d+hold_days-1 -> d+hold_days and is closed at the close of
d+hold_days), after which the ticker is flat and out of the portfolio until its next decision.

Costs: `cost_bps * |position change|` is charged on the day of the change (at that day's close).

Missing bars: prices are pivoted to the union calendar of trading days and carried forward, so a
ticker without a bar on a day earns 0 that day and the price move across the gap is earned on the
day its bar reappears (nothing is lost, nothing is invented). A decision dated on a day the ticker
has no bar is rejected (it could not have been traded at that close).

Portfolio (weighting="equal"): each day, capital is split equally across the tickers that are
"active" (hold a live decision, including HOLD = 0, or trade at that close), i.e. the portfolio
return is the average of the active tickers' net position returns, rebalanced daily.
weighting="universe" instead divides by the number of tickers in the backtest (fixed 1/N sleeves).

All of it is numpy/pandas on a date x ticker grid; there is no per-bar Python loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from thesisgym.evaluate import metrics as M
from thesisgym.schema import DEFAULT_POSITIONS, LABELS

WEIGHTINGS = ("equal", "universe")


@dataclass
class BacktestResult:
    """Date x ticker frames of one backtest plus the portfolio series."""

    positions: pd.DataFrame  # position held after the close of each day
    asset_returns: pd.DataFrame  # close-to-close return of each day (0 when no bar)
    gross: pd.DataFrame  # positions.shift(1) * asset_returns
    costs: pd.DataFrame  # cost charged at each day's close
    net: pd.DataFrame  # gross - costs
    turnover: pd.DataFrame  # |position change| at each day's close
    active: pd.DataFrame  # bool: ticker is part of the portfolio that day
    live: pd.DataFrame  # bool: a decision covers the position held after that day's close
    returns: pd.Series  # portfolio net daily returns
    gross_returns: pd.Series
    portfolio_turnover: pd.Series
    rf: float = M.DEFAULT_RF
    meta: dict = field(default_factory=dict)

    @property
    def nav(self) -> pd.Series:
        """Net asset value, 1.0 before the first day."""
        return (1.0 + self.returns).cumprod()

    @property
    def drawdown(self) -> pd.Series:
        return pd.Series(M.drawdown_series(self.returns), index=self.returns.index)

    @property
    def held(self) -> pd.DataFrame:
        """The position held INTO each day (earning that day's return)."""
        return self.positions.shift(1).fillna(0.0)

    @property
    def covered(self) -> pd.DataFrame:
        """Cells whose held-into position comes from a live decision (the hit rate's days)."""
        return self.live.shift(1, fill_value=False)

    def stats(self, *, rf: float | None = None) -> dict[str, float]:
        """Portfolio metrics (see metrics.py for every convention)."""
        return M.summary(
            self.returns,
            rf=self.rf if rf is None else rf,
            positions=self.held.to_numpy(),
            asset_returns=self.asset_returns.to_numpy(),
            turnover=self.portfolio_turnover,
            covered=self.covered.to_numpy(),
        )

    def ticker_stats(self, *, rf: float | None = None) -> pd.DataFrame:
        """Metrics per ticker over the span from its first to its last active day."""
        held, covered = self.held, self.covered
        rows = {}
        for ticker in self.net.columns:
            act = self.active[ticker].to_numpy()
            if not act.any():
                continue
            lo, hi = int(np.argmax(act)), len(act) - int(np.argmax(act[::-1]))
            rows[ticker] = M.summary(
                self.net[ticker].iloc[lo:hi],
                rf=self.rf if rf is None else rf,
                positions=held[ticker].iloc[lo:hi].to_numpy()[:, None],
                asset_returns=self.asset_returns[ticker].iloc[lo:hi].to_numpy()[:, None],
                turnover=self.turnover[ticker].iloc[lo:hi],
                covered=covered[ticker].iloc[lo:hi].to_numpy()[:, None],
            )
        return pd.DataFrame.from_dict(rows, orient="index")


class Backtest:
    """Backtest of decisions (ticker, date, decision) against close prices (ticker, date, close).

    >>> Backtest(decisions, store.bars, cost_bps=5).run().stats()["sharpe"]
    """

    def __init__(
        self,
        decisions: pd.DataFrame,
        prices: pd.DataFrame,
        *,
        positions: Mapping[str, float] = DEFAULT_POSITIONS,
        long_only: bool = False,
        cost_bps: float = 5.0,
        hold_days: int | None = None,
        weighting: str = "equal",
        start: str | pd.Timestamp | None = None,
        end: str | pd.Timestamp | None = None,
        rf: float = M.DEFAULT_RF,
    ) -> None:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting: expected one of {WEIGHTINGS}, got {weighting!r}")
        if hold_days is not None and (not isinstance(hold_days, int) or hold_days < 1):
            raise ValueError(f"hold_days: expected a positive int or None, got {hold_days!r}")
        if not np.isfinite(cost_bps) or cost_bps < 0:
            raise ValueError(f"cost_bps: expected a finite non-negative number, got {cost_bps!r}")
        missing_labels = [lab for lab in LABELS if lab not in positions]
        if missing_labels:
            raise ValueError(f"positions: no position given for {missing_labels}")
        self.positions_map = {k: float(v) for k, v in positions.items()}
        self.long_only = long_only
        self.cost_bps = float(cost_bps)
        self.hold_days = hold_days
        self.weighting = weighting
        self.rf = rf
        self.close = self._pivot_prices(prices)
        self._check_decisions(decisions)
        self.start = pd.Timestamp(start) if start is not None else self.close.index[self._d_row.min()]
        self.end = pd.Timestamp(end) if end is not None else self.close.index[-1]
        if self.end < self.start:
            raise ValueError(f"end {self.end.date()} is before start {self.start.date()}")

    # --- input checks -----------------------------------------------------------------------------
    # Strings are factorised once (a few hundred unique tickers, five labels) and everything after
    # that is integer indexing: pandas pivots and maps over a million string rows cost seconds.
    @staticmethod
    def _pivot_prices(prices: pd.DataFrame) -> pd.DataFrame:
        missing = {"ticker", "date", "close"} - set(prices.columns)
        if missing:
            raise ValueError(f"prices: missing column(s) {sorted(missing)}")
        close = prices["close"].to_numpy(dtype=float)
        bad = ~np.isfinite(close) | (close <= 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"prices: row {i} (ticker {prices['ticker'].iloc[i]!r}): close must be a positive number, got {close[i]}"
            )
        t_codes, t_uniq = pd.factorize(prices["ticker"], sort=True)
        d_codes, d_uniq = pd.factorize(pd.to_datetime(prices["date"]).to_numpy(), sort=True)
        flat = d_codes.astype(np.int64) * len(t_uniq) + t_codes
        counts = np.bincount(flat, minlength=len(d_uniq) * len(t_uniq))
        if (counts > 1).any():
            dup = counts[flat] > 1
            i = int(np.flatnonzero(dup)[1])
            raise ValueError(
                f"prices: row {i}: duplicate bar for ({prices['ticker'].iloc[i]}, {prices['date'].iloc[i]})"
            )
        wide = np.full(len(d_uniq) * len(t_uniq), np.nan)
        wide[flat] = close
        return pd.DataFrame(
            wide.reshape(len(d_uniq), len(t_uniq)),
            index=pd.DatetimeIndex(d_uniq, name="date"),
            columns=pd.Index(t_uniq, name="ticker"),
        )

    def _check_decisions(self, decisions: pd.DataFrame) -> None:
        missing = {"ticker", "date", "decision"} - set(decisions.columns)
        if missing:
            raise ValueError(f"decisions: missing column(s) {sorted(missing)}")
        if decisions.empty:
            raise ValueError("decisions: empty frame, nothing to backtest")
        dec_codes, dec_uniq = pd.factorize(decisions["decision"])
        unknown = [u for u in dec_uniq if u not in self.positions_map]
        if unknown:
            i = int(np.argmax(decisions["decision"].to_numpy() == unknown[0]))
            raise ValueError(
                f"decisions: row {i}: decision {unknown[0]!r} is not one of {list(self.positions_map)}"
            )
        t_codes, t_uniq = pd.factorize(decisions["ticker"])
        t_cols = self.close.columns.get_indexer(t_uniq)
        if (t_cols < 0).any():
            bad = t_uniq[int(np.argmax(t_cols < 0))]
            i = int(np.argmax(decisions["ticker"].to_numpy() == bad))
            raise ValueError(f"decisions: row {i}: ticker {bad!r} has no prices")
        dates = pd.to_datetime(decisions["date"]).to_numpy()
        d_codes, d_uniq = pd.factorize(dates)
        d_rows = self.close.index.get_indexer(pd.DatetimeIndex(d_uniq))
        rows, cols = d_rows[d_codes], t_cols[t_codes]
        # a decision must be tradable at its own close: the ticker needs a bar on that date
        ok = rows >= 0
        ok[ok] = np.isfinite(self.close.to_numpy()[rows[ok], cols[ok]])
        if not ok.all():
            i = int(np.argmax(~ok))
            raise ValueError(
                f"decisions: row {i}: ticker {decisions['ticker'].iloc[i]!r} has no bar on "
                f"{pd.Timestamp(dates[i]).date()}, so no close to trade at"
            )
        flat = rows.astype(np.int64) * self.close.shape[1] + cols
        counts = np.bincount(flat, minlength=self.close.size)
        if (counts > 1).any():
            i = int(np.flatnonzero(counts[flat] > 1)[1])
            raise ValueError(
                f"decisions: row {i}: more than one decision for ({decisions['ticker'].iloc[i]}, {pd.Timestamp(dates[i]).date()})"
            )
        self._d_row, self._d_col = rows, cols
        self._dec_uniq, self._dec_codes = list(dec_uniq), dec_codes

    # --- the backtest ---------------------------------------------------------------------------
    def _targets(self, lo: int, hi: int, used: np.ndarray) -> tuple[np.ndarray, int]:
        """(days x used tickers) position entered at each decision's close (nan elsewhere), decisions."""
        pos_map = dict(self.positions_map)
        if self.long_only:
            pos_map = {k: max(v, 0.0) for k, v in pos_map.items()}
        values = np.array([pos_map[u] for u in self._dec_uniq], dtype=float)[self._dec_codes]
        inside = (self._d_row >= lo) & (self._d_row < hi)
        col_of = np.full(self.close.shape[1], -1)
        col_of[used] = np.arange(len(used))
        target = np.full((hi - lo, len(used)), np.nan)
        target[self._d_row[inside] - lo, col_of[self._d_col[inside]]] = values[inside]
        return target, int(inside.sum())

    def run(self) -> BacktestResult:
        idx = self.close.index
        lo, hi = int(idx.searchsorted(self.start, "left")), int(idx.searchsorted(self.end, "right"))
        # only tickers with a decision take part
        used = np.flatnonzero(np.bincount(self._d_col, minlength=self.close.shape[1]))
        tickers = self.close.columns[used]
        dates = idx[lo:hi]
        # prices before the window are needed for nothing: day `start` earns no return because no
        # position can be held into it (decisions start at its close)
        filled = _ffill(self.close.to_numpy()[lo:hi][:, used], limit=None)
        with np.errstate(invalid="ignore"):
            r = np.empty_like(filled)
            r[:1] = 0.0
            r[1:] = filled[1:] / filled[:-1] - 1.0
        rets = np.nan_to_num(r, nan=0.0)
        target, n_decisions = self._targets(lo, hi, used)
        # `live` marks cells covered by a decision: the decision day plus hold_days-1 more days
        held = _ffill(target, limit=None if self.hold_days is None else self.hold_days - 1)
        live = ~np.isnan(held)
        pos = np.nan_to_num(held, nan=0.0)

        prev = np.zeros_like(pos)
        prev[1:] = pos[:-1]
        gross = prev * rets
        turnover = np.abs(pos - prev)
        costs = turnover * (self.cost_bps / 1e4)
        net = gross - costs
        live_prev = np.zeros_like(live)
        live_prev[1:] = live[:-1]
        act = live | live_prev | (turnover > 0)

        if self.weighting == "equal":
            n_active = act.sum(axis=1).astype(float)
            denom = np.where(n_active > 0, n_active, 1.0)
        else:
            denom = np.full(len(net), float(len(tickers)))

        def frame(a: np.ndarray) -> pd.DataFrame:
            return pd.DataFrame(a, index=dates, columns=tickers)

        def port(a: np.ndarray, name: str) -> pd.Series:
            return pd.Series(np.where(act, a, 0.0).sum(axis=1) / denom, index=dates, name=name)

        pos_f, rets_f, gross_f, costs_f, net_f, turn_f, active, live_f = (
            frame(a) for a in (pos, rets, gross, costs, net, turnover, act, live)
        )
        port_net, port_gross, port_turn = port(net, "net"), port(gross, "gross"), port(turnover, "turnover")
        return BacktestResult(
            positions=pos_f,
            asset_returns=rets_f,
            gross=gross_f,
            costs=costs_f,
            net=net_f,
            turnover=turn_f,
            active=active,
            live=live_f,
            returns=port_net,
            gross_returns=port_gross,
            portfolio_turnover=port_turn,
            rf=self.rf,
            meta={
                "cost_bps": self.cost_bps,
                "long_only": self.long_only,
                "hold_days": self.hold_days,
                "weighting": self.weighting,
                "start": str(self.start.date()),
                "end": str(self.end.date()),
                "tickers": len(tickers),
                "decisions": n_decisions,
            },
        )


def _ffill(a: np.ndarray, *, limit: int | None) -> np.ndarray:
    """Forward-fill NaNs down each column, at most `limit` rows past the last valid value."""
    rows = np.arange(a.shape[0])[:, None]
    last = np.where(np.isnan(a), -1, rows)
    np.maximum.accumulate(last, axis=0, out=last)
    out = np.take_along_axis(a, np.maximum(last, 0), axis=0)
    stale = last < 0
    if limit is not None:
        stale |= (rows - last) > limit
    out[stale] = np.nan
    return out
