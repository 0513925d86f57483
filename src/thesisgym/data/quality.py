"""Data quality of an events frame and coverage of built prompts: what a researcher must see first.

- `merge_near_duplicates`: the same story for the same ticker and kind, republished within
  `window_days` (a headline repeated by the collector, a title with a " - Source" or " | Source"
  suffix or a trailing "(AAPL)" tag, different case or punctuation), is kept once: the earliest copy, which is also the point-in-time-safe one.
  The number merged is returned and recorded, never silent.
- `quality_pass`: the above, then the content-date check (thesisgym.data.contentdates): events whose
  text names a period that had not begun at their timestamp are quarantined (default) or kept and
  flagged (`content_dates="keep"`), counted per rule with examples; and events dated after the last
  price bar, which no prompt can show, are counted.
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

from thesisgym.data.contentdates import CONTENT_RULES, content_date_suspects
from thesisgym.schema import DEFAULT_TIMEZONE, SECTIONS

__all__ = [
    "coverage_table",
    "coverage_warnings",
    "future_rows",
    "store_sections",
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


def quality_pass(
    events: pd.DataFrame,
    *,
    merge_window_days: float | None = 3.0,
    content_dates: str = "quarantine",
    last_bar: pd.Timestamp | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Near-duplicates merged (unless `merge_window_days` is None), the content-date check, and the
    count of events after `last_bar`: (events, quarantined events with a `reason` column, the
    `store.meta["quality"]` entry)."""
    if content_dates not in ("quarantine", "keep"):
        raise ValueError(f"content_dates must be 'quarantine' or 'keep', got {content_dates!r}")
    merged = 0
    if merge_window_days is not None and len(events):
        events, merged = merge_near_duplicates(events, window_days=merge_window_days)
    suspects = content_date_suspects(events)
    by_rule = {r: int((suspects["rule"] == r).sum()) for r in CONTENT_RULES}
    examples = [
        {
            "ticker": str(events["ticker"].iat[i]),
            "published_at": str(events["published_at"].iat[i]),
            "rule": rule,
            "names": named,
            "title": (str(events["title"].iat[i]) or str(events["text"].iat[i])).strip()[:120],
        }
        for i, rule, named in suspects.head(20).itertuples(index=False)
    ]
    quarantine = events.iloc[0:0].assign(reason=pd.Series([], dtype=object))
    if content_dates == "quarantine" and len(suspects):
        idx = suspects["index"].to_numpy()
        quarantine = events.iloc[idx].assign(
            reason=("content date: " + suspects["rule"] + " " + suspects["named"]).to_numpy()
        ).reset_index(drop=True)
        events = events.drop(events.index[idx]).reset_index(drop=True)
    after = 0
    if last_bar is not None and len(events):
        local = pd.DatetimeIndex(events["published_at"]).tz_convert(DEFAULT_TIMEZONE).tz_localize(None)
        after = int((local.normalize() > pd.Timestamp(last_bar)).sum())
    return events, quarantine, {
        "near_duplicates_merged": merged,
        "merge_window_days": merge_window_days,
        "content_dates": {
            "mode": content_dates,
            "suspects": int(len(suspects)),
            "quarantined": int(len(quarantine)),
            "by_rule": by_rule,
            "examples": examples,
        },
        "after_last_bar": after,
    }


def future_rows(events: pd.DataFrame, source: str, *, now: pd.Timestamp | None = None) -> None:
    """Raise when `events` (one imported file) holds a row published after `now` (default: the wall
    clock): no source can have published it yet, so its date is wrong (a 2030 row in a 2020 file)."""
    if not len(events):
        return
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    late = (events["published_at"] > now).to_numpy()
    if late.any():
        i = int(np.flatnonzero(late)[0])
        raise ValueError(
            f"{source}: {int(late.sum())} row(s) published in the future, first {events['published_at'].iat[i]} "
            f"({str(events['title'].iat[i])[:80]!r}); fix or remove them"
        )


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


def store_sections(store) -> dict[str, set[str]]:
    """The prompt sections each ticker's events could fill (ticker "" -> {"macro"}: market-wide ones)."""
    ev = store.events
    out: dict[str, set[str]] = {t: {"technical"} for t in store.tickers}
    if len(ev):
        sec = np.where(ev["ticker"].to_numpy() == "", "macro", ev["kind"].to_numpy())
        for t, s in set(zip(ev["ticker"].tolist(), sec.tolist(), strict=True)):
            out.setdefault(t, set()).add(s)
    return out


def coverage_warnings(table: pd.DataFrame, sections: Mapping[str, set[str]] | None = None) -> list[str]:
    """A line for every split, and every ticker, that has no item of a section in any prompt, among
    the sections the store could fill (`sections`, from `store_sections`; None: every section)."""
    if not len(table):
        return ["no prompts were built"]
    market = sections.get("", set()) if sections is not None else set()

    def could(ticker: str, section: str) -> bool:
        if sections is None:
            return True
        return section in market if section == "macro" else section in sections.get(ticker, set())

    table = table[table["section"] != "technical"]
    table = table[[could(t, s) for t, s in zip(table["ticker"], table["section"], strict=True)]]
    warn = []
    for by in ("split", "ticker"):
        agg = table.groupby([by, "section"], sort=True)["mean_items"].max()
        warn += [f"{by} {k}: no {s} evidence in any prompt, though the store has some" for (k, s), m in agg.items()
                 if m == 0]
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
