"""Company event files -> events with the time they became public: earnings and analysts (insider
trades: thesisgym.data.insider).

Earnings (`read_earnings`, Alpha Vantage `fiscalDateEnding,reportedDate,reportedEPS,estimatedEPS,
surprise,surprisePercentage[,reportTime]`): reported vs estimated EPS and the surprise, at the report
time: given the company's 8-K earnings releases (item 2.02 in its SEC submissions), the release's
acceptance time; else post-market = 16:05 New York (the next day's context), no reportTime = 23:59
(the next day's), and a "pre-market" label, which the vendor also puts on after-close reports (the
2014 reports of AMZN, META, NVDA, TSLA), is not trusted unless asked (`pre_market="trust"`: 08:00,
that day's context). Kind "fundamentals", source "earnings". Alpha Vantage adjusts past EPS for every
split up to its download; the EPS numbers are written `{{ps:..}}` with `basis_date` = the day the file
is adjusted to (default its last report date), so a prompt shows them on its own day's basis
(thesisgym.data.asof), as SEC facts (thesisgym.data.sec), which are as filed, are.

Analyst (`read_analyst`), three layouts, chosen by header:
- generic: `ticker,published_at,source,action,text[,price_target]`; published_at ISO-8601 with an offset
  (or naive/date-only with `assume_timezone`, as for the generic events layout).
- rating headlines (Benzinga: `,title,date,stock`): only rating actions are kept (titles with
  Upgrades/Downgrades/Maintains/Initiates/Reiterates/Price Target); the others are counted as
  `not_rating_actions`, not silently dropped.
- recommendation trends (Finnhub: `symbol,period,strongBuy,buy,hold,sell,strongSell`): a monthly
  snapshot; taken as public at the END of its month (23:59), since it may count ratings of that month.
Estimize estimates (`read_estimize_estimates`, a zip or JSON of `{ticker, fiscal_year,
fiscal_quarter, eps, revenue, created_at, flagged}`): individual estimates grouped per New York day and
fiscal quarter into one event stamped at the day's latest estimate; the EPS figures are adjusted as of
the file's last estimate (`{{ps:..}}` with that basis).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.asof import per_share
from thesisgym.data.files import (
    EventsImport,
    date_column,
    layout_columns,
    number_column,
    read_json_records,
    read_table,
    require_layout,
)
from thesisgym.data.validate import END_OF_DAY, local_instants, raise_rows, validate_events
from thesisgym.schema import DEFAULT_TIMEZONE

__all__ = ["read_analyst", "read_earnings", "read_estimize_estimates"]

NY = DEFAULT_TIMEZONE


def _ticker_from_name(path: Path, ticker: str | None) -> str:
    if ticker:
        return ticker
    m = re.search(r"_([A-Z]{1,6})(?:_[^/]*)?\.(?:csv|json|zip)$", path.name)
    if not m:
        raise ValueError(f"{path.name}: cannot tell the ticker from the file name; pass ticker=")
    return m.group(1)


# --- earnings -------------------------------------------------------------------------------------
_REPORT_TIME = {"pre-market": pd.Timedelta(hours=8), "post-market": pd.Timedelta(hours=16, minutes=5)}


def read_earnings(
    path: str | Path,
    *,
    ticker: str | None = None,
    pre_market: str = "next_day",
    release_times: pd.Series | None = None,
    adjusted_as_of: str | pd.Timestamp | None = None,
) -> EventsImport:
    """Alpha Vantage earnings -> "fundamentals" events at the report time (module docstring).

    `release_times` (from `thesisgym.data.sec.earnings_release_times` of the company's submissions):
    when an 8-K item 2.02 was accepted on the report date, its acceptance time is used instead of the
    label (counted as `timed_by_8k`). `pre_market="next_day"` (default) dates a pre-market label no
    8-K confirms 16:05 (counted as `pre_market_label_not_trusted`); "trust" takes it at 08:00.
    `adjusted_as_of`: the day the file's EPS are split-adjusted to (default its last report date).
    """
    if pre_market not in ("trust", "next_day"):
        raise ValueError(f"pre_market must be 'trust' or 'next_day', got {pre_market!r}")
    path = Path(path)
    raw, lines = read_table(path)
    cols = layout_columns(raw)
    require_layout(path, cols, ("fiscaldateending", "reporteddate", "reportedeps", "estimatedeps"),
                   "Alpha Vantage earnings")
    ticker = _ticker_from_name(path, ticker)
    period = date_column(path, raw, lines, cols["fiscaldateending"])
    reported = date_column(path, raw, lines, cols["reporteddate"])
    eps = number_column(path, raw, lines, cols["reportedeps"], allow_none=True)
    est = number_column(path, raw, lines, cols["estimatedeps"], allow_none=True)
    when = _report_times(path, raw, lines, cols)
    when_used = when.where(when != "pre-market", "post-market") if pre_market == "next_day" else when
    published, timed = _earnings_times(reported, when_used, release_times)
    counts = {
        "pre_market": int((when == "pre-market").sum()),
        "post_market": int((when == "post-market").sum()),
        "no_report_time_dated_23_59": int((~when.isin(list(_REPORT_TIME))).sum()),
        "skipped_no_reported_eps": int(np.isnan(eps).sum()),
        "timed_by_8k": int(timed.sum()),
    }
    if pre_market == "next_day":
        counts["pre_market_label_not_trusted"] = int(((when == "pre-market").to_numpy() & ~timed).sum())
    keep = ~np.isnan(eps)
    local = pd.DatetimeIndex(published).tz_convert(NY).strftime("%H:%M")
    labels = np.asarray([f"8-K {hm} ET" if t else w for t, w, hm in zip(timed, when_used, local, strict=True)],
                        dtype=object)
    texts = [
        _earnings_text(ticker, p, r, e, x, w)
        for p, r, e, x, w in zip(period[keep], reported[keep], eps[keep], est[keep], labels[keep], strict=True)
    ]
    basis = pd.Timestamp(adjusted_as_of) if adjusted_as_of is not None else reported.max()
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": ticker,
                "published_at": published[keep].reset_index(drop=True),
                "kind": "fundamentals",
                "source": "earnings",
                "title": texts,
                "value": eps[keep],
                "basis_date": basis.normalize(),
                "timing": np.where(timed[keep], "8-K acceptance", "report time"),
            }
        ),
        source=path.name,
    )
    rep = EventsImport(events=events, source=path.name, rows_read=len(raw), counts=counts)
    if counts["skipped_no_reported_eps"]:
        rep.notes.append(
            f"{counts['skipped_no_reported_eps']} rows without reportedEPS (upcoming quarters) not imported"
        )
    return rep


def _report_times(path: Path, raw: pd.DataFrame, lines, cols: dict) -> pd.Series:
    when = (
        raw[cols["reporttime"]].astype(str).str.strip().str.lower()
        if "reporttime" in cols
        else pd.Series([""] * len(raw))
    )
    raise_rows(
        path.name,
        lines,
        ~when.isin(["", "none", "nan", *_REPORT_TIME]).to_numpy(),
        cols.get("reporttime", "reportTime"),
        lambda i: f"expected pre-market or post-market, got {when.iloc[i]!r}",
    )
    return when


def _earnings_times(reported: pd.DatetimeIndex, when: pd.Series, release_times) -> tuple[pd.Series, np.ndarray]:
    """(UTC publication per row, whether an 8-K acceptance time was used)."""
    offset = np.array([_REPORT_TIME.get(w, END_OF_DAY) for w in when], dtype="timedelta64[ns]")
    published = local_instants(reported, offset)
    timed = np.zeros(len(reported), dtype=bool)
    if release_times is not None and len(release_times):
        exact = pd.Series(release_times).reindex(reported).to_numpy()
        timed = ~pd.isna(exact)
        published = published.where(~timed, pd.Series(exact).astype("datetime64[ns, UTC]"))
    return published, timed


def _earnings_text(ticker: str, period, reported, eps: float, est: float, label: str) -> str:
    timing = f" ({label})" if label in _REPORT_TIME or label.startswith("8-K") else ""
    if np.isfinite(est):
        surprise = eps - est
        pct = f", {100 * surprise / abs(est):+.1f}%" if est != 0 else ""
        body = (f"EPS {per_share(eps, _decimals(eps))} vs {per_share(est, _decimals(est))} estimated "
                f"(surprise {per_share(surprise, 2, sign=True)}{pct})")
    else:
        body = f"EPS {per_share(eps, _decimals(eps))} (no estimate)"
    return f"{ticker} quarter ended {period.date()} reported {reported.date()}{timing}: {body}"


def _decimals(v: float) -> int:
    """Decimals to write a vendor's EPS with: at least 2, more when the vendor gave more (0.0775)."""
    text = f"{v:.6f}".rstrip("0")
    return max(2, len(text.split(".")[1]) if "." in text else 0)


# --- analyst --------------------------------------------------------------------------------------
_RATING = re.compile(
    r"\b(?:upgrades?|downgrades?|maintains|initiates|reiterates|price target|resumes|assumes)\b",
    re.IGNORECASE,
)


def read_analyst(
    path: str | Path,
    *,
    assume_timezone: str | None = None,
    ticker_map: Mapping[str, str] | None = None,
    malformed: str = "error",
) -> EventsImport:
    """Analyst ratings/estimates -> "analyst" events (module docstring: three layouts).

    `malformed="skip"` leaves out CSV records with the wrong number of fields (the Benzinga file has
    titles broken across lines) and counts them as `malformed_records_skipped`; default: they raise.
    """
    if malformed not in ("error", "skip"):
        raise ValueError(f"malformed must be 'error' or 'skip', got {malformed!r}")
    path = Path(path)
    skipped: list[int] | None = [] if malformed == "skip" else None
    raw, lines = read_table(path, skipped)
    cols = layout_columns(raw)
    counts: dict[str, int] = {"malformed_records_skipped": len(skipped)} if skipped else {}
    if "published_at" in cols:
        events = _generic_analyst(path, raw, lines, cols, assume_timezone)
    elif {"title", "date", "stock"} <= set(cols):
        events = _rating_headlines(path, raw, lines, cols, assume_timezone, counts)
    elif {"symbol", "period", "strongbuy", "buy", "hold", "sell", "strongsell"} <= set(cols):
        events = _recommendation_trends(path, raw, lines, cols)
        counts["dated_end_of_month"] = len(events)
    else:
        raise ValueError(
            f"{path.name}: unknown analyst layout (columns: {', '.join(cols.values())}); expected "
            "ticker,published_at,source,action,text[,price_target], a ,title,date,stock headline file or "
            "symbol,period,strongBuy,buy,hold,sell,strongSell"
        )
    if ticker_map:
        events["ticker"] = events["ticker"].replace(dict(ticker_map))
    return EventsImport(events=events, source=path.name, rows_read=len(raw), counts=counts)


def _generic_analyst(path: Path, raw: pd.DataFrame, lines, cols: dict, assume_timezone: str | None):
    require_layout(path, cols, ("ticker", "published_at", "action", "text"), "generic analyst")
    frame = pd.DataFrame(
        {
            "ticker": raw[cols["ticker"]],
            "published_at": raw[cols["published_at"]],
            "kind": "analyst",
            "source": raw[cols["source"]] if "source" in cols else "analyst",
            "title": raw[cols["action"]].astype(str).str.strip(),
            "text": raw[cols["text"]],
            "value": raw[cols["price_target"]] if "price_target" in cols else np.nan,
        }
    )
    fields = {"published_at": cols["published_at"], "title": cols["action"],
              "value": cols.get("price_target", "price_target")}
    return validate_events(frame, source=path.name, lines=lines, assume_timezone=assume_timezone, fields=fields)


def _rating_headlines(path: Path, raw: pd.DataFrame, lines, cols: dict, assume_timezone: str | None, counts: dict):
    title = raw[cols["title"]].astype(str).str.strip()
    rating = title.str.contains(_RATING).to_numpy()
    counts["not_rating_actions"] = int((~rating).sum())
    frame = pd.DataFrame(
        {
            "ticker": raw[cols["stock"]].astype(str).str.strip().str.upper(),
            "published_at": raw[cols["date"]],
            "kind": "analyst",
            "source": "Benzinga",
            "title": title,
        }
    )[rating].reset_index(drop=True)
    return validate_events(
        frame,
        source=path.name,
        lines=None if lines is None else lines[rating],
        assume_timezone=assume_timezone,
        fields={"published_at": cols["date"], "title": cols["title"]},
    )


def _recommendation_trends(path: Path, raw: pd.DataFrame, lines, cols: dict):
    period = date_column(path, raw, lines, cols["period"])
    nums = {
        k: number_column(path, raw, lines, cols[k], allow_none=False)
        for k in ("strongbuy", "buy", "hold", "sell", "strongsell")
    }
    month_end = pd.DatetimeIndex(period + pd.offsets.MonthEnd(0))
    texts = [
        f"analyst recommendations for {p:%Y-%m}: {a:.0f} strong buy, {b:.0f} buy, {h:.0f} hold, {s:.0f} sell, "
        f"{ss:.0f} strong sell"
        for p, a, b, h, s, ss in zip(period, *nums.values(), strict=False)
    ]
    total = sum(nums.values())
    score = np.where(
        total > 0,
        (2 * nums["strongbuy"] + nums["buy"] - nums["sell"] - 2 * nums["strongsell"]) / np.maximum(total, 1),
        np.nan,
    )
    return validate_events(
        pd.DataFrame(
            {
                "ticker": raw[cols["symbol"]].astype(str).str.strip().str.upper(),
                "published_at": local_instants(month_end),
                "kind": "analyst",
                "source": "recommendation trends",
                "title": texts,
                "value": score,
                "timing": "end of month",
            }
        ),
        source=path.name,
    )


def read_estimize_estimates(
    path: str | Path, *, flagged: str = "drop", adjusted_as_of: str | pd.Timestamp | None = None
) -> EventsImport:
    """Estimize analyst estimates (zip or JSON list) -> one "analyst" event per ticker, day and quarter.

    `flagged` estimates (Estimize's own outlier flag) are dropped and counted (`flagged="keep"` keeps them).
    `adjusted_as_of`: the day the EPS figures are split-adjusted to (default the last estimate's day).
    """
    name, obj = read_json_records(path, "estimates")
    rows = []
    for k, r in enumerate(obj):
        for need in ("ticker", "fiscal_year", "fiscal_quarter", "eps", "created_at"):
            if r.get(need) is None and need != "eps":
                raise ValueError(f"{name}, record {k} (id {r.get('id', '?')}), field '{need}': missing")
        rows.append(
            (
                r["ticker"],
                r["fiscal_year"],
                r["fiscal_quarter"],
                r.get("eps"),
                r.get("revenue"),
                r["created_at"],
                bool(r.get("flagged")),
            )
        )
    df = pd.DataFrame(rows, columns=["ticker", "fy", "fq", "eps", "revenue", "created_at", "flagged"])
    ts = pd.to_datetime(df["created_at"], utc=True, format="ISO8601", errors="coerce")
    if ts.isna().any():
        i = int(np.flatnonzero(ts.isna().to_numpy())[0])
        raise ValueError(
            f"{name}, record {i}, field 'created_at': not an ISO-8601 timestamp {df['created_at'].iat[i]!r}"
        )
    df["ts"] = ts
    counts = {"flagged": int(df["flagged"].sum()), "no_eps": int(df["eps"].isna().sum())}
    keep = df["eps"].notna() & (~df["flagged"] if flagged == "drop" else True)
    df = df[keep]
    df["day"] = df["ts"].dt.tz_convert(NY).dt.date
    g = (
        df.groupby(["ticker", "day", "fy", "fq"], sort=True)
        .agg(
            published_at=("ts", "max"),
            n=("eps", "size"),
            mean=("eps", "mean"),
            lo=("eps", "min"),
            hi=("eps", "max"),
        )
        .reset_index()
    )
    texts = [
        f"Estimize: {n} new EPS estimate{'s' if n > 1 else ''} for FQ{q} {y}, mean {per_share(m)}"
        + (f" (range {per_share(lo)} to {per_share(hi)})" if n > 1 else "")
        for n, q, y, m, lo, hi in zip(g["n"], g["fq"], g["fy"], g["mean"], g["lo"], g["hi"], strict=False)
    ]
    basis = pd.Timestamp(adjusted_as_of) if adjusted_as_of is not None else ts.max().tz_convert(NY).tz_localize(None)
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": g["ticker"],
                "published_at": g["published_at"],
                "kind": "analyst",
                "source": "Estimize",
                "title": texts,
                "value": g["mean"],
                "basis_date": basis.normalize(),
                "timing": "estimate",
            }
        ),
        source=name,
    )
    counts["estimates_grouped"] = int(len(df))
    return EventsImport(events=events, source=name, rows_read=len(obj), counts=counts)
