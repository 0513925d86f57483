"""SEC EDGAR XBRL fundamentals as filed: `companyfacts` (+ `submissions` acceptance times) -> events.

What a prompt may show about a company's financials on day d is what its filings made public by the
cutoff of d, with the values those filings carried, not today's restated ones. The SEC `companyfacts`
API gives every reported value with the accession number and filing date of the filing that reported
it (`facts.us-gaap.TAG.units.UNIT[{start, end, val, accn, fy, fp, form, filed}]`), so:

- One event per 10-K/10-Q (and amendment) filing: the chosen facts (`FACTS`) for the filing's own
  period (3 months for a 10-Q, 12 months for a 10-K; cash flow, which 10-Qs report year-to-date, shows
  its span), each with its change against the same-length period a year earlier *as reported in the
  same filing*, plus gross and operating margins. Rendered as one readable fundamentals item, e.g.
  "10-K FY2019 (period ended 2019-09-28): revenue 260,174 million (-2.0% y/y); ...".
- Restatements: when a later filing reports a different value for a period already shown, one event at
  that later filing's time lists the changes ("restated diluted EPS for the 12 months ended
  2020-09-26: 3.28, previously 13.00"). Nothing earlier is rewritten: the store holds both.
- Time stamp: with the `submissions` JSON (or its `-submissions-NNN.json` pages), the filing's
  `acceptanceDateTime`. It ends in "Z", but recorded files disagree on what the clock is: in some
  (the shared AAPL file) it is US Eastern time, in others (MSFT, NVDA, TSLA) real UTC. EDGAR's own
  rule tells them apart: a filing other than Forms 3/4/5 accepted after 17:30 Eastern carries the next
  business day's filing date. `read_submissions` reads each file both ways and keeps the reading that
  agrees with more filing dates (Eastern on a tie, the later and so safer instant), and says which.
  Without submissions, the `filed` date, which only gives the day, is placed at 23:59 Eastern
  (visible from the next trading day). The import report counts which was used.
- Per-share numbers (diluted EPS) are written `{{ps:..}}` with the filing day as their basis, so a
  prompt after a later split shows them on its own basis (thesisgym.data.asof); a comparative a later
  filing changed only by a split in between is not reported as a restatement.
- `form4_index`: the Form 4 filings of a submissions frame (accession, report date = the earliest
  trade reported, acceptance time), which dates insider trades by their real filing
  (thesisgym.data.corporate).

Live loading (`fetch_sec_json`, `fetch_company`): the SEC asks for a descriptive User-Agent with a
contact e-mail and at most 10 requests a second; both are enforced here. Tests never call them; they
feed the recorded responses in ../shared/data/fundamentals through the same parsers.
"""

from __future__ import annotations

import gzip
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.asof import SplitHistory, per_share
from thesisgym.data.files import EventsImport, read_json
from thesisgym.data.validate import local_instants, validate_events

__all__ = [
    "FACTS",
    "SecClient",
    "acceptance_zone",
    "earnings_release_times",
    "fetch_company",
    "form4_index",
    "read_companyfacts",
    "fiscal_year_end",
    "read_submissions",
]

EASTERN = "America/New_York"
# label -> candidate us-gaap tags, first present wins for a filing (companies move between tags).
FACTS: dict[str, tuple[str, ...]] = {
    "revenue": (
        "RevenueFromContractWithCustomerExcludingAssessedTax",
        "Revenues",
        "SalesRevenueNet",
        "RevenueFromContractWithCustomerIncludingAssessedTax",
    ),
    "gross profit": ("GrossProfit",),
    "operating income": ("OperatingIncomeLoss",),
    "net income": ("NetIncomeLoss",),
    "diluted EPS": ("EarningsPerShareDiluted",),
    "operating cash flow": ("NetCashProvidedByUsedInOperatingActivities",),
    "R&D expense": ("ResearchAndDevelopmentExpense",),
}
_FORMS = ("10-K", "10-Q", "10-K/A", "10-Q/A", "20-F", "40-F")
_RESTATE_RTOL = 0.005


