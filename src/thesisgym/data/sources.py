"""Every source family into one MarketStore, and the Magnificent-7 preset over ../shared/data.

`import_sources(ImportConfig(...))` reads prices plus any of: a split history, headline/event files, SEC companyfacts
(+ submissions), insider, earnings, analyst, macro and feed files, each through its family's reader,
then
- keeps only events of tickers that have bars (the others are dropped and counted per file),
- dates insider trades by their Form 4 (the issuers' submissions give the Form 4 index), else by
  the availability rule, whose miss share on the trades with both dates is measured and recorded,
- drops insider trades of a file without filing dates that a filing-dated file also has (counted),
- refuses rows published in the future (a 2030 row in a 2020 file) and counts rows after the last bar,
- merges near-duplicate items and runs the content-date check (thesisgym.data.quality.quality_pass),
and records all counts in `store.meta["imports"]`, `store.meta["insider"]` and `store.meta["quality"]`.

`import_shared(root)` (the import `shared_config(root)` describes) is the one-command real-data example: the 7 price files of
../shared/data/prices (2013-2023, split-adjusted as of their 2024-04 download; the split history is
`thesisgym.data.actions.MAG7_SPLITS`) with every family that covers them (see that folder's README):
ticker and market headlines, the BBC RSS dump, SEC companyfacts + submissions (AAPL, NVDA, GOOGL,
TSLA; MSFT submissions too), Alpha Vantage insider (no filing dates: Form 4 index or availability
rule) and Finnhub insider (filing dates), Alpha Vantage earnings, Benzinga rating headlines, Finnhub
recommendation trends and Estimize estimates (analyst; earnings timed by 8-K item 2.02 where
submissions exist, unconfirmed "pre-market" labels distrusted), Philadelphia Fed RTDSM CPI and
unemployment vintages, FRED-MD vintages, the Fed calendar, the primary credit rate and the
(latest-vintage, never revised) fed funds rate. GOOG files are mapped to GOOGL and FB to META.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from thesisgym.data.actions import MAG7_SPLITS, read_actions, split_actions
from thesisgym.data.asof import SplitHistory
from thesisgym.data.corporate import read_analyst, read_earnings, read_estimize_estimates
from thesisgym.data.feeds import read_feed
from thesisgym.data.importers import DEFAULT_TICKER_MAP, EventsImport, import_prices, read_events
from thesisgym.data.insider import (
    DEFAULT_AVAILABILITY_DAYS,
    availability_misses,
    drop_covered_insider,
    read_insider,
)
from thesisgym.data.macro import (
    read_alfred,
    read_fredmd_vintage,
    read_release_calendar,
    read_rtdsm,
    read_series_csv,
)
from thesisgym.data.quality import future_rows, quality_pass
from thesisgym.data.sec import (
    earnings_release_times,
    fiscal_year_end,
    form4_index,
    read_companyfacts,
    read_submissions,
)
from thesisgym.data.store import MarketStore, empty_actions, empty_events
from thesisgym.data.validate import validate_events
from thesisgym.schema import StrictModel

__all__ = ["MAG7", "ImportConfig", "import_shared", "import_sources", "read_macro", "shared_config"]

log = logging.getLogger(__name__)
MAG7: tuple[str, ...] = ("AAPL", "AMZN", "GOOGL", "META", "MSFT", "NVDA", "TSLA")
SHARED_TICKER_MAP: dict[str, str] = {**DEFAULT_TICKER_MAP, "GOOG": "GOOGL"}


def read_macro(path: str | Path) -> EventsImport:
    """Any supported macro file, by layout: calendar zip/JSON, RTDSM, FRED-MD, ALFRED, date,value series."""
    path = Path(path)
    if path.suffix.lower() in (".zip", ".json"):
        return read_release_calendar(path)
    from thesisgym.data.files import peek_columns

    cols = [c.strip() for c in peek_columns(path)]
    low = {c.lower() for c in cols}
    if cols and cols[0].upper() == "DATE" and len(cols) > 2 and re.match(r"^[A-Z]+\d{2}[MQ]\d", cols[1]):
        return read_rtdsm(path)
    if "sasdate" in low:
        return read_fredmd_vintage(path)
    if "realtime_start" in low:
        return read_alfred(path)
    if len(cols) == 2 and cols[0].lower() == "date":
        # FRED downloads are latest-vintage; a Lean/Fed change-date file (DATE,SERIES) is not revised
        return read_series_csv(path, latest_vintage=cols[1].lower() == "value")
    raise ValueError(
        f"{path.name}: unknown macro layout (columns: {', '.join(cols[:8])}); expected RTDSM (DATE,PCPI98M11,...), "
        "FRED-MD (sasdate,...), ALFRED (date,value,realtime_start,realtime_end), date,value, or a calendar .zip/.json"
    )


def _cik(path: Path) -> str | None:
    m = re.search(r"CIK(\d{10})", path.name)
    return m.group(1) if m else None


def _submissions_ticker(path: Path, tmap: Mapping[str, str]) -> str | None:
    m = re.search(r"_([A-Z]{1,6})\.json$", path.name)
    return tmap.get(m.group(1), m.group(1)) if m else None


class ImportConfig(StrictModel, frozen=True):
    """What `import_sources` reads and how: one field per source family and per import rule.

    Why a config (extra="forbid") and not keyword arguments: the CLI builds it from its options and
    a typo in a caller's dict fails naming the field instead of being taken as a default.
    """

    prices: list[Path] = Field(min_length=1, description="price files (CSV or Parquet), one or more tickers each")
    events: list[Path] = Field(default_factory=list, description="event or headline files")
    fundamentals: list[Path] = Field(default_factory=list, description="SEC companyfacts JSON files")
    submissions: list[Path] = Field(
        default_factory=list, description="SEC submissions JSON (acceptance times, Form 4 index), matched to "
        "companyfacts by the CIK in their names; `..._<TICKER>.json` also times that ticker's insider and earnings")
    insider: list[Path] = Field(default_factory=list, description="insider transaction CSVs")
    earnings: list[Path] = Field(default_factory=list, description="earnings CSVs (reported vs estimated EPS)")
    analyst: list[Path] = Field(
        default_factory=list, description="analyst CSVs (generic, rating headlines, trends) or Estimize zip/JSON")
    macro: list[Path] = Field(
        default_factory=list, description="macro files: RTDSM, FRED-MD vintage, ALFRED CSV, date,value, calendar zip")
    feeds: list[Path] = Field(default_factory=list, description="RSS/Atom XML files")
    actions: list[Path] = Field(
        default_factory=list, description="split/dividend history files (ticker,date,kind,value or a Yahoo "
        "Date,Stock Splits export; thesisgym.data.actions.read_actions)")
    bars_adjusted_as_of: str | None = Field(
        None, description="the day the price files are split-adjusted to (default: each ticker's last bar)")
    bars_adjusted_for: Literal["splits", "splits+dividends"] = Field(
        "splits", description="splits (Yahoo's default) | splits+dividends (auto-adjusted downloads: the "
        "dividends of the split history are then undone per as-of day too)")
    name: str = Field("real", description="store name")
    ticker_map: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_TICKER_MAP), description="old ticker -> new ticker (FB -> META)")
    insider_availability_days: int = Field(
        DEFAULT_AVAILABILITY_DAYS, ge=0, description="the measured availability rule: business days after a "
        "trade; a floor under the Form 5 deadline for trades no Form 4 dates (its miss share is shown in the summary)")
    insider_undated: Literal["form5_deadline", "drop"] = Field(
        "form5_deadline", description="trades neither a filing date nor the availability rule can date safely: "
        "form5_deadline (public at the Form 5 deadline of the issuer's fiscal year) or drop (left out, counted)")
    merge_window_days: float | None = Field(
        3.0, ge=0, description="merge near-duplicate items within this many days (0 or None: off)")
    assume_timezone: str | None = Field(
        None, description="zone of naive or date-only event times, e.g. America/New_York (date-only: 23:59); "
        "read by the event, analyst and feed files")
    earnings_pre_market: Literal["next_day", "trust"] = Field(
        "next_day", description="a vendor's unconfirmed 'pre-market' label: next_day (16:05) or trust (08:00)")
    content_dates: Literal["quarantine", "keep"] = Field(
        "quarantine", description="items whose text names a later period: quarantine, or keep (flagged)")

    @field_validator("assume_timezone")
    @classmethod
    def _zone(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}; expected an IANA name such as America/New_York") from None
        return v

    @field_validator("merge_window_days")
    @classmethod
    def _off(cls, v: float | None) -> float | None:
        return v or None

    @field_validator("bars_adjusted_as_of")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            return str(pd.Timestamp(v).date())
        except ValueError:
            raise ValueError(f"expected a date like 2024-04-02, got {v!r}") from None


def import_sources(config: ImportConfig, *, splits: pd.DataFrame | None = None) -> MarketStore:
    """A validated MarketStore from prices and any source families (module docstring).

    `splits`: a split-history frame (thesisgym.data.actions.split_actions) used with the files of
    `config.actions`. Events of tickers without bars are dropped and counted per file.
    """
    if not isinstance(config, ImportConfig):
        raise TypeError(f"import_sources: expected an ImportConfig, got {type(config).__name__}")
    c = config
    prices, name, assume_timezone = c.prices, c.name, c.assume_timezone
    insider_availability_days = c.insider_availability_days
    bars = import_prices(prices)
    tickers = set(bars["ticker"])
    tmap = dict(c.ticker_map)
    acts = _read_actions(c.actions)
    if splits is not None:
        acts = pd.concat([acts, splits], ignore_index=True) if len(acts) else splits
    history = SplitHistory(acts)
    subs = {p: read_submissions(p) for p in c.submissions}
    reports: list[EventsImport] = []
    for p in c.events:
        reports.append(
            read_events(p, keep_tickers=tickers, duplicates="keep", assume_timezone=assume_timezone, ticker_map=tmap)
        )
    reports += _fundamentals(c.fundamentals, subs, history)
    filings = _form4_filings(subs, tmap)
    insider_reps = _insider(c.insider, filings, subs, tmap, insider_availability_days, c.insider_undated)
    reports += insider_reps
    reports += _earnings(c.earnings, subs, tmap, c.earnings_pre_market)
    reports += _analyst(c.analyst, tmap, assume_timezone)
    reports += _macro_and_feeds(c.macro, c.feeds, assume_timezone)
    measured = _availability_measured(insider_reps, filings, insider_availability_days)
    ev = _merge_reports(reports, tickers, name)
    ev, quarantine, quality = quality_pass(
        ev, merge_window_days=c.merge_window_days, content_dates=c.content_dates, last_bar=bars["date"].max()
    )
    meta = {
        "market": "real",
        "sources": {"prices": [str(Path(p)) for p in prices]},
        "imports": [r.meta() for r in reports],
        "insider": _insider_meta(ev, measured, insider_reps, c.insider_undated) if insider_reps else {},
        "quality": quality,
    }
    meta["bars_adjusted_for"] = c.bars_adjusted_for
    if c.bars_adjusted_as_of is not None:
        meta["bars_adjusted_as_of"] = c.bars_adjusted_as_of
    acts = acts[acts["ticker"].isin(tickers)].reset_index(drop=True)
    return MarketStore(bars=bars, events=ev, name=name, meta=meta, actions=acts, quarantine=quarantine,
                       filings=None if filings is None else filings[filings["ticker"].isin(tickers)].reset_index(drop=True))


def _read_actions(paths: Sequence[str | Path]) -> pd.DataFrame:
    frames = [read_actions(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else empty_actions()


def _fundamentals(paths, subs: dict[Path, pd.DataFrame], splits: SplitHistory) -> list[EventsImport]:
    by_cik: dict[str, list[pd.DataFrame]] = {}
    for p, frame in subs.items():
        cik = _cik(p)
        if cik is None:
            raise ValueError(f"{p.name}: submissions file name must contain CIK##########")
        by_cik.setdefault(cik, []).append(frame)
    out = []
    for p in map(Path, paths):
        mine = by_cik.get(_cik(p) or "")
        out.append(read_companyfacts(p, submissions=pd.concat(mine, ignore_index=True) if mine else None, splits=splits))
    return out


def _form4_filings(subs: dict[Path, pd.DataFrame], tmap: Mapping[str, str]) -> pd.DataFrame | None:
    frames = [form4_index(f, t) for p, f in subs.items() if (t := _submissions_ticker(p, tmap))]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).drop_duplicates("accn").reset_index(drop=True)


def _insider(paths, filings, subs: dict[Path, pd.DataFrame], tmap: Mapping[str, str], days: int,
             undated: str) -> list[EventsImport]:
    """The insider files, dated (thesisgym.data.insider) with the issuers' Form 4 index and fiscal year
    ends from their submissions; an undated file's trades a filing-dated file also has left out."""
    fiscal_years = {t: fiscal_year_end(p) for p in subs if (t := _submissions_ticker(p, tmap))}
    reps = [read_insider(p, filings=filings, availability_days=days, ticker_map=tmap, missing_dates="skip",
                         undated=undated, fiscal_year_ends=fiscal_years) for p in paths]
    dated = [r for r in reps if "dated_by_filing_date" in r.counts]
    for rep in reps:
        if "dated_by_filing_date" not in rep.counts:
            drop_covered_insider(rep, dated)
    return reps


