"""Data quality of an events frame and coverage of built prompts: what a researcher must see first.

- `merge_near_duplicates`: the same story for the same ticker and kind, republished within
  `window_days` (a headline repeated by the collector, a title with a " - Source" or " | Source"
  suffix or a trailing "(AAPL)" tag, different case or punctuation), is kept once: the earliest copy, which is also the point-in-time-safe one.
  The number merged is returned and recorded, never silent.
- `flag_suspicious_timestamps`: events whose text contradicts their publication time, e.g. a
  headline naming a calendar quarter ("Q3 2020", "third quarter of 2020") whose results cannot exist
  yet because the quarter ends after the publication time. Flagged and counted, not dropped: guidance
  ("expects Q3 2020 revenue ...") is legitimate, so a human decides. Those naming a quarter that had
  not even STARTED ("Q4 2020 Investor Letter" dated April 2020) are counted apart; `quality_pass(
  suspicious="drop")` removes them (counted), as the Magnificent-7 preset does.
- `coverage_table` / `coverage_warnings`: per ticker x split x section, the share of prompts that
  carry the section and the mean number of its items; a warning for every split or ticker that has
  none of a section, so an empty fundamentals or news section cannot go unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from thesisgym.schema import SECTIONS

__all__ = [
    "coverage_table",
    "coverage_warnings",
    "flag_suspicious_timestamps",
    "merge_near_duplicates",
    "normalised_title",
    "quality_pass",
    "render_coverage",
]

_SUFFIX = re.compile(r"\s+[-|–—]\s+[^-|–—]{1,40}$")
_NON_WORD = re.compile(r"[^0-9a-z]+")


_TICKER_TAG = re.compile(r"\s*\((?:[A-Z]{1,5}[ ,]*)+\)$")  # "... levels (AAPL)", "(SONO AAPL)"


def normalised_title(title: str) -> str:
    """The key near-duplicates share: no source suffix or ticker tag, lower case, words only."""
    t = _TICKER_TAG.sub("", _SUFFIX.sub("", str(title).strip()))
    return _NON_WORD.sub(" ", t.lower()).strip()


def merge_near_duplicates(events: pd.DataFrame, *, window_days: float = 3.0) -> tuple[pd.DataFrame, int]:
    """(events without near-duplicates, number merged); see the module docstring."""
    if not len(events):
        return events, 0
    key = pd.DataFrame(
        {
            "t": events["ticker"].to_numpy(),
            "k": events["kind"].to_numpy(),
            "h": [
                normalised_title(x)
                for x in events["title"].where(events["title"].astype(bool), events["text"])
            ],
            "p": events["published_at"].to_numpy(),
            "i": np.arange(len(events)),
        }
    )
    key = key[key["h"] != ""].sort_values(["t", "k", "h", "p"], kind="stable")
    same = (key[["t", "k", "h"]] == key[["t", "k", "h"]].shift()).all(axis=1).to_numpy()
    gap = key["p"].diff().to_numpy()
    dup = same & (gap <= np.timedelta64(int(window_days * 86400), "s"))
    drop = np.zeros(len(events), dtype=bool)
    drop[key["i"].to_numpy()[dup]] = True
    return events[~drop].reset_index(drop=True), int(drop.sum())


# Calendar quarters only: a fiscal label ("Q2 FY2025") says nothing about the calendar.
_QUARTER = re.compile(
    r"\b(?:Q([1-4])\s*'?((?:19|20)?\d{2})|(first|second|third|fourth)[- ]quarter(?:\s+of)?\s+((?:19|20)\d{2}))\b",
    re.IGNORECASE,
)
_ORD = {"first": 1, "second": 2, "third": 3, "fourth": 4}


def _quarter_checks(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list]:
    """Per event: names a calendar quarter that ends after / starts after its publication; the match."""
    n = len(events)
    ends_after, starts_after, names = np.zeros(n, bool), np.zeros(n, bool), [None] * n
    text = (events["title"].astype(str) + " " + events["text"].astype(str)).tolist()
    pub = pd.DatetimeIndex(events["published_at"])
    for i, s in enumerate(text):
        m = _QUARTER.search(s)
        if not m:
            continue
        q = int(m.group(1)) if m.group(1) else _ORD[m.group(3).lower()]
        y = m.group(2) or m.group(4)
        year = int(y) if len(y) == 4 else 2000 + int(y)
        first = pd.Timestamp(year=year, month=3 * q - 2, day=1, tz="UTC")
        ends_after[i] = first + pd.offsets.QuarterEnd(0) > pub[i]
        starts_after[i] = first > pub[i]
        names[i] = m.group(0)
    return ends_after, starts_after, names


def flag_suspicious_timestamps(events: pd.DataFrame, *, limit: int = 20) -> dict:
    """Events naming a calendar quarter that ends after their publication time ("count"; results of
    such a quarter cannot exist yet, though an outlook can), and among them those naming a quarter
    that has not even started ("not_started": almost surely a wrong date), with examples."""
    ends_after, starts_after, names = _quarter_checks(events)
    pub = pd.DatetimeIndex(events["published_at"])
    examples = [
        {
            "ticker": str(events["ticker"].iat[i]),
            "published_at": str(pub[i]),
            "names": names[i],
            "not_started": bool(starts_after[i]),
            "title": (str(events["title"].iat[i]) or str(events["text"].iat[i])).strip()[:120],
        }
        for i in np.flatnonzero(ends_after)[:limit]
    ]
    return {"count": int(ends_after.sum()), "not_started": int(starts_after.sum()), "examples": examples}


def quality_pass(
    events: pd.DataFrame, *, merge_window_days: float | None = 3.0, suspicious: str = "flag"
) -> tuple[pd.DataFrame, dict]:
    """Near-duplicates merged (unless `merge_window_days` is None) and timestamps flagged:
    (events, the `store.meta["quality"]` entry with the counts). `suspicious="drop"` also removes the
    events naming a quarter that had not started when they were published (counted)."""
    if suspicious not in ("flag", "drop"):
        raise ValueError(f"suspicious must be 'flag' or 'drop', got {suspicious!r}")
    merged = dropped = 0
    if merge_window_days is not None and len(events):
        events, merged = merge_near_duplicates(events, window_days=merge_window_days)
    flags = (
        flag_suspicious_timestamps(events) if len(events) else {"count": 0, "not_started": 0, "examples": []}
    )
    if suspicious == "drop" and flags["not_started"]:
        _, not_started, _ = _quarter_checks(events)
        events, dropped = events[~not_started].reset_index(drop=True), int(not_started.sum())
    return events, {
        "near_duplicates_merged": merged,
        "merge_window_days": merge_window_days,
        "suspicious_timestamps": flags,
        "dropped_not_started_quarter": dropped,
    }


# --- coverage of built prompts ------------------------------------------------------------------
def coverage_table(splits: Mapping[str, object]) -> pd.DataFrame:
    """Rows (ticker, split, section, prompts, share, mean_items) over every row of every split."""
    out = []
    sections = list(SECTIONS)
    for name, ds in splits.items():
        if ds is None or len(ds) == 0:
            continue
        table = ds.data.table if hasattr(ds, "data") else ds
        tick = table.column("ticker").to_numpy()
        ev = table.column("evidence").combine_chunks()
        parent = pc.list_parent_indices(ev).to_numpy()
        sec = pc.struct_field(pc.list_flatten(ev), "section").to_numpy(zero_copy_only=False)
        n = len(tick)
        counts = np.zeros((n, len(sections)), dtype=np.int64)
        codes = pd.Categorical(sec, categories=sections).codes
        np.add.at(counts, (parent, codes), 1)
        frame = pd.DataFrame(counts, columns=sections)
        frame["ticker"] = tick
        for t, g in frame.groupby("ticker", sort=True):
            for s in sections:
                c = g[s].to_numpy()
                out.append(
                    {
                        "ticker": t,
                        "split": name,
                        "section": s,
                        "prompts": len(c),
                        "share": float((c > 0).mean()),
                        "mean_items": float(c.mean()),
                    }
                )
    return pd.DataFrame(out, columns=["ticker", "split", "section", "prompts", "share", "mean_items"])


def coverage_warnings(table: pd.DataFrame) -> list[str]:
    """A line for every split, and every ticker, that has no item of a section in any prompt."""
    if not len(table):
        return ["no prompts were built"]
    warn = []
    for by in ("split", "ticker"):
        agg = table.groupby([by, "section"], sort=True)["mean_items"].max()
        for (k, s), m in agg.items():
            if s == "technical":
                continue
            if m == 0:
                warn.append(f"{by} {k}: no {s} evidence in any prompt")
    return warn


def render_coverage(table: pd.DataFrame, *, title: str = "coverage"):
    """A rich Table: one row per ticker x split, one column per section ("share% / mean items")."""
    from rich.table import Table

    out = Table(title=title + " (share of prompts with the section / mean items per prompt)")
    out.add_column("ticker")
    out.add_column("split")
    out.add_column("prompts", justify="right")
    for s in SECTIONS:
        out.add_column(s, justify="right")
    if not len(table):
        return out
    wide = table.pivot_table(
        index=["ticker", "split", "prompts"],
        columns="section",
        values=["share", "mean_items"],
        aggfunc="first",
    )
    order = {"train": 0, "val": 1, "test": 2, "heldout": 3}
    keys = sorted(wide.index, key=lambda k: (k[0], order.get(k[1], 9), k[1]))
    for t, sp, n in keys:
        cells = []
        for s in SECTIONS:
            sh, mi = wide.loc[(t, sp, n), ("share", s)], wide.loc[(t, sp, n), ("mean_items", s)]
            cells.append("-" if sh == 0 else f"{100 * sh:.0f}% / {mi:.1f}")
        out.add_row(t, sp, f"{n:,}", *cells)
    return out
