"""Audit any tool function for look-ahead: call it at a set of cutoffs and flag what it returns from later.

The failures users of LLM trading agents report most are tools that see the future: a news tool whose date
filter is skipped when a field is empty, fundamentals of a later quarter served for an earlier date, a
search index without a time filter. `audit_tool(fn, cutoffs, calls=...)` calls `fn(cutoff, **arguments)`
for every cutoff and argument set and reads the date of every item returned:

- a list of dicts or a DataFrame: the first of `published_at`, `datetime`, `timestamp`, `time`, `date`;
- text (or items without such a field): every ISO date (YYYY-MM-DD) in it.

An item stamped at or after its cutoff is a leak, and so is an item dated (without a time) a later day
than the cutoff's. A date-only item ON the cutoff's day cannot be placed before or after the cutoff: it is
counted as `same_day` (unverifiable at day resolution; give the tool timestamps to check it). Items with
no readable date are counted as `undated`. Neither is ever silently passed. Our own tools
(`thesisgym.tools.MarketTools`) pass by construction; tests/test_tools.py runs this audit on them too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["ToolAudit", "audit_tool"]

DATE_FIELDS: tuple[str, ...] = ("published_at", "datetime", "timestamp", "time", "date")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:Z|[+-]\d{2}:?\d{2})?)?\b")


@dataclass
class ToolAudit:
    """What the audit found: calls made, items read, leaks (with examples) and undated items."""

    calls: int = 0
    items: int = 0
    leaks: int = 0
    same_day: int = 0
    undated: int = 0
    examples: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.leaks == 0

    def summary(self) -> str:
        verdict = "no look-ahead found" if self.ok else f"{self.leaks} item(s) from after their cutoff"
        return (f"{verdict}: {self.calls} calls, {self.items} dated items ({self.same_day} dated the cutoff's day "
                f"without a time), {self.undated} without a readable date")


def _instant(value: Any, tz: str) -> tuple[pd.Timestamp, bool] | None:
    """(UTC instant, True) of a timestamp, (local midnight of the day, False) of a bare date, or None."""
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        return None
    if ts is pd.NaT or pd.isna(ts):
        return None
    timed = not (isinstance(value, str) and len(value.strip()) <= 10)
    if ts.tzinfo is None:
        ts = ts.tz_localize(tz)
    return (ts.tz_convert("UTC") if timed else ts.normalize()), timed


def _dates_of(output: Any, tz: str) -> tuple[list[tuple[pd.Timestamp, bool]], int]:
    """(dated items as (instant, timed), undated item count) of one tool output."""
    if isinstance(output, pd.DataFrame):
        output = output.to_dict("records")
    if isinstance(output, str):
        found = [_instant(m.group(0).replace(" ", "T") if m.group(2) else m.group(1), tz)
                 for m in _ISO_DATE.finditer(output)]
        dated = [f for f in found if f]
        return dated, 0 if dated or not output.strip() else 1
    if isinstance(output, Mapping):
        output = [output]
    dated, undated = [], 0
    for item in output if isinstance(output, Iterable) else [output]:
        value = next((item.get(k) for k in DATE_FIELDS if isinstance(item, Mapping) and item.get(k) not in (None, "")),
                     None)
        got = _instant(value, tz) if value is not None else None
        if got is None and not isinstance(item, Mapping):
            sub, n = _dates_of(str(item), tz)
            dated.extend(sub)
            undated += n
        elif got is None:
            undated += 1
        else:
            dated.append(got)
    return dated, undated


def audit_tool(fn: Callable[..., Any], cutoffs: Sequence[Any], *, calls: Sequence[Mapping[str, Any]] = ({},),
               timezone: str = "America/New_York", max_examples: int = 5) -> ToolAudit:
    """Call `fn(cutoff, **arguments)` for every cutoff x argument set and flag items from after the cutoff.

    `cutoffs`: instants (timezone-aware, or naive in `timezone`); `calls`: the argument sets to try (a
    tool that leaks only for some queries or look-back windows is caught only if they are tried).
    """
    if not callable(fn):
        raise TypeError(f"audit_tool: `fn` must be callable, got {type(fn).__name__}")
    if not cutoffs:
        raise ValueError("audit_tool: give at least one cutoff")
    report = ToolAudit()
    for raw in cutoffs:
        cut = pd.Timestamp(raw)
        cut = (cut.tz_localize(timezone) if cut.tzinfo is None else cut).tz_convert("UTC")
        for args in calls:
            report.calls += 1
            dated, undated = _dates_of(fn(cut, **dict(args)), timezone)
            report.items += len(dated)
            report.undated += undated
            day = cut.tz_convert(timezone).normalize()
            late = [when for when, timed in dated if (when >= cut if timed else when > day)]
            report.same_day += sum(1 for when, timed in dated if not timed and when == day)
            report.leaks += len(late)
            if late and len(report.examples) < max_examples:
                report.examples.append({"cutoff": str(cut), "arguments": dict(args), "item_time": str(max(late))})
    return report
