"""Company event files -> events with the time they became public: insider trades, earnings, analysts.

Insider transactions (`read_insider`), two layouts, chosen by header:
- with a filing date (Finnhub: `symbol,share,change,transactionDate,transactionCode,transactionPrice,
  name,filingDate,id`): public at the filing date, 23:59 New York (the day is all the file gives).
- without one (Alpha Vantage: `transaction_date,ticker,executive,executive_title,security_type,
  acquisition_or_disposal,shares,share_price`, any header case): a Form 4 is due within two business
  days of the trade, so the trade is taken to be public `delay_business_days` (default 2) business
  days (US federal holidays, when EDGAR is closed, excluded) after the trade date, at 23:59.
  Conservative: a filing made earlier only shows up later. The report counts which rule dated each event (`dated_by_filing_date`, `dated_by_trade_date_plus_delay`).
  Rows of the same insider, day, direction and security (lots of one trade) are summed into one
  event (shares; share-weighted price) and the merge is counted.

Earnings (`read_earnings`, Alpha Vantage `fiscalDateEnding,reportedDate,reportedEPS,estimatedEPS,
surprise,surprisePercentage[,reportTime]`): reported vs estimated EPS and the surprise, at the report
time: pre-market = 08:00 New York (visible to that day's 16:00 context), post-market = 16:05 (the
next day's), no reportTime = 23:59 (the next day's); or, given the company's 8-K earnings releases
(item 2.02 in its SEC submissions), the release's acceptance time. Kind "fundamentals", source
"earnings (split-adjusted)": Alpha Vantage adjusts past EPS for later splits (as the shared prices
are), which tells a prompt that a split came later; SEC facts (thesisgym.data.sec) are as filed.

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
fiscal quarter into one event stamped at the day's latest estimate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.tseries.holiday import USFederalHolidayCalendar

from thesisgym.data.files import EventsImport, read_json_records, read_table
from thesisgym.data.validate import END_OF_DAY, local_instants, raise_rows, require_columns, validate_events
from thesisgym.schema import DEFAULT_TIMEZONE

__all__ = [
    "drop_covered_insider",
    "insider_keys",
    "read_analyst",
    "read_earnings",
    "read_estimize_estimates",
    "read_insider",
]

NY = DEFAULT_TIMEZONE


def _business_days_after(days: pd.DatetimeIndex, n: int) -> pd.DatetimeIndex:
    """`n` federal business days after each day (a weekend or holiday day first rolls forward):
    Form 4 deadlines count the days EDGAR is open, so a holiday pushes the due date out."""
    hol = USFederalHolidayCalendar().holidays(
        days.min() - pd.Timedelta(days=7), days.max() + pd.Timedelta(days=30)
    )
    out = np.busday_offset(
        days.to_numpy().astype("datetime64[D]"),
        n,
        roll="forward",
        holidays=hol.to_numpy().astype("datetime64[D]"),
    )
    return pd.DatetimeIndex(out.astype("datetime64[ns]"))


def _norm_cols(raw: pd.DataFrame) -> dict[str, str]:
    """normalised name (lower, spaces -> _) -> the file's column name."""
    return {re.sub(r"\s+", "_", str(c).strip().lower()): str(c) for c in raw.columns}


def _need(path: Path, cols: Mapping[str, str], names: tuple[str, ...], layout: str) -> None:
    # `cols` maps normalised names to the file's; the message lists the file's own
    have = [k if k in names else v for k, v in cols.items()]
    require_columns(path.name, have, names, layout)


def _dates(path: Path, raw: pd.DataFrame, lines, col: str) -> pd.DatetimeIndex:
    text = raw[col].astype(str).str.strip()
    parsed = pd.to_datetime(text, format="%Y-%m-%d", errors="coerce")
    raise_rows(
        path.name,
        lines,
        parsed.isna().to_numpy(),
        col,
        lambda i: (
            "missing date"
            if text.iloc[i] in ("", "None", "nan")
            else f"not a YYYY-MM-DD date {text.iloc[i]!r}"
        ),
    )
    return pd.DatetimeIndex(parsed)