def _earnings(paths, subs: dict[Path, pd.DataFrame], tmap: Mapping[str, str], pre_market: str) -> list[EventsImport]:
    releases: dict[str, list[pd.DataFrame]] = {}
    for p, frame in subs.items():
        t = _submissions_ticker(p, tmap)
        if t:
            releases.setdefault(t, []).append(frame)
    out = []
    for p in map(Path, paths):
        m = re.search(r"_([A-Z]{1,6})(?:_[^/]*)?\.csv$", p.name)
        t = tmap.get(m.group(1), m.group(1)) if m else None
        rel = earnings_release_times(pd.concat(releases[t], ignore_index=True)) if t in releases else None
        rep = read_earnings(p, pre_market=pre_market, release_times=rel)
        rep.events["ticker"] = rep.events["ticker"].replace(tmap)
        out.append(rep)
    return out


def _analyst(paths, tmap: Mapping[str, str], assume_timezone: str | None) -> list[EventsImport]:
    out = []
    for p in map(Path, paths):
        if p.suffix.lower() in (".zip", ".json"):
            out.append(read_estimize_estimates(p))
        else:
            out.append(read_analyst(p, ticker_map=tmap, malformed="skip", assume_timezone=assume_timezone))
    return out


def _macro_and_feeds(macro, feeds, assume_timezone: str | None) -> list[EventsImport]:
    out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for p in macro:
            out.append(read_macro(p))
    for w in caught:
        log.warning(str(w.message))
    for p in feeds:
        out.append(read_feed(p, assume_timezone=assume_timezone))
    return out