# --- submissions: accession number -> acceptance time -------------------------------------------
def _submission_columns(obj: object, name: str) -> Mapping[str, list]:
    if isinstance(obj, Mapping) and isinstance(obj.get("filings"), Mapping):
        obj = obj["filings"].get("recent")  # the main file; the -NNN pages are flat
    if not isinstance(obj, Mapping):
        raise ValueError(f"{name}: not a SEC submissions layout (expected filings.recent or flat columns)")
    for col in ("accessionNumber", "filingDate", "acceptanceDateTime", "form"):
        if not isinstance(obj.get(col), list):
            raise ValueError(f"{name}, record filings.recent, field '{col}': missing or not a list")
    n = len(obj["accessionNumber"])
    for col in ("filingDate", "acceptanceDateTime", "form"):
        if len(obj[col]) != n:
            raise ValueError(
                f"{name}, record filings.recent, field '{col}': {len(obj[col])} values for {n} accession numbers"
            )
    return obj


_INSIDER_FORMS = ("3", "4", "5", "3/A", "4/A", "5/A")


def _edgar_filing_day(local: pd.DatetimeIndex) -> np.ndarray:
    """The filing date EDGAR gives a filing accepted at Eastern time `local`: that business day, or the
    next one when accepted after 17:30."""
    from pandas.tseries.holiday import USFederalHolidayCalendar

    day = local.tz_localize(None).normalize().to_numpy().astype("datetime64[D]")
    hol = USFederalHolidayCalendar().holidays(str(day.min() - 7), str(day.max() + 30)).to_numpy().astype("datetime64[D]")
    late = np.asarray(local.hour * 60 + local.minute >= 17 * 60 + 30)
    return np.busday_offset(day, np.where(late, 1, 0), roll="forward", holidays=hol)


def acceptance_zone(naive: pd.DatetimeIndex, filing_date: Sequence[str], form: Sequence[str]) -> tuple[str, dict]:
    """Which clock a file's `acceptanceDateTime` values are on ("America/New_York" or "UTC"), chosen
    by EDGAR's 17:30 rule on the filings other than Forms 3/4/5, and the agreement counts."""
    keep = ~pd.Series(list(form)).astype(str).isin(_INSIDER_FORMS).to_numpy() & ~naive.isna()
    filed = pd.to_datetime(pd.Series(list(filing_date))[keep], errors="coerce").to_numpy().astype("datetime64[D]")
    agree = {}
    for zone in (EASTERN, "UTC"):
        local = naive[keep].tz_localize(zone, ambiguous=False, nonexistent="shift_forward").tz_convert(EASTERN)
        agree[zone] = int((_edgar_filing_day(local) == filed).sum()) if keep.any() else 0
    zone = "UTC" if agree["UTC"] > agree[EASTERN] else EASTERN
    return zone, {"filings_checked": int(keep.sum()), "agree_if_eastern": agree[EASTERN], "agree_if_utc": agree["UTC"]}