def _numbers(path: Path, raw: pd.DataFrame, lines, col: str | None, *, allow_none: bool) -> np.ndarray:
    """The column as floats ("None", "-", "" = missing); an optional column that is absent (`col`
    None, with `allow_none`) is all NaN."""
    if col is None and allow_none:
        return np.full(len(raw), np.nan)
    text = raw[col].astype(str).str.strip()
    none = text.isin(["", "None", "nan", "NaN", "-"]).to_numpy()
    vals = pd.to_numeric(text.where(~none, None), errors="coerce").to_numpy(dtype="float64")
    bad = np.isnan(vals) & ~none
    if not allow_none:
        bad |= none
    raise_rows(
        path.name, lines, bad, col, lambda i: "missing value" if none[i] else f"not a number {text.iloc[i]!r}"
    )
    return vals


def _ticker_from_name(path: Path, ticker: str | None) -> str:
    if ticker:
        return ticker
    m = re.search(r"_([A-Z]{1,6})(?:_[^/]*)?\.(?:csv|json|zip)$", path.name)
    if not m:
        raise ValueError(f"{path.name}: cannot tell the ticker from the file name; pass ticker=")
    return m.group(1)


# --- insider --------------------------------------------------------------------------------------
_FINNHUB_CODES = {
    "S": "sold",
    "P": "bought",
    "M": "exercised options for",
    "A": "was awarded",
    "F": "withheld for tax",
    "G": "gifted",
    "C": "converted",
    "D": "disposed of",
    "X": "exercised",
    "J": "other transaction in",
}


