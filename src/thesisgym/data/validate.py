"""Validation of bars, events and truth frames (docs/spec.md, section 2): bad input fails loudly, by location.

Every frame that enters a MarketStore from the outside (CSV, Parquet, yfinance, a user's DataFrame)
goes through `validate_bars` / `validate_events` first. They check what would otherwise corrupt the
point-in-time rule or the labels silently (NaN or non-positive prices, high < low, duplicate or
unsorted dates, naive timestamps, unknown tickers or event kinds) and return the frame in the
canonical column names and dtypes of `thesisgym.data.store`. Nothing is dropped: a problem raises a
`DataValidationError` (a ValueError) whose message names the file, the row and the field, e.g.

    AAPL.csv, line 17 (header = line 1), field 'Close': negative price -3.2

Row convention: when the caller knows the physical line of each row (the CSV importers do), rows are
reported as file lines with the header on line 1; otherwise as 1-based data rows ("row 3 (1-based
data row)"), which for an in-memory frame has source "<frame>".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.store import BAR_COLUMNS, EVENT_COLUMNS, TRUTH_COLUMNS, MarketStore
from thesisgym.schema import DEFAULT_TIMEZONE, EVENT_KINDS, ArgumentError

__all__ = [
    "END_OF_DAY",
    "DataValidationError",
    "Problem",
    "end_of_day",
    "local_instants",
    "load_store",
    "raise_rows",
    "require_columns",
    "validate_bars",
    "validate_events",
    "validate_store",
    "validate_truth",
]

FRAME = "<frame>"
# Prices are float32 artefacts in many vendor files: allow rounding noise in the OHLC ordering checks.
_OHLC_RTOL = 1e-6
_MAX_LISTED = 10
# an offset only counts after a time of day: "2020-04-06" ends in "-06" but is date-only
_TZ_SUFFIX = re.compile(
    r"\d[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}(?::?\d{2})?|UTC|GMT)$", re.IGNORECASE
)
_DATE_ONLY = r"\d{4}-\d{2}-\d{2}"
# A date-only publication is placed at this time of its day: after the close, visible the next day.
# The date-only rule, written once: a value that gives only a day is placed at 23:59 local time of that
# day (the latest instant, the only one that cannot leak it into a close it may have come after).
# `end_of_day` applies it to naive days, `local_instants` (default offset) turns it into UTC instants;
# every importer goes through one of the two.
END_OF_DAY = pd.Timedelta(hours=23, minutes=59)


@dataclass(frozen=True)
class Problem:
    """One bad cell (or a missing column when `row` is None)."""

    source: str
    row: int | None  # a file line when `is_line`, else a 1-based data row
    field: str
    message: str
    is_line: bool = False

    def __str__(self) -> str:
        if self.row is None:
            where = "header"
        elif self.is_line:
            where = f"line {self.row} (header = line 1)"
        else:
            where = f"row {self.row} (1-based data row)"
        return f"{self.source}, {where}, field '{self.field}': {self.message}"


class DataValidationError(ValueError):
    """Raised with every problem found; the message lists the first few, in file order."""

    def __init__(self, problems: Sequence[Problem], *, unlisted: int = 0):
        self.problems = sorted(problems, key=lambda p: -1 if p.row is None else p.row)
        self.total = len(self.problems) + unlisted
        head = "; ".join(str(p) for p in self.problems[:_MAX_LISTED])
        more = self.total - min(len(self.problems), _MAX_LISTED)
        super().__init__(head + (f"; ... and {more} more problems" if more > 0 else ""))


def raise_rows(source: str, lines: Sequence[int] | None, mask, field: str, message) -> None:
    """Raise a DataValidationError for the rows where `mask` is True (the first 10 listed, the rest
    counted); `message(i)` says what is wrong at frame position i. Rows are file lines when `lines`
    holds them, else 1-based data rows. Does nothing when no row is marked."""
    hits = np.flatnonzero(np.asarray(mask, dtype=bool))
    if not len(hits):
        return
    problems = [
        Problem(
            source,
            int(lines[i]) if lines is not None else int(i) + 1,
            field,
            message(int(i)),
            lines is not None,
        )
        for i in hits[:_MAX_LISTED]
    ]
    raise DataValidationError(problems, unlisted=max(0, len(hits) - _MAX_LISTED))


def require_columns(source: str, have: Iterable[str], need: Iterable[str], layout: str) -> None:
    """Raise a DataValidationError naming every column of `need` missing from `have`."""
    have = list(have)
    missing = [n for n in need if n not in have]
    if missing:
        raise DataValidationError(
            [
                Problem(source, None, m, f"missing column for the {layout} layout (have: {', '.join(have)})")
                for m in missing
            ]
        )


class _Locator:
    """Maps frame positions and canonical column names to what the user sees in the source."""

    def __init__(self, source: str, n: int, lines: Sequence[int] | None, fields: Mapping[str, str]):
        if lines is not None and len(lines) != n:
            raise ValueError(f"{source}: got {len(lines)} line numbers for {n} rows")
        self.source = source
        self.lines = None if lines is None else np.asarray(lines, dtype=np.int64)
        self.fields = dict(fields)
        self.problems: list[Problem] = []
        self.unlisted = 0  # problems counted but not materialised (see add_many)

    def row(self, pos: int) -> int:
        return int(self.lines[pos]) if self.lines is not None else pos + 1

    def add(self, pos: int | None, column: str, message: str) -> None:
        row = None if pos is None else self.row(pos)
        self.problems.append(
            Problem(self.source, row, self.fields.get(column, column), message, self.lines is not None)
        )

    def add_many(self, mask: np.ndarray, column: str, make_message, limit: int = 50) -> None:
        # Only the first `limit` of one kind are materialised: a wholly broken file must still fail fast.
        hits = np.flatnonzero(mask)
        self.unlisted += max(0, len(hits) - limit)
        for pos in hits[:limit]:
            self.add(int(pos), column, make_message(int(pos)))

    def raise_if_any(self) -> None:
        if self.problems:
            raise DataValidationError(self.problems, unlisted=self.unlisted)


def _resolve_columns(
    df: pd.DataFrame, loc: _Locator, required: Iterable[str], optional: Iterable[str] = ()
) -> dict[str, str]:
    """Case-insensitive column lookup: canonical name -> the frame's column name."""
    by_lower: dict[str, str] = {}
    for col in df.columns:
        key = str(col).strip().lower()
        if key in by_lower:
            loc.add(None, str(col), f"duplicate column (also '{by_lower[key]}')")
        by_lower[key] = str(col)
    found = {}
    for name in (*required, *optional):
        if name in by_lower:
            found[name] = by_lower[name]
            loc.fields.setdefault(name, by_lower[name])
        elif name in required:
            loc.add(None, name, f"missing column (have: {', '.join(map(str, df.columns)) or 'none'})")
    loc.raise_if_any()
    return found


