"""Point-in-time prompts for (ticker, as-of day) pairs, built fast enough for 100k rows a minute.

For a context of ticker t at day d (docs/spec.md, section 3 (contexts)):
- technical: indicators computed from bars <= d, then the last `bars` bars, newest first;
- fundamentals: the latest filings visible at d; news in lookback buckets (d-3..d, d-10..d-4,
  d-30..d-11 calendar days, most recent first); insider; analyst; macro = market-wide events
  (ticker "", whatever their kind). What is visible, and on which basis numbers are shown, is decided
  by the store's point-in-time door (`store.timeline()`, thesisgym.data.asof): an event is visible
  iff published strictly before the cutoff of d; prices, volumes, indicators and per-share numbers
  are on d's split basis (a split after d does not show).
Ids are section prefix + 1-based position in the prompt (T1.., N1..), assigned after sampling and
budgeting, so every id in a prompt exists and ids are dense.

How it stays fast: per ticker and split regime (the days between two splits share one basis),
indicators are computed once (vectorised), every bar/indicator/event is formatted once into a shared
"pool" of evidence texts (with its numbers), and the visibility windows of all days are found at once
with the door's searchsorted windows. A context is then a list of pool indices; the text is joined
with plain string ops and the `evidence` column is an Arrow `take` from the pool, so the HF Dataset
is assembled from Arrow columns, not from millions of Python dicts.

Variations (Trading-R1 uses ~20 per ticker-day): variation 0 is the canonical context (every section
that has evidence, canonical order); variations 1..k-1 keep technical always (the label is about the
price path, so a prompt without prices is not one we want to train on) and each other non-empty
section with probability `section_keep_prob`, in a random order. The randomness is a hash of (seed,
ticker, day, variation), so a row does not depend on which other rows are built.

Token budget: whole prompt (system + user) counted with `render.count_tokens`; items are dropped
lowest priority first: news d-30..d-11, news d-10..d-4, macro, bars older than the newest 5,
insider/analyst, news d-3..d, older fundamentals, indicators, the remaining bars, the latest
filing; always the oldest first within a tier. Sections left empty disappear from the prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, Field, field_validator

from thesisgym.data.store import MarketStore
from thesisgym.dataset.events import EventPool
from thesisgym.dataset.indicators import (
    as_of_basis,
    bar_texts,
    compute_indicators,
    indicator_texts,
    price_decimals,
)
from thesisgym.dataset.render import (
    ID_TOKENS,
    count_tokens,
    render_header,
    section_header,
)
from thesisgym.dataset.select import apply_budget, item_tiers, section_uniforms
from thesisgym.schema import LABELS, PREFIX_TO_SECTION, SECTIONS, SYSTEM_PROMPT

SECTION_ORDER: tuple[str, ...] = tuple(SECTIONS)
_NS_DAY = 86_400_000_000_000


class ContextConfig(BaseModel):
    """What goes into one context; the defaults follow Trading-R1's layout."""

    bars: int = Field(15, ge=1, description="last N bars shown (newest first)")
    indicators: bool = True
    # (min_age, max_age, max_items) in calendar days before d; Trading-R1's buckets (docs/spec.md, section 3)
    news_buckets: tuple[tuple[int, int, int], ...] = ((0, 3, 10), (4, 10, 20), (11, 30, 20))
    fundamentals_days: int = 400
    fundamentals_items: int = 4
    insider_days: int = 30
    insider_items: int = 10
    analyst_days: int = 30
    analyst_items: int = 10
    macro_days: int = 10
    macro_items: int = 10
    section_keep_prob: float = Field(0.6, ge=0.0, le=1.0)
    # the instructions every prompt opens with; the token budget counts them. The small-model demo
    # uses schema.COMPACT_SYSTEM_PROMPT: ~40 tokens instead of ~250 on every training example
    system_prompt: str = Field(SYSTEM_PROMPT, min_length=1)

    @field_validator("news_buckets")
    @classmethod
    def _buckets(cls, v: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, int, int], ...]:
        for lo, hi, cap in v:
            if not 0 <= lo <= hi or cap < 0:
                raise ValueError(
                    f"news_buckets: ({lo}, {hi}, {cap}) must be (min_age <= max_age, max_items >= 0)"
                )
        return v