def read_insider(
    path: str | Path,
    *,
    delay_business_days: int = 2,
    ticker_map: Mapping[str, str] | None = None,
    missing_dates: str = "error",
) -> EventsImport:
    """Insider transactions -> "insider" events (module docstring: layouts and dating rules).

    `missing_dates="skip"` leaves out rows with an empty trade date or share count (a few in the AMZN
    file) and counts them as `skipped_missing_date_or_shares`; by default they raise, naming the line.
    """
    if missing_dates not in ("error", "skip"):
        raise ValueError(f"missing_dates must be 'error' or 'skip', got {missing_dates!r}")
    if not isinstance(delay_business_days, int) or delay_business_days < 0:
        raise ValueError(f"delay_business_days must be an int >= 0, got {delay_business_days!r}")
    path = Path(path)
    raw, lines = read_table(path)
    cols = _norm_cols(raw)
    counts: dict[str, int] = {}
    if "filingdate" in cols:
        _need(
            path,
            cols,
            ("symbol", "change", "transactiondate", "transactioncode", "name", "filingdate"),
            "Finnhub insider",
        )
        tick = raw[cols["symbol"]].astype(str).str.strip().str.upper()
        trade = _dates(path, raw, lines, cols["transactiondate"])
        filed = _dates(path, raw, lines, cols["filingdate"])
        change = _numbers(path, raw, lines, cols["change"], allow_none=False)
        price = _numbers(path, raw, lines, cols.get("transactionprice"), allow_none=True)
        code = raw[cols["transactioncode"]].astype(str).str.strip().str.upper()
        frame = pd.DataFrame(
            {
                "ticker": tick,
                "who": raw[cols["name"]].astype(str).str.strip(),
                "title": "",
                "trade": trade,
                "published_at": local_instants(filed),
                "verb": [
                    _FINNHUB_CODES.get(c, f"code {c}")
                    if not (c == "S" or c == "P")
                    else ("sold" if ch < 0 else "bought")
                    for c, ch in zip(code, change, strict=False)
                ],
                "security": "shares",
                "shares": np.abs(change),
                "price": price,
            }
        )
        counts["dated_by_filing_date"] = len(frame)
        raise_rows(
            path.name,
            lines,
            np.asarray(filed < trade),
            cols["filingdate"],
            lambda i: f"filing date {filed[i].date()} before the trade date {trade[i].date()}",
        )
        rule = "filing date"
    else:
        _need(
            path,
            cols,
            ("transaction_date", "ticker", "executive", "acquisition_or_disposal", "shares"),
            "Alpha Vantage insider",
        )
        if missing_dates == "skip":
            empty = np.zeros(len(raw), dtype=bool)
            for c in ("transaction_date", "shares"):
                empty |= raw[cols[c]].astype(str).str.strip().isin(["", "None", "nan"]).to_numpy()
            counts["skipped_missing_date_or_shares"] = int(empty.sum())
            raw, lines = raw[~empty].reset_index(drop=True), None if lines is None else lines[~empty]
        trade = _dates(path, raw, lines, cols["transaction_date"])
        shares = _numbers(path, raw, lines, cols["shares"], allow_none=False)
        price = _numbers(path, raw, lines, cols.get("share_price"), allow_none=True)
        ad = raw[cols["acquisition_or_disposal"]].astype(str).str.strip().str.upper()
        raise_rows(
            path.name,
            lines,
            ~ad.isin(["A", "D"]).to_numpy(),
            cols["acquisition_or_disposal"],
            lambda i: f"expected A or D, got {ad.iloc[i]!r}",
        )
        public = _business_days_after(trade, delay_business_days) if delay_business_days else trade
        frame = pd.DataFrame(
            {
                "ticker": raw[cols["ticker"]].astype(str).str.strip().str.upper(),
                "who": raw[cols["executive"]].astype(str).str.strip(),
                "title": raw[cols["executive_title"]].astype(str).str.strip()
                if "executive_title" in cols
                else "",
                "trade": trade,
                "published_at": local_instants(public),
                "verb": np.where(ad == "D", "sold", "acquired"),
                "security": raw[cols["security_type"]].astype(str).str.strip()
                if "security_type" in cols
                else "shares",
                "shares": shares,
                "price": price,
            }
        )
        counts["dated_by_trade_date_plus_delay"] = len(frame)
        rule = f"trade date + {delay_business_days} business days (no filing date in the file)"
    if ticker_map:
        frame["ticker"] = frame["ticker"].replace(dict(ticker_map))
    # lots of one trade -> one event, share-weighted price
    frame["pv"] = frame["shares"] * frame["price"].fillna(0.0)
    frame["priced"] = np.where(frame["price"].notna(), frame["shares"], 0.0)
    key = ["ticker", "who", "title", "trade", "published_at", "verb", "security"]
    agg = (
        frame.groupby(key, sort=False, dropna=False)
        .agg(shares=("shares", "sum"), pv=("pv", "sum"), priced=("priced", "sum"))
        .reset_index()
    )
    counts["lots_merged"] = len(frame) - len(agg)
    avg = np.where(agg["priced"] > 0, agg["pv"] / agg["priced"].where(agg["priced"] > 0, 1.0), np.nan)
    texts = []
    for who, title, verb, sec, sh, px, day in zip(
        agg["who"], agg["title"], agg["verb"], agg["security"], agg["shares"], avg, agg["trade"], strict=False
    ):
        role = f" ({title})" if title and title != "nan" else ""
        at = f" at {px:,.2f}" if np.isfinite(px) and px > 0 else ""
        texts.append(
            f"{who}{role} {verb} {sh:,.0f} {sec if sec and sec != 'nan' else 'shares'}{at} on {day.date()}"
        )
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": agg["ticker"],
                "published_at": agg["published_at"],
                "kind": "insider",
                "source": "Form 4" if rule == "filing date" else "insider trade",
                "title": texts,
                "value": agg["shares"] * np.where(agg["verb"] == "sold", -1, 1),
            }
        ),
        source=path.name,
    )
    rep = EventsImport(events=events, source=path.name, rows_read=len(frame), counts=counts)
    rep.notes.append(f"public time: {rule}")
    return rep


_INSIDER_TEXT = re.compile(
    r"^(?P<who>.+?)(?: \([^)]*\))? (?:sold|acquired|bought|exercised options for|was awarded|withheld for tax|"
    r"gifted|converted|disposed of|exercised|other transaction in|code \w+) .* on (?P<day>\d{4}-\d{2}-\d{2})$"
)


