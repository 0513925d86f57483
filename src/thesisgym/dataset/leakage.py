"""Point-in-time audit of built prompts: every item's public time re-derived from the store.

`audit_prompts(target)` reads a built dataset (a `thesisgym build` directory, its store found through
build_meta.json) or a store (its canonical prompts are built with a SplitConfig first) and, with
code separate from the builder's, checks every evidence item of every prompt:

- time: each event item is matched to the store event it shows (same ticker, section, date, source
  and text, numbers rendered on the prompt's basis) and counted when published at or after the
  prompt's cutoff; bars and indicators dated after the as-of day are counted too. An item no store
  event explains is counted as unmatched.
- insider filing: an insider trade is re-dated from the reference store's records: its exact filing
  (a filing-dated source naming the same insider and day) or the Form 4 index of the issuer (forms
  reporting that trade date). Shown before every candidate filing was public = a certain leak;
  before some of them = a probable leak; no record = unverifiable (counted, not a leak).
- content dates: free-text items whose text names a period that starts after their date.
- one basis: prices (against the split history of the reference store) and per-share numbers of
  events: counted when shown on a basis other than the as-of day's (adjusted for a later split, or
  as filed before an earlier one).
- coverage per ticker x split x section.

`reference` (default: the audited store) supplies the split history and filing records, so prompts
built from an older store can be audited with what a newer import knows. Any leak, unexplained item
or off-basis number makes `AuditReport.ok` false (`thesisgym data audit` exits 1).

Independence: the audit reads the store's raw frames (`events`, `actions`, `bars`, `filings`, `meta`)
and re-derives with its own short code everything a leak could hide in: each event's public instant
(its `published_at`), each prompt's cutoff (the as-of day at the store's `cutoff` time in its
`timezone`), the split level S(t) (product of the split ratios with ex-date <= t) and the split
regimes, the bars' basis day. It does not use the builder's `EventPool` nor the door's `Timeline`
(`cutoffs`, `window`, `SplitHistory`, factors). It shares only how an event is WRITTEN in a prompt, which
it must reproduce byte for byte to recognise the item: `clean_text` / `event_text`
(thesisgym.dataset.render) and the per-share marker format (`render_per_share`, `strip_per_share`,
thesisgym.data.asof). A difference there cannot hide a leak: an item the audit cannot match to an event
is counted as `unmatched`, itself a finding. The content-date check shares `names_later_period` with the
import quality pass, so it re-finds what import would quarantine (a second opinion on the time rule,
not on that parser).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from thesisgym.data.asof import render_per_share, strip_per_share
from thesisgym.data.contentdates import names_later_period
from thesisgym.data.quality import coverage_table
from thesisgym.data.store import MarketStore
from thesisgym.dataset.render import clean_text, event_text
from thesisgym.schema import SECTIONS

__all__ = ["AuditReport", "audit_prompts", "render_audit", "undated_insider"]

LEAK_COLUMNS: tuple[str, ...] = (
    "after_cutoff", "insider_certain", "insider_probable", "content_suspects", "off_basis", "unmatched",
)
_INSIDER = re.compile(r"^(?P<who>.+?)(?: \([^)]*\))? (?:sold|acquired|bought|exercised options for|was awarded|"
                      r"withheld for tax|gifted|converted|disposed of|exercised|other transaction in|code \w+) .* "
                      r"on (?P<day>\d{4}-\d{2}-\d{2})$")
_STRUCTURED_ANALYST = ("Estimize", "recommendation trends")


@dataclass
class AuditReport:
    """Counts per section (`families`), per prompt (`prompts`), coverage and examples of each finding."""

    target: str
    store: str
    reference: str
    families: list[dict]
    prompts: dict
    coverage: list[dict] = field(default_factory=list)
    examples: dict[str, list] = field(default_factory=dict)
    insider_undated: dict = field(default_factory=dict)

    @property
    def leaks(self) -> int:
        return int(sum(f[c] for f in self.families for c in LEAK_COLUMNS) + self.prompts["prices_off_basis"])

    @property
    def ok(self) -> bool:
        return self.leaks == 0

    def to_dict(self) -> dict:
        return {"target": self.target, "store": self.store, "reference": self.reference, "ok": self.ok,
                "leaks": self.leaks, "families": self.families, "prompts": self.prompts,
                "coverage": self.coverage, "examples": self.examples, "insider_undated": self.insider_undated}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def audit_prompts(target: str | Path, *, store: str | Path | MarketStore | None = None,
                  reference: str | Path | MarketStore | None = None, config=None,
                  show_progress: bool = False) -> AuditReport:
    """Audit a built dataset directory or a store directory (module docstring). `store` overrides the
    store a dataset names; `config` (SplitConfig, or a YAML path / preset name) builds a store's prompts."""
    splits, st, store_name = _load_target(Path(target), store, config, show_progress)
    ref = _store(reference) if reference is not None else st
    items = _items(splits)
    items = _match(items, st)
    _check_time(items, st)
    _check_insider(items, ref)
    _check_content(items, st)
    prompts = _check_basis(items, st, ref)
    families = _families(items)
    examples = _examples(items)
    cov = coverage_table(splits)
    return AuditReport(target=str(target), store=store_name, reference=getattr(ref, "name", "?"),
                       families=families, prompts=prompts, coverage=cov.to_dict("records"), examples=examples,
                       insider_undated=undated_insider(st))