def _merge_reports(reports: list[EventsImport], tickers: set[str], name: str) -> pd.DataFrame:
    """Every report's events for known tickers (others dropped and counted) in one validated frame."""
    frames = []
    for rep in reports:
        future_rows(rep.events, rep.source)
        ev = rep.events
        other = (ev["ticker"] != "") & ~ev["ticker"].isin(tickers)
        rep.dropped_other_tickers += int(other.sum())
        rep.events = ev[~other].reset_index(drop=True)
        frames.append(rep.events)
        log.info(rep.summary())
    ev = pd.concat(frames, ignore_index=True) if frames else empty_events()
    return validate_events(ev, source=f"{name}/events", tickers=sorted(tickers)) if len(ev) else ev


def _availability_measured(reps: list[EventsImport], filings: pd.DataFrame | None, days: int) -> dict | None:
    """The availability rule's miss share on every trade with both a trade (or report) date and a
    filing date: the filing-dated files (all their tickers) and the Form 4 index."""
    if not reps:
        return None
    trade, filed = [], []
    for rep in reps:
        both = rep.events[rep.events["timing"] == "filed"]
        trade += list(both["basis_date"])
        filed += list(pd.DatetimeIndex(both["published_at"]).tz_convert("America/New_York").tz_localize(None).normalize())
    if filings is not None:
        trade += list(filings["report_date"])
        filed += list(filings["filing_date"])
    return availability_misses(trade, filed, days)


