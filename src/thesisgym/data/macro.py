"""Macro data with vintages -> market-wide events showing each value as it was published.

A macro value in a prompt for day d must be the number the market could read on d, not today's
revised one (April 2020 unemployment was first 14.7, and 14.8 only from 2024). Each reader turns
"what was known when" into events (ticker "", kind "macro") published at the vintage's date, whose
text holds only numbers from that vintage:

- `read_rtdsm`: Philadelphia Fed Real-Time Data Set layout: `DATE` (observation "1998:11" or
  "1965:Q4") then one column per vintage (`PCPI22M7` = as published in July 2022, `RUC20Q2` = the
  2020Q2 vintage; "#N/A" before release; trailing spaces allowed). One event per vintage: the newest
  observation in it with its change against the previous one and a year earlier, as in that vintage.
  The Philadelphia Fed takes its vintages around the middle of the month (monthly) or of the
  quarter's middle month (quarterly) but does not give the exact day, so by default an event is placed
  at 23:59 New York on the LAST day of that month (`vintage_day=None`), the choice that cannot show a
  value before the snapshot holding it was taken; `vintage_day=15` trusts the mid-month date.
- `read_fredmd_vintage`: a FRED-MD vintage file (`sasdate,SERIES...`, row 2 = transformation codes);
  the vintage (YYYY-MM, from the file name or `vintage=`) is taken as public at the END of its month.
  One event per chosen series.
- `read_alfred`: ALFRED-style CSV `date,value,realtime_start,realtime_end[,series_id]` (or the FRED
  API's JSON observations, see `parse_alfred_json`): every (observation, realtime_start) pair is a
  value as first published or as revised on realtime_start (date-only, so 23:59 that day).
- `read_release_calendar`: a release/event calendar (the QuantConnect Lean TradingEconomics JSON:
  `Date` in UTC, `Event`, `Actual`, `Forecast`, `Previous`), zip or JSON; each event at its time.
- `read_series_csv`: a plain `date,value` series (FRED latest vintage, Lean rate-change files). With
  `latest_vintage=True` (the default for FRED downloads) it warns that revised values leak hindsight,
  unless the series is one that is never revised (market rates such as FEDFUNDS or DGS10, whose
  latest vintage is the first release: `NEVER_REVISED`), and dates each observation
  `release_lag_days` after its period ends (default: 0 for irregular change-date series, else one period).

Live loading: `fetch_alfred` calls the FRED API (`series/observations` with all real-time periods)
with the user's API key and parses the JSON the same way; tests use recorded responses only.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.files import EventsImport, read_json_records, read_table
from thesisgym.data.validate import (
    DataValidationError,
    Problem,
    local_instants,
    raise_rows,
    require_columns,
    validate_events,
)

__all__ = [
    "NEVER_REVISED",
    "fetch_alfred",
    "parse_alfred_json",
    "read_alfred",
    "read_fredmd_vintage",
    "read_release_calendar",
    "read_rtdsm",
    "read_series_csv",
]

_NAMES = {
    "PCPI": "CPI (Philadelphia Fed RTDSM)",
    "RUC": "unemployment rate % (Philadelphia Fed RTDSM)",
    "ROUTPUT": "real GDP (Philadelphia Fed RTDSM)",
    "UNRATE": "unemployment rate %",
    "CPIAUCSL": "CPI",
    "PAYEMS": "nonfarm payrolls (thousands)",
    "INDPRO": "industrial production index",
    "FEDFUNDS": "effective fed funds rate %",
    "GS10": "10-year Treasury yield %",
    "DGS10": "10-year Treasury yield %",
    "GDP": "nominal GDP (billions)",
    "PCREDIT8": "Fed primary credit rate %",
}


# Market rates are observed, not estimated: FRED never revises them, so their latest vintage is the
# value as first published.
NEVER_REVISED: frozenset[str] = frozenset(
    {"FEDFUNDS", "DFF", "DGS1", "DGS2", "DGS5", "DGS10", "DGS30", "GS1", "GS2", "GS5", "GS10", "TB3MS", "DTB3",
     "PCREDIT8", "DPCREDIT", "DFEDTARU", "DFEDTARL", "SP500"}
)


def _num(cell: str) -> float:
    cell = cell.strip()
    if cell in ("", "#N/A", "NA", ".", "nan"):
        return np.nan
    return float(cell)


def _describe(name: str, label: str, v: float, prev: float | None, yoy: float | None) -> str:
    parts = []
    if prev is not None and np.isfinite(prev):
        parts.append(f"previous {prev:g}")
    if yoy is not None and np.isfinite(yoy) and yoy > 0 and v > 0 and "%" not in name:
        parts.append(f"{100 * (v / yoy - 1):+.1f}% y/y")
    return f"{name} for {label}: {v:g}" + (f" ({', '.join(parts)})" if parts else "")


def _events(rows: list[dict], source: str) -> pd.DataFrame:
    if not rows:
        raise ValueError(f"{source}: no values to import")
    return validate_events(pd.DataFrame(rows), source=source)


# --- Philadelphia Fed RTDSM ---------------------------------------------------------------------
_VINTAGE = re.compile(r"^([A-Z]+?)(\d{2})(M(\d{1,2})|Q([1-4]))$")


def _vintage_date(col: str, day: int | None) -> tuple[str, pd.Timestamp] | None:
    m = _VINTAGE.match(col.strip())
    if not m:
        return None
    yy = int(m.group(2))
    year = 1900 + yy if yy >= 40 else 2000 + yy
    month = int(m.group(4)) if m.group(4) else 3 * int(m.group(5)) - 1  # quarterly: the middle month
    first = pd.Timestamp(year=year, month=month, day=1)
    return m.group(1), first + pd.offsets.MonthEnd(0) if day is None else first.replace(day=day)


def read_rtdsm(path: str | Path, *, vintage_day: int | None = None) -> EventsImport:
    """Philadelphia Fed real-time data set CSV -> one macro event per vintage (module docstring)."""
    if vintage_day is not None and not 1 <= vintage_day <= 28:
        raise ValueError(f"vintage_day must be in 1..28, got {vintage_day}")
    path = Path(path)
    raw, lines = read_table(path)
    cols = [str(c) for c in raw.columns]
    if cols[0].strip().upper() != "DATE":
        raise DataValidationError(
            [Problem(path.name, None, cols[0], "expected DATE as the first column (RTDSM layout)")]
        )
    vintages = [(c, _vintage_date(c, vintage_day)) for c in cols[1:]]
    bad = [c for c, v in vintages if v is None]
    if bad:
        raise DataValidationError(
            [Problem(path.name, None, bad[0], "not a vintage column like PCPI22M7 or RUC20Q2")]
        )
    obs = raw[cols[0]].astype(str).str.strip()
    labels = []
    for k, o in enumerate(obs):
        m = re.fullmatch(r"(\d{4}):(?:(\d{2})|Q([1-4]))", o)
        if not m:
            raise_rows(
                path.name,
                lines,
                np.arange(len(obs)) == k,
                cols[0],
                lambda i: f"not an observation date like 1998:11 or 1965:Q4, got {obs.iloc[i]!r}",
            )
        labels.append(f"{m.group(1)}-{m.group(2)}" if m.group(2) else f"{m.group(1)}Q{m.group(3)}")
    per_year = 12 if "-" in labels[-1] else 4
    rows, skipped = [], 0
    for c, (series, when) in vintages:
        cells = raw[c].astype(str)
        ok = np.array([_is_num(x) for x in cells])
        raise_rows(path.name, lines, ~ok, c, lambda i, cells=cells: f"not a number {cells.iloc[i]!r}")
        vals = np.array([_num(x) for x in cells])
        have = np.flatnonzero(np.isfinite(vals))
        if not len(have):
            skipped += 1
            continue
        i = int(have[-1])
        prev = vals[i - 1] if i >= 1 else None
        yoy = vals[i - per_year] if i >= per_year else None
        name = _NAMES.get(series, series)
        rows.append(
            {
                "ticker": "",
                "published_at": local_instants([when]).iat[0],
                "kind": "macro",
                "source": "Philadelphia Fed RTDSM",
                "timing": "vintage",
                "title": _describe(name, labels[i], vals[i], prev, yoy) + f", vintage {c.strip()}",
                "value": vals[i],
            }
        )
    rep = EventsImport(
        events=_events(rows, path.name),
        source=path.name,
        rows_read=len(vintages),
        counts={"vintages": len(vintages), "empty_vintages": skipped},
    )
    return rep


def _is_num(x: str) -> bool:
    try:
        _num(x)
        return True
    except ValueError:
        return False


# --- FRED-MD --------------------------------------------------------------------------------------
FREDMD_SERIES: tuple[str, ...] = ("PAYEMS", "UNRATE", "CPIAUCSL", "INDPRO", "FEDFUNDS", "GS10")


def read_fredmd_vintage(
    path: str | Path, *, series: Sequence[str] = FREDMD_SERIES, vintage: str | None = None
) -> EventsImport:
    """One FRED-MD vintage file -> one macro event per series in `series` (module docstring)."""
    path = Path(path)
    if vintage is None:
        m = re.search(r"(\d{4})-(\d{2})", path.name)
        if not m:
            raise ValueError(
                f"{path.name}: cannot tell the vintage (YYYY-MM) from the file name; pass vintage="
            )
        vintage = m.group(0)
    public = pd.Timestamp(vintage + "-01") + pd.offsets.MonthEnd(0)
    raw, lines = read_table(path)
    cols = {str(c).strip(): str(c) for c in raw.columns}
    if "sasdate" not in cols:
        raise DataValidationError([Problem(path.name, None, "sasdate", "missing column (FRED-MD layout)")])
    missing = [s for s in series if s not in cols]
    if missing:
        raise DataValidationError(
            [Problem(path.name, None, s, "series not in this vintage") for s in missing]
        )
    dates = raw[cols["sasdate"]].astype(str).str.strip()
    is_obs = dates.str.match(r"^\d{1,2}/\d{1,2}/\d{4}$").to_numpy()
    obs = pd.to_datetime(dates[is_obs], format="%m/%d/%Y")
    rows = []
    for s in series:
        column = raw[cols[s]].astype(str)
        ok = np.array([_is_num(x) for x in column])
        raise_rows(
            path.name,
            lines,
            is_obs & ~ok,
            cols[s],
            lambda i, column=column: f"not a number {column.iat[i]!r}",
        )
        cells = column[is_obs]
        vals = np.array([_num(x) for x in cells])
        have = np.flatnonzero(np.isfinite(vals))
        if not len(have):
            continue
        i = int(have[-1])
        rows.append(
            {
                "ticker": "",
                "published_at": local_instants([public]).iat[0],
                "kind": "macro",
                "source": f"FRED-MD {vintage}",
                "timing": "vintage",
                "title": _describe(
                    _NAMES.get(s, s),
                    f"{obs.iloc[i]:%Y-%m}",
                    vals[i],
                    vals[i - 1] if i else None,
                    vals[i - 12] if i >= 12 else None,
                ),
                "value": vals[i],
            }
        )
    return EventsImport(
        events=_events(rows, path.name),
        source=path.name,
        rows_read=int(is_obs.sum()),
        counts={"series": len(rows)},
    )


# --- ALFRED ---------------------------------------------------------------------------------------
def _alfred_events(df: pd.DataFrame, series: str, source: str, lines) -> EventsImport:
    start = pd.to_datetime(df["realtime_start"].astype(str).str.strip(), format="%Y-%m-%d", errors="coerce")
    obs = pd.to_datetime(df["date"].astype(str).str.strip(), format="%Y-%m-%d", errors="coerce")
    for name, parsed in (("realtime_start", start), ("date", obs)):
        raise_rows(
            source,
            lines,
            parsed.isna().to_numpy(),
            name,
            lambda i, name=name: f"not a YYYY-MM-DD date {df[name].iat[i]!r}",
        )
    text = df["value"].astype(str).str.strip()
    vals = pd.to_numeric(text.where(text != ".", None), errors="coerce").to_numpy(dtype="float64")
    raise_rows(
        source,
        lines,
        np.isnan(vals) & (text != ".").to_numpy(),
        "value",
        lambda i: f"not a number {text.iat[i]!r}",
    )
    frame = pd.DataFrame({"obs": obs, "start": start, "val": vals}).dropna(subset=["val"])
    frame = frame.sort_values(["start", "obs"], kind="stable")
    name = _NAMES.get(series, series)
    rows, known = [], {}
    for (when, o), v in zip(zip(frame["start"], frame["obs"], strict=False), frame["val"], strict=False):
        before = known.get(o)
        known[o] = v
        note = "first release" if before is None else (f"revised from {before:g}" if before != v else None)
        if note is None:
            continue
        rows.append(
            {
                "ticker": "",
                "published_at": local_instants([when]).iat[0],
                "kind": "macro",
                "source": f"ALFRED {series}",
                "timing": "vintage",
                "title": f"{name} for {o:%Y-%m-%d}: {v:g} ({note}, published {when.date()})",
                "value": v,
            }
        )
    return EventsImport(
        events=_events(rows, source),
        source=source,
        rows_read=len(df),
        counts={
            "first_releases": sum("first release" in r["title"] for r in rows),
            "revisions": sum("revised" in r["title"] for r in rows),
        },
    )


def read_alfred(path: str | Path, *, series: str | None = None) -> EventsImport:
    """ALFRED-style CSV `date,value,realtime_start,realtime_end[,series_id]` -> macro events."""
    path = Path(path)
    raw, lines = read_table(path)
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    require_columns(
        path.name,
        cols,
        ("date", "value", "realtime_start"),
        "ALFRED (date,value,realtime_start,realtime_end)",
    )
    if series is None:
        series = (
            str(raw[cols["series_id"]].iat[0]).strip()
            if "series_id" in cols and len(raw)
            else path.stem.split("_")[-1]
        )
    df = pd.DataFrame({k: raw[cols[k]] for k in ("date", "value", "realtime_start")})
    return _alfred_events(df, series, path.name, lines)


def parse_alfred_json(obj: object, series: str, *, source: str = "FRED API") -> EventsImport:
    """The FRED API's `series/observations` JSON (with real-time periods) -> macro events."""
    obs = obj.get("observations") if isinstance(obj, Mapping) else None
    if not isinstance(obs, list):
        raise ValueError(f"{source}: expected an 'observations' list (FRED series/observations JSON)")
    for k, o in enumerate(obs):
        for need in ("date", "value", "realtime_start"):
            if not isinstance(o, Mapping) or need not in o:
                raise ValueError(f"{source}, record observations[{k}], field '{need}': missing")
    df = pd.DataFrame([{k: o[k] for k in ("date", "value", "realtime_start")} for o in obs])
    return _alfred_events(df, series, source, None)