def undated_insider(store: MarketStore) -> dict:
    """What each choice for insider trades no filing record dates (`read_insider(undated=)`) does in this
    store: the choice it was imported with, the trades concerned at import, how many events the
    store shows at the Form 5 deadline ("form5_deadline" moves them, by a median number of days past
    the old trade + 10 business days rule) and how many it left out ("drop"). A store imported before
    the choice existed shows them by the old rule (`events_by_old_rule`): re-import it."""
    ev = store.events
    timing = ev.loc[ev["kind"] == "insider", "timing"].value_counts() if "timing" in ev.columns else pd.Series()
    meta = (store.meta.get("insider") or {}).get("undated") or {}
    shown, old = int(timing.get("form5 deadline", 0)), int(timing.get("availability rule", 0))
    trades = int(meta.get("trades", shown + old))
    return {"choice": meta.get("choice", "old rule (imported before the choice)" if old else "none recorded"),
            "trades": trades, "events_at_form5_deadline": shown, "events_by_old_rule": old,
            "form5_deadline_moves": trades, "drop_drops": trades,
            "dropped_here": trades if meta.get("choice") == "drop" else 0,
            "form5_median_days_after_old_rule": meta.get("form5_median_days_after_old_rule")}


def _store(s: str | Path | MarketStore) -> MarketStore:
    return s if isinstance(s, MarketStore) else MarketStore.load(s)


def _load_target(target: Path, store, config, show_progress: bool):
    """(splits, store, store label) of a dataset directory or a store directory."""
    from thesisgym.dataset.splits import META_FILE, SplitConfig, build_splits, load_split

    if (target / "bars.parquet").exists():
        st = _store(target if store is None else store)
        cfg = config if isinstance(config, SplitConfig) else (
            SplitConfig.from_yaml(config) if config is not None else SplitConfig())
        cfg = cfg.model_copy(update={"variations": 1, "eval_variations": 1})
        splits = dict(build_splits(st, cfg, show_progress=show_progress))
        return splits, st, str(target)
    meta_path = target / META_FILE
    if not meta_path.exists():
        raise ValueError(f"{target}: neither a MarketStore directory (bars.parquet) nor a built dataset ({META_FILE})")
    meta = json.loads(meta_path.read_text())
    if store is None:
        store = (meta.get("store") or {}).get("path")
        if not store:
            raise ValueError(f"{meta_path}: names no store path; pass the store the dataset was built from")
    splits = {}
    for name in meta.get("counts", {}):
        ds = load_split(target, name, required=False)
        if ds is not None and len(ds):
            splits[name] = ds
    st = _store(store)
    return splits, st, str(store)