def insider_keys(events: pd.DataFrame) -> list[tuple[str, str, str] | None]:
    """(ticker, insider name as sorted lower-case words, trade date) per insider event written by
    `read_insider`; "KONDO, CHRIS" (Alpha Vantage) and "KONDO CHRIS" (Finnhub) give the same key."""
    out: list[tuple[str, str, str] | None] = []
    for t, title in zip(events["ticker"], events["title"], strict=False):
        m = _INSIDER_TEXT.match(str(title))
        who = " ".join(sorted(re.sub(r"[^a-z ]", " ", m["who"].lower()).split())) if m else ""
        out.append((str(t), who, m["day"]) if m else None)
    return out


def drop_covered_insider(undated: EventsImport, dated: list[EventsImport]) -> None:
    """Leave out of `undated` (a file without filing dates) the trades a filing-dated source also has:
    the same trade twice in a prompt is noise, and the filing date is the better public time. Counted
    as `also_in_a_filing_dated_source`."""
    covered = {k for rep in dated for k in insider_keys(rep.events) if k is not None}
    if not covered:
        return
    hit = np.array([k in covered for k in insider_keys(undated.events)], dtype=bool)
    undated.counts["also_in_a_filing_dated_source"] = int(hit.sum())
    undated.events = undated.events[~hit].reset_index(drop=True)


# --- earnings -------------------------------------------------------------------------------------
_REPORT_TIME = {"pre-market": pd.Timedelta(hours=8), "post-market": pd.Timedelta(hours=16, minutes=5)}


