"""Importers: price and event files (CSV, Parquet), the real headline files, yfinance -> MarketStore.

Every reader validates what it read (thesisgym.data.validate) with the physical line of each CSV row,
so a bad cell is reported as "AAPL.csv, line 17 (header = line 1), field 'Close': ...". Layouts:

Prices
- per-ticker file (the layout of ../shared/data/prices and of Yahoo exports): `Date,Open,High,Low,
  Close,Volume` (other columns such as `Adj Close` are ignored); the ticker is the file stem, upper
  case, unless `ticker=` is given.
- generic long file: `ticker,date,open,high,low,close,volume`, one row per ticker-day, any order of
  tickers but increasing dates within each ticker.
Headers are matched case-insensitively. `.parquet` files use the same column names.

Events (generic layout): `ticker,published_at,kind,source,title[,text,value,sentiment]`;
`ticker` empty for market-wide events, `published_at` ISO-8601 WITH an offset ("2020-04-06T16:45:00
-04:00" or "...Z"), `kind` one of schema.EVENT_KINDS. Date-only or naive sources need an explicit
`assume_timezone=`: a date-only publication is then placed at 23:59 local time of that day, i.e. after
that day's 16:00 close, so it is first visible to the NEXT trading day's context. That can delay an
item that really came out in the morning by a day, but never shows a prompt something the market
may only have learned after the close it trades at.

Real headline files (../shared/data/news, date-only, sentiment `score`): `read_ticker_headlines`
and `read_market_headlines` adapt them to the events frame (kind "news", title = headline, FB
renamed META by default). Duplicate rows are counted and either kept or dropped on request; the
count is returned in an `EventsImport` and logged, never dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from thesisgym.data.feeds import read_rss_csv
from thesisgym.data.files import EventsImport, peek_columns, read_table
from thesisgym.data.store import MarketStore, empty_events
from thesisgym.data.validate import DataValidationError, Problem, validate_bars, validate_events
from thesisgym.schema import DEFAULT_TIMEZONE

__all__ = [
    "DEFAULT_TICKER_MAP",
    "EventsImport",
    "fetch_yfinance",
    "import_prices",
    "import_store",
    "read_events",
    "read_events_csv",
    "read_market_headlines",
    "read_price_csv",
    "read_price_file",
    "read_ticker_headlines",
]

log = logging.getLogger(__name__)

# Facebook renamed itself Meta Platforms in 2022; the price files use META throughout.
DEFAULT_TICKER_MAP: dict[str, str] = {"FB": "META"}


def _lower_columns(df: pd.DataFrame) -> set[str]:
    return {str(c).strip().lower() for c in df.columns}


# --- prices ---------------------------------------------------------------------------------------
def read_price_file(path: str | Path, *, ticker: str | None = None) -> pd.DataFrame:
    """Read one price file (per-ticker or long layout, CSV or Parquet) into a validated bars frame.

    For a per-ticker file `ticker` overrides the name taken from the file stem; for a long file it
    selects that ticker's rows (an explicit filter, so nothing is dropped behind the caller's back).
    """
    path = Path(path)
    raw, lines = read_table(path)
    cols = _lower_columns(raw)
    fields = {str(c).strip().lower(): str(c) for c in raw.columns}
    if "ticker" in cols:
        if ticker is not None:
            tcol = fields["ticker"]
            keep = (raw[tcol].astype(str).str.strip() == ticker).to_numpy()
            if not keep.any():
                raise ValueError(f"{path.name}: no rows for ticker {ticker!r}")
            raw = raw[keep].reset_index(drop=True)
            lines = None if lines is None else lines[keep]
    else:
        raw = raw.copy()
        raw.insert(0, "ticker", (ticker or path.stem).upper())
        fields["ticker"] = "ticker (from file name)"
    return validate_bars(raw, source=path.name, lines=lines, fields=fields)


def read_price_csv(path: str | Path, *, ticker: str | None = None) -> pd.DataFrame:
    """Read one price CSV (see the module docstring for the two layouts) into a validated bars frame."""
    return read_price_file(path, ticker=ticker)


def import_prices(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Read several price files into one bars frame; a ticker found in two files is an error."""
    frames: list[pd.DataFrame] = []
    owner: dict[str, str] = {}
    for p in paths:
        p = Path(p)
        bars = read_price_file(p)
        for t in bars["ticker"].unique():
            if t in owner:
                raise ValueError(f"{p.name}, field 'ticker': ticker {t} already imported from {owner[t]}")
            owner[t] = p.name
        frames.append(bars)
    if not frames:
        raise ValueError("import_prices: no price files given")
    return pd.concat(frames, ignore_index=True)