def _numeric(raw: pd.Series, loc: _Locator, column: str, *, allow_missing: bool) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(raw.dtype) and not pd.api.types.is_bool_dtype(raw.dtype):
        values = raw.to_numpy(dtype="float64", na_value=np.nan)
        missing = np.isnan(values)
    else:  # text cells: tell "missing" from "not a number"
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        text = raw.astype(object).where(raw.notna(), "").astype(str).str.strip()
        missing = raw.isna().to_numpy() | text.isin(["", "nan", "NaN", "None"]).to_numpy()
    bad = np.isnan(values) & ~missing
    loc.add_many(bad, column, lambda i: f"not a number {raw.iloc[i]!r}")
    if not allow_missing:
        loc.add_many(missing, column, lambda i: "missing value")
    loc.add_many(np.isinf(values), column, lambda i: f"not finite {values[i]}")
    return values


def _strings(raw: pd.Series) -> pd.Series:
    return raw.astype(object).where(raw.notna(), "").astype(str).str.strip()


# --- bars -----------------------------------------------------------------------------------------
def validate_bars(
    df: pd.DataFrame,
    *,
    source: str = FRAME,
    lines: Sequence[int] | None = None,
    fields: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Check a bars frame and return it with canonical columns/dtypes, in its original row order.

    `lines` gives the file line of each row (header = line 1) for messages; `fields` maps canonical
    names to the names shown to the user (defaults to the frame's own, case-insensitively matched).
    Extra columns (e.g. "Adj Close") are not part of the store and are left out of the result.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{source}: bars must be a pandas DataFrame, got {type(df).__name__}")
    loc = _Locator(source, len(df), lines, fields or {})
    cols = _resolve_columns(df, loc, BAR_COLUMNS)

    tickers = _strings(df[cols["ticker"]])
    loc.add_many((tickers == "").to_numpy(), "ticker", lambda i: "missing ticker")

    dates = _parse_dates(df[cols["date"]], loc, "date")

    out = {"ticker": tickers.to_numpy(dtype=object), "date": dates}
    for name in ("open", "high", "low", "close"):
        v = _numeric(df[cols[name]], loc, name, allow_missing=False)
        loc.add_many((v < 0) & np.isfinite(v), name, lambda i, v=v: f"negative price {v[i]:g}")  # -inf: reported once
        loc.add_many(v == 0, name, lambda i: "zero price")
        out[name] = v
    vol = _numeric(df[cols["volume"]], loc, "volume", allow_missing=False)
    loc.add_many((vol < 0) & np.isfinite(vol), "volume", lambda i: f"negative volume {vol[i]:g}")
    out["volume"] = vol

    o, h, lo, c = out["open"], out["high"], out["low"], out["close"]
    with np.errstate(invalid="ignore"):
        # ordering checks only where all four prices are valid: one bad cell is one problem, not three
        ok = np.isfinite(o + h + lo + c) & (np.minimum.reduce([o, h, lo, c]) > 0)
        crossed = ok & (h < lo * (1 - _OHLC_RTOL))
        loc.add_many(crossed, "high", lambda i: f"high {h[i]:g} below low {lo[i]:g}")
        ok &= ~crossed
        top = np.maximum(o, c)
        loc.add_many(
            ok & (h < top * (1 - _OHLC_RTOL)),
            "high",
            lambda i: f"high {h[i]:g} below max(open, close) {top[i]:g}",
        )
        bottom = np.minimum(o, c)
        loc.add_many(
            ok & (lo > bottom * (1 + _OHLC_RTOL)),
            "low",
            lambda i: f"low {lo[i]:g} above min(open, close) {bottom[i]:g}",
        )
    loc.raise_if_any()

    frame = pd.DataFrame(out)
    frame["date"] = frame["date"].astype("datetime64[ns]")
    _check_date_order(frame, loc)
    loc.raise_if_any()
    return frame[list(BAR_COLUMNS)]


def _parse_dates(raw: pd.Series, loc: _Locator, column: str) -> np.ndarray:
    if isinstance(raw.dtype, pd.DatetimeTZDtype):
        loc.add(0, column, "bar dates are trading days and must not carry a timezone")
        loc.raise_if_any()
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        parsed = raw.reset_index(drop=True)
        missing = parsed.isna().to_numpy()
        loc.add_many(missing, column, lambda i: "missing date")
    else:
        text = _strings(raw)
        parsed = pd.to_datetime(text, format="ISO8601", errors="coerce")
        loc.add_many((text == "").to_numpy(), column, lambda i: "missing date")
        loc.add_many(
            (parsed.isna() & (text != "")).to_numpy(), column, lambda i: f"not an ISO date {text.iloc[i]!r}"
        )
        if isinstance(parsed.dtype, pd.DatetimeTZDtype):  # every string carried an offset
            loc.add(0, column, "bar dates are trading days and must not carry a timezone")
            loc.raise_if_any()
    timed = (parsed.notna() & (parsed != parsed.dt.normalize())).to_numpy()
    loc.add_many(
        timed, column, lambda i: f"bar date {parsed.iloc[i]} has a time of day; give the trading day"
    )
    return parsed.to_numpy()


def _check_date_order(frame: pd.DataFrame, loc: _Locator) -> None:
    pos = np.arange(len(frame))
    key = frame[["ticker", "date"]]
    dup = key.duplicated(keep="first").to_numpy()
    if dup.any():
        first = pd.Series(pos, index=pd.MultiIndex.from_frame(key))
        first = first[~first.index.duplicated(keep="first")]
        for i in np.flatnonzero(dup)[:50]:
            j = int(first.loc[(frame["ticker"].iat[i], frame["date"].iat[i])])
            loc.add(
                int(i),
                "date",
                f"duplicate date {frame['date'].iat[i].date()} for ticker {frame['ticker'].iat[i]} "
                f"(first at {'line' if loc.lines is not None else 'row'} {loc.row(j)})",
            )
    prev = frame.groupby("ticker", sort=False)["date"].shift(1)
    back = (frame["date"] < prev).to_numpy()
    loc.add_many(
        back,
        "date",
        lambda i: (
            f"date {frame['date'].iat[i].date()} comes after {prev.iat[i].date()} in the file for "
            f"ticker {frame['ticker'].iat[i]}; dates must be increasing"
        ),
    )


# --- events ---------------------------------------------------------------------------------------
def validate_events(
    df: pd.DataFrame,
    *,
    source: str = FRAME,
    tickers: Iterable[str] | None = None,
    assume_timezone: str | None = None,
    lines: Sequence[int] | None = None,
    fields: Mapping[str, str] | None = None,
    date_only: bool | None = None,
) -> pd.DataFrame:
    """Check an events frame and return it with canonical columns/dtypes (published_at in UTC).

    Required columns: ticker ("" or empty = market-wide), published_at, kind, and title or text;
    source, value and sentiment are optional. `published_at` must be timezone-aware; naive values
    raise unless `assume_timezone` is given (see `thesisgym.data.importers.read_events_csv` for the
    date-only convention; `date_only` as in `parse_timestamps`). With `tickers`, an event naming a
    ticker outside it raises.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{source}: events must be a pandas DataFrame, got {type(df).__name__}")
    loc = _Locator(source, len(df), lines, fields or {})
    optional = [c for c in EVENT_COLUMNS if c not in ("ticker", "published_at", "kind")]
    cols = _resolve_columns(df, loc, ("ticker", "published_at", "kind"), optional)
    if "title" not in cols and "text" not in cols:
        loc.add(None, "title", "missing column (an event needs a title or a text column)")
        loc.raise_if_any()
    n = len(df)

    def text_col(name: str) -> pd.Series:
        return _strings(df[cols[name]]) if name in cols else pd.Series([""] * n, dtype=object)

    tick = text_col("ticker")
    if tickers is not None:
        known = set(tickers)
        unknown = ((tick != "") & ~tick.isin(known)).to_numpy()
        loc.add_many(
            unknown,
            "ticker",
            lambda i: f"unknown ticker {tick.iloc[i]!r} (not in the bars; '' = market-wide)",
        )
    kind = text_col("kind").str.lower()
    loc.add_many(
        (~kind.isin(EVENT_KINDS)).to_numpy(),
        "kind",
        lambda i: f"unknown event kind {kind.iloc[i]!r} (expected one of {', '.join(EVENT_KINDS)})",
    )
    published = parse_timestamps(
        df[cols["published_at"]],
        loc=loc,
        column="published_at",
        assume_timezone=assume_timezone,
        date_only=date_only,
    )
    title, text = text_col("title"), text_col("text")
    loc.add_many(
        ((title == "") & (text == "")).to_numpy(), "title", lambda i: "event has neither title nor text"
    )
    value, sent, basis = _event_numbers(df, cols, loc)
    loc.raise_if_any()
    frame = pd.DataFrame(
        {
            "ticker": tick.to_numpy(dtype=object),
            "published_at": published,
            "kind": kind.to_numpy(dtype=object),
            "source": text_col("source").to_numpy(dtype=object),
            "title": title.to_numpy(dtype=object),
            "text": text.to_numpy(dtype=object),
            "value": value,
            "sentiment": sent,
            "basis_date": pd.Series(basis, dtype="datetime64[ns]"),
            "timing": text_col("timing").to_numpy(dtype=object),
        }
    )
    frame["published_at"] = frame["published_at"].astype("datetime64[ns, UTC]")
    return frame[list(EVENT_COLUMNS)]


def _event_numbers(df: pd.DataFrame, cols: Mapping[str, str], loc: _Locator) -> tuple:
    """The optional value, sentiment (in [-1, 1]) and basis_date columns, NaN/NaT where absent."""
    n = len(df)
    value = _numeric(df[cols["value"]], loc, "value", allow_missing=True) if "value" in cols else np.full(n, np.nan)
    sent = (
        _numeric(df[cols["sentiment"]], loc, "sentiment", allow_missing=True)
        if "sentiment" in cols
        else np.full(n, np.nan)
    )
    with np.errstate(invalid="ignore"):
        loc.add_many(np.abs(sent) > 1, "sentiment", lambda i: f"sentiment {sent[i]:g} outside [-1, 1]")
    basis = (
        _basis_dates(df[cols["basis_date"]], loc) if "basis_date" in cols else np.full(n, np.datetime64("NaT", "ns"))
    )
    return value, sent, basis


def _basis_dates(raw: pd.Series, loc: _Locator) -> np.ndarray:
    """The optional `basis_date` column: a calendar day or empty (NaT)."""
    if isinstance(raw.dtype, pd.DatetimeTZDtype):
        raw = raw.dt.tz_convert(DEFAULT_TIMEZONE).dt.tz_localize(None)
    if pd.api.types.is_datetime64_any_dtype(raw.dtype):
        return pd.DatetimeIndex(raw).normalize().to_numpy()
    text = _strings(raw)
    parsed = pd.to_datetime(text.where(~text.isin(["", "NaT", "nan", "None"]), None), format="ISO8601", errors="coerce")
    bad = (parsed.isna() & ~text.isin(["", "NaT", "nan", "None"])).to_numpy()
    loc.add_many(bad, "basis_date", lambda i: f"not an ISO date {text.iloc[i]!r}")
    return pd.DatetimeIndex(parsed).normalize().to_numpy()


def parse_timestamps(
    raw: pd.Series,
    *,
    loc: _Locator | None = None,
    column: str = "published_at",
    assume_timezone: str | None = None,
    source: str = FRAME,
    date_only: bool | None = None,
) -> pd.Series:
    """Parse publication times to UTC; naive ones raise unless `assume_timezone` is given.

    With `assume_timezone`, a naive date-time is read as local time there, and a DATE-ONLY value
    ("2020-04-06") as 23:59 local time of that day: we do not know when during the day it appeared,
    and the latest possible instant is the only choice that cannot leak it into the context of a
    close it may have come after (it becomes visible from the next trading day on).

    A date read into a datetime column (Parquet, a pandas frame, "2020-04-06 00:00") arrives as naive
    MIDNIGHT and cannot be told from a real 00:00 stamp. `date_only=None` (default) treats every
    naive midnight as a date-only value (23:59), the reading that cannot leak; `date_only=True` does
    so for every naive value, `date_only=False` keeps naive times as given (midnight included).
    Timezone-aware values are never moved.
    """
    own = loc is None
    if loc is None:
        loc = _Locator(source, len(raw), None, {})
    n = len(raw)
    if isinstance(raw.dtype, pd.DatetimeTZDtype):
        out = raw.reset_index(drop=True).dt.tz_convert("UTC")
        loc.add_many(out.isna().to_numpy(), column, lambda i: "missing timestamp")
    elif pd.api.types.is_datetime64_any_dtype(raw.dtype):
        naive = raw.reset_index(drop=True)
        if assume_timezone is None:
            _raise_naive(loc, column, naive.notna().to_numpy(), lambda i: str(naive.iloc[i]))
        out = _localise(_end_of_date_only(naive, date_only), assume_timezone)
        loc.add_many(out.isna().to_numpy(), column, lambda i: "missing timestamp")
    else:
        text = _strings(raw)
        empty = (text == "").to_numpy()
        loc.add_many(empty, column, lambda i: "missing timestamp")
        has_tz = text.str.contains(_TZ_SUFFIX).to_numpy() & ~empty
        out = pd.Series(pd.NaT, index=range(n), dtype="datetime64[ns, UTC]")
        if has_tz.any():
            norm = text[has_tz].str.replace(r"\s*(?:UTC|GMT)$", "+00:00", regex=True, flags=re.IGNORECASE)
            parsed = pd.to_datetime(norm, format="ISO8601", utc=True, errors="coerce")
            out.iloc[np.flatnonzero(has_tz)] = parsed.to_numpy()
        naive = ~has_tz & ~empty
        if naive.any():
            if assume_timezone is None:
                _raise_naive(loc, column, naive, lambda i: repr(text.iloc[i]))
            else:
                sub = text[naive]
                parsed = pd.to_datetime(sub, format="ISO8601", errors="coerce")
                dated = sub.str.fullmatch(_DATE_ONLY).to_numpy()
                parsed = parsed.where(~dated, pd.Series(end_of_day(parsed), index=parsed.index))
                if date_only is not False:
                    parsed = _end_of_date_only(parsed, date_only)
                out.iloc[np.flatnonzero(naive)] = _localise(parsed, assume_timezone).to_numpy()
        bad = out.isna().to_numpy() & ~empty & (has_tz | (assume_timezone is not None))
        loc.add_many(bad, column, lambda i: f"not an ISO-8601 timestamp {text.iloc[i]!r}")
    if own:
        loc.raise_if_any()
    return out.reset_index(drop=True)


def _raise_naive(loc: _Locator, column: str, mask: np.ndarray, show) -> None:
    """One error for every naive timestamp of a column: the count, the first one and where it is, and
    the argument that fixes it (an ArgumentError, so the CLI names its option instead)."""
    hits = np.flatnonzero(mask)
    if not len(hits):
        return
    i = int(hits[0])
    where = f"line {loc.row(i)} (header = line 1)" if loc.lines is not None else f"row {loc.row(i)} (1-based data row)"
    raise ArgumentError(
        "{source}, {where}, field '{field}': {n} naive timestamp{s} (no timezone), the first {first}; write "
        "ISO-8601 with an offset (2020-04-06T09:30:00-04:00) or pass {arg} with the zone they are in "
        "(a date-only value then counts as 23:59 that day)",
        argument="assume_timezone", source=loc.source, field=loc.fields.get(column, column), n=len(hits),
        s="" if len(hits) == 1 else "s", first=show(i), where=where,
    )


def local_instants(days, offset=END_OF_DAY, tz: str = DEFAULT_TIMEZONE) -> pd.Series:
    """UTC instants of `days` (naive dates) plus `offset` (a Timedelta or one per day) read as local
    time in `tz`; by default 23:59 New York, the date-only convention of `parse_timestamps`."""
    local = pd.DatetimeIndex(days) + pd.to_timedelta(offset)
    return pd.Series(local.tz_localize(tz, ambiguous=False, nonexistent="shift_forward").tz_convert("UTC"))


def end_of_day(days) -> pd.DatetimeIndex:
    """Naive days (any time of day ignored) at 23:59, the date-only rule."""
    return pd.DatetimeIndex(days).normalize() + END_OF_DAY


def _end_of_date_only(naive: pd.Series, date_only: bool | None) -> pd.Series:
    """Naive values read as date-only (see `parse_timestamps`) moved to 23:59 of their day."""
    if date_only is False:
        return naive
    naive = pd.Series(pd.DatetimeIndex(naive), dtype="datetime64[ns]")
    day = naive.dt.normalize()
    move = (naive.notna() & (naive == day)) if date_only is None else naive.notna()
    return naive.where(~move, pd.Series(end_of_day(day), index=naive.index))


def _localise(naive: pd.Series, tz: str) -> pd.Series:
    try:
        # ambiguous=False picks the later (standard-time) instant of a repeated hour: the conservative one.
        local = pd.Series(
            pd.DatetimeIndex(naive).tz_localize(
                tz, ambiguous=np.zeros(len(naive), dtype=bool), nonexistent="shift_forward"
            )
        )
    except Exception as exc:  # an unknown zone name surfaces here
        raise ValueError(f"assume_timezone={tz!r}: {exc}") from exc
    return local.dt.tz_convert("UTC")


# --- truth and stores -----------------------------------------------------------------------------
def validate_truth(
    df: pd.DataFrame, *, source: str = FRAME, tickers: Iterable[str] | None = None
) -> pd.DataFrame:
    """Check a synthetic truth frame: known tickers, one row per (ticker, date), finite numbers."""
    loc = _Locator(source, len(df), None, {})
    cols = _resolve_columns(df, loc, TRUTH_COLUMNS)
    tick = _strings(df[cols["ticker"]])
    if tickers is not None:
        known = set(tickers)
        loc.add_many((~tick.isin(known)).to_numpy(), "ticker", lambda i: f"unknown ticker {tick.iloc[i]!r}")
    for name in ("expected_return", "quality"):
        _numeric(df[cols[name]], loc, name, allow_missing=False)
    dates = pd.Series(_parse_dates(df[cols["date"]], loc, "date"))
    dup = (pd.DataFrame({"t": tick.to_numpy(), "d": dates}).duplicated() & dates.notna()).to_numpy()
    loc.add_many(dup, "date", lambda i: f"duplicate (ticker, date) ({tick.iloc[i]}, {dates.iloc[i].date()})")
    loc.raise_if_any()
    return df


def validate_store(store: MarketStore, *, source: str = FRAME) -> MarketStore:
    """Validate every frame of `store` in place (canonical dtypes) and return it."""
    store.bars = validate_bars(store.bars, source=f"{source}/bars")
    store.events = validate_events(store.events, source=f"{source}/events", tickers=store.tickers)
    if store.truth is not None:
        validate_truth(store.truth, source=f"{source}/truth", tickers=store.tickers)
    store.__post_init__()
    return store


def load_store(path: str | Path, *, validate: bool = True) -> MarketStore:
    """`MarketStore.load` plus validation of what was read (errors name the Parquet file and row)."""
    path = Path(path)
    store = MarketStore.load(path)
    if validate:
        store.bars = validate_bars(store.bars, source=str(path / "bars.parquet"))
        store.events = validate_events(
            store.events, source=str(path / "events.parquet"), tickers=store.tickers
        )
        if store.truth is not None:
            validate_truth(store.truth, source=str(path / "truth.parquet"), tickers=store.tickers)
    return store