def context_schema() -> pa.Schema:
    """Arrow schema of a built context dataset (schema.CONTEXT_COLUMNS)."""
    item = pa.struct(
        [
            ("id", pa.string()),
            ("section", pa.string()),
            ("date", pa.string()),
            ("source", pa.string()),
            ("text", pa.string()),
            ("numbers", pa.list_(pa.float64())),
        ]
    )
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("prompt", pa.list_(msg)),
            ("prompt_text", pa.string()),
            ("evidence", pa.list_(item)),
            ("sections", pa.list_(pa.string())),
            ("ticker", pa.string()),
            ("asof", pa.string()),
            ("market", pa.string()),
            ("variation", pa.int64()),
            ("label", pa.string()),
            ("label_id", pa.int64()),
            ("composite", pa.float64()),
            ("fwd_return", pa.float64()),
            ("fwd_vol", pa.float64()),
            ("true_expected_return", pa.float64()),
            ("split", pa.string()),
        ]
    )


# --- the builder ----------------------------------------------------------------------------------
_IDS: dict[str, list[str]] = {p: [f"{p}{j}" for j in range(1, 257)] for p in SECTIONS.values()}
_SECTION_POS = {s: j for j, s in enumerate(SECTION_ORDER)}
_EVENT_SECTIONS = ("fundamentals", "news", "insider", "analyst", "macro")


_LINE_PRE: dict[str, list[str]] = {s: [f"[{i}] " for i in _IDS[p]] for s, p in SECTIONS.items()}
_SEC_HEAD = {s: "\n" + section_header(s) + "\n" for s in SECTIONS}


def _ids(prefix: str, n: int) -> list[str]:
    ids = _IDS[prefix]
    if n > len(ids):
        ids.extend(f"{prefix}{j}" for j in range(len(ids) + 1, n + 1))
        _LINE_PRE[PREFIX_TO_SECTION[prefix]][:] = [f"[{i}] " for i in ids]
    return ids


def _market_of(store: MarketStore, ticker: str, bars: pd.DataFrame) -> str:
    if "market" in bars.columns and len(bars):
        return str(bars["market"].iloc[0])
    markets = store.meta.get("markets")
    if isinstance(markets, Mapping) and ticker in markets:
        return str(markets[ticker])
    return str(store.meta.get("market", store.name))


def _by_ticker(frame: pd.DataFrame | None, name: str) -> dict[str, pd.DataFrame]:
    if frame is None or not len(frame):
        return {}
    missing = {"ticker", "date"} - set(frame.columns)
    if missing:
        raise ValueError(f"build_contexts: {name} frame is missing column(s) {sorted(missing)}")
    out = {}
    for t, g in frame.groupby("ticker", sort=False):
        g = g.assign(date=pd.DatetimeIndex(g["date"]).as_unit("ns")).set_index("date")
        if g.index.has_duplicates:
            raise ValueError(f"build_contexts: {name} frame has duplicate dates for ticker {t!r}")
        out[str(t)] = g
    return out


def _col(g: pd.DataFrame | None, col: str, days: pd.DatetimeIndex, fill: object) -> np.ndarray:
    if g is None or col not in g.columns:
        return np.full(len(days), fill, dtype=object if fill is None else "float64")
    return g[col].reindex(days).to_numpy()