def _items(splits: dict) -> pd.DataFrame:
    """One row per evidence item: prompt number, split, ticker, asof, section, date, source, text."""
    frames, base = [], 0
    for name, ds in splits.items():
        table = ds.data.table if hasattr(ds, "data") else ds
        ev = table.column("evidence").combine_chunks()
        parent = pc.list_parent_indices(ev).to_numpy()
        flat = pc.list_flatten(ev)
        tick = np.asarray(table.column("ticker").to_pylist(), dtype=object)
        asof = np.asarray(table.column("asof").to_pylist(), dtype=object)
        frames.append(pd.DataFrame({
            "prompt": parent + base, "split": name, "ticker": tick[parent], "asof": asof[parent],
            **{k: pc.struct_field(flat, k).to_numpy(zero_copy_only=False) for k in ("section", "date", "source", "text")},
        }))
        base += len(table)
    if not frames:
        return pd.DataFrame(columns=["prompt", "split", "ticker", "asof", "section", "date", "source", "text"])
    return pd.concat(frames, ignore_index=True)


def _raw_events(store: MarketStore) -> pd.DataFrame:
    """The store's events by publication time (stable), with the columns later store formats added."""
    ev = store.events
    if len(ev):
        ns = pd.DatetimeIndex(ev["published_at"]).as_unit("ns").asi8
        ev = ev.iloc[np.argsort(ns, kind="stable")]
    ev = ev.reset_index(drop=True)
    for col, empty in (("basis_date", pd.NaT), ("timing", "")):
        if col not in ev.columns:
            ev = ev.assign(**{col: empty})
    return ev


def _splits(store: MarketStore) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """ticker -> (ex-dates as ns, cumulative product of the ratios) of the store's splits."""
    a = store.actions
    if a is None or not len(a):
        return {}
    a = a[a["kind"] == "split"].sort_values(["ticker", "date"], kind="stable")
    return {str(t): (pd.DatetimeIndex(g["date"]).as_unit("ns").asi8, np.cumprod(g["value"].to_numpy(dtype="float64")))
            for t, g in a.groupby("ticker", sort=False)}


def _level(splits: dict, ticker: str, days) -> np.ndarray:
    """S(t) per day: the product of the split ratios of `ticker` with ex-date <= t (1 before any)."""
    ns = pd.DatetimeIndex(pd.to_datetime(list(days))).normalize().as_unit("ns").asi8
    if ticker not in splits:
        return np.ones(len(ns))
    at, cum = splits[ticker]
    return np.concatenate([[1.0], cum])[np.searchsorted(at, ns, side="right")]


def _regime(splits: dict, ticker: str, days) -> np.ndarray:
    """How many splits of `ticker` took effect on or before each day."""
    ns = pd.DatetimeIndex(pd.to_datetime(list(days))).normalize().as_unit("ns").asi8
    return np.searchsorted(splits[ticker][0], ns, side="right") if ticker in splits else np.zeros(len(ns), "int64")


def _event_keys(store: MarketStore) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every way a prompt can show each event: its text as written (`regime` -1, any day) and, for
    events with per-share numbers, rendered for each split regime of its ticker. Also the events with
    the audit's own columns (pub_ns, marked, basis)."""
    ev = _raw_events(store)
    tick = ev["ticker"].fillna("").astype(str).to_numpy()
    kinds = ev["kind"].astype(str).to_numpy()
    raw = [event_text(a, b) for a, b in zip(ev["title"].fillna("").astype(str), ev["text"].fillna("").astype(str),
                                              strict=True)]
    plain = [strip_per_share(x) for x in raw]
    marked = np.array([p != r for p, r in zip(plain, raw, strict=True)], dtype=bool) & (tick != "")
    dates = (pd.DatetimeIndex(ev["published_at"]).tz_convert(store.timezone).strftime("%Y-%m-%d").tolist()
             if len(ev) else [])
    sources = [clean_text(s) or k for s, k in zip(ev["source"].fillna("").astype(str), kinds, strict=True)]
    sections = np.where(tick == "", "macro", kinds)
    texts = [p if m else r for p, r, m in zip(plain, raw, marked, strict=True)]
    keys = pd.DataFrame({"eid": np.arange(len(ev)), "key_ticker": tick, "section": sections, "date": dates,
                         "source": sources, "text": texts, "regime": -1})
    splits, rows = _splits(store), []
    basis = pd.DatetimeIndex(ev["basis_date"])
    for i in np.flatnonzero(marked):
        t = str(tick[i])
        at = splits.get(t, (np.zeros(0, "int64"), None))[0]
        for r, start in enumerate([pd.Timestamp("1900-01-01"), *pd.to_datetime(at)]):
            f = 1.0 if pd.isna(basis[i]) else float(_level(splits, t, [basis[i]])[0] / _level(splits, t, [start])[0])
            rows.append((i, t, sections[i], dates[i], sources[i], render_per_share(raw[i], f), r))
    rend = pd.DataFrame(rows, columns=keys.columns)
    pub = pd.DatetimeIndex(ev["published_at"]).tz_convert("UTC").as_unit("ns").asi8 if len(ev) else np.zeros(0, "int64")
    own = pd.DataFrame({"pub_ns": pub, "marked": marked, "kind": kinds, "timing": ev["timing"].astype(str).to_numpy()})
    return pd.concat([keys[~marked], rend], ignore_index=True), own