def read_submissions(paths: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """Filings of one or more `submissions` files: accn, form, filing_date, accepted (UTC), report_date,
    items (8-K item numbers, e.g. "2.02,9.01"; 2.02 = results of operations, i.e. an earnings release),
    acceptance_zone (the clock the file's times were read on, module docstring).

    A value that does not parse raises naming the file, the accession number and the field.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    frames = []
    for p in paths:
        p = Path(p)
        cols = _submission_columns(read_json(p), p.name)
        raw = pd.Series(cols["acceptanceDateTime"], dtype=object).fillna("").astype(str)
        naive = pd.to_datetime(
            raw.str.replace(r"(\.\d+)?Z$", "", regex=True), format="ISO8601", errors="coerce"
        )
        bad = naive.isna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{p.name}, record {cols['accessionNumber'][i]}, field 'acceptanceDateTime': "
                f"not a timestamp {raw.iloc[i]!r} ({int(bad.sum())} such records)"
            )
        zone, _ = acceptance_zone(pd.DatetimeIndex(naive), cols["filingDate"], cols["form"])
        accepted = pd.DatetimeIndex(naive).tz_localize(zone, ambiguous=False, nonexistent="shift_forward")
        frames.append(
            pd.DataFrame(
                {
                    "accn": cols["accessionNumber"],
                    "form": cols["form"],
                    "filing_date": cols["filingDate"],
                    "accepted": accepted.tz_convert("UTC"),
                    "report_date": cols.get("reportDate", [""] * len(raw)),
                    "items": cols.get("items", [""] * len(raw)),
                    "acceptance_zone": zone,
                }
            )
        )
    out = pd.concat(frames, ignore_index=True)
    return out.drop_duplicates("accn", keep="first").reset_index(drop=True)


def fiscal_year_end(path: str | Path) -> str | None:
    """The issuer's fiscal year end (MMDD, e.g. "0926") a `submissions` file states, None if it has none."""
    obj = read_json(Path(path))
    value = obj.get("fiscalYearEnd") if isinstance(obj, dict) else None
    return str(value) if value else None


def form4_index(submissions: pd.DataFrame, ticker: str) -> pd.DataFrame:
    """The Form 4 filings of one issuer's submissions: ticker, accn, report_date (the earliest trade the
    form reports), filing_date, accepted (UTC). Amendments (4/A) are left out: they restate a filing
    already public."""
    f4 = submissions[submissions["form"].astype(str) == "4"]
    report = pd.to_datetime(f4["report_date"], errors="coerce")
    return pd.DataFrame(
        {
            "ticker": ticker,
            "accn": f4["accn"].to_numpy(),
            "report_date": report.to_numpy(),
            "filing_date": pd.to_datetime(f4["filing_date"], errors="coerce").to_numpy(),
            "accepted": f4["accepted"].to_numpy(),
        }
    )[report.notna().to_numpy()].reset_index(drop=True)


def earnings_release_times(submissions: pd.DataFrame) -> pd.Series:
    """Acceptance times (UTC) of 8-K filings with item 2.02 (results of operations), one per New York
    day (the earliest), indexed by that day: when an earnings release became public, to the second."""
    is_release = submissions["form"].astype(str).str.startswith("8-K") & submissions["items"].astype(
        str
    ).str.contains(r"\b2\.02\b")
    acc = submissions.loc[is_release, "accepted"].sort_values()
    day = pd.DatetimeIndex(acc).tz_convert(EASTERN).normalize().tz_localize(None)
    out = pd.Series(acc.to_numpy(), index=day)
    return out[~out.index.duplicated(keep="first")]


# --- companyfacts -------------------------------------------------------------------------------
@dataclass
class _Fact:
    label: str
    start: pd.Timestamp | None
    end: pd.Timestamp
    val: float
    accn: str
    filed: str
    form: str
    fy: object
    fp: str
    tag: str
    prio: int  # position of the tag in FACTS[label]; a filing's lowest wins

    @property
    def months(self) -> int:
        if self.start is None:
            return 0
        return int(round((self.end - self.start).days / 30.44))


def _facts(obj: object, name: str, counts: dict[str, int]) -> list[_Fact]:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("facts"), Mapping):
        raise ValueError(
            f"{name}: not a SEC companyfacts layout (expected a 'facts' object with us-gaap/ifrs tags)"
        )
    taxonomy = obj["facts"].get("us-gaap") or obj["facts"].get("ifrs-full")
    if not isinstance(taxonomy, Mapping):
        raise ValueError(f"{name}, record facts, field 'us-gaap': missing (no us-gaap or ifrs-full facts)")
    out: list[_Fact] = []
    for label, tags in FACTS.items():
        for prio, tag in enumerate(tags):
            units = taxonomy.get(tag, {}).get("units") if isinstance(taxonomy.get(tag), Mapping) else None
            if not units:
                continue
            for unit, rows in units.items():
                if not isinstance(rows, list):
                    raise ValueError(f"{name}, record {tag}.units.{unit}: expected a list of facts")
                for k, r in enumerate(rows):
                    where = f"{name}, record {tag}.units.{unit}[{k}]"
                    if not isinstance(r, Mapping):
                        raise ValueError(f"{where}: expected an object, got {type(r).__name__}")
                    for need in ("end", "val", "accn", "filed", "form"):
                        if need not in r:
                            raise ValueError(f"{where}, field '{need}': missing")
                    if r["form"] not in _FORMS:
                        continue
                    try:
                        end = pd.Timestamp(r["end"])
                        start = pd.Timestamp(r["start"]) if r.get("start") else None
                        pd.Timestamp(r["filed"])
                    except (ValueError, TypeError) as exc:
                        raise ValueError(f"{where}, field 'end/start/filed': not a date ({exc})") from exc
                    if not isinstance(r["val"], (int, float)) or isinstance(r["val"], bool):
                        raise ValueError(f"{where}, field 'val': not a number {r['val']!r}")
                    out.append(
                        _Fact(
                            label,
                            start,
                            end,
                            float(r["val"]),
                            str(r["accn"]),
                            str(r["filed"]),
                            str(r["form"]),
                            r.get("fy"),
                            str(r.get("fp") or ""),
                            tag,
                            prio,
                        )
                    )
                    counts["facts_read"] = counts.get("facts_read", 0) + 1
    return out


