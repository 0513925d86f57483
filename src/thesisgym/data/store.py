"""MarketStore: the point-in-time container of bars, events, corporate actions and (synthetic only)
ground truth.

Everything downstream reads market data through a MarketStore, and reads it through ONE door:
`store.timeline()` (vectorised, for the context builder and labels) or `store.as_of(day)` (one day,
for tools), both in `thesisgym.data.asof`, where the visibility rule (docs/spec.md, section 2: published
strictly before the cutoff) and the one-basis rule (numbers as they were on the as-of day) are written once.

Frames (pandas, one row per observation):
- bars:    ticker (str), date (datetime64[ns], midnight, the trading day), open, high, low, close,
           volume (float64). As the vendor gave them (usually split-adjusted up to
           `meta["bars_adjusted_as_of"]`, default the last bar); the door un-adjusts them per as-of
           day. Sorted by ticker then date, unique per (ticker, date).
- events:  ticker (str, "" for market-wide), published_at (datetime64[ns, UTC]), kind (one of
           schema.EVENT_KINDS), source (str), title (str), text (str), value (float64, nan when the
           event has no headline number), sentiment (float64 in [-1, 1] when known, nan otherwise),
           basis_date (datetime64[ns]: the day whose split basis the `{{ps:..}}`/`{{sh:..}}` numbers
           of the text are on; NaT when it has none), timing (str: how published_at was derived, e.g.
           "filed", "form4 index", "form5 deadline"; "" = the source's own time). Sorted by
           published_at.
- actions: ticker, date (ex-date), kind ("split": value = the ratio, 4.0 = four shares for one;
           "dividend": value = the cash paid per share). Dividends matter only for bars the vendor
           adjusted for them (`meta["bars_adjusted_for"] = "splits+dividends"`).
- truth:   synthetic markets only: ticker, date, expected_return (true E[fwd_return] over
           schema.REWARD_HORIZON days at the close of date), quality (latent factor), regime.
- quarantine: events held back at import (e.g. text naming a period after their timestamp), with a
           `reason` column; never visible to a prompt, kept so a user can inspect them.
- filings: the SEC Form 4 index the insider events were dated with (ticker, accn, report_date,
           filing_date, accepted), kept so `thesisgym data audit` can re-derive their public times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.asof import ACTION_COLUMNS, AsOfView, Timeline, with_event_defaults
from thesisgym.schema import DEFAULT_CUTOFF, DEFAULT_TIMEZONE

BAR_COLUMNS: tuple[str, ...] = ("ticker", "date", "open", "high", "low", "close", "volume")
EVENT_COLUMNS: tuple[str, ...] = (
    "ticker", "published_at", "kind", "source", "title", "text", "value", "sentiment", "basis_date", "timing",
)
TRUTH_COLUMNS: tuple[str, ...] = ("ticker", "date", "expected_return", "quality", "regime")


@dataclass
class MarketStore:
    """Bars + events (+ truth) of one market, with the point-in-time cutoff rule attached."""

    bars: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: empty_events())
    truth: pd.DataFrame | None = None
    name: str = "market"
    cutoff: str = DEFAULT_CUTOFF
    timezone: str = DEFAULT_TIMEZONE
    meta: dict = field(default_factory=dict)
    actions: pd.DataFrame = field(default_factory=lambda: empty_actions())
    quarantine: pd.DataFrame | None = None
    filings: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        self.bars = self.bars.sort_values(["ticker", "date"], kind="stable").reset_index(drop=True)
        self.events = with_event_defaults(self.events)
        if len(self.events):
            self.events = self.events.sort_values("published_at", kind="stable").reset_index(drop=True)
        self._timeline: tuple[tuple, tuple, Timeline] | None = None

    # --- shape -------------------------------------------------------------------------------
    @property
    def tickers(self) -> list[str]:
        return sorted(self.bars["ticker"].unique().tolist())

    @property
    def dates(self) -> pd.DatetimeIndex:
        """Union of trading days across tickers, sorted."""
        return pd.DatetimeIndex(np.sort(self.bars["date"].unique()))

    def cutoff_of(self, day: pd.Timestamp | str) -> pd.Timestamp:
        """The UTC instant of the cutoff of trading day `day`: only what was published strictly
        before it is visible to that day's context."""
        return pd.Timestamp(int(self.timeline().cutoffs([day])[0]), tz="UTC")

    # --- the point-in-time door ------------------------------------------------------------------
    def timeline(self) -> Timeline:
        """The vectorised point-in-time door (thesisgym.data.asof); rebuilt when anything it reads changes."""
        frames, settings = self._timeline_key()
        hit = self._timeline
        if hit is None or hit[1] != settings or any(a is not b for a, b in zip(hit[0], frames, strict=True)):
            basis = self.meta.get("bars_adjusted_as_of")
            if isinstance(basis, str):
                basis = dict.fromkeys(self.tickers, basis)
            tl = Timeline(bars=self.bars, events=self.events, actions=self.actions, cutoff=self.cutoff,
                          timezone=self.timezone, bars_basis=basis, truth=self.truth,
                          dividend_adjusted=self.meta.get("bars_adjusted_for") == "splits+dividends")
            self._timeline = (frames, settings, tl)
        return self._timeline[2]

    def _timeline_key(self) -> tuple[tuple, tuple]:
        """Everything the timeline depends on: the frames themselves (held, so compared by identity: a
        frame replaced by another is seen even if the old one's id() is reused; frames are not edited in
        place) and the settings and meta entries it reads, by value."""
        frames = (self.bars, self.events, self.actions, self.truth)
        meta = json.dumps({k: self.meta.get(k) for k in ("bars_adjusted_as_of", "bars_adjusted_for")},
                          sort_keys=True, default=str)
        return frames, (self.cutoff, self.timezone, meta)

    def as_of(self, day: pd.Timestamp | str) -> AsOfView:
        """The store as the market saw it at the cutoff of trading day `day` (thesisgym.data.asof)."""
        return self.timeline().view(day)

    # --- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the store as a directory of Parquet files plus meta.json."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.bars.to_parquet(path / "bars.parquet", index=False)
        self.events.to_parquet(path / "events.parquet", index=False)
        self.actions.to_parquet(path / "actions.parquet", index=False)
        if self.truth is not None:
            self.truth.to_parquet(path / "truth.parquet", index=False)
        for name, frame in (("quarantine", self.quarantine), ("filings", self.filings)):
            if frame is not None:
                frame.to_parquet(path / f"{name}.parquet", index=False)
        meta = {"name": self.name, "cutoff": self.cutoff, "timezone": self.timezone, **self.meta}
        (path / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
        return path

    @classmethod
    def load(cls, path: str | Path) -> MarketStore:
        path = Path(path)
        if not (path / "bars.parquet").exists():
            raise ValueError(f"{path}: not a MarketStore directory (bars.parquet is missing)")
        meta = json.loads((path / "meta.json").read_text()) if (path / "meta.json").exists() else {}
        bars = pd.read_parquet(path / "bars.parquet")
        events = pd.read_parquet(path / "events.parquet") if (path / "events.parquet").exists() else empty_events()
        truth = pd.read_parquet(path / "truth.parquet") if (path / "truth.parquet").exists() else None
        actions = pd.read_parquet(path / "actions.parquet") if (path / "actions.parquet").exists() else empty_actions()
        optional = {
            k: pd.read_parquet(path / f"{k}.parquet") if (path / f"{k}.parquet").exists() else None
            for k in ("quarantine", "filings")
        }
        name = meta.pop("name", path.name)
        cutoff = meta.pop("cutoff", DEFAULT_CUTOFF)
        tz = meta.pop("timezone", DEFAULT_TIMEZONE)
        return cls(bars=bars, events=events, truth=truth, name=name, cutoff=cutoff, timezone=tz, meta=meta,
                   actions=actions, **optional)


def empty_events() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticker": pd.Series([], dtype=object),
            "published_at": pd.Series([], dtype="datetime64[ns, UTC]"),
            "kind": pd.Series([], dtype=object),
            "source": pd.Series([], dtype=object),
            "title": pd.Series([], dtype=object),
            "text": pd.Series([], dtype=object),
            "value": pd.Series([], dtype="float64"),
            "sentiment": pd.Series([], dtype="float64"),
            "basis_date": pd.Series([], dtype="datetime64[ns]"),
            "timing": pd.Series([], dtype=object),
        }
    )


def empty_actions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticker": pd.Series([], dtype=object),
            "date": pd.Series([], dtype="datetime64[ns]"),
            "kind": pd.Series([], dtype=object),
            "value": pd.Series([], dtype="float64"),
        }
    )[list(ACTION_COLUMNS)]
