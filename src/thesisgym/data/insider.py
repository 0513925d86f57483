"""Insider transactions -> "insider" events at the time their Form 4 became public.

An insider trade is news when its Form 4 is filed, not when it is made. Form 4 is due two business
days after the trade, but 1-2 % of trades are filed later (some months later), so the legal deadline
is not a filing date. Each trade is dated by the best source there is, and the event says which
(`timing`, and the `source` shown in the prompt):

1. "filed": the file has the filing date (Finnhub: `symbol,share,change,transactionDate,
   transactionCode,transactionPrice,name,filingDate,id`, id = accession number). Public at the
   filing's EDGAR acceptance time when the issuer's submissions list that accession, else at 23:59
   New York of the filing date. Source "Form 4".
2. "form4 index": no filing date in the file (Alpha Vantage: `transaction_date,ticker,executive,
   executive_title,security_type,acquisition_or_disposal,shares,share_price`, any header case), but
   the issuer's SEC submissions list its Form 4 filings (`thesisgym.data.sec.form4_index`) with the
   report date (the earliest trade a form reports) over the trade's period: the trade is public at the
   acceptance of the LATEST Form 4 reporting that trade date (the index does not name the insider, so
   the latest is the one that cannot be too early whichever form it was). Source "Form 4".
3. neither ("undated"): `undated=` chooses.
   - "form5_deadline" (default): public at 23:59 New York of the latest day a filing could legally
     hold the trade, the Form 5 deadline: 45 days after the end of the issuer's fiscal year that
     contains the trade (rolled to the next EDGAR business day), and never before `availability_days`
     business days after the trade. A trade filed late on a Form 5 (or not on the Form 4 the index
     knows, e.g. an amendment) is therefore never shown before it could have been public; the price
     is that a trade filed on time is shown months late. The fiscal year end is the issuer's
     (`fiscal_year_ends`: the SEC submissions' `fiscalYearEnd`, else `FISCAL_YEAR_ENDS`), as a month
     and day that a 52/53-week year can miss by up to `_FISCAL_SLACK_DAYS`, so the year taken is the
     first whose nominal end is at least that many days after the trade and its end is moved that
     many days later. Unknown issuer: any fiscal year end is possible, so the trade's fiscal year may
     end up to 371 days (53 weeks) after it: deadline = trade + 371 + 45 days. Timing "form5
     deadline", source "insider trade (filing date unknown)", so the prompt says the date is an
     estimate.
   - "drop": left out, counted (`undated_dropped`).
   Trades filed more than 10 business days late are not rare (1.5 % of the checkable trades of
   ../shared/data), and the old rule "public 10 business days after the trade" showed such trades up
   to 15 months before their filing; `availability_misses` still measures that rule for the record.

Rows of the same insider, day, direction and security (lots of one trade) are summed into one event
(shares; share-weighted price). Share counts and prices are as traded, written `{{sh:..}}` and
`{{ps:..}}` with the trade day as their basis (thesisgym.data.asof shows them on the as-of basis).
A trade both a filing-dated and an undated file hold is kept once, from the filing-dated file
(`drop_covered_insider`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.tseries.holiday import USFederalHolidayCalendar

from thesisgym.data.asof import per_share, shares
from thesisgym.data.files import (
    EventsImport,
    date_column,
    layout_columns,
    number_column,
    read_table,
    require_layout,
)
from thesisgym.data.validate import local_instants, raise_rows, validate_events

__all__ = [
    "DEFAULT_AVAILABILITY_DAYS",
    "FISCAL_YEAR_ENDS",
    "UNDATED_CHOICES",
    "availability_misses",
    "business_days_after",
    "form5_deadlines",
    "drop_covered_insider",
    "insider_keys",
    "read_insider",
]

# Measured on ../shared/data (docs/data.md): of the 9,521 Finnhub trades with both dates, 1.2 % were
# filed more than 10 business days after the trade (1.7 % after 2, the legal deadline); 20 days would
# miss 0.7 %, at the cost of showing every undated trade four weeks late.
DEFAULT_AVAILABILITY_DAYS = 10
SOURCE_FILED = "Form 4"
UNDATED_CHOICES = ("form5_deadline", "drop")
# Fiscal year ends (MMDD) as the SEC submissions files state them (`fiscalYearEnd`), for the issuers of
# ../shared/data whose submissions file is absent or gives none; a submissions file's value wins.
FISCAL_YEAR_ENDS = {"AAPL": "0926", "MSFT": "0630", "NVDA": "0131", "AMZN": "1231", "GOOG": "1231",
                    "GOOGL": "1231", "META": "1231", "TSLA": "1231"}
_FISCAL_SLACK_DAYS = 7  # a 52/53-week year ends up to a week either side of its nominal month and day
_FORM5_DAYS = 45  # Form 5 is due 45 days after the fiscal year end (Exchange Act rule 16a-3(f))
_LONGEST_FISCAL_YEAR_DAYS = 371  # 53 weeks
SOURCE_ESTIMATED = "insider trade (filing date unknown)"

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


def business_days_after(days: pd.DatetimeIndex, n: int) -> pd.DatetimeIndex:
    """`n` federal business days after each day (a weekend or holiday day first rolls forward):
    EDGAR is closed on weekends and federal holidays."""
    days = pd.DatetimeIndex(days)
    if not len(days):
        return days
    hol = USFederalHolidayCalendar().holidays(days.min() - pd.Timedelta(days=7), days.max() + pd.Timedelta(days=60))
    out = np.busday_offset(
        days.to_numpy().astype("datetime64[D]"), n, roll="forward", holidays=hol.to_numpy().astype("datetime64[D]")
    )
    return pd.DatetimeIndex(out.astype("datetime64[ns]"))


def form5_deadlines(trade: pd.DatetimeIndex, fiscal_year_end: str | None) -> pd.DatetimeIndex:
    """The latest day a filing could legally report each trade: the Form 5 deadline of the fiscal year
    holding it (module docstring: the slack for 52/53-week years, the bound for an unknown issuer),
    on or after the next EDGAR business day."""
    trade = pd.DatetimeIndex(trade).normalize()
    if fiscal_year_end is None:
        end = trade + pd.Timedelta(days=_LONGEST_FISCAL_YEAR_DAYS)
    else:
        if not re.fullmatch(r"(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])", str(fiscal_year_end)):
            raise ValueError(f"fiscal year end must be MMDD (e.g. 0926), got {fiscal_year_end!r}")
        month, day = int(fiscal_year_end[:2]), int(fiscal_year_end[2:])
        earliest = trade + pd.Timedelta(days=_FISCAL_SLACK_DAYS)
        end = pd.DatetimeIndex([_nominal_end(e, month, day) for e in earliest]) + pd.Timedelta(days=_FISCAL_SLACK_DAYS)
    return business_days_after(end + pd.Timedelta(days=_FORM5_DAYS), 0)


def _nominal_end(earliest: pd.Timestamp, month: int, day: int) -> pd.Timestamp:
    """The first month-day (Feb 29 and day 31 clipped to the month's end) on or after `earliest`."""
    for year in (earliest.year, earliest.year + 1):
        last = pd.Timestamp(year=year, month=month, day=1) + pd.offsets.MonthEnd(0)
        end = min(pd.Timestamp(year=year, month=month, day=min(day, last.day)), last)
        if end >= earliest:
            return end
    raise AssertionError("unreachable: a month-day recurs within a year")


def availability_misses(trade: Sequence, filed: Sequence, days: int) -> dict:
    """How often the rule "public `days` business days after the trade, 23:59" is still too early:
    rows (trade date, filing date) filed on a later day than the rule says."""
    trade, filed = pd.DatetimeIndex(pd.to_datetime(list(trade))), pd.DatetimeIndex(pd.to_datetime(list(filed)))
    ok = ~(trade.isna() | filed.isna())
    rule = business_days_after(trade[ok], days)
    missed = int((filed[ok].normalize() > rule).sum())
    n = int(ok.sum())
    return {"days": days, "rows_with_both_dates": n, "missed": missed, "miss_share": missed / n if n else None}


def read_insider(
    path: str | Path,
    *,
    filings: pd.DataFrame | None = None,
    availability_days: int = DEFAULT_AVAILABILITY_DAYS,
    ticker_map: Mapping[str, str] | None = None,
    missing_dates: str = "error",
    undated: str = "form5_deadline",
    fiscal_year_ends: Mapping[str, str | None] | None = None,
) -> EventsImport:
    """Insider transactions -> "insider" events (module docstring: layouts and dating rules).

    `filings`: Form 4 indexes (`thesisgym.data.sec.form4_index`, concatenated over issuers, with a
    `ticker` column). `missing_dates="skip"` leaves out rows with an empty trade date or share count
    (a few in the AMZN file) and counts them as `skipped_missing_date_or_shares`; by default they
    raise, naming the line. `undated`: "form5_deadline" | "drop", for trades neither a filing date nor
    the Form 4 index dates; `fiscal_year_ends`: ticker -> MMDD, over `FISCAL_YEAR_ENDS`.
    """
    if missing_dates not in ("error", "skip"):
        raise ValueError(f"missing_dates must be 'error' or 'skip', got {missing_dates!r}")
    if undated not in UNDATED_CHOICES:
        raise ValueError(f"undated must be one of {', '.join(UNDATED_CHOICES)}, got {undated!r}")
    if not isinstance(availability_days, int) or isinstance(availability_days, bool) or availability_days < 0:
        raise ValueError(f"availability_days must be an int >= 0, got {availability_days!r}")
    path = Path(path)
    raw, lines = read_table(path)
    cols = layout_columns(raw)
    counts: dict[str, int] = {}
    if "filingdate" in cols:
        frame = _finnhub_frame(path, raw, lines, cols, counts)
    else:
        frame = _alphavantage_frame(path, raw, lines, cols, counts, missing_dates)
    if ticker_map:
        frame["ticker"] = frame["ticker"].replace(dict(ticker_map))
    agg = _aggregate(frame)
    counts["lots_merged"] = len(frame) - len(agg)
    if "filingdate" in cols:
        _time_filed(agg, filings, counts)
    else:
        fye = {**FISCAL_YEAR_ENDS, **{k: v for k, v in (fiscal_year_ends or {}).items() if v}}
        agg = _time_undated(agg, filings, availability_days, counts, undated=undated, fiscal_year_ends=fye)
    rep = EventsImport(events=_events(agg, path.name), source=path.name, rows_read=len(frame), counts=counts)
    if "filingdate" not in cols:
        rep.notes.append(
            "trades without a Form 4 in the index: " + ("left out" if undated == "drop" else
                                                        "public at the Form 5 deadline of their fiscal year"))
    return rep


def _finnhub_frame(path: Path, raw: pd.DataFrame, lines, cols: dict, counts: dict) -> pd.DataFrame:
    require_layout(path, cols, ("symbol", "change", "transactiondate", "transactioncode", "name", "filingdate"),
                   "Finnhub insider")
    trade = date_column(path, raw, lines, cols["transactiondate"])
    filed = date_column(path, raw, lines, cols["filingdate"])
    raise_rows(path.name, lines, np.asarray(filed < trade), cols["filingdate"],
               lambda i: f"filing date {filed[i].date()} before the trade date {trade[i].date()}")
    change = number_column(path, raw, lines, cols["change"], allow_none=False)
    code = raw[cols["transactioncode"]].astype(str).str.strip().str.upper()
    verbs = [
        ("sold" if ch < 0 else "bought") if c in ("S", "P") else _FINNHUB_CODES.get(c, f"code {c}")
        for c, ch in zip(code, change, strict=True)
    ]
    counts["dated_by_filing_date"] = len(raw)
    return pd.DataFrame(
        {
            "ticker": raw[cols["symbol"]].astype(str).str.strip().str.upper(),
            "who": raw[cols["name"]].astype(str).str.strip(),
            "title": "",
            "trade": trade,
            "filed": filed,
            "accn": raw[cols["id"]].astype(str).str.strip() if "id" in cols else "",
            "verb": verbs,
            "security": "shares",
            "shares": np.abs(change),
            "price": number_column(path, raw, lines, cols.get("transactionprice"), allow_none=True),
        }
    )


def _alphavantage_frame(path: Path, raw: pd.DataFrame, lines, cols: dict, counts: dict, missing_dates: str):
    require_layout(path, cols, ("transaction_date", "ticker", "executive", "acquisition_or_disposal", "shares"),
                   "Alpha Vantage insider")
    if missing_dates == "skip":
        empty = np.zeros(len(raw), dtype=bool)
        for c in ("transaction_date", "shares"):
            empty |= raw[cols[c]].astype(str).str.strip().isin(["", "None", "nan"]).to_numpy()
        counts["skipped_missing_date_or_shares"] = int(empty.sum())
        raw, lines = raw[~empty].reset_index(drop=True), None if lines is None else lines[~empty]
    trade = date_column(path, raw, lines, cols["transaction_date"])
    ad = raw[cols["acquisition_or_disposal"]].astype(str).str.strip().str.upper()
    raise_rows(path.name, lines, ~ad.isin(["A", "D"]).to_numpy(), cols["acquisition_or_disposal"],
               lambda i: f"expected A or D, got {ad.iloc[i]!r}")

    def text(name: str, default: str) -> pd.Series | str:
        return raw[cols[name]].astype(str).str.strip() if name in cols else default

    return pd.DataFrame(
        {
            "ticker": raw[cols["ticker"]].astype(str).str.strip().str.upper(),
            "who": raw[cols["executive"]].astype(str).str.strip(),
            "title": text("executive_title", ""),
            "trade": trade,
            "filed": pd.NaT,
            "accn": "",
            "verb": np.where(ad == "D", "sold", "acquired"),
            "security": text("security_type", "shares"),
            "shares": number_column(path, raw, lines, cols["shares"], allow_none=False),
            "price": number_column(path, raw, lines, cols.get("share_price"), allow_none=True),
        }
    )


def _aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """Lots of one trade (same insider, day, direction, security, filing) -> one row, share-weighted price."""
    frame = frame.assign(
        pv=frame["shares"] * frame["price"].fillna(0.0),
        priced=np.where(frame["price"].notna(), frame["shares"], 0.0),
    )
    key = ["ticker", "who", "title", "trade", "filed", "accn", "verb", "security"]
    agg = (
        frame.groupby(key, sort=False, dropna=False)
        .agg(shares=("shares", "sum"), pv=("pv", "sum"), priced=("priced", "sum"))
        .reset_index()
    )
    agg["price"] = np.where(agg["priced"] > 0, agg["pv"] / agg["priced"].where(agg["priced"] > 0, 1.0), np.nan)
    return agg


def _time_filed(agg: pd.DataFrame, filings: pd.DataFrame | None, counts: dict) -> None:
    """Public at the filing's acceptance when an index lists the accession, else 23:59 of the filing date."""
    published = local_instants(pd.DatetimeIndex(agg["filed"]))
    if filings is not None and len(filings):
        acc = dict(zip(filings["accn"].astype(str), filings["accepted"], strict=False))
        exact = pd.Series([acc.get(a) for a in agg["accn"]], dtype="datetime64[ns, UTC]")
        hit = exact.notna().to_numpy()
        published = published.where(~hit, exact)
        counts["timed_by_acceptance"] = int(hit.sum())
    agg["published_at"] = published.to_numpy()
    agg["timing"] = "filed"


def _time_undated(agg: pd.DataFrame, filings: pd.DataFrame | None, days: int, counts: dict, *, undated: str,
                  fiscal_year_ends: Mapping[str, str]) -> pd.DataFrame:
    """The latest Form 4 of the trade's report date when the index covers it, else `undated`'s choice
    (module docstring). Counts what both choices would do with the undated trades."""
    trade = pd.DatetimeIndex(agg["trade"]).normalize()
    rule = business_days_after(trade, days)
    deadline = rule.to_numpy().copy()
    for t, idx in agg.groupby("ticker", sort=False).indices.items():
        deadline[idx] = np.maximum(form5_deadlines(trade[idx], fiscal_year_ends.get(str(t))).to_numpy(), deadline[idx])
    deadline = pd.DatetimeIndex(deadline)
    published = local_instants(deadline)
    timing = np.full(len(agg), "form5 deadline", dtype=object)
    candidates = np.zeros(len(agg), dtype="int64")
    if filings is not None and len(filings):
        f = filings.assign(report_date=pd.to_datetime(filings["report_date"]).dt.normalize())
        latest = f.groupby(["ticker", "report_date"])["accepted"].agg(["max", "size"])
        key = pd.MultiIndex.from_arrays([agg["ticker"], pd.DatetimeIndex(agg["trade"]).normalize()])
        found = latest.reindex(key)
        hit = found["max"].notna().to_numpy()
        published = published.where(~hit, pd.Series(found["max"].to_numpy(), dtype="datetime64[ns, UTC]"))
        timing[hit] = "form4 index"
        candidates[hit] = found["size"].to_numpy()[hit]
    agg["published_at"] = published.to_numpy()
    agg["timing"] = timing
    und = timing == "form5 deadline"
    counts["dated_by_form4_index"] = int((~und).sum())
    counts["dated_by_form4_index_single_filing"] = int((candidates == 1).sum())
    counts["undated"] = int(und.sum())
    later = (deadline[und] - rule[und]).days
    counts["undated_form5_median_days_after_old_rule"] = int(np.median(later)) if und.any() else 0
    if undated == "drop":
        counts["undated_dropped"] = int(und.sum())
        return agg[~und].reset_index(drop=True)
    counts["dated_by_form5_deadline"] = int(und.sum())
    return agg


def _events(agg: pd.DataFrame, source: str) -> pd.DataFrame:
    texts = []
    for who, title, verb, sec, sh, px, day in zip(
        agg["who"], agg["title"], agg["verb"], agg["security"], agg["shares"], agg["price"], agg["trade"], strict=True
    ):
        role = f" ({title})" if title and title != "nan" else ""
        at = f" at {per_share(px)}" if np.isfinite(px) and px > 0 else ""
        sec = sec if sec and sec != "nan" else "shares"
        texts.append(f"{who}{role} {verb} {shares(sh)} {sec}{at} on {day.date()}")
    signed = agg["shares"].to_numpy() * np.where(agg["verb"] == "sold", -1, 1)
    return validate_events(
        pd.DataFrame(
            {
                "ticker": agg["ticker"],
                "published_at": pd.Series(agg["published_at"].to_numpy(), dtype="datetime64[ns, UTC]"),
                "kind": "insider",
                "source": np.where(agg["timing"] == "form5 deadline", SOURCE_ESTIMATED, SOURCE_FILED),
                "title": texts,
                "value": signed,
                "basis_date": pd.DatetimeIndex(agg["trade"]).normalize(),
                "timing": agg["timing"].to_numpy(),
            }
        ),
        source=source,
    )


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