def _insider_meta(events: pd.DataFrame, measured: dict | None, reps: list[EventsImport], undated: str) -> dict:
    """How the store's insider events were dated, the old availability rule's measured miss share, and
    what each choice for the trades no filing record dates does with them (`thesisgym data audit`
    reports it): "form5_deadline" moves them (median days later than the old rule), "drop" drops them."""
    timing = events.loc[events["kind"] == "insider", "timing"].value_counts().to_dict()
    n = sum(r.counts.get("undated", 0) for r in reps)
    later = [r.counts["undated_form5_median_days_after_old_rule"] for r in reps if r.counts.get("undated")]
    choices = {"choice": undated, "trades": int(n), "form5_deadline_moves": int(n), "drop_drops": int(n),
               "form5_median_days_after_old_rule": int(np.median(later)) if later else 0}  # median of the files' medians
    return {"events_by_timing": {k: int(v) for k, v in timing.items()}, "availability_rule": measured,
            "undated": choices}


def shared_config(
    root: str | Path, *, tickers: Sequence[str] = MAG7, name: str = "mag7", content_dates: str = "quarantine"
) -> ImportConfig:
    """The import of the Magnificent-7 store from ../shared/data with every family (module docstring);
    `import_shared` runs it (with `MAG7_SPLITS` as the split history)."""
    root = Path(root)
    if not (root / "prices").is_dir():
        raise ValueError(f"{root}: not the shared data folder (no prices/ inside)")

    def have(*parts: str) -> list[Path]:
        return sorted(p for pat in parts for p in root.glob(pat))

    return ImportConfig(
        prices=[root / "prices" / f"{t}.csv" for t in tickers],
        events=have(
            "news/ticker_news_headlines_*.csv",
            "news/market_news_headlines_*.csv",
            "news/bbc_business_rss_*.csv",
        ),
        fundamentals=have("fundamentals/companyfacts_*.json"),
        submissions=have("fundamentals/submissions_*.json"),
        insider=have("insider/*.csv"),
        earnings=have("earnings/alphavantage_earnings_*.csv"),
        analyst=have(
            "analyst/benzinga_*.csv",
            "analyst/finnhub_recommendation_trends_*.csv",
            "earnings/lean_estimize_estimate_*.zip",
        ),
        macro=have(
            "macro/phillyfed_rtdsm_*.csv",
            "macro/fredmd_vintage_*.csv",
            "macro/lean_tradingeconomics_*.zip",
            "macro/lean_usa_interest-rate_*.csv",
            "macro/fred_latest_FEDFUNDS.csv",
        ),
        bars_adjusted_as_of="2024-04-02",  # the price files' download (README): NVDA's 2024 split is not in them
        name=name,
        ticker_map=SHARED_TICKER_MAP,
        content_dates=content_dates,
    )


def import_shared(
    root: str | Path, *, tickers: Sequence[str] = MAG7, name: str = "mag7", content_dates: str = "quarantine"
) -> MarketStore:
    """The Magnificent-7 store from ../shared/data with every family (module docstring)."""
    config = shared_config(root, tickers=tickers, name=name, content_dates=content_dates)
    return import_sources(config, splits=split_actions(MAG7_SPLITS))