# --- events ---------------------------------------------------------------------------------------
def read_events_csv(
    path: str | Path,
    *,
    assume_timezone: str | None = None,
    tickers: Iterable[str] | None = None,
    date_only: bool | None = None,
) -> pd.DataFrame:
    """Read an events file in the generic layout (module docstring) into a validated events frame.

    `assume_timezone` (e.g. "America/New_York") is required for naive or date-only timestamps; a
    date-only value is placed at 23:59 local time (visible from the next trading day), and so is a
    naive midnight from a datetime column (Parquet) unless `date_only=False` (see
    `thesisgym.data.validate.parse_timestamps`). With `tickers`, an event for a ticker outside it raises.
    """
    path = Path(path)
    raw, lines = read_table(path)
    return validate_events(
        raw,
        source=path.name,
        tickers=tickers,
        assume_timezone=assume_timezone,
        lines=lines,
        date_only=date_only,
    )


def _headlines(
    path: Path,
    raw: pd.DataFrame,
    lines: np.ndarray | None,
    tickers: pd.Series,
    *,
    kind: str,
    duplicates: Literal["keep", "drop"],
    keep_tickers: Iterable[str] | None,
    assume_timezone: str,
    tickers_known: Iterable[str] | None = None,
) -> EventsImport:
    if duplicates not in ("keep", "drop"):
        raise ValueError(f"duplicates must be 'keep' or 'drop', got {duplicates!r}")
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    for need in ("headline", "date"):
        if need not in cols:
            raise DataValidationError([Problem(path.name, None, need, "missing column")])
    frame = pd.DataFrame(
        {
            "ticker": tickers.to_numpy(dtype=object),
            "published_at": raw[cols["date"]].to_numpy(dtype=object),
            "kind": kind,
            "source": raw[cols["source"]].to_numpy(dtype=object) if "source" in cols else "",
            "title": raw[cols["headline"]].to_numpy(dtype=object),
            "text": "",
            "value": np.nan,
            "sentiment": raw[cols["score"]].to_numpy(dtype=object) if "score" in cols else np.nan,
        }
    )
    fields = {
        "ticker": cols.get("ticker", "ticker"),
        "published_at": cols["date"],
        "title": cols["headline"],
        "sentiment": cols.get("score", "score"),
        "source": cols.get("source", "source"),
    }
    n = len(frame)
    report = EventsImport(events=empty_events(), source=path.name, rows_read=n)
    keep = np.ones(n, dtype=bool)
    if keep_tickers is not None:
        wanted = set(keep_tickers)
        other = ((frame["ticker"] != "") & ~frame["ticker"].isin(wanted)).to_numpy()
        report.dropped_other_tickers = int(other.sum())
        keep &= ~other
    events = validate_events(
        frame[keep].reset_index(drop=True),
        source=path.name,
        assume_timezone=assume_timezone,
        tickers=tickers_known,
        lines=None if lines is None else lines[keep],
        fields=fields,
    )
    day = events["published_at"].dt.tz_convert(assume_timezone).dt.normalize()
    dup = pd.DataFrame({"t": events["ticker"], "h": events["title"], "d": day}).duplicated().to_numpy()
    report.duplicates = int(dup.sum())
    if duplicates == "drop" and dup.any():
        events = events[~dup].reset_index(drop=True)
        report.dropped_duplicates = report.duplicates
    report.events = events
    log.info(report.summary())
    return report