def build_contexts(
    store: MarketStore,
    tickers: Sequence[str] | None = None,
    dates: Sequence | Mapping[str, Sequence] | None = None,
    *,
    variations: int = 1,
    seed: int = 0,
    token_budget: int | None = None,
    labels: pd.DataFrame | None = None,
    config: ContextConfig | None = None,
    split: str = "",
    cache_file: str | Path | None = None,
    show_progress: bool = True,
):
    """Build one row per (ticker, as-of day, variation) as a `datasets.Dataset` (schema.CONTEXT_COLUMNS).

    tickers: default all of the store's. dates: as-of days for every ticker, or a mapping ticker ->
    days; default every day with a full bar window. A requested day on which the ticker has no bar
    raises ValueError. labels: a frame from `thesisgym.dataset.labels.compute_labels` (with thresholds);
    default: forward composites/returns without thresholds, so `label` is None. split: the value
    of the `split` column. cache_file: stream each ticker's rows to this Arrow file and return a
    memory-mapped dataset, so peak memory is one ticker's rows rather than the whole build (use it
    for large builds, e.g. Trading-R1's ~20 variations per ticker-day).
    """
    import datasets
    from datasets.fingerprint import generate_random_fingerprint
    from datasets.table import InMemoryTable

    from thesisgym.dataset.labels import compute_labels

    cfg = config or ContextConfig()
    tickers = _check_request(store, tickers, dates, variations, token_budget)
    timeline = store.timeline()
    if labels is None:
        labels = compute_labels(timeline.label_bars(tickers))
    label_g = _by_ticker(labels, "labels")
    truth_g = _by_ticker(timeline.label_truth(), "truth")
    bars = timeline.bars_future_included()
    groups = bars.groupby("ticker", sort=False).indices
    state = _BuildState(store, cfg, EventPool(timeline, store.name), variations, seed, token_budget, split)
    if isinstance(dates, Mapping):
        tickers = [t for t in tickers if dates.get(t) is not None]  # only the tickers the mapping names
    writer = None
    if cache_file is not None:
        Path(cache_file).parent.mkdir(parents=True, exist_ok=True)
        writer = pa.ipc.new_stream(str(cache_file), state.schema)
    tables: list[pa.Table] = []
    with _progress(show_progress, split, len(tickers)) as advance:
        try:
            for t in tickers:
                req = dates.get(t) if isinstance(dates, Mapping) else dates
                table = state.ticker_table(t, bars.iloc[groups[t]], req, label_g.get(t), truth_g.get(t))
                if writer is not None:
                    writer.write_table(table)
                else:
                    tables.append(table)
                advance()
        finally:
            if writer is not None:
                writer.close()
    if cache_file is not None:
        return datasets.Dataset.from_file(str(cache_file))
    table = pa.concat_tables(tables) if tables else context_schema().empty_table()
    # A random fingerprint: hashing a multi-GB table (the datasets default) costs more than building it.
    return datasets.Dataset(InMemoryTable(table), fingerprint=generate_random_fingerprint())


def _check_request(store: MarketStore, tickers, dates, variations, token_budget) -> list[str]:
    if not isinstance(variations, int) or variations < 1:
        raise ValueError(f"build_contexts: variations must be an int >= 1, got {variations!r}")
    if token_budget is not None and (not isinstance(token_budget, int) or token_budget <= 0):
        raise ValueError(f"build_contexts: token_budget must be a positive int or None, got {token_budget!r}")
    known = store.tickers
    tickers = known if tickers is None else [str(t) for t in tickers]
    unknown = sorted(set(tickers) - set(known))
    if unknown:
        raise ValueError(f"build_contexts: unknown ticker(s) {unknown} (store {store.name!r} has {len(known)})")
    if isinstance(dates, Mapping):
        extra = sorted(set(map(str, dates)) - set(tickers))
        if extra:
            raise ValueError(f"build_contexts: dates given for ticker(s) {extra} that are not being built")
    return tickers


@contextmanager
def _progress(show: bool, split: str, total: int):
    """Yields `advance()`; progress over tickers when `show` (a bar in a terminal, lines in a log)."""
    from thesisgym.progress import Ticker

    with Ticker(total, f"contexts {split}".rstrip(), enabled=show, unit="tickers") as ticker:
        yield ticker.advance


def _requested_positions(t: str, days_all: pd.DatetimeIndex, req, min_bars: int) -> np.ndarray:
    """Positions in the ticker's bars of the requested as-of days (default: every day with a full window)."""
    n = len(days_all)
    if req is None:
        return np.arange(min(min_bars - 1, n), n)
    want = pd.DatetimeIndex(pd.to_datetime(list(req))).as_unit("ns").normalize()
    pos = np.searchsorted(days_all.asi8, want.asi8)
    bad = (pos >= n) | (days_all.asi8[np.minimum(pos, n - 1)] != want.asi8) if n else np.ones(len(want), bool)
    if bad.any():
        d = want[np.argmax(bad)].date()
        raise ValueError(f"build_contexts: ticker {t!r} has no bar on requested date {d}")
    return pos