def _match(items: pd.DataFrame, store: MarketStore) -> pd.DataFrame:
    """Items with the store event each shows (`eid`, -1 for technical items and unmatched ones)."""
    keys, own = _event_keys(store)
    splits = _splits(store)
    items = items.copy()
    items["key_ticker"] = np.where(items["section"] == "macro", "", items["ticker"])
    items["regime"] = -1
    for t, idx in items.groupby("ticker", sort=False).indices.items():
        items.loc[items.index[idx], "regime"] = _regime(splits, str(t), items["asof"].iloc[idx])
    on = ["key_ticker", "section", "date", "source", "text"]
    plain = keys[keys["regime"] == -1].groupby(on, sort=False)["eid"].min()
    eid = pd.MultiIndex.from_frame(items[on]).map(plain.to_dict().get) if len(items) else []
    items["eid"] = pd.Series(eid, index=items.index, dtype="float64")
    miss = items["eid"].isna() & (items["section"] != "technical")
    if miss.any():
        rend = keys[keys["regime"] >= 0].groupby([*on, "regime"], sort=False)["eid"].min().to_dict()
        sub = items.loc[miss, [*on, "regime"]]
        found = [rend.get(tuple(r)) for r in sub.itertuples(index=False)]
        items.loc[miss, "eid"] = np.array([np.nan if e is None else e for e in found], dtype="float64")
    items["eid"] = items["eid"].fillna(-1).astype("int64")
    items["unmatched"] = (items["eid"] < 0) & (items["section"] != "technical")
    ok = items["eid"].to_numpy() >= 0
    at = np.maximum(items["eid"].to_numpy(), 0)
    items["pub_ns"] = np.where(ok, own["pub_ns"].to_numpy()[at] if len(own) else 0, np.iinfo("int64").min)
    for col in ("kind", "timing"):
        items[col] = np.where(ok, own[col].to_numpy()[at] if len(own) else "", "")
    items["marked"] = np.where(ok, own["marked"].to_numpy()[at] if len(own) else False, False)
    return items.drop(columns=["key_ticker", "regime"])


def _cutoffs(store: MarketStore, asof: pd.Series) -> np.ndarray:
    """UTC ns of each as-of day's cutoff: the day at the store's `cutoff` time in its `timezone`."""
    days = pd.Series(asof).astype(str).str[:10]
    one = {d: pd.Timestamp(f"{d} {store.cutoff}").tz_localize(store.timezone).tz_convert("UTC").value
           for d in days.unique()}
    return days.map(one).to_numpy(dtype="int64")


def _check_time(items: pd.DataFrame, store: MarketStore) -> None:
    """Items published at or after the prompt's cutoff; bars and indicators dated after the as-of day."""
    cut = _cutoffs(store, items["asof"]) if len(items) else np.zeros(0, "int64")
    items["cutoff_ns"] = cut
    event = items["eid"].to_numpy() >= 0
    late_event = event & (items["pub_ns"].to_numpy() >= cut)
    late_bar = (items["section"] == "technical").to_numpy() & (items["date"].to_numpy() > items["asof"].to_numpy())
    items["after_cutoff"] = late_event | late_bar