def fetch_alfred(
    series: str,
    *,
    api_key: str,
    observation_start: str | None = None,
    opener: Callable | None = None,
    timeout: float = 30.0,
) -> EventsImport:
    """Every vintage of a FRED series from the FRED API (needs a free API key from fred.stlouisfed.org)."""
    if not re.fullmatch(r"[0-9a-f]{32}", api_key or ""):
        raise ValueError("FRED api_key must be the 32-character lower-case key from fred.stlouisfed.org")
    params = {
        "series_id": series,
        "api_key": api_key,
        "file_type": "json",
        "realtime_start": "1776-07-04",
        "realtime_end": "9999-12-31",
    }
    if observation_start:
        params["observation_start"] = observation_start
    url = "https://api.stlouisfed.org/fred/series/observations?" + urllib.parse.urlencode(params)
    with (opener or urllib.request.urlopen)(urllib.request.Request(url), timeout=timeout) as resp:
        body = resp.read()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"FRED API {series}: malformed JSON ({exc.msg})") from exc
    return parse_alfred_json(obj, series, source=f"FRED API {series}")


# --- release calendar -------------------------------------------------------------------------------
def read_release_calendar(path: str | Path) -> EventsImport:
    """Lean/TradingEconomics calendar JSON (or a zip holding it) -> macro events at their UTC times."""
    source, obj = read_json_records(path, "calendar events")
    rows = []
    for k, e in enumerate(obj):
        for need in ("Date", "Event"):
            if not e.get(need):
                raise ValueError(
                    f"{source}, record {k} (CalendarId {e.get('CalendarId', '?')}), field '{need}': missing"
                )
        try:
            when = pd.Timestamp(e["Date"])
        except ValueError as exc:
            raise ValueError(
                f"{source}, record {k} (CalendarId {e.get('CalendarId', '?')}), field 'Date': {exc}"
            ) from exc
        when = when.tz_localize("UTC") if when.tzinfo is None else when.tz_convert("UTC")  # Lean stores UTC
        figures = [
            f"{lab} {e[key]}"
            for key, lab in (("Actual", "actual"), ("Forecast", "forecast"), ("Previous", "previous"))
            if e.get(key)
        ]
        rows.append(
            {
                "ticker": "",
                "published_at": when,
                "kind": "macro",
                "source": str(e.get("Source") or "calendar"),
                "timing": "release time",
                "title": str(e["Event"]) + (f": {', '.join(figures)}" if figures else ""),
            }
        )
    return EventsImport(events=_events(rows, source), source=source, rows_read=len(obj))