def _fmt(label: str, v: float) -> str:
    if label == "diluted EPS":
        return per_share(v, 2)
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.0f} million"
    return f"{v:,.0f}"


def _change(label: str, v: float, prev: float | None) -> str:
    if prev is None:
        return ""
    if prev > 0 and v > 0:
        return f" ({100 * (v / prev - 1):+.1f}% y/y)"
    if label == "diluted EPS":
        return f" (a year earlier {per_share(prev, 2)})"
    return f" (a year earlier {_fmt('', prev) if abs(prev) >= 1e6 else f'{prev:g}'})"


def _period_name(fy: object, fp: str) -> str:
    if fp == "FY":
        return f"FY{fy}"
    return f"{fp} FY{fy}" if fp else f"FY{fy}"


def read_companyfacts(
    path: str | Path,
    *,
    submissions: str | Path | Sequence[str | Path] | pd.DataFrame | None = None,
    ticker: str | None = None,
    splits: SplitHistory | None = None,
) -> EventsImport:
    """One fundamentals event per filing (+ restatement events), stamped as the module docstring says.

    `ticker`: default the `_TICKER` part of the file name (companyfacts_CIK..._AAPL.json) or the
    first ticker of the submissions file. Facts of forms other than 10-K/10-Q/20-F/40-F are ignored.
    `splits`: the company's split history, so a comparative changed only by a split between two
    filings is not called a restatement.
    """
    path = Path(path)
    obj = read_json(path)
    counts: dict[str, int] = {}
    facts = _facts(obj, path.name, counts)
    subs = (
        submissions
        if isinstance(submissions, pd.DataFrame) or submissions is None
        else read_submissions(submissions)
    )
    if ticker is None:
        m = re.search(r"_([A-Z.]{1,6})(?:_|\.json$)", path.name)
        ticker = m.group(1) if m else None
    if ticker is None:
        raise ValueError(f"{path.name}: cannot tell the ticker from the file name; pass ticker=")
    entity = str(obj.get("entityName") or ticker) if isinstance(obj, Mapping) else ticker
    accepted = dict(zip(subs["accn"], subs["accepted"], strict=False)) if subs is not None else {}
    by_accn: dict[str, list[_Fact]] = {}
    for f in facts:
        by_accn.setdefault(f.accn, []).append(f)
    filings = sorted(by_accn.items(), key=lambda kv: (min(f.filed for f in kv[1]), kv[0]))
    shown: dict[tuple[str, object, pd.Timestamp], tuple[float, str]] = {}  # (tag, start, end) -> (val, filed)
    rows = []
    for accn, fs in filings:
        filed = min(f.filed for f in fs)
        published = _stamp(accepted.get(accn), filed, counts)
        row = _filing_row(ticker, entity, fs, filed, published)
        if row is not None:
            rows.append(row)
        changed = _restated(fs, filed, shown, ticker, splits)
        if changed:
            counts["restatements"] = counts.get("restatements", 0) + len(changed)
            rows.append(_restatement_row(ticker, entity, fs[0].form, filed, published, changed))
    if not rows:
        raise ValueError(f"{path.name}: no 10-K/10-Q facts for {', '.join(FACTS)}")
    events = validate_events(pd.DataFrame(rows), source=path.name)
    rep = EventsImport(events=events, source=path.name, rows_read=len(by_accn), counts=counts)
    if subs is not None and counts.get("stamped_by_filing_date"):
        rep.notes.append(
            f"{counts['stamped_by_filing_date']} filings not in the submissions file: dated by filing date (23:59 ET)"
        )
    return rep