def _parse_insider(text: str) -> tuple[str, str] | None:
    m = _INSIDER.match(text)
    if not m:
        return None
    return " ".join(sorted(re.sub(r"[^a-z ]", " ", m["who"].lower()).split())), m["day"]


def _check_insider(items: pd.DataFrame, ref: MarketStore) -> None:
    """Insider items re-dated from the reference's exact filings and Form 4 index (module docstring)."""
    for c in ("insider_certain", "insider_probable", "insider_unverifiable"):
        items[c] = False
    ins = items.index[(items["section"] == "insider") & (items["eid"] >= 0)]
    if not len(ins):
        return
    exact = _exact_filings(ref)
    idx = _index_filings(ref)
    for i, text, t, cut, timing, source in zip(ins, items.loc[ins, "text"], items.loc[ins, "ticker"],
                                               items.loc[ins, "cutoff_ns"], items.loc[ins, "timing"],
                                               items.loc[ins, "source"], strict=True):
        key = _parse_insider(text)
        if key is None:
            continue
        known = exact.get((t, key[0], key[1]))
        cand = idx.get((t, key[1]))
        if known is not None:
            items.at[i, "insider_certain"] = cut <= known
        elif cand is not None:
            items.at[i, "insider_certain"] = cut <= cand[0]
            items.at[i, "insider_probable"] = cand[0] < cut <= cand[1]
        elif timing != "filed" and source != "Form 4":
            items.at[i, "insider_unverifiable"] = True


def _exact_filings(ref: MarketStore) -> dict[tuple[str, str, str], int]:
    """(ticker, insider, trade day) -> earliest publication (ns) of a filing-dated insider event."""
    ev = _raw_events(ref)
    filed = ev[(ev["kind"] == "insider") & ((ev["timing"] == "filed") | (ev["source"] == "Form 4") & (ev["timing"] == ""))]
    out: dict = {}
    pub = pd.DatetimeIndex(filed["published_at"]).as_unit("ns").asi8
    for t, title, p in zip(filed["ticker"], filed["title"], pub, strict=True):
        key = _parse_insider(render_per_share(str(title), 1.0))
        if key is not None:
            k = (str(t), *key)
            out[k] = min(out.get(k, p), p)
    return out


def _index_filings(ref: MarketStore) -> dict[tuple[str, str], tuple[int, int]]:
    """(ticker, report day) -> (earliest, latest) acceptance (ns) of the Form 4s reporting that day."""
    f = ref.filings
    if f is None or not len(f):
        return {}
    day = pd.to_datetime(f["report_date"]).dt.strftime("%Y-%m-%d")
    acc = pd.DatetimeIndex(f["accepted"]).as_unit("ns").asi8
    g = pd.DataFrame({"t": f["ticker"].to_numpy(), "d": day.to_numpy(), "a": acc}).groupby(["t", "d"])["a"]
    return {k: (int(lo), int(hi)) for k, lo, hi in zip(g.min().index, g.min().to_numpy(), g.max().to_numpy(),
                                                       strict=True)}


def _check_content(items: pd.DataFrame, store: MarketStore) -> None:
    """Free-text items naming a period that starts after their date (legacy stores: by kind and source)."""
    ev = _raw_events(store)
    legacy = bool((ev["timing"] == "").all()) if len(ev) else False
    free = (items["eid"] >= 0) & ((items["timing"] == "") if not legacy else (
        (items["kind"] == "news") | ((items["kind"] == "analyst") & ~items["source"].isin(_STRUCTURED_ANALYST))))
    cache: dict[tuple[str, str], bool] = {}
    flags = np.zeros(len(items), dtype=bool)
    for j in np.flatnonzero(free.to_numpy()):
        key = (items["text"].iat[j], items["date"].iat[j])
        if key not in cache:
            cache[key] = names_later_period(key[0], pd.Timestamp(key[1])) is not None
        flags[j] = cache[key]
    items["content_suspects"] = flags


