"""Every source family into one MarketStore, and the Magnificent-7 preset over ../shared/data.

`import_sources` reads prices plus any of: headline/event files, SEC companyfacts (+ submissions),
insider, earnings, analyst, macro and feed files, each through its family's reader, then
- keeps only events of tickers that have bars (the others are dropped and counted per file),
- drops insider trades of a file without filing dates that a filing-dated file also has (counted),
- merges near-duplicate items (thesisgym.data.quality.merge_near_duplicates, counted),
- flags suspicious timestamps (counted, examples kept),
and records all counts in `store.meta["imports"]` and `store.meta["quality"]`.

`import_shared(root)` is the one-command real-data example: the 7 price files of
../shared/data/prices (2013-2023) with every family that covers them (see that folder's README):
ticker and market headlines, the BBC RSS dump, SEC companyfacts + submissions (AAPL, NVDA, GOOGL,
TSLA), Alpha Vantage insider (dated trade date + 2 business days) and Finnhub insider (filing
dates), Alpha Vantage earnings, Benzinga rating headlines, Finnhub recommendation trends and
Estimize estimates (analyst; earnings timed by 8-K item 2.02 where submissions exist, unconfirmed
"pre-market" labels distrusted), Philadelphia Fed RTDSM CPI and unemployment vintages, FRED-MD
vintages, the Fed calendar, the primary credit rate and the (latest-vintage, unrevised) fed funds
rate. GOOG files are mapped to GOOGL and FB to META.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from thesisgym.data.corporate import (
    drop_covered_insider,
    read_analyst,
    read_earnings,
    read_estimize_estimates,
    read_insider,
)
from thesisgym.data.feeds import read_feed
from thesisgym.data.importers import DEFAULT_TICKER_MAP, EventsImport, import_prices, read_events
from thesisgym.data.macro import (
    read_alfred,
    read_fredmd_vintage,
    read_release_calendar,
    read_rtdsm,
    read_series_csv,
)
from thesisgym.data.quality import quality_pass
from thesisgym.data.sec import earnings_release_times, read_companyfacts, read_submissions
from thesisgym.data.store import MarketStore, empty_events
from thesisgym.data.validate import validate_events

__all__ = ["MAG7", "import_shared", "import_sources", "read_macro"]

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


def import_sources(
    *,
    prices: Sequence[str | Path],
    events: Sequence[str | Path] = (),
    fundamentals: Sequence[str | Path] = (),
    submissions: Sequence[str | Path] = (),
    insider: Sequence[str | Path] = (),
    earnings: Sequence[str | Path] = (),
    analyst: Sequence[str | Path] = (),
    macro: Sequence[str | Path] = (),
    feeds: Sequence[str | Path] = (),
    name: str = "real",
    ticker_map: Mapping[str, str] | None = DEFAULT_TICKER_MAP,
    insider_delay_days: int = 2,
    merge_window_days: float | None = 3.0,
    assume_timezone: str | None = None,
    earnings_pre_market: str = "trust",
    suspicious: str = "flag",
) -> MarketStore:
    """A validated MarketStore from prices and any source families (module docstring).

    `submissions` files are matched to companyfacts files by the CIK in their names
    (`..._CIK0000320193_...`); those named `..._<TICKER>.json` also time that ticker's earnings files
    by its 8-K item 2.02 releases. `earnings_pre_market`: see `read_earnings(pre_market=)`;
    `suspicious`: see `thesisgym.data.quality.quality_pass`. Events of
    tickers without bars are dropped and counted per file.
    """
    bars = import_prices(prices)
    tickers = set(bars["ticker"])
    tmap = dict(ticker_map or {})
    reports: list[EventsImport] = []
    for p in events:
        reports.append(
            read_events(
                p, keep_tickers=tickers, duplicates="keep", assume_timezone=assume_timezone, ticker_map=tmap
            )
        )
    subs_by_cik: dict[str, list[Path]] = {}
    for p in map(Path, submissions):
        cik = _cik(p)
        if cik is None:
            raise ValueError(f"{p.name}: submissions file name must contain CIK##########")
        subs_by_cik.setdefault(cik, []).append(p)
    for p in map(Path, fundamentals):
        rep = read_companyfacts(p, submissions=subs_by_cik.get(_cik(p) or "") or None)
        reports.append(rep)
    insider_reps = [
        read_insider(p, delay_business_days=insider_delay_days, ticker_map=tmap, missing_dates="skip")
        for p in insider
    ]
    dated = [r for r in insider_reps if "dated_by_filing_date" in r.counts]
    for rep in insider_reps:
        if "dated_by_filing_date" not in rep.counts:
            drop_covered_insider(rep, dated)
    reports += insider_reps
    releases: dict[str, list[pd.DataFrame]] = {}
    for p in map(Path, submissions):
        m = re.search(r"_([A-Z]{1,6})\.json$", p.name)
        if m:
            releases.setdefault(tmap.get(m.group(1), m.group(1)), []).append(read_submissions(p))
    for p in map(Path, earnings):
        m = re.search(r"_([A-Z]{1,6})(?:_[^/]*)?\.csv$", p.name)
        t = tmap.get(m.group(1), m.group(1)) if m else None
        rel = earnings_release_times(pd.concat(releases[t], ignore_index=True)) if t in releases else None
        rep = read_earnings(p, pre_market=earnings_pre_market, release_times=rel)
        rep.events["ticker"] = rep.events["ticker"].replace(tmap)
        reports.append(rep)
    for p in analyst:
        p = Path(p)
        if p.suffix.lower() in (".zip", ".json"):
            reports.append(read_estimize_estimates(p))
        else:
            reports.append(
                read_analyst(p, ticker_map=tmap, malformed="skip", assume_timezone=assume_timezone)
            )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for p in macro:
            reports.append(read_macro(p))
    for w in caught:
        log.warning(str(w.message))
    for p in feeds:
        reports.append(read_feed(p))
    frames = []
    for rep in reports:
        ev = rep.events
        other = (ev["ticker"] != "") & ~ev["ticker"].isin(tickers)
        rep.dropped_other_tickers += int(other.sum())
        rep.events = ev[~other].reset_index(drop=True)
        frames.append(rep.events)
        log.info(rep.summary())
    ev = pd.concat(frames, ignore_index=True) if frames else empty_events()
    ev = validate_events(ev, source=f"{name}/events", tickers=sorted(tickers)) if len(ev) else ev
    ev, quality = quality_pass(ev, merge_window_days=merge_window_days, suspicious=suspicious)
    meta = {
        "market": "real",
        "sources": {"prices": [str(Path(p)) for p in prices]},
        "imports": [r.meta() for r in reports],
        "quality": quality,
    }
    return MarketStore(bars=bars, events=ev, name=name, meta=meta)


def import_shared(root: str | Path, *, tickers: Sequence[str] = MAG7, name: str = "mag7") -> MarketStore:
    """The Magnificent-7 store from ../shared/data with every family (module docstring)."""
    root = Path(root)
    if not (root / "prices").is_dir():
        raise ValueError(f"{root}: not the shared data folder (no prices/ inside)")

    def have(*parts: str) -> list[Path]:
        return sorted(p for pat in parts for p in root.glob(pat))

    return import_sources(
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
        name=name,
        ticker_map=SHARED_TICKER_MAP,
        earnings_pre_market="next_day",  # the 2014 "pre-market" labels of AMZN, META, NVDA, TSLA are after-close
        suspicious="drop",  # market headlines dated months before the quarter they name
    )