def read_ticker_headlines(
    path: str | Path,
    *,
    ticker_map: Mapping[str, str] | None = DEFAULT_TICKER_MAP,
    duplicates: Literal["keep", "drop"] = "keep",
    keep_tickers: Iterable[str] | None = None,
    tickers: Iterable[str] | None = None,
    assume_timezone: str = DEFAULT_TIMEZONE,
    kind: str = "news",
) -> EventsImport:
    """Adapt `ticker,headline,source,url,date,score` (ticker_news_headlines_2019_2021.csv) to events.

    Dates are date-only, so each headline is placed at 23:59 `assume_timezone` of its day (visible
    from the next trading day). `ticker_map` renames tickers (FB -> META by default; None = keep).
    `keep_tickers` keeps only those tickers and counts the rest in `dropped_other_tickers`; with
    `tickers`, a row for any other ticker raises (naming its line). Duplicate (ticker, headline, day) rows are counted; `duplicates="drop"` removes them.
    """
    path = Path(path)
    raw, lines = read_table(path)
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    if "ticker" not in cols:
        raise DataValidationError([Problem(path.name, None, "ticker", "missing column")])
    names = raw[cols["ticker"]].astype(str).str.strip().str.upper()
    if ticker_map:
        names = names.replace(dict(ticker_map))
    return _headlines(
        path,
        raw,
        lines,
        names,
        kind=kind,
        duplicates=duplicates,
        keep_tickers=keep_tickers,
        assume_timezone=assume_timezone,
        tickers_known=tickers,
    )


def read_market_headlines(
    path: str | Path,
    *,
    duplicates: Literal["keep", "drop"] = "keep",
    assume_timezone: str = DEFAULT_TIMEZONE,
    kind: str = "news",
) -> EventsImport:
    """Adapt `headline,source,url,date,score` (market_news_headlines_2019_2021.csv) to market-wide events."""
    path = Path(path)
    raw, lines = read_table(path)
    tickers = pd.Series([""] * len(raw), dtype=object)
    return _headlines(
        path,
        raw,
        lines,
        tickers,
        kind=kind,
        duplicates=duplicates,
        keep_tickers=None,
        assume_timezone=assume_timezone,
    )


def read_events(
    path: str | Path,
    *,
    tickers: Iterable[str] | None = None,
    keep_tickers: Iterable[str] | None = None,
    duplicates: Literal["keep", "drop"] = "keep",
    assume_timezone: str | None = None,
    ticker_map: Mapping[str, str] | None = DEFAULT_TICKER_MAP,
) -> EventsImport:
    """Read any supported events file, choosing the adapter from its header.

    `published_at` + `kind` -> generic layout; `ticker` + `headline` -> ticker headlines;
    `headline` alone -> market headlines (both headline layouts default to New York dates).
    `tickers`: events for other tickers raise; `keep_tickers`: they are dropped and counted.
    """
    path = Path(path)
    columns = peek_columns(path)
    cols = {c.strip().lower() for c in columns}
    if {"published_at", "kind"} <= cols:
        # with keep_tickers the others are dropped and counted below, so they must not raise here
        events = read_events_csv(
            path, assume_timezone=assume_timezone, tickers=None if keep_tickers is not None else tickers
        )
        n = len(events)
        report = EventsImport(events=events, source=path.name, rows_read=n)
        if keep_tickers is not None:
            other = ((events["ticker"] != "") & ~events["ticker"].isin(set(keep_tickers))).to_numpy()
            report.dropped_other_tickers = int(other.sum())
            report.events = events[~other].reset_index(drop=True)
        return report
    tz = assume_timezone or DEFAULT_TIMEZONE
    if {"ticker", "headline"} <= cols:
        return read_ticker_headlines(
            path,
            ticker_map=ticker_map,
            duplicates=duplicates,
            keep_tickers=keep_tickers,
            tickers=tickers,
            assume_timezone=tz,
        )
    if "headline" in cols:
        return read_market_headlines(path, duplicates=duplicates, assume_timezone=tz)
    if {"title", "pubdate"} <= cols:
        return read_rss_csv(path)
    raise ValueError(
        f"{path.name}: unknown events layout (columns: {', '.join(columns)}); expected "
        "ticker,published_at,kind,source,title[,text,value,sentiment], a headline file or an RSS CSV "
        "(title,pubDate,...)"
    )


