"""Benchmark: build 100,000 point-in-time contexts and compare with a naive per-row pandas builder.

    python bench/bench_contexts.py [--tickers 50] [--rows-per-ticker 2000] [--naive-sample 200] [--stream]
    python bench/bench_contexts.py --real ../shared/data     # Magnificent-7, every source family

Market: the synthetic market (`thesisgym.data.synth`, 50 tickers x 2,014 business days, i.e. 2,000
days per ticker with a full 15-bar window = 100,000 contexts, about 57k events).

Fast path: `build_contexts` (per-ticker vectorised indicators, pooled evidence texts, searchsorted
visibility windows, Arrow assembly); with --stream also the `cache_file` path that writes each
ticker's rows to an Arrow file and returns a memory-mapped dataset. Peak memory: the process RSS sampled every 20 ms by a thread
(psutil) during the build, reported absolute and above the pre-build baseline.

Naive path (what one writes first, and what a tool sees): for each (ticker, d) open the store's
point-in-time door `store.as_of(d)` (bars as traded on d, events published before its cutoff, per-share
numbers on d's basis), recompute the indicators on that history, filter the events with pandas masks
per section and bucket, extract numbers per item with the regex, render with `render_context`, then
`Dataset.from_list`. It is timed on a random subsample of
rows and extrapolated linearly to the full row count (its per-row cost grows with history length,
and the sample is uniform over days, so the linear estimate is fair). The naive rows are also
checked to be identical to the fast rows (prompt text and evidence), so the speed-up is not bought
with different output.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def peak_rss_during(fn):
    """(result, seconds, peak RSS bytes, baseline RSS bytes) of fn() with a 20 ms RSS sampler."""
    import psutil

    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    try:
        out = fn()
    finally:
        dt = time.perf_counter() - t0
        stop.set()
        th.join()
    return out, dt, max(peak[0], proc.memory_info().rss), base


def naive_row(store, ticker: str, day: pd.Timestamp, cfg) -> tuple[str, list[dict]]:
    """One context the straightforward way: pandas filters per row, indicators recomputed per row."""
    from thesisgym.dataset.indicators import bar_texts, compute_indicators, indicator_texts, price_decimals
    from thesisgym.dataset.render import clean_text, event_text, extract_numbers, render_context
    from thesisgym.schema import SECTIONS

    view = store.as_of(day)
    b = view.bars(ticker)
    ind = compute_indicators(b)
    dec = price_decimals(b["close"].to_numpy())
    _, ind_txt, _, _ = indicator_texts(ind, decimals=dec, rows=np.array([len(b) - 1]))
    bar_txt, _, _ = bar_texts(b, ind["chg"].to_numpy(), decimals=dec)
    asof = str(day.date())
    groups: dict[str, list[tuple[str, str, str]]] = {s: [] for s in SECTIONS}
    groups["technical"] = [(asof, "indicators", t) for t in ind_txt]
    dates = b["date"].dt.strftime("%Y-%m-%d").tolist()
    groups["technical"] += [
        (dates[i], "prices", bar_txt[i]) for i in range(len(b) - 1, max(len(b) - 1 - cfg.bars, -1), -1)
    ]
    ev = view.events(ticker)
    local = ev["published_at"].dt.tz_convert(store.timezone)
    age = (day - local.dt.tz_localize(None).dt.normalize()).dt.days
    section = np.where(ev["ticker"] == "", "macro", ev["kind"])
    specs = {
        "fundamentals": [(0, cfg.fundamentals_days, cfg.fundamentals_items)],
        "news": list(cfg.news_buckets),
        "insider": [(0, cfg.insider_days, cfg.insider_items)],
        "analyst": [(0, cfg.analyst_days, cfg.analyst_items)],
        "macro": [(0, cfg.macro_days, cfg.macro_items)],
    }
    for s, windows in specs.items():
        for lo, hi, cap in windows:
            sel = ev[(section == s) & (age >= lo) & (age <= hi)].iloc[::-1].head(cap)
            for _, e in sel.iterrows():
                src = clean_text(e["source"]) or e["kind"]
                groups[s].append(
                    (
                        e["published_at"].tz_convert(store.timezone).strftime("%Y-%m-%d"),
                        src,
                        event_text(e["title"], e["text"]),
                    )
                )
    evidence = []
    for s, items in groups.items():
        for j, (d, src, text) in enumerate(items, 1):
            evidence.append(
                {
                    "id": f"{SECTIONS[s]}{j}",
                    "section": s,
                    "date": d,
                    "source": src,
                    "text": text,
                    "numbers": extract_numbers(text),
                }
            )
    _, prompt_text = render_context(ticker, asof, evidence, cutoff=store.cutoff, timezone=store.timezone)
    return prompt_text, evidence


def news_duplicates(root: str, cfg) -> None:
    """Share of news items repeated inside their prompt (AAPL, META, MSFT while the ticker headlines
    run), with near-duplicate merging (the default) against without it (the baseline)."""
    from thesisgym.data import sources
    from thesisgym.data.actions import MAG7_SPLITS, split_actions
    from thesisgym.data.quality import normalised_title
    from thesisgym.dataset import build_contexts

    for window in (None, 3.0):
        config = sources.shared_config(root).model_copy(update={"merge_window_days": window})
        store = sources.import_sources(config, splits=split_actions(MAG7_SPLITS))
        days = [d for d in store.dates if pd.Timestamp("2019-04-15") <= d <= pd.Timestamp("2021-04-01")]
        ds = build_contexts(
            store, tickers=["AAPL", "META", "MSFT"], dates=days, config=cfg, show_progress=False
        )
        total = dup = 0
        for ev in ds["evidence"]:
            seen: set[str] = set()
            for it in ev:
                if it["section"] == "news":
                    key = normalised_title(it["text"])
                    total += 1
                    dup += key in seen
                    seen.add(key)
        print(
            f"news duplicates inside a prompt, merge window {window} days: {dup:,} of {total:,} news items "
            f"= {100 * dup / total:.1f}% ({len(ds):,} prompts, AAPL/META/MSFT {days[0].date()}..{days[-1].date()})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tickers", type=int, default=50)
    ap.add_argument("--rows-per-ticker", type=int, default=2000)
    ap.add_argument("--naive-sample", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--stream", action="store_true", help="also time the cache_file (streamed, memory-mapped) path"
    )
    ap.add_argument(
        "--real",
        default=None,
        help="the shared data folder: benchmark the Magnificent-7 store with every source family "
        "(thesisgym data import-shared) and the context config of configs/splits/mag7.yaml instead",
    )
    args = ap.parse_args()

    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset import ContextConfig, build_contexts

    cfg = ContextConfig()
    t0 = time.perf_counter()
    if args.real:
        from thesisgym.data.sources import import_shared
        from thesisgym.dataset.splits import SplitConfig

        store = import_shared(args.real)
        cfg = SplitConfig.from_yaml("mag7").context
        kinds = ", ".join(f"{k} {v:,}" for k, v in store.events["kind"].value_counts().sort_index().items())
        print(
            f"market: Magnificent-7 {len(store.tickers)} tickers x {len(store.dates)} days, {len(store.events):,} "
            f"events ({kinds}); imported in {time.perf_counter() - t0:.1f}s"
        )
    else:
        store = generate_market(
            SynthConfig(n_tickers=args.tickers, n_days=args.rows_per_ticker + cfg.bars - 1, seed=args.seed)
        )
        print(
            f"market: {args.tickers} tickers x {args.rows_per_ticker + cfg.bars - 1} days, {len(store.events):,} events "
            f"(generated in {time.perf_counter() - t0:.1f}s)"
        )
    import datasets  # noqa: F401  (import time is not build time)

    ds, fast_s, peak, base = peak_rss_during(lambda: build_contexts(store, config=cfg, show_progress=False))
    n = len(ds)
    print(
        f"fast:  {n:,} contexts in {fast_s:.1f}s = {n / fast_s:,.0f} contexts/s; "
        f"peak RSS {peak / 2**30:.2f} GiB ({(peak - base) / 2**30:.2f} GiB above the {base / 2**30:.2f} GiB baseline)"
    )
    ev_items = sum(len(x) for x in ds.select(range(0, n, 100))["evidence"]) / len(range(0, n, 100))
    chars = np.mean([len(x) for x in ds.select(range(0, n, 100))["prompt_text"]])
    print(f"       {ev_items:.1f} evidence items and {chars:,.0f} characters per prompt on average")

    if args.real:
        news_duplicates(args.real, cfg)
    if args.stream:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            ds2, s_s, s_peak, s_base = peak_rss_during(
                lambda: build_contexts(store, config=cfg, cache_file=f"{tmp}/rows.arrow", show_progress=False)
            )
            print(
                f"stream: {len(ds2):,} contexts in {s_s:.1f}s = {len(ds2) / s_s:,.0f} contexts/s; peak RSS "
                f"{s_peak / 2**30:.2f} GiB ({(s_peak - s_base) / 2**30:.2f} GiB above its baseline)"
            )
            del ds2
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(n, size=min(args.naive_sample, n), replace=False))
    rows = ds.select(sample)
    t0 = time.perf_counter()
    outs = [
        naive_row(store, t, pd.Timestamp(d), cfg) for t, d in zip(rows["ticker"], rows["asof"], strict=False)
    ]
    datasets.Dataset.from_list([{"prompt_text": p, "evidence": e} for p, e in outs])
    naive_s = time.perf_counter() - t0
    same = sum(
        p == q and e == f for (p, e), q, f in zip(outs, rows["prompt_text"], rows["evidence"], strict=False)
    )
    est = naive_s / len(sample) * n
    print(
        f"naive: {len(sample)} sampled rows in {naive_s:.1f}s = {len(sample) / naive_s:,.1f} contexts/s; "
        f"extrapolated {est:,.0f}s ({est / 60:.1f} min) for {n:,}"
    )
    print(
        f"ratio: fast is {est / fast_s:,.0f}x faster than naive; naive == fast on {same}/{len(sample)} sampled rows"
    )
    if same != len(sample):
        raise SystemExit("naive and fast builders disagree")


if __name__ == "__main__":
    main()