def read_earnings(
    path: str | Path,
    *,
    ticker: str | None = None,
    pre_market: str = "trust",
    release_times: pd.Series | None = None,
) -> EventsImport:
    """Alpha Vantage earnings -> "fundamentals" events at the report time (module docstring).

    `release_times` (from `thesisgym.data.sec.earnings_release_times` of the company's submissions):
    when an 8-K item 2.02 was accepted on the report date, its acceptance time is used instead of the
    label (counted as `timed_by_8k`). `pre_market="next_day"` distrusts a pre-market label that no 8-K
    confirms and dates it 16:05 (counted as `pre_market_label_not_trusted`): the shared Alpha Vantage
    files label several after-close reports of 2014 pre-market, which would leak them into the close.
    """
    if pre_market not in ("trust", "next_day"):
        raise ValueError(f"pre_market must be 'trust' or 'next_day', got {pre_market!r}")
    path = Path(path)
    raw, lines = read_table(path)
    cols = _norm_cols(raw)
    _need(
        path,
        cols,
        ("fiscaldateending", "reporteddate", "reportedeps", "estimatedeps"),
        "Alpha Vantage earnings",
    )
    ticker = _ticker_from_name(path, ticker)
    period = _dates(path, raw, lines, cols["fiscaldateending"])
    reported = _dates(path, raw, lines, cols["reporteddate"])
    eps = _numbers(path, raw, lines, cols["reportedeps"], allow_none=True)
    est = _numbers(path, raw, lines, cols["estimatedeps"], allow_none=True)
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
    when_used = when.where(when != "pre-market", "post-market") if pre_market == "next_day" else when
    offset = np.array([_REPORT_TIME.get(w, END_OF_DAY) for w in when_used], dtype="timedelta64[ns]")
    published = local_instants(reported, offset)
    timed = np.zeros(len(raw), dtype=bool)
    if release_times is not None and len(release_times):
        exact = pd.Series(release_times).reindex(reported).to_numpy()
        timed = ~pd.isna(exact)
        published = published.where(~timed, pd.Series(exact).astype("datetime64[ns, UTC]"))
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
    texts = []
    local = pd.DatetimeIndex(published).tz_convert(NY).strftime("%H:%M")
    labels = [f"8-K {hm} ET" if t else w for t, w, hm in zip(timed, when_used, local, strict=False)]
    for p, r, e, x, w in zip(
        period[keep],
        reported[keep],
        eps[keep],
        est[keep],
        np.asarray(labels, dtype=object)[keep],
        strict=False,
    ):
        timing = f" ({w})" if w in _REPORT_TIME or w.startswith("8-K") else ""
        if np.isfinite(x):
            surprise = e - x
            pct = f", {100 * surprise / abs(x):+.1f}%" if x != 0 else ""
            body = f"EPS {e:g} vs {x:g} estimated (surprise {surprise:+.2f}{pct})"
        else:
            body = f"EPS {e:g} (no estimate)"
        texts.append(f"{ticker} quarter ended {p.date()} reported {r.date()}{timing}: {body}")
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": ticker,
                "published_at": published[keep].reset_index(drop=True),
                "kind": "fundamentals",
                "source": "earnings (split-adjusted)",
                "title": texts,
                "value": eps[keep],
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
    cols = _norm_cols(raw)
    counts: dict[str, int] = {"malformed_records_skipped": len(skipped)} if skipped else {}
    if "published_at" in cols:
        _need(path, cols, ("ticker", "published_at", "action", "text"), "generic analyst")
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
        fields = {
            "published_at": cols["published_at"],
            "title": cols["action"],
            "value": cols.get("price_target", "price_target"),
        }
        events = validate_events(
            frame, source=path.name, lines=lines, assume_timezone=assume_timezone, fields=fields
        )
    elif {"title", "date", "stock"} <= set(cols):
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
        events = validate_events(
            frame,
            source=path.name,
            lines=None if lines is None else lines[rating],
            assume_timezone=assume_timezone,
            fields={"published_at": cols["date"], "title": cols["title"]},
        )
    elif {"symbol", "period", "strongbuy", "buy", "hold", "sell", "strongsell"} <= set(cols):
        period = _dates(path, raw, lines, cols["period"])
        nums = {
            k: _numbers(path, raw, lines, cols[k], allow_none=False)
            for k in ("strongbuy", "buy", "hold", "sell", "strongsell")
        }
        month_end = pd.DatetimeIndex(period + pd.offsets.MonthEnd(0))
        texts = [
            f"analyst recommendations for {p:%Y-%m}: {a:.0f} strong buy, {b:.0f} buy, {h:.0f} hold, {s:.0f} sell, {ss:.0f} strong sell"
            for p, a, b, h, s, ss in zip(period, *nums.values(), strict=False)
        ]
        total = sum(nums.values())
        score = np.where(
            total > 0,
            (2 * nums["strongbuy"] + nums["buy"] - nums["sell"] - 2 * nums["strongsell"])
            / np.maximum(total, 1),
            np.nan,
        )
        events = validate_events(
            pd.DataFrame(
                {
                    "ticker": raw[cols["symbol"]].astype(str).str.strip().str.upper(),
                    "published_at": local_instants(month_end),
                    "kind": "analyst",
                    "source": "recommendation trends",
                    "title": texts,
                    "value": score,
                }
            ),
            source=path.name,
        )
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


def read_estimize_estimates(path: str | Path, *, flagged: str = "drop") -> EventsImport:
    """Estimize analyst estimates (zip or JSON list) -> one "analyst" event per ticker, day and quarter.

    `flagged` estimates (Estimize's own outlier flag) are dropped and counted (`flagged="keep"` keeps them).
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
        f"Estimize: {n} new EPS estimate{'s' if n > 1 else ''} for FQ{q} {y}, mean {m:.2f}"
        + (f" (range {lo:.2f} to {hi:.2f})" if n > 1 else "")
        for n, q, y, m, lo, hi in zip(g["n"], g["fq"], g["fy"], g["mean"], g["lo"], g["hi"], strict=False)
    ]
    events = validate_events(
        pd.DataFrame(
            {
                "ticker": g["ticker"],
                "published_at": g["published_at"],
                "kind": "analyst",
                "source": "Estimize",
                "title": texts,
                "value": g["mean"],
            }
        ),
        source=name,
    )
    counts["estimates_grouped"] = int(len(df))
    return EventsImport(events=events, source=name, rows_read=len(obj), counts=counts)