def _stamp(accepted: pd.Timestamp | None, filed: str, counts: dict) -> tuple[pd.Timestamp, str]:
    """(publication time, how it was dated): the acceptance time, else 23:59 Eastern of the filing date."""
    if accepted is not None:
        counts["stamped_by_acceptance_time"] = counts.get("stamped_by_acceptance_time", 0) + 1
        return accepted, "accepted"
    counts["stamped_by_filing_date"] = counts.get("stamped_by_filing_date", 0) + 1
    return local_instants([pd.Timestamp(filed)], tz=EASTERN).iat[0], "filing date"  # the date-only rule


def _filing_row(ticker: str, entity: str, fs: list[_Fact], filed: str, published: tuple) -> dict | None:
    """The event of one filing: the chosen facts of its own period, y/y changes, margins."""
    form, fy, fp = fs[0].form, fs[0].fy, fs[0].fp
    end = max(f.end for f in fs)
    want = 12 if fp == "FY" or form.startswith(("10-K", "20-F", "40-F")) else 3
    parts, values = [], {}
    for label in FACTS:
        cur = [f for f in fs if f.label == label and f.end == end]
        if not cur:
            continue
        top = min(f.prio for f in cur)  # a company may switch tags between filings, not within one
        cur = [f for f in cur if f.prio == top]
        exact = [f for f in cur if f.months in (want, 0)]
        f = exact[0] if exact else max(cur, key=lambda x: x.months)
        prior = [g for g in fs if g.tag == f.tag and g.months == f.months and abs((f.end - g.end).days - 365) <= 20]
        values[label] = f.val
        span = "" if f.months in (want, 0) else f" ({f.months} months)"
        parts.append(f"{label} {_fmt(label, f.val)}{span}{_change(label, f.val, prior[0].val if prior else None)}")
    if "revenue" in values and values["revenue"] > 0:
        for label, name in (("gross profit", "gross margin"), ("operating income", "operating margin")):
            if label in values:
                parts.append(f"{name} {100 * values[label] / values['revenue']:.1f}%")
    if not parts:
        return None
    return {
        "ticker": ticker,
        "published_at": published[0],
        "kind": "fundamentals",
        "source": f"SEC {form}",
        "title": f"{entity} {form} {_period_name(fy, fp)} (period ended {end.date()}, filed {filed})",
        "text": "; ".join(parts),
        "value": values.get("revenue", np.nan),
        "basis_date": pd.Timestamp(filed),
        "timing": published[1],
    }


def _restated(fs: list[_Fact], filed: str, shown: dict, ticker: str, splits: SplitHistory | None) -> list[str]:
    """Values of this filing for periods shown before that differ from what was shown (a change a
    split between the two filings explains exactly is a re-basing, not a restatement); updates `shown`."""
    changed = []
    for f in fs:
        key = (f.tag, f.start, f.end)
        old = shown.get(key)
        if old is not None and old[1] < filed:
            prev = old[0]
            if f.label == "diluted EPS" and splits is not None:
                # the earlier value on this filing's share basis
                prev = prev * float(splits.level(ticker, [old[1]])[0] / splits.level(ticker, [filed])[0])
            if not np.isclose(f.val, prev, rtol=_RESTATE_RTOL, atol=0):
                span = f"{f.months} months ended {f.end.date()}" if f.months else f"{f.end.date()}"
                changed.append(f"{f.label} for the {span}: {_fmt(f.label, f.val)}, previously {_fmt(f.label, prev)} "
                               f"(filed {old[1]})")
        if old is None or old[1] < filed:
            shown[key] = (f.val, filed)
    return changed