class _BuildState:
    """Everything shared across tickers of one build_contexts call."""

    def __init__(self, store, cfg, events, variations, seed, token_budget, split):
        self.store, self.cfg, self.events = store, cfg, events
        self.timeline = store.timeline()
        self.k, self.seed, self.budget, self.split = variations, seed, token_budget, split
        self.schema = context_schema()
        self.sys_tokens = count_tokens(cfg.system_prompt) if token_budget else 0
        self._max_age = max([mx for _, mx, _ in cfg.news_buckets]
                            + [getattr(cfg, f"{s}_days") for s in ("fundamentals", "insider", "analyst", "macro")])

    def ticker_table(self, t, b, req, lab, truth) -> pa.Table:
        """Rows of one ticker: one group per basis (between two splits or applied dividends), in the
        requested order."""
        days_all = pd.DatetimeIndex(b["date"]).as_unit("ns")
        pos = _requested_positions(t, days_all, req, self.cfg.bars)
        if not len(pos):
            return self.schema.empty_table()
        regime = self.timeline.regimes(t, days_all[pos])
        tables, order = [], []
        for r in np.unique(regime):
            sel = np.flatnonzero(regime == r)
            tables.append(self._group_table(t, b, pos[sel], lab, truth))
            order.append(sel)
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        perm = np.concatenate(order)
        if np.all(perm[1:] > perm[:-1]):
            return table
        # rows come k per requested day; put the days back in the order they were asked for
        rows = (np.argsort(perm, kind="stable")[:, None] * self.k + np.arange(self.k)[None, :]).ravel()
        return table.take(pa.array(rows))

    def _group_table(self, t, b, pos, lab, truth) -> pa.Table:
        """Rows of the requested days `pos` of one ticker, which share one split basis."""
        days_all = pd.DatetimeIndex(b["date"]).as_unit("ns")
        days = days_all[pos]
        pool, bodies, tech = self._pool(t, b, pos, days)
        windows = self._windows(t, days, base=tech["n"])
        rows = self._render_rows(t, pos, days, days_all.strftime("%Y-%m-%d").tolist(), tech, windows, bodies)
        return self._table(t, b, lab, truth, days, pool, rows)

    def _pool(self, t, b, pos, days):
        """Every evidence text this group can show, on the basis of `asof`: indicators of the requested
        rows, all bars, then the ticker's events of each section and the market-wide ones."""
        cfg, ev = self.cfg, self.events
        n = len(b)
        asof = days[0]  # every day of the group has the same split basis
        tl = self.timeline
        scaled = as_of_basis(b, float(tl.price_factor(t, [asof])[0]), float(tl.volume_factor(t, [asof])[0]))
        ind = compute_indicators(scaled)
        dec = price_decimals(scaled["close"].to_numpy(dtype="float64"))
        ind_starts, ind_txt, ind_vals, ind_offs = (
            indicator_texts(ind, decimals=dec, rows=pos) if cfg.indicators else
            ([0] * (len(pos) + 1), [], np.zeros(0), np.zeros(1, "int64"))
        )
        ind_rows = np.repeat(pos, np.diff(ind_starts)).tolist()
        bar_txt, bar_vals, bar_offs = bar_texts(scaled, ind["chg"].to_numpy(), decimals=dec)
        n_ind = len(ind_txt)
        date_str = pd.DatetimeIndex(b["date"]).strftime("%Y-%m-%d").tolist()
        self._sec_idx = {s: ev.indices(t, s) for s in _EVENT_SECTIONS}
        ev_glob = np.concatenate([self._sec_idx[s] for s in _EVENT_SECTIONS]).astype("int64")
        span = (int(self.timeline.day_start([min(days)], self._max_age)[0]), int(self.timeline.cutoffs([max(days)])[0]))
        ev_arrow, ev_bodies, ev_numbers = ev.rendered(ev_glob, self.timeline, t, asof, span)
        bodies = (
            [f"{date_str[r]} | indicators | {x}" for r, x in zip(ind_rows, ind_txt, strict=True)]
            + [f"{d} | prices | {x}" for d, x in zip(date_str, bar_txt, strict=True)]
            + ev_bodies
        )
        m = n_ind + n
        pool = {
            "section": pa.concat_arrays([pa.array(["technical"] * m, pa.string()), ev_arrow["section"]]),
            "date": pa.concat_arrays([pa.array([date_str[r] for r in ind_rows] + date_str, pa.string()),
                                      ev_arrow["date"]]),
            "source": pa.concat_arrays([pa.array(["indicators"] * n_ind + ["prices"] * n, pa.string()),
                                        ev_arrow["source"]]),
            "text": pa.concat_arrays([pa.array(ind_txt + bar_txt, pa.string()), ev_arrow["text"]]),
            "numbers": pa.concat_arrays([
                pa.ListArray.from_arrays(pa.array(ind_offs, pa.int32()), pa.array(ind_vals, pa.float64())),
                pa.ListArray.from_arrays(pa.array(bar_offs, pa.int32()), pa.array(bar_vals, pa.float64())),
                pa.array(ev_numbers, pa.list_(pa.float64())),
            ]),
        }
        return pool, bodies, {"n": m, "n_ind": n_ind, "starts": ind_starts}

    def _windows(self, t, days, *, base: int) -> dict[str, list[tuple[list, list, int, int]]]:
        """Per section, per lookback bucket: the [lo, hi) pool ranges visible at each day (the door's rule)."""
        cfg = self.cfg
        out = {}
        for s in _EVENT_SECTIONS:
            pub = self.events.pub_ns[self._sec_idx[s]]
            specs = cfg.news_buckets if s == "news" else [(0, getattr(cfg, f"{s}_days"), getattr(cfg, f"{s}_items"))]
            out[s] = []
            for mn, mx, cap in specs:
                lo, hi = self.timeline.window(pub, days, mn, mx)
                out[s].append((lo.tolist(), hi.tolist(), cap, base))
            base += len(pub)
        return out

    def _render_rows(self, t, pos, days, date_str, tech, windows, bodies) -> dict:
        """The user message, sections and evidence pool indices of every (day, variation) row."""
        cfg, store = self.cfg, self.store
        u = section_uniforms(self.seed, t, days.asi8 // _NS_DAY, self.k, 2 * len(SECTION_ORDER)) if self.k > 1 else None
        ntok: list[int] = [-1] * len(bodies) if self.budget else []
        out = {"users": [], "sections": [], "flat_idx": [], "flat_ids": [], "offsets": [0], "row_of": [], "var": []}
        starts, n_ind = tech["starts"], tech["n_ind"]
        for r, p in enumerate(pos.tolist()):
            tech_items = list(range(starts[r], starts[r + 1])) + list(range(n_ind + p, n_ind + max(p - cfg.bars, -1), -1))
            grp, news_split = _event_items(windows, r)
            grp["technical"] = tech_items
            present = [s for s in SECTION_ORDER if grp[s]]
            asof = date_str[p]
            for v in range(self.k):
                order = present if v == 0 else _variation_order(present, u[r, v], cfg.section_keep_prob)
                chosen = [(s, grp[s]) for s in order]
                if self.budget:
                    chosen = self._budget(t, asof, order, chosen, news_split, n_ind_r=starts[r + 1] - starts[r],
                                          bodies=bodies, ntok=ntok)
                parts = [render_header(t, asof, [s for s, _ in chosen], cutoff=store.cutoff, timezone=store.timezone)]
                for s, items in chosen:
                    m = len(items)
                    pre = _ids(SECTIONS[s], m)
                    parts.append(_SEC_HEAD[s] + "\n".join(map(str.__add__, _LINE_PRE[s][:m], map(bodies.__getitem__, items))))
                    out["flat_idx"] += items
                    out["flat_ids"] += pre[:m]
                out["users"].append("\n".join(parts))
                out["sections"].append([s for s, _ in chosen])
                out["offsets"].append(len(out["flat_idx"]))
                out["row_of"].append(r)
                out["var"].append(v)
        return out

    def _budget(self, t, asof, order, chosen, news_split, *, n_ind_r, bodies, ntok):
        for _, items in chosen:
            for i in items:
                if ntok[i] < 0:
                    ntok[i] = count_tokens(bodies[i]) + ID_TOKENS
        header = render_header(t, asof, order, cutoff=self.store.cutoff, timezone=self.store.timezone)
        # The header with every chosen section is an upper bound once empty sections disappear.
        fixed = self.sys_tokens + count_tokens(header) + sum(count_tokens(section_header(s)) for s in order)
        groups = [(s, items, item_tiers(s, len(items), news_split, n_ind_r)) for s, items in chosen]
        return apply_budget(groups, ntok, fixed, self.budget, f"ticker {t}, {asof}")

    def _table(self, t, b, lab, truth, days, pool, out) -> pa.Table:
        """The Arrow table of the rows `_render_rows` laid out, evidence taken from the pool."""
        rows = np.asarray(out["row_of"], dtype="int64")
        n = len(rows)
        take = pa.array(out["flat_idx"], pa.int64())
        item = pa.StructArray.from_arrays(
            [pa.array(out["flat_ids"], pa.string())]
            + [pool[k].take(take) for k in ("section", "date", "source", "text", "numbers")],
            fields=list(self.schema.field("evidence").type.value_type),
        )
        evidence = pa.ListArray.from_arrays(pa.array(out["offsets"], pa.int32()), item)
        users_a = pa.array(out["users"], pa.string())
        # system/user interleaved and prompt_text joined by Arrow kernels, not Python string copies
        both = pa.concat_arrays([pa.array([self.cfg.system_prompt], pa.string()), users_a])
        inter = np.zeros(2 * n, dtype="int64")
        inter[1::2] = np.arange(1, n + 1)
        msgs = pa.StructArray.from_arrays(
            [pa.array(["system", "user"] * n, pa.string()), both.take(pa.array(inter))],
            fields=list(self.schema.field("prompt").type.value_type),
        )
        prompt = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2), pa.int32()), msgs)
        label = _col(lab, "label", days, None)[rows]
        label = [x if isinstance(x, str) and x in LABELS else None for x in label.tolist()]
        label_id = [LABELS.index(x) if x is not None else -1 for x in label]
        sections_col, var_col = out["sections"], out["var"]
        cols = {
            "prompt": prompt,
            "prompt_text": pc.binary_join_element_wise(pa.scalar(self.cfg.system_prompt), users_a, "\n\n"),
            "evidence": evidence,
            "sections": pa.array(sections_col, pa.list_(pa.string())),
            "ticker": pa.array([t] * n, pa.string()),
            "asof": pa.array(days.strftime("%Y-%m-%d").to_numpy()[rows].tolist() if n else [], pa.string()),
            "market": pa.array([_market_of(self.store, t, b)] * n, pa.string()),
            "variation": pa.array(var_col, pa.int64()),
            "label": pa.array(label, pa.string()),
            "label_id": pa.array(label_id, pa.int64()),
            "composite": pa.array(_col(lab, "composite", days, np.nan).astype("float64")[rows]),
            "fwd_return": pa.array(_col(lab, "fwd_return", days, np.nan).astype("float64")[rows]),
            "fwd_vol": pa.array(_col(lab, "fwd_vol", days, np.nan).astype("float64")[rows]),
            "true_expected_return": pa.array(
                _col(truth, "expected_return", days, np.nan).astype("float64")[rows]
            ),
            "split": pa.array([self.split] * n, pa.string()),
        }
        return pa.Table.from_arrays([cols[f.name] for f in self.schema], schema=self.schema)


def _event_items(windows: dict, r: int) -> tuple[dict[str, list[int]], tuple[int, ...]]:
    """Pool indices of row r's events per section (newest first, each bucket capped), and the sizes
    of the news buckets (the token budget drops older buckets first)."""
    grp: dict[str, list[int]] = {}
    news_split: tuple[int, ...] = ()
    for s in _EVENT_SECTIONS:
        items: list[int] = []
        sizes = []
        for lo, up, cap, bs in windows[s]:
            a, z = lo[r], up[r]
            chunk = list(range(bs + z - 1, bs + max(a, z - cap) - 1, -1)) if z > a else []
            items += chunk
            sizes.append(len(chunk))
        grp[s] = items
        if s == "news":
            news_split = tuple(sizes)
    return grp, news_split


def _variation_order(present: list[str], uv: np.ndarray, keep_p: float) -> list[str]:
    """A variation's sections: technical always, each other with probability keep_p, in a random order."""
    kept = [s for s in present if s == "technical" or uv[_SECTION_POS[s]] < keep_p]
    return sorted(kept, key=lambda s: uv[len(SECTION_ORDER) + _SECTION_POS[s]])
