"""Events of a MarketStore formatted once per build: the evidence text, date, source and section of each.

The events come through the store's point-in-time door (`store.timeline()`): sorted by publication,
with the publication instants the builder windows with the door's rule. The context builder takes
slices of these (by index) for every prompt, so each event is cleaned, dated in the store's timezone
and regex-scanned for numbers at most once per build, however many contexts show it. An event whose
text carries per-share numbers (`{{ps:..}}`, `{{sh:..}}`) is rendered per split basis by `rendered`
(thesisgym.data.asof), so a prompt shows them as they were on its as-of day. Market-wide events
(ticker "") land in the macro section whatever their kind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from thesisgym.data.asof import Timeline, has_markers, render_per_share, strip_per_share
from thesisgym.dataset.render import clean_text, event_text, extract_numbers
from thesisgym.schema import EVENT_KINDS


class EventPool:
    """All events formatted once: Arrow columns for `take`, Python bodies for the text join."""

    def __init__(self, timeline: Timeline, name: str = "market"):
        ev = timeline.events_future_included()
        missing = {"ticker", "published_at", "kind", "source", "title", "text"} - set(ev.columns)
        if missing:
            raise ValueError(f"MarketStore {name!r} events: missing column(s) {sorted(missing)}")
        self.pub_ns = timeline.pub_ns
        n = len(ev)
        dates = (
            pd.DatetimeIndex(ev["published_at"]).tz_convert(timeline.timezone).strftime("%Y-%m-%d").tolist()
            if n else []
        )
        tickers = ev["ticker"].fillna("").astype(str).to_numpy()
        kinds = ev["kind"].astype(str).tolist()
        bad = [i for i, k in enumerate(kinds) if k not in EVENT_KINDS]
        if bad:
            raise ValueError(f"MarketStore {name!r} events row {bad[0]} field 'kind': unknown kind {kinds[bad[0]]!r}")
        sections = ["macro" if t == "" else k for t, k in zip(tickers, kinds, strict=True)]
        raw = [
            event_text(ti, tx)
            for ti, tx in zip(ev["title"].fillna("").astype(str), ev["text"].fillna("").astype(str), strict=True)
        ]
        self.marked = has_markers(raw) & (tickers != "")
        self.raw = raw
        texts = [strip_per_share(x) if m else x for x, m in zip(raw, self.marked, strict=True)]
        sources = [clean_text(src) or k for src, k in zip(ev["source"].fillna("").astype(str), kinds, strict=True)]
        self.texts, self.dates, self.sources = texts, dates, sources
        self.basis = pd.DatetimeIndex(ev["basis_date"]) if "basis_date" in ev.columns else pd.DatetimeIndex([pd.NaT] * n)
        self.bodies = [f"{d} | {s} | {t}" for d, s, t in zip(dates, sources, texts, strict=True)]
        self.arrow = {
            "section": pa.array(sections, pa.string()),
            "date": pa.array(dates, pa.string()),
            "source": pa.array(sources, pa.string()),
            "text": pa.array(texts, pa.string()),
        }
        self._numbers: list[list[float] | None] = [None] * n
        self.tickers = tickers
        self.sections = np.array(sections, dtype=object)

    def numbers(self, idx: np.ndarray) -> list[list[float]]:
        # Lazily: only the events of tickers being built pay for the regex.
        out = []
        for i in idx.tolist():
            v = self._numbers[i]
            if v is None:
                v = self._numbers[i] = extract_numbers(self.texts[i])
            out.append(v)
        return out

    def rendered(self, idx: np.ndarray, timeline: Timeline, ticker: str, asof,
                 span: tuple[int, int] | None = None) -> tuple[dict, list[str], list]:
        """(Arrow columns, bodies, numbers) of events `idx` as shown to a context of `ticker` on `asof`:
        per-share numbers on that day's split basis. `span` (UTC ns [from, to)): only events published
        in it can be shown, so only those are re-rendered."""
        arrow = {k: v.take(pa.array(idx, pa.int64())) for k, v in self.arrow.items()}
        bodies = [self.bodies[i] for i in idx.tolist()]
        numbers = self.numbers(idx)
        in_span = np.ones(len(idx), bool) if span is None else (
            (self.pub_ns[idx] >= span[0]) & (self.pub_ns[idx] < span[1]))
        marked = np.flatnonzero(self.marked[idx] & in_span)
        if not len(marked):
            return arrow, bodies, numbers
        factor = timeline.event_factor(ticker, self.basis[idx[marked]], asof)
        change = marked[factor != 1.0]
        if not len(change):
            return arrow, bodies, numbers
        texts = arrow["text"].to_pylist()
        for j, f in zip(change.tolist(), factor[factor != 1.0].tolist(), strict=True):
            i = int(idx[j])
            texts[j] = render_per_share(self.raw[i], f)
            bodies[j] = f"{self.dates[i]} | {self.sources[i]} | {texts[j]}"
            numbers[j] = extract_numbers(texts[j])
        arrow["text"] = pa.array(texts, pa.string())
        return arrow, bodies, numbers

    def indices(self, ticker: str, section: str) -> np.ndarray:
        if section == "macro":  # market-wide events of any kind, and the ticker's own macro events
            mask = (self.tickers == "") | ((self.tickers == ticker) & (self.sections == "macro"))
        else:
            mask = (self.tickers == ticker) & (self.sections == section)
        return np.flatnonzero(mask)