def _check_basis(items: pd.DataFrame, st: MarketStore, ref: MarketStore) -> dict:
    """Per-share items and prompts' prices shown on a basis other than the as-of day's. An item's
    `basis_ratio` is the factor it is off by (1 = on the as-of basis, nan = no per-share number)."""
    aud, chk = _splits(st), _splits(ref)
    basis = _item_basis(items, st)
    asof = pd.to_datetime(items["asof"])
    ratio = np.full(len(items), np.nan)
    has = basis.notna().to_numpy()
    marked = items["marked"].to_numpy()
    for t, idx in items.groupby("ticker", sort=False).indices.items():
        idx = idx[has[idx]]
        if len(idx):
            b, a = pd.DatetimeIndex(basis.iloc[idx]), pd.DatetimeIndex(asof.iloc[idx])
            needed = _level(chk, t, b) / _level(chk, t, a)
            applied = np.where(marked[idx], _level(aud, t, b) / _level(aud, t, a), 1.0)
            ratio[idx] = needed / applied
    items["basis_ratio"] = ratio
    items["off_basis"] = np.isfinite(ratio) & ~np.isclose(ratio, 1.0, rtol=1e-9)
    prompts = items.drop_duplicates("prompt")[["prompt", "ticker", "asof"]].reset_index(drop=True)
    price_ratio = np.ones(len(prompts))
    for t, idx in prompts.groupby("ticker", sort=False).indices.items():
        a, bb = pd.to_datetime(prompts["asof"].iloc[idx]), [_bars_basis(st, t)]
        price_ratio[idx] = (_level(chk, t, bb)[0] / _level(chk, t, a)) / (_level(aud, t, bb)[0] / _level(aud, t, a))
    price_off = ~np.isclose(price_ratio, 1.0, rtol=1e-9)
    numbered = pd.concat([
        pd.DataFrame({"prompt": prompts["prompt"], "r": price_ratio}),
        items.loc[np.isfinite(ratio), ["prompt"]].assign(r=ratio[np.isfinite(ratio)]),
    ])
    numbered["r"] = np.round(np.log(numbered["r"].to_numpy()), 6)
    bases = numbered.groupby("prompt")["r"].nunique()
    off_any = numbered.assign(off=numbered["r"] != 0).groupby("prompt")["off"].any()
    return {"prompts": int(len(prompts)), "prices_off_basis": int(price_off.sum()),
            "with_any_number_off_basis": int(off_any.sum()), "with_mixed_bases": int((bases > 1).sum())}


def _bars_basis(store: MarketStore, ticker: str) -> pd.Timestamp:
    """The day the store's bars of `ticker` are split-adjusted to: meta `bars_adjusted_as_of` (one day
    or per ticker), else the ticker's last bar."""
    given = store.meta.get("bars_adjusted_as_of")
    given = given.get(ticker) if isinstance(given, dict) else given
    if given:
        return pd.Timestamp(given)
    days = store.bars.loc[store.bars["ticker"] == ticker, "date"]
    return pd.Timestamp(days.max()) if len(days) else pd.Timestamp("1970-01-01")


def _item_basis(items: pd.DataFrame, st: MarketStore) -> pd.Series:
    """The split basis day of each item's per-share numbers (NaT: none). From the event's basis_date;
    for a store written before bases were recorded: insider trades as traded, SEC facts as filed, and
    the vendor-adjusted families (split-adjusted earnings, Estimize) at their latest publication."""
    ev = _raw_events(st)
    eid = items["eid"].to_numpy()
    ok = eid >= 0
    out = pd.Series(pd.NaT, index=items.index, dtype="datetime64[ns]")
    if ev["basis_date"].notna().any():
        out[ok & items["marked"].to_numpy()] = ev["basis_date"].to_numpy()[eid[ok & items["marked"].to_numpy()]]
        return out
    pub = pd.DatetimeIndex(ev["published_at"]).tz_convert(st.timezone).tz_localize(None).normalize()
    latest = pd.Series(pub).groupby([ev["ticker"].to_numpy(), ev["source"].to_numpy()]).max().to_dict()
    for j in np.flatnonzero(ok):
        e, src, kind = eid[j], items["source"].iat[j], items["kind"].iat[j]
        if kind == "insider":
            key = _parse_insider(items["text"].iat[j])
            out.iat[j] = pd.Timestamp(key[1]) if key else pub[e]
        elif src.startswith("SEC "):
            out.iat[j] = pub[e]
        elif "split-adjusted" in src or src == "Estimize":
            out.iat[j] = latest[(ev["ticker"].iat[e], ev["source"].iat[e])]
    return out