def _restatement_row(ticker: str, entity: str, form: str, filed: str, published: tuple, changed: list) -> dict:
    uniq = sorted(set(changed))
    return {
        "ticker": ticker,
        "published_at": published[0],
        "kind": "fundamentals",
        "source": f"SEC {form}",
        "title": f"{entity} {form} filed {filed} restates earlier periods",
        "text": "; ".join(uniq[:6]) + (f"; and {len(uniq) - 6} more" if len(uniq) > 6 else ""),
        "value": np.nan,
        "basis_date": pd.Timestamp(filed),
        "timing": published[1],
    }


# --- live loading ---------------------------------------------------------------------------------
class SecClient:
    """GET JSON from data.sec.gov with the SEC's fair-access rules: a User-Agent naming a contact
    e-mail, and at most `max_per_second` requests a second (10 is the SEC's limit).

    `opener(request, timeout)` is urllib's by default; tests pass a fake that replays recorded bodies.
    """

    BASE = "https://data.sec.gov"

    def __init__(
        self,
        user_agent: str,
        *,
        max_per_second: float = 10.0,
        opener: Callable | None = None,
        timeout: float = 30.0,
    ):
        if not isinstance(user_agent, str) or not re.search(r"\S+@\S+\.\S+", user_agent):
            raise ValueError(
                "SEC user_agent must name you and a contact e-mail, e.g. 'Jane Doe jane@example.com' "
                "(https://www.sec.gov/os/accessing-edgar-data)"
            )
        if not 0 < max_per_second <= 10:
            raise ValueError(f"max_per_second must be in (0, 10] (the SEC's limit), got {max_per_second}")
        self.user_agent = user_agent
        self.interval = 1.0 / max_per_second
        self.opener = opener or urllib.request.urlopen
        self.timeout = timeout
        self._last = 0.0
        self._lock = threading.Lock()

    def get(self, path: str) -> bytes:
        with self._lock:
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._last = time.monotonic()
        req = urllib.request.Request(
            self.BASE + path, headers={"User-Agent": self.user_agent, "Accept-Encoding": "gzip"}
        )
        with self.opener(req, timeout=self.timeout) as resp:
            body = resp.read()
            if (getattr(resp, "headers", None) or {}).get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
        return body


def fetch_company(
    cik: int | str,
    out_dir: str | Path,
    *,
    user_agent: str,
    ticker: str,
    client: SecClient | None = None,
) -> tuple[Path, list[Path]]:
    """Download companyfacts and submissions (with its extra pages) of one CIK into `out_dir`.

    Returns (companyfacts path, submissions paths), named like ../shared/data/fundamentals, ready
    for `read_companyfacts(path, submissions=paths)`.
    """
    client = client or SecClient(user_agent)
    cik10 = f"{int(cik):010d}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    facts = out / f"companyfacts_CIK{cik10}_{ticker}.json"
    facts.write_bytes(client.get(f"/api/xbrl/companyfacts/CIK{cik10}.json"))
    main = out / f"submissions_CIK{cik10}_{ticker}.json"
    main.write_bytes(client.get(f"/submissions/CIK{cik10}.json"))
    subs = [main]
    obj = read_json(main)
    pages: Iterable = obj.get("filings", {}).get("files", []) if isinstance(obj, Mapping) else []
    for page in pages:
        name = str(page.get("name", ""))
        if not re.fullmatch(r"CIK\d{10}-submissions-\d{3}\.json", name):
            raise ValueError(
                f"{main.name}, record filings.files, field 'name': unexpected page name {name!r}"
            )
        dest = out / name.replace(".json", f"_{ticker}.json")
        dest.write_bytes(client.get(f"/submissions/{name}"))
        subs.append(dest)
    return facts, subs