# --- plain series -------------------------------------------------------------------------------------
def read_series_csv(
    path: str | Path,
    *,
    series: str | None = None,
    latest_vintage: bool = True,
    release_lag_days: int | None = None,
) -> EventsImport:
    """`date,value` (or `DATE,<SERIES>`) -> one macro event per observation (module docstring)."""
    path = Path(path)
    raw, lines = read_table(path)
    cols = [str(c) for c in raw.columns]
    if len(cols) != 2 or cols[0].strip().lower() != "date":
        raise DataValidationError(
            [Problem(path.name, None, cols[0], f"expected two columns date,value (have: {', '.join(cols)})")]
        )
    if series is None:
        series = cols[1].strip() if cols[1].strip().lower() != "value" else path.stem.split("_")[-1]
    dates = pd.to_datetime(raw[cols[0]].astype(str).str.strip(), format="%Y-%m-%d", errors="coerce")
    raise_rows(
        path.name,
        lines,
        dates.isna().to_numpy(),
        cols[0],
        lambda i: f"not a YYYY-MM-DD date {raw[cols[0]].iat[i]!r}",
    )
    text = raw[cols[1]].astype(str).str.strip()
    vals = pd.to_numeric(text.where(~text.isin(["", "."]), None), errors="coerce").to_numpy(dtype="float64")
    raise_rows(
        path.name,
        lines,
        np.isnan(vals) & ~text.isin(["", "."]).to_numpy(),
        cols[1],
        lambda i: f"not a number {text.iat[i]!r}",
    )
    step = pd.Series(dates).diff().dt.days.median()
    regular = len(dates) > 2 and pd.Series(dates).diff().dt.days.std() < 0.3 * max(step, 1)
    if release_lag_days is None:
        release_lag_days = int(step) if regular else 0
    notes, counts = [], {"missing_values": int(np.isnan(vals).sum())}
    latest_vintage = latest_vintage and series.upper() not in NEVER_REVISED
    if latest_vintage:
        msg = (
            f"{path.name}: latest-vintage series {series}: revised values leak hindsight into earlier prompts; "
            "use a vintage source (ALFRED, RTDSM, FRED-MD) for revised series"
        )
        warnings.warn(msg, UserWarning, stacklevel=2)
        notes.append(msg)
    keep = np.isfinite(vals)
    d, v = pd.DatetimeIndex(dates[keep]), vals[keep]
    period = "" if not regular else (" (period)" if step > 1 else "")
    prev = np.concatenate([[np.nan], v[:-1]])
    titles = [
        f"{_NAMES.get(series, series)} for {day:%Y-%m-%d}{period}: {x:g}"
        + (f" (previous {p:g})" if np.isfinite(p) else "")
        for day, x, p in zip(d, v, prev, strict=False)
    ]
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": "",
                "published_at": local_instants(d + pd.Timedelta(days=release_lag_days)),
                "kind": "macro",
                "source": f"{series} (latest vintage)" if latest_vintage else series,
                "timing": "observation + release lag",
                "title": titles,
                "value": v,
            }
        ),
        source=path.name,
    )
    rep = EventsImport(events=events, source=path.name, rows_read=len(raw), counts=counts, notes=notes)
    rep.counts["release_lag_days"] = release_lag_days
    return rep
