"""The point-in-time door: every reader of a MarketStore sees it through a `Timeline` or an `AsOfView`.

Two rules live here and nowhere else:

- Visibility. An event is visible to the context of trading day d iff it was published STRICTLY
  before the cutoff of d (16:00 New York by default): an item stamped 16:00:00 came out with the
  close, not before it, so a position taken at that close could not have used it. `Timeline.cutoffs`
  gives the cutoff instants, `Timeline.window` turns them into index ranges over sorted publication
  times with one `np.searchsorted(..., side="left")`.
- One basis. Prices, volumes and per-share numbers are shown as they were on the as-of day: bars a
  vendor adjusted for a split that came later are un-adjusted (prices x ratio, volume / ratio; and,
  for bars the store says are dividend-adjusted, the later dividends undone too), and a
  per-share number in an event's text written `{{ps:2.58}}` (an amount per share) or `{{sh:10,000}}`
  (a share count) is converted from the basis it was written on (the event's `basis_date`) to the
  as-of day's, with the split history the store keeps (`actions`). A prompt therefore never shows a
  number nobody had on that day (a split-adjusted price is a leak of the split) and never mixes scales.

`Timeline` is the vectorised door the context builder uses (cutoffs, windows, basis factors for all
days of a ticker at once). `AsOfView` is the door for one as-of day (a tool such as
`search_news(query, days)` bound to a day): it holds uncopied slices of the visible rows only and keeps
no reference to the store, so nothing published at or after the cutoff can be reached through it; its
readers convert only the rows they return.
Labels and backtests need future prices by definition; they read `Timeline.label_bars` (and a
synthetic market's `label_truth`). The builder windows all rows itself and reads
`events_future_included` / `bars_future_included`. These four are the only readers that go past a
cutoff, each says so in its name, and tests/test_data_pit.py allows each only where it is needed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ACTION_COLUMNS",
    "AsOfView",
    "SplitHistory",
    "Timeline",
    "per_share",
    "render_per_share",
    "strip_per_share",
    "with_event_defaults",
]

ACTION_COLUMNS: tuple[str, ...] = ("ticker", "date", "kind", "value")
# {{ps:1,040.00}} is an amount per share, {{sh:10,000}} a number of shares, written on the event's basis.
_MARK = re.compile(r"\{\{(ps|sh):([+-]?[\d,]*\.?\d+)\}\}")
_NS_DAY = 86_400_000_000_000


def per_share(value: float, decimals: int = 2, *, sign: bool = False, grouped: bool = True) -> str:
    """`value` written as a per-share marker, e.g. per_share(2.5) -> "{{ps:2.50}}"."""
    body = f"{value:{'+' if sign else ''}{',' if grouped else ''}.{decimals}f}"
    return "{{ps:" + body + "}}"


def shares(value: float, decimals: int = 0) -> str:
    """`value` written as a share-count marker, e.g. shares(10000) -> "{{sh:10,000}}"."""
    return "{{sh:" + f"{value:,.{decimals}f}" + "}}"


def _reformat(raw: str, value: float, kind: str) -> str:
    """`value` written like `raw` was: the same sign convention and as many significant digits (at
    least 3, with 2 to 6 decimals for amounts); share counts stay whole when they were."""
    sign = "+" if raw.startswith("+") else ""
    digits = raw.lstrip("+-").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    if kind != "ps":
        return f"{value:{sign},.{decimals}f}"
    mantissa = digits.rstrip("0").rstrip(".") if "." in digits else digits
    sig = max(3, len(mantissa.replace(".", "").lstrip("0")))
    magnitude = int(np.floor(np.log10(abs(value)))) + 1 if value else 1  # digits before the point
    text = f"{value:{sign},.{max(2, min(6, sig - magnitude))}f}"
    head, _, tail = text.partition(".")
    return head + "." + (tail.rstrip("0") + "00")[: max(2, len(tail.rstrip("0")))]


def render_per_share(text: str, factor: float) -> str:
    """`text` with its markers resolved: per-share amounts x `factor`, share counts / `factor`.

    `factor` = S(basis) / S(as-of) where S(t) is the product of the split ratios with ex-date <= t:
    a number written after a 4:1 split and shown before it is multiplied by 4. With factor 1 the
    markers are only removed, so the text is exactly what the importer wrote.
    """
    if "{{" not in text:
        return text
    if factor == 1.0:
        return _MARK.sub(lambda m: m.group(2), text)

    def one(m: re.Match) -> str:
        raw = m.group(2)
        v = float(raw.replace(",", ""))
        return _reformat(raw, v * factor if m.group(1) == "ps" else v / factor, m.group(1))

    return _MARK.sub(one, text)


def strip_per_share(text: str) -> str:
    """The text as written (markers removed, numbers unchanged)."""
    return render_per_share(text, 1.0)


def has_markers(texts: Iterable[str]) -> np.ndarray:
    return np.fromiter(("{{" in t and _MARK.search(t) is not None for t in texts), dtype=bool)


class SplitHistory:
    """Split ratios per ticker (`actions` rows of kind "split"), as a step function S(t) per ticker."""

    def __init__(self, actions: pd.DataFrame | None):
        self._steps: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if actions is None or not len(actions):
            return
        splits = actions[actions["kind"] == "split"].sort_values(["ticker", "date"], kind="stable")
        for t, g in splits.groupby("ticker", sort=False):
            days = pd.DatetimeIndex(g["date"]).as_unit("ns").asi8
            self._steps[str(t)] = (days, np.cumprod(g["value"].to_numpy(dtype="float64")))

    @property
    def tickers(self) -> list[str]:
        return sorted(self._steps)

    def level(self, ticker: str, days) -> np.ndarray:
        """S(t): the product of the split ratios of `ticker` with ex-date <= t, for each day."""
        ns = _day_ns(days)
        steps = self._steps.get(ticker)
        if steps is None:
            return np.ones(len(ns))
        at, cum = steps
        k = np.searchsorted(at, ns, side="right")
        return np.concatenate([[1.0], cum])[k]

    def regime_starts(self, ticker: str) -> list[pd.Timestamp]:
        """The first day of each split regime of `ticker`: the distant past, then every ex-date."""
        steps = self._steps.get(ticker)
        days = [] if steps is None else list(pd.to_datetime(steps[0]))
        return [pd.Timestamp("1900-01-01"), *days]

    def regimes(self, ticker: str, days) -> np.ndarray:
        """How many splits of `ticker` took effect on or before each day (0 = before the first)."""
        steps = self._steps.get(ticker)
        ns = _day_ns(days)
        return np.zeros(len(ns), dtype="int64") if steps is None else np.searchsorted(steps[0], ns, side="right")


def _day_ns(days) -> np.ndarray:
    if np.isscalar(days) or isinstance(days, (str, pd.Timestamp)):
        days = [days]
    idx = pd.DatetimeIndex(pd.to_datetime(list(days) if not isinstance(days, pd.DatetimeIndex) else days))
    if idx.tz is not None:
        idx = idx.tz_localize(None)
    return idx.normalize().as_unit("ns").asi8


class Timeline:
    """The vectorised point-in-time door of one store (module docstring)."""

    def __init__(self, *, bars: pd.DataFrame, events: pd.DataFrame, actions: pd.DataFrame | None,
                 cutoff: str, timezone: str, bars_basis: dict[str, pd.Timestamp] | None = None,
                 dividend_adjusted: bool = False, truth: pd.DataFrame | None = None):
        hh, mm = (int(x) for x in cutoff.split(":"))
        self.cutoff, self.timezone = cutoff, timezone
        self._delta = pd.Timedelta(hours=hh, minutes=mm)
        self._all_bars, self._all_truth = bars, truth
        self._bar_rows: dict[str, tuple[int, np.ndarray]] | None = None
        self._all_events = _sorted_events(with_event_defaults(events))
        if not isinstance(self._all_events.index, pd.RangeIndex) or self._all_events.index.start != 0:
            self._all_events = self._all_events.reset_index(drop=True)  # labels = positions (AsOfView)
        self._levels: np.ndarray | None = None
        self.pub_ns = (
            pd.DatetimeIndex(self._all_events["published_at"]).tz_convert("UTC").as_unit("ns").asi8.copy()
            if len(self._all_events) else np.zeros(0, dtype="int64")
        )
        self.splits = SplitHistory(actions)
        self._bars_basis = dict(bars_basis or {})
        self._dividends = (
            actions[actions["kind"] == "dividend"] if dividend_adjusted and actions is not None else None
        )
        self._div_steps: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # --- the visibility rule ---------------------------------------------------------------------
    def cutoffs(self, days) -> np.ndarray:
        """UTC ns of the cutoff of each trading day (its local `cutoff` time)."""
        d = pd.DatetimeIndex(pd.to_datetime(_day_ns(days)))
        return (d.tz_localize(self.timezone) + self._delta).tz_convert("UTC").as_unit("ns").asi8

    def day_start(self, days, age: int) -> np.ndarray:
        """UTC ns of local midnight of day d - `age` calendar days, per day."""
        d = pd.DatetimeIndex(pd.to_datetime(_day_ns(days))) - pd.Timedelta(days=age)
        return d.tz_localize(self.timezone).tz_convert("UTC").as_unit("ns").asi8

    def visible_count(self, pub_ns: np.ndarray, days) -> np.ndarray:
        """How many of the sorted publication times `pub_ns` are visible at each day's cutoff: those
        strictly before it."""
        return np.searchsorted(pub_ns, self.cutoffs(days), side="left")

    def window(self, pub_ns: np.ndarray, days, min_age: int, max_age: int) -> tuple[np.ndarray, np.ndarray]:
        """Index ranges [lo, hi) of the sorted `pub_ns` visible at each day's cutoff and published
        between local midnight of d - max_age and the end of day d - min_age (calendar days)."""
        hi = self.visible_count(pub_ns, days)
        lo = np.searchsorted(pub_ns, self.day_start(days, max_age), side="left")
        if min_age > 0:
            hi = np.minimum(hi, np.searchsorted(pub_ns, self.day_start(days, min_age - 1), side="left"))
        return lo, np.maximum(hi, lo)

    # --- the one-basis rule ----------------------------------------------------------------------
    def bars_basis(self, ticker: str) -> pd.Timestamp:
        """The day whose split basis the stored bars of `ticker` are on (default: its last bar)."""
        if ticker in self._bars_basis:
            return pd.Timestamp(self._bars_basis[ticker])
        index = self._bar_index()  # a ticker's dates are sorted: its last bar is the last of its slice
        return pd.Timestamp(index[ticker][1][-1]) if ticker in index else pd.Timestamp("1970-01-01")

    def volume_factor(self, ticker: str, days) -> np.ndarray:
        """Split ratio between the stored bars' basis and each day's (volumes / it; split part of prices)."""
        basis = self.splits.level(ticker, [self.bars_basis(ticker)])[0]
        return basis / self.splits.level(ticker, days)

    def price_factor(self, ticker: str, days) -> np.ndarray:
        """Multiplier from stored bars to the as-of basis of each day: the splits after it and, for
        dividend-adjusted bars, the dividends after it undone."""
        out = self.volume_factor(ticker, days)
        if self._dividends is None:
            return out
        ex, after = self._dividend_steps(ticker)
        if len(ex):
            k = np.searchsorted(ex, _day_ns(days), side="right")  # first dividend after each day
            out = out / np.concatenate([after, [1.0]])[k]
        return out

    def _dividend_steps(self, ticker: str) -> tuple[np.ndarray, np.ndarray]:
        """(ex-dates, product of the vendor's adjustment factors of the dividends from each one on).

        A vendor that adjusts for dividends multiplies every price before ex-date e by
        f = 1 - D / close(e-1) (raw close, D the cash paid). From the stored close the raw one is
        close_stored * split ratio / (f * F_later), which solves to f = 1 / (1 + D F_later / (close_stored
        * split ratio)), taking the dividends from the latest back."""
        if ticker in self._div_steps:
            return self._div_steps[ticker]
        basis = self.bars_basis(ticker)
        d = self._dividends[(self._dividends["ticker"] == ticker) & (self._dividends["date"] <= basis)]
        b = self._all_bars[self._all_bars["ticker"] == ticker]
        days, close = pd.DatetimeIndex(b["date"]).as_unit("ns").asi8, b["close"].to_numpy(dtype="float64")
        ex_out, f_out, later = [], [], 1.0
        pairs = zip(_day_ns(d["date"]), d["value"].to_numpy(dtype="float64"), strict=True)
        for e, cash in sorted(pairs, reverse=True):
            i = int(np.searchsorted(days, e, side="left")) - 1  # the last bar before the ex-date
            if i < 0:
                continue
            ratio = float(self.volume_factor(ticker, [pd.Timestamp(days[i])])[0])
            later *= 1.0 / (1.0 + cash * later / (close[i] * ratio))
            ex_out.append(e)
            f_out.append(later)
        out = (np.asarray(ex_out[::-1], dtype="int64"), np.asarray(f_out[::-1], dtype="float64"))
        self._div_steps[ticker] = out
        return out

    def event_factor(self, ticker: str, basis_days, asof) -> np.ndarray:
        """Multiplier from each event's basis day to the as-of basis (1 where the basis is unknown)."""
        return _event_factor(self.splits, ticker, basis_days, asof)

    def regimes(self, ticker: str, days) -> np.ndarray:
        """A group id per day: days with the same id share one basis (no split, nor applied dividend,
        takes effect between them)."""
        r = self.splits.regimes(ticker, days)
        if self._dividends is not None:
            ex, _ = self._dividend_steps(ticker)
            r = r * (len(ex) + 1) + np.searchsorted(ex, _day_ns(days), side="right")
        return r

    # --- readers ---------------------------------------------------------------------------------
    # Three readers hand out rows dated after some as-of day, and say so in their names; the guard test
    # (tests/test_data_pit.py) allows each only in the modules that window them or need the future.
    def events_future_included(self) -> pd.DataFrame:
        """ALL events sorted by publication time, future included: only for a builder that cuts every
        prompt's slice with `window` / `visible_count` (thesisgym.dataset.events)."""
        return self._all_events

    def bars_future_included(self) -> pd.DataFrame:
        """ALL bars as stored (the vendor's basis, every day), future included: only for the vectorised
        builder, which shows a day's rows only up to that day and re-bases them with `price_factor` /
        `volume_factor`."""
        return self._all_bars

    def label_bars(self, tickers: Sequence[str] | None = None) -> pd.DataFrame:
        """The stored (adjusted) bars, future included: only for labels and realised returns, which
        are about what came after the as-of day by definition."""
        if tickers is None:
            return self._all_bars
        return self._all_bars.loc[self._all_bars["ticker"].isin(list(tickers))]

    def label_truth(self) -> pd.DataFrame | None:
        """A synthetic market's ground truth (expected forward return per ticker-day), None for a real
        one: a label (what came after the day), only for label columns and the truth oracle."""
        return self._all_truth

    def _bar_index(self) -> dict[str, tuple[int, np.ndarray]]:
        """ticker -> (its first row, its dates as ns): sorted by ticker then date, so a day's visible
        bars of a ticker are one contiguous slice."""
        if self._bar_rows is None:
            rows = {}
            for t, idx in self._all_bars.groupby("ticker", sort=False).indices.items():
                lo, hi = int(idx[0]), int(idx[-1]) + 1
                days = pd.DatetimeIndex(self._all_bars["date"].iloc[lo:hi]).as_unit("ns").asi8
                if hi - lo != len(idx) or np.any(days[1:] < days[:-1]):
                    raise ValueError(f"bars of {t!r}: not sorted by ticker then date (MarketStore sorts them when "
                                     "created; a frame assigned later must be sorted too)")
                rows[str(t)] = (lo, days)
            self._bar_rows = rows
        return self._bar_rows

    def _basis_levels(self) -> np.ndarray:
        """S(basis day) of each event's ticker (`SplitHistory.level`), NaN where it has no basis day or
        no ticker: an event's per-share factor on day d is this / S(d), computed once per timeline."""
        if self._levels is None:
            ev = self._all_events
            out = np.full(len(ev), np.nan)
            if len(ev):
                basis = pd.DatetimeIndex(ev["basis_date"])
                tick = ev["ticker"].fillna("").astype(str).to_numpy()
                for t in self.splits.tickers:
                    idx = np.flatnonzero((tick == t) & ~basis.isna())
                    if len(idx):
                        out[idx] = self.splits.level(t, basis[idx])
            self._levels = out
        return self._levels

    def bars_upto(self, ticker: str, day) -> pd.DataFrame:
        """The stored rows of `ticker` dated <= `day` (the vendor's basis; a slice, not a copy)."""
        index = self._bar_index()
        if ticker not in index:
            return self._all_bars.iloc[:0]
        lo, days = index[ticker]
        return self._all_bars.iloc[lo: lo + int(np.searchsorted(days, _day_ns([day])[0], side="right"))]

    def view(self, day) -> AsOfView:
        """The store as it was at the cutoff of trading day `day` (see `AsOfView`)."""
        day = pd.Timestamp(_day_ns([day])[0])
        cut = int(self.cutoffs([day])[0])
        n = int(np.searchsorted(self.pub_ns, cut, side="left"))
        bars = {t: b for t in self._bar_index() if len(b := self.bars_upto(t, day))}
        return AsOfView(
            asof=day, cutoff=pd.Timestamp(cut, tz="UTC"), timezone=self.timezone, bars=bars,
            events=self._all_events.iloc[:n], basis_levels=self._basis_levels()[:n],
            day_levels={t: float(self.splits.level(t, [day])[0]) for t in self.splits.tickers},
            price={t: float(self.price_factor(t, [day])[0]) for t in bars},
            volume={t: float(self.volume_factor(t, [day])[0]) for t in bars},
        )


def with_event_defaults(events: pd.DataFrame) -> pd.DataFrame:
    """`events` with the columns added after the first store format (basis_date NaT, timing "")."""
    if "basis_date" in events.columns and "timing" in events.columns:
        return events
    events = events.copy()
    if "basis_date" not in events.columns:
        events["basis_date"] = pd.Series(pd.NaT, index=events.index, dtype="datetime64[ns]")
    if "timing" not in events.columns:
        events["timing"] = pd.Series("", index=events.index, dtype=object)
    return events


def _sorted_events(events: pd.DataFrame) -> pd.DataFrame:
    if not len(events):
        return events
    pub = events["published_at"]
    if getattr(pub.dtype, "tz", None) is None:
        raise ValueError("events field 'published_at': timestamps must be timezone-aware")
    ns = pd.DatetimeIndex(pub).as_unit("ns").asi8
    if np.any(ns[1:] < ns[:-1]):
        events = events.iloc[np.argsort(ns, kind="stable")].reset_index(drop=True)
    return events


def _event_factor(splits: SplitHistory, ticker: str, basis_days, asof) -> np.ndarray:
    basis_days = pd.DatetimeIndex(basis_days)
    ok = ~basis_days.isna()
    out = np.ones(len(basis_days))
    if ok.any():
        out[ok] = splits.level(ticker, basis_days[ok]) / splits.level(ticker, [asof])[0]
    return out


def _render_events(ev: pd.DataFrame, factor: np.ndarray) -> pd.DataFrame:
    """Title and text of each event with its per-share markers converted by its `factor`."""
    for col in ("title", "text"):
        ev[col] = [render_per_share(str(x), f) for x, f in zip(ev[col], factor, strict=True)]
    return ev


class AsOfView:
    """What the market could see at the cutoff of one trading day, and nothing else.

    Built by `MarketStore.as_of(day)`: bars dated <= the day and events published strictly before its
    cutoff, every price, volume and per-share number on the as-of day's basis. It holds slices of the
    visible rows only (the first n events by publication, each ticker's bars up to the day; slices,
    which pandas does not copy) and the factors that re-base them (split levels of the visible events'
    basis days and of the day), and converts just the rows a reader returns. So a view costs kilobytes, and it keeps no reference
    to the store or its timeline: a tool bound to it cannot reach later data by any path.
    """

    def __init__(self, *, asof: pd.Timestamp, cutoff: pd.Timestamp, timezone: str, bars: dict[str, pd.DataFrame],
                 events: pd.DataFrame, basis_levels: np.ndarray, day_levels: dict[str, float],
                 price: dict[str, float], volume: dict[str, float]):
        self.asof, self.cutoff, self.timezone = asof, cutoff, timezone
        self._bars, self._events = bars, events
        self._basis_levels, self._day_levels = basis_levels, day_levels
        self._price, self._volume = price, volume

    def __repr__(self) -> str:
        return f"AsOfView(asof={self.asof.date()}, cutoff={self.cutoff}, {len(self._events)} events)"

    def bars(self, ticker: str, last: int | None = None) -> pd.DataFrame:
        """Bars of `ticker` dated <= the as-of day (the last `last` ones), as traded on that day."""
        if ticker not in self._bars:  # no bar on or before the day: an empty frame of the same columns
            some = next(iter(self._bars.values()), None)
            return some.iloc[:0].reset_index(drop=True) if some is not None else pd.DataFrame(
                columns=["ticker", "date", "open", "high", "low", "close", "volume"])
        b = self._bars[ticker]
        b = (b if last is None else b.tail(last)).reset_index(drop=True)
        for c in ("open", "high", "low", "close"):
            b[c] = b[c].to_numpy(dtype="float64") * self._price[ticker]
        b["volume"] = b["volume"].to_numpy(dtype="float64") / self._volume[ticker]
        return b

    def events(self, ticker: str | None = None, *, kinds: Iterable[str] | None = None,
               days: int | None = None, market_wide: bool = True) -> pd.DataFrame:
        """Visible events, newest last: those of `ticker` (plus market-wide ones unless
        `market_wide=False`; all tickers when None), of `kinds`, published within `days` calendar days
        (local midnight of as-of - days onwards)."""
        ev = self._events
        if ticker is not None:
            mine = ev["ticker"] == ticker
            ev = ev[(mine | (ev["ticker"] == "")) if market_wide else mine]
        if kinds is not None:
            ev = ev[ev["kind"].isin(list(kinds))]
        if days is not None:
            start = (self.asof - pd.Timedelta(days=int(days))).tz_localize(self.timezone).tz_convert("UTC")
            ev = ev[ev["published_at"] >= start]
        if not len(ev):
            return ev.reset_index(drop=True)
        # per-share numbers from each event's basis to the as-of day's: S(basis) / S(as-of), 1 without a basis
        level = self._basis_levels[ev.index.to_numpy()]
        day = ev["ticker"].map(self._day_levels).to_numpy(dtype="float64")
        factor = np.where(np.isnan(level) | np.isnan(day), 1.0, level / np.where(np.isnan(day), 1.0, day))
        return _render_events(ev.copy(), factor).reset_index(drop=True)

    def search(self, query: str, *, ticker: str | None = None, kinds: Iterable[str] | None = None,
               days: int | None = None, limit: int = 20) -> pd.DataFrame:
        """Visible events whose title or text contains every word of `query` (case-insensitive),
        newest first; the minimal search a news tool can build on."""
        ev = self.events(ticker, kinds=kinds, days=days)
        words = [w for w in re.findall(r"\w+", query.lower()) if w]
        if words and len(ev):
            hay = (ev["title"].astype(str) + " " + ev["text"].astype(str)).str.lower()
            keep = np.logical_and.reduce([hay.str.contains(re.escape(w)).to_numpy() for w in words])
            ev = ev[keep]
        return ev.iloc[::-1].head(limit).reset_index(drop=True)
