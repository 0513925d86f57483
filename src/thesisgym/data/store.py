"""MarketStore: the point-in-time container of bars, events and (synthetic only) ground truth.

Everything downstream reads market data through a MarketStore, so this is where the point-in-time
rule (docs/spec.md, section 2) is made cheap to respect: bars are sorted by (ticker, date), events carry a
timezone-aware `published_at` and are sorted by it, and `visible_events(...)` / `bars_until(...)`
are the only doors through which later stages see data.

Frames (pandas, one row per observation):
- bars:   ticker (str), date (datetime64[ns], midnight, the trading day), open, high, low, close,
          volume (float64). Split-adjusted. Sorted by ticker then date, unique per (ticker, date).
- events: ticker (str, "" for market-wide), published_at (datetime64[ns, UTC]), kind (one of
          schema.EVENT_KINDS), source (str), title (str), text (str), value (float64, nan when the
          event has no headline number), sentiment (float64 in [-1, 1] when known, nan otherwise).
          Sorted by published_at.
- truth:  synthetic markets only: ticker, date, expected_return (true E[fwd_return] over
          schema.REWARD_HORIZON days at the close of date), quality (latent factor), regime.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.schema import DEFAULT_CUTOFF, DEFAULT_TIMEZONE

BAR_COLUMNS: tuple[str, ...] = ("ticker", "date", "open", "high", "low", "close", "volume")
EVENT_COLUMNS: tuple[str, ...] = ("ticker", "published_at", "kind", "source", "title", "text", "value", "sentiment")
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

    def __post_init__(self) -> None:
        self.bars = self.bars.sort_values(["ticker", "date"], kind="stable").reset_index(drop=True)
        if len(self.events):
            self.events = self.events.sort_values("published_at", kind="stable").reset_index(drop=True)

    # --- shape -------------------------------------------------------------------------------
    @property
    def tickers(self) -> list[str]:
        return sorted(self.bars["ticker"].unique().tolist())

    @property
    def dates(self) -> pd.DatetimeIndex:
        """Union of trading days across tickers, sorted."""
        return pd.DatetimeIndex(np.sort(self.bars["date"].unique()))

    def cutoff_of(self, day: pd.Timestamp | str) -> pd.Timestamp:
        """The UTC instant after which nothing is visible to a context for trading day `day`."""
        d = pd.Timestamp(day).normalize()
        hh, mm = (int(x) for x in self.cutoff.split(":"))
        local = d.tz_localize(self.timezone) + pd.Timedelta(hours=hh, minutes=mm)
        return local.tz_convert("UTC")

    # --- point-in-time doors -------------------------------------------------------------------
    def bars_until(self, ticker: str, day: pd.Timestamp | str) -> pd.DataFrame:
        """Bars of `ticker` dated <= day."""
        b = self.bars[self.bars["ticker"] == ticker]
        return b[b["date"] <= pd.Timestamp(day)]

    def visible_events(self, day: pd.Timestamp | str, ticker: str | None = None) -> pd.DataFrame:
        """Events published at or before the cutoff of `day` (for `ticker` plus market-wide ones)."""
        ev = self.events[self.events["published_at"] <= self.cutoff_of(day)]
        if ticker is not None:
            ev = ev[(ev["ticker"] == ticker) | (ev["ticker"] == "")]
        return ev

    # --- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the store as a directory of Parquet files plus meta.json."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.bars.to_parquet(path / "bars.parquet", index=False)
        self.events.to_parquet(path / "events.parquet", index=False)
        if self.truth is not None:
            self.truth.to_parquet(path / "truth.parquet", index=False)
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
        name = meta.pop("name", path.name)
        cutoff = meta.pop("cutoff", DEFAULT_CUTOFF)
        tz = meta.pop("timezone", DEFAULT_TIMEZONE)
        return cls(bars=bars, events=events, truth=truth, name=name, cutoff=cutoff, timezone=tz, meta=meta)


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
        }
    )