_FLAGS = ("after_cutoff", "insider_certain", "insider_probable", "insider_unverifiable", "content_suspects",
          "off_basis", "unmatched")


def _families(items: pd.DataFrame) -> list[dict]:
    """Per section: items and the items of each finding, and (`<finding>_events`) how many distinct store
    events those items show (one late insider trade appears in many prompts)."""
    rows = []
    for s in SECTIONS:
        g = items[items["section"] == s]
        row = {"family": s, "items": int(len(g)), "events": int(g.loc[g["eid"] >= 0, "eid"].nunique())}
        for c in _FLAGS:
            row[c] = int(g[c].sum())
            row[f"{c}_events"] = int(g.loc[g[c] & (g["eid"] >= 0), "eid"].nunique())
        rows.append(row)
    return rows


def _examples(items: pd.DataFrame, limit: int = 5) -> dict[str, list]:
    cols = ["split", "ticker", "asof", "section", "date", "source", "text"]
    return {c: items.loc[items[c], cols].drop_duplicates(["ticker", "section", "text"]).head(limit).to_dict("records")
            for c in (*LEAK_COLUMNS, "insider_unverifiable") if c in items.columns and items[c].any()}


def render_audit(report: AuditReport):
    """A rich Table of the report: one row per section, then the prompt-level counts."""
    from rich.table import Table

    head = ("items", "late", "insider late", "undated", "content", "basis", "unmatched")
    out = Table(title=f"point-in-time audit of {report.target} (store {report.store}, reference {report.reference})")
    out.add_column("family")
    for h in head:
        out.add_column(h, justify="right")

    def cells(f: dict) -> list[str]:
        def c(k: str) -> str:
            return f"{f[k]:,}" + (f" ({f[k + '_events']:,})" if f.get(k + "_events") else "")

        return [f"{f['items']:,} ({f['events']:,})", c("after_cutoff"),
                f"{c('insider_certain')} / {c('insider_probable')}", c("insider_unverifiable"),
                c("content_suspects"), c("off_basis"), f"{f['unmatched']:,}"]

    for f in report.families:
        out.add_row(f["family"], *cells(f))
    if report.families:
        tot = {k: sum(f[k] for f in report.families) for k in report.families[0] if k != "family"}
        out.add_row("all", *cells(tot), style="bold")
    p = report.prompts
    out.caption = (
        "Counts are prompt items (distinct store events). late: published at or after the cutoff; "
        "insider late: shown before its Form 4 (certain / probable); "
        "undated: insider trade no filing record dates (not a leak); content: text names a later period; "
        "basis: a per-share number not on the as-of day's split basis; unmatched: no store event shows it.\n"
        f"{p['prompts']:,} prompts: {p['prices_off_basis']:,} show prices adjusted for a split after their "
        f"as-of day, {p['with_any_number_off_basis']:,} show some number on another basis, "
        f"{p['with_mixed_bases']:,} mix bases. {'No leak found.' if report.ok else f'{report.leaks:,} findings.'}")
    u = report.insider_undated
    if u.get("trades") or u.get("events_by_old_rule"):
        days = u.get("form5_median_days_after_old_rule")
        out.caption += (
            f"\nInsider trades no filing record dates: {u['trades']:,} at import, choice {u['choice']}. "
            f"form5_deadline moves all {u['form5_deadline_moves']:,} to their Form 5 deadline"
            + (f" (median {days} days after the old trade + 10 business days)" if days is not None else "")
            + f"; drop drops all {u['drop_drops']:,}. This store: {u['events_at_form5_deadline']:,} shown at the "
            f"deadline, {u['dropped_here']:,} left out, {u['events_by_old_rule']:,} by the old rule.")
    return out
