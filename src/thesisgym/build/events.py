"""Events of a MarketStore formatted once per build: the evidence text, date, source and section of each.

The context builder takes slices of these (by index) for every prompt, so each event is cleaned,
dated in the store's timezone and regex-scanned for numbers at most once per build, however many
contexts show it. Market-wide events (ticker "") land in the macro section whatever their kind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from thesisgym.build.render import clean_text, event_text, extract_numbers
from thesisgym.data.store import MarketStore
from thesisgym.schema import EVENT_KINDS


class EventPool:
    """All events formatted once: Arrow columns for `take`, Python bodies for the text join."""

    def __init__(self, store: MarketStore):
        ev = store.events
        missing = {"ticker", "published_at", "kind", "source", "title", "text"} - set(ev.columns)
        if missing:
            raise ValueError(f"MarketStore {store.name!r} events: missing column(s) {sorted(missing)}")
        n = len(ev)
        if n:
            pub = ev["published_at"]
            if getattr(pub.dtype, "tz", None) is None:
                raise ValueError(
                    f"MarketStore {store.name!r} events field 'published_at': timestamps must be timezone-aware"
                )
            idx = pd.DatetimeIndex(pub).tz_convert("UTC").as_unit("ns")
            self.pub_ns = idx.asi8.copy()
            if np.any(self.pub_ns[1:] < self.pub_ns[:-1]):
                order = np.argsort(self.pub_ns, kind="stable")
                ev = ev.iloc[order].reset_index(drop=True)
                idx, self.pub_ns = idx[order], self.pub_ns[order]
            dates = idx.tz_convert(store.timezone).strftime("%Y-%m-%d").tolist()
        else:
            self.pub_ns = np.zeros(0, dtype="int64")
            dates = []
        tickers = ev["ticker"].fillna("").astype(str).to_numpy()
        kinds = ev["kind"].astype(str).tolist()
        sections = []
        for i, (t, k) in enumerate(zip(tickers, kinds, strict=False)):
            if k not in EVENT_KINDS:
                raise ValueError(
                    f"MarketStore {store.name!r} events row {i} field 'kind': unknown kind {k!r}"
                )
            sections.append("macro" if t == "" else k)
        titles = ev["title"].fillna("").astype(str).tolist()
        bodies_txt = ev["text"].fillna("").astype(str).tolist()
        srcs = ev["source"].fillna("").astype(str).tolist()
        texts, sources = [], []
        for ti, tx, src, k in zip(titles, bodies_txt, srcs, kinds, strict=False):
            texts.append(event_text(ti, tx))
            sources.append(clean_text(src) or k)
        self.texts = texts
        self.bodies = [f"{d} | {s} | {t}" for d, s, t in zip(dates, sources, texts, strict=False)]
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

    def indices(self, ticker: str, section: str) -> np.ndarray:
        if section == "macro":
            mask = self.tickers == ""
        else:
            mask = (self.tickers == ticker) & (self.sections == section)
        return np.flatnonzero(mask)
