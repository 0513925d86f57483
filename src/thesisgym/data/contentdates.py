"""The content-date check: an item whose text names a period that had not begun when it was published
is misdated (or was retitled later), whatever its timestamp says.

The date rule (published strictly before the cutoff) cannot catch a row whose timestamp is wrong; its
text often can: a "2020 Q4 earnings" headline dated 2019-11, "rates on hold through 2023" dated a
year before the Fed said it, a page retitled after the fact. `content_date_suspects` finds, per event,
the first named period that starts after the event's publication day (New York):

- "date":    an ISO date (2020-12-31) or a written one (Dec 31, 2020 / 31 December 2020) after it;
- "month":   a month and year (December 2020) starting after it;
- "quarter": a calendar quarter (Q4 2020, 4Q20, 2020 Q4, fourth quarter of 2020) starting after it;
- "fiscal":  a fiscal period (FY2021, fiscal 2021, Q3 FY2021, F3Q21). Fiscal year N ends in calendar
             year N (or early N+1), so it starts no earlier than January 1 of N-1; only a fiscal
             period whose EARLIEST possible start is after the publication day counts;
- "year":    a bare year (2021) after the publication year.

Forward-looking text ("expects 2021 revenue", "Vision 2030") names later periods too; the check cannot
tell it from a misdated row, so by default such rows are quarantined (kept apart in
`store.quarantine`, counted in the import summary) and `content_dates="keep"` keeps them, flagged.
Items our own importers write from structured fields (SEC facts, earnings, insider trades, estimates,
vintages: any event with a non-empty `timing`) name only periods those fields date, and Estimize names
the future quarter it estimates by design, so only free text is checked: events whose `timing` is empty.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from thesisgym.schema import DEFAULT_TIMEZONE

__all__ = ["CONTENT_RULES", "content_date_suspects", "names_later_period"]

CONTENT_RULES: tuple[str, ...] = ("date", "month", "quarter", "fiscal", "year")
_MONTHS = {m: i + 1 for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
       r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_YEAR = r"((?:19|20)\d{2})"
_YY = r"'?((?:19|20)?\d{2})"
_ORD = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}

# (rule, pattern, how the match becomes the earliest day the named period starts)
_PATTERNS: list[tuple[str, re.Pattern, str]] = [
    ("date", re.compile(r"\b" + _YEAR + r"-(\d{2})-(\d{2})\b"), "ymd"),
    ("date", re.compile(r"\b" + _MON + r"\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+" + _YEAR + r"\b", re.I), "mdy"),
    ("date", re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + _MON + r"\.?,?\s+" + _YEAR + r"\b", re.I), "dmy"),
    ("fiscal", re.compile(r"\b(?:Q([1-4])\s*(?:of\s+)?FY\s*" + _YY + r"|F([1-4])Q\s*" + _YY + r")\b", re.I), "fq"),
    ("fiscal", re.compile(r"\b(?:FY\s*" + _YY + r"|fiscal(?:\s+year)?\s+" + _YEAR + r")\b", re.I), "fy"),
    ("quarter", re.compile(r"\bQ([1-4])\s*" + _YY + r"\b|\b([1-4])Q\s*" + _YY + r"\b|\b" + _YEAR + r"\s*Q([1-4])\b",
                           re.I), "q"),
    ("quarter", re.compile(r"\b(first|second|third|fourth|1st|2nd|3rd|4th)[- ]quarter(?:\s+of)?,?\s+" + _YEAR + r"\b",
                           re.I), "qw"),
    ("month", re.compile(r"\b" + _MON + r"\.?,?\s+" + _YEAR + r"\b", re.I), "my"),
    ("year", re.compile(r"(?<![\w$.,/\-'])" + _YEAR + r"(?![\w%/]|[.,]\d|-\d{2}-)"), "y"),
]


def _year(text: str) -> int:
    y = int(text)
    return y if y >= 100 else 2000 + y


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return next(v for k, v in _MONTHS.items() if k.startswith(name[:3]))


def _start(kind: str, g: tuple) -> pd.Timestamp | None:
    """The earliest first day of the period a match names (None: not a real date)."""
    try:
        if kind == "ymd":
            return pd.Timestamp(int(g[0]), int(g[1]), int(g[2]))
        if kind == "mdy":
            return pd.Timestamp(int(g[2]), _month(g[0]), int(g[1]))
        if kind == "dmy":
            return pd.Timestamp(int(g[2]), _month(g[1]), int(g[0]))
        if kind == "my":
            return pd.Timestamp(int(g[1]), _month(g[0]), 1)
        if kind == "fq":
            q, y = (g[0], g[1]) if g[0] else (g[2], g[3])
            return pd.Timestamp(_year(y) - 1, 1, 1) + pd.DateOffset(months=3 * (int(q) - 1))
        if kind == "fy":
            return pd.Timestamp(_year(g[0] or g[1]) - 1, 1, 1)
        if kind == "q":
            q, y = (g[0], g[1]) if g[0] else (g[2], g[3]) if g[2] else (g[5], g[4])
            return pd.Timestamp(_year(y), 3 * int(q) - 2, 1)
        if kind == "qw":
            return pd.Timestamp(int(g[1]), 3 * _ORD[g[0].lower()] - 2, 1)
        return pd.Timestamp(int(g[0]), 1, 1)
    except (ValueError, StopIteration):
        return None


def names_later_period(text: str, day: pd.Timestamp) -> tuple[str, str] | None:
    """(rule, named text) of the first period `text` names that starts after `day`; spans already
    read by a more specific pattern are not read again as a bare year or month."""
    taken: list[tuple[int, int]] = []
    for rule, pattern, kind in _PATTERNS:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append((m.start(), m.end()))
            start = _start(kind, m.groups())
            if start is not None and start > day:
                return rule, m.group(0)
    return None


def content_date_suspects(events: pd.DataFrame, *, timezone: str = DEFAULT_TIMEZONE) -> pd.DataFrame:
    """One row per suspect event: `index` (position in `events`), `rule` (one of CONTENT_RULES) and
    `named` (the text that names the later period). Only free-text events (empty `timing`) are read."""
    if not len(events):
        return pd.DataFrame({"index": pd.Series([], dtype="int64"), "rule": [], "named": []})
    timing = events["timing"].fillna("").astype(str) if "timing" in events.columns else pd.Series([""] * len(events))
    days = pd.DatetimeIndex(events["published_at"]).tz_convert(timezone).tz_localize(None).normalize()
    text = (events["title"].fillna("").astype(str) + " | " + events["text"].fillna("").astype(str)).tolist()
    rows = []
    for i in np.flatnonzero((timing == "").to_numpy()):
        hit = names_later_period(text[i], days[i])
        if hit is not None:
            rows.append((int(i), hit[0], hit[1]))
    return pd.DataFrame(rows, columns=["index", "rule", "named"]).astype({"index": "int64"})