# --- stores ---------------------------------------------------------------------------------------
def import_store(
    *,
    prices: Sequence[str | Path],
    events: Sequence[str | Path] = (),
    name: str = "real",
    unknown_tickers: Literal["error", "drop"] = "error",
    duplicates: Literal["keep", "drop"] = "keep",
    assume_timezone: str | None = None,
    ticker_map: Mapping[str, str] | None = DEFAULT_TICKER_MAP,
    merge_window_days: float | None = 3.0,
    content_dates: str = "quarantine",
) -> MarketStore:
    """Build a validated MarketStore from price files and optional event files.

    Events for tickers that have no bars raise (`unknown_tickers="error"`) or are dropped and counted
    (`"drop"`); counts of everything dropped or duplicated are kept in `store.meta["imports"]`; a row
    published in the future raises. Then near-duplicate items within `merge_window_days` are merged
    (None: kept) and the content-date check quarantines (or, `content_dates="keep"`, flags) rows whose
    text names a later period, all counted in `store.meta["quality"]` (thesisgym.data.quality.quality_pass).
    """
    from thesisgym.data.quality import future_rows, quality_pass

    if unknown_tickers not in ("error", "drop"):
        raise ValueError(f"unknown_tickers must be 'error' or 'drop', got {unknown_tickers!r}")
    bars = import_prices(prices)
    tickers = sorted(bars["ticker"].unique().tolist())
    frames, reports = [], []
    for p in events:
        rep = read_events(
            p,
            tickers=tickers,
            keep_tickers=tickers if unknown_tickers == "drop" else None,
            duplicates=duplicates,
            assume_timezone=assume_timezone,
            ticker_map=ticker_map,
        )
        future_rows(rep.events, rep.source)
        frames.append(rep.events)
        reports.append(rep)
        if rep.dropped_other_tickers or rep.duplicates:
            log.warning(rep.summary())
    ev = pd.concat(frames, ignore_index=True) if frames else empty_events()
    ev, quarantine, quality = quality_pass(
        ev, merge_window_days=merge_window_days, content_dates=content_dates, last_bar=bars["date"].max()
    )
    meta = {
        "market": "real",
        "sources": {"prices": [str(Path(p)) for p in prices], "events": [str(Path(p)) for p in events]},
        "imports": [r.meta() for r in reports],
        "quality": quality,
    }
    return MarketStore(bars=bars, events=ev, name=name, meta=meta, quarantine=quarantine)


# --- yfinance -------------------------------------------------------------------------------------
def fetch_yfinance(tickers: Sequence[str], start: str, end: str, *, name: str = "yfinance") -> MarketStore:
    """Download daily bars from Yahoo Finance (needs the `yfinance` extra and internet access).

    Prices are split-adjusted but not dividend-adjusted (`auto_adjust=False`), the convention of
    ../shared/data/prices. Yahoo provides no point-in-time news here, so the store has no events.
    """
    try:
        import yfinance as yf
    except ImportError as exc:
        raise ImportError(
            "fetch_yfinance needs the optional dependency yfinance: pip install 'thesisgym[yfinance]'"
        ) from exc
    if isinstance(tickers, str) or not tickers:
        raise TypeError("tickers must be a non-empty list of symbols, e.g. ['AAPL', 'MSFT']")
    frames = []
    for t in tickers:
        df = yf.download(
            t, start=start, end=end, auto_adjust=False, actions=False, progress=False, multi_level_index=False
        )
        if df is None or df.empty:
            raise ValueError(f"yfinance: no data for {t} between {start} and {end}")
        if isinstance(df.columns, pd.MultiIndex):
            df.columns = df.columns.get_level_values(0)
        idx = pd.DatetimeIndex(df.index)
        if idx.tz is not None:
            idx = idx.tz_localize(None)
        frames.append(
            pd.DataFrame(
                {
                    "ticker": t,
                    "date": idx.normalize(),
                    "open": df["Open"].to_numpy(),
                    "high": df["High"].to_numpy(),
                    "low": df["Low"].to_numpy(),
                    "close": df["Close"].to_numpy(),
                    "volume": df["Volume"].to_numpy(),
                }
            )
        )
    bars = validate_bars(pd.concat(frames, ignore_index=True), source=f"yfinance({','.join(tickers)})")
    return MarketStore(bars=bars, name=name, meta={"market": "real", "sources": {"yfinance": list(tickers)}})
