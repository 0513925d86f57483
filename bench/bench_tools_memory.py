"""Benchmark: process memory over a long tool run, the as-of view cache before and after #28.

    python bench/bench_tools_memory.py [--tickers 100] [--days 500] [--steps 400] [--every 40]

Market: the synthetic market (`thesisgym.data.synth`), `--tickers` x `--days` business days. A "step"
is one rollout of the analyst's tool environment: `reset(ticker, asof)` on a random (ticker, day) and
the calls a model typically makes (get_prices, search_news, get_fundamentals, get_insider, get_macro).
Days are drawn uniformly over the calendar, so almost every step needs a view no cache holds yet: the
worst case for a cache and the case of a GRPO run over a shuffled training set.

Two modes, each in its own process (RSS does not shrink reliably once a process has grown, so the two
cannot share one), same market, same seed, same steps:
- old: the cache before #28, a dict of up to 256 views per factory, each a COPY of every visible bar and
  event with all per-share numbers rendered when it is built (`CopyingView` below, the old AsOfView);
- new: `thesisgym.tools.env` as it is, one process-wide `functools.lru_cache` of `VIEW_CACHE_SIZE`
  views, each slices of the visible rows (no copies) converting only the rows a tool returns.
The tool output of both modes is compared step by step (must be identical). Printed: RSS in MB after
every `--every` steps and the ratio old/new of the growth above the store's own baseline.

Measured with the defaults (PYTHONPATH=src, 2 shared cores, 2026-11-28; about 10 min, the old mode
most of it): RSS above the store's baseline (~177 MB) after 40 / 160 / 400 rollouts: old 149 / 570 /
1,091 MB (levels off once 256 views are held), new -4 / 12 / 12 MB; 88x; tool output identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd

from thesisgym.data.asof import AsOfView

CALLS = (("get_prices", {"days": 10}), ("search_news", {"query": "", "days": 30}),
         ("get_fundamentals", {"days": 120}), ("get_insider", {"days": 90}), ("get_macro", {"days": 60}))


class CopyingView(AsOfView):
    """The as-of view before #28: copies of the visible rows, rebased and rendered when built."""

    def __init__(self, tl, day):  # the old layout: AsOfView.__init__ is the new one's
        day = pd.Timestamp(day)
        cut = int(tl.cutoffs([day])[0])
        bars = tl.bars_future_included()
        bars = bars[bars["date"] <= day].copy()
        tickers = bars["ticker"].unique()
        fac = bars["ticker"].map({t: float(tl.price_factor(t, [day])[0]) for t in tickers}).to_numpy("float64")
        vol = bars["ticker"].map({t: float(tl.volume_factor(t, [day])[0]) for t in tickers}).to_numpy("float64")
        for c in ("open", "high", "low", "close"):
            bars[c] = bars[c].to_numpy(dtype="float64") * fac
        bars["volume"] = bars["volume"].to_numpy(dtype="float64") / vol
        full = tl.view(day).events()  # every visible event, rendered on the day's basis (a copy)
        self.asof, self.cutoff, self.timezone = day, pd.Timestamp(cut, tz="UTC"), tl.timezone
        self._bars = bars.reset_index(drop=True)
        self._events = full

    def bars(self, ticker, last=None):
        b = self._bars[self._bars["ticker"] == ticker]
        return (b if last is None else b.tail(last)).reset_index(drop=True)

    def events(self, ticker=None, *, kinds=None, days=None, market_wide=True):
        ev = self._events
        if ticker is not None:
            mine = ev["ticker"] == ticker
            ev = ev[(mine | (ev["ticker"] == "")) if market_wide else mine]
        if kinds is not None:
            ev = ev[ev["kind"].isin(list(kinds))]
        if days is not None:
            start = (self.asof - pd.Timedelta(days=int(days))).tz_localize(self.timezone).tz_convert("UTC")
            ev = ev[ev["published_at"] >= start]
        return ev.reset_index(drop=True)


def run(mode: str, args) -> dict:
    import psutil

    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.tools import env as tool_env
    from thesisgym.tools.market import MarketTools

    store = generate_market(SynthConfig(n_tickers=args.tickers, n_days=args.days, seed=args.seed))
    timeline = store.timeline()
    proc = psutil.Process()
    base = proc.memory_info().rss
    rng = np.random.default_rng(args.seed)
    days = store.dates[30:]
    old_cache: dict[str, CopyingView] = {}
    rss, digest = [], hashlib.sha256()
    for step in range(1, args.steps + 1):
        ticker = store.tickers[int(rng.integers(len(store.tickers)))]
        day = str(days[int(rng.integers(len(days)))].date())
        if mode == "old":
            if day not in old_cache:
                if len(old_cache) >= 256:
                    old_cache.pop(next(iter(old_cache)))
                old_cache[day] = CopyingView(timeline, day)
            tools = MarketTools(old_cache[day], ticker)
        else:
            env = tool_env.tool_env_factory(store)()
            env.reset(ticker=ticker, asof=day)
            tools = env.tools
        for name, kw in CALLS:
            digest.update(tools.call(name, **kw).encode())
        if step % args.every == 0:
            rss.append([step, (proc.memory_info().rss - base) / 2**20, proc.memory_info().rss / 2**20])
    return {"mode": mode, "base_mb": base / 2**20, "rss": rss, "digest": digest.hexdigest(),
            "store": f"{len(store.tickers)} tickers x {len(store.dates)} days, {len(store.events)} events"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--days", type=int, default=500)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["old", "new"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(run(args.mode, args)))
        return
    out = {}
    for mode in ("old", "new"):
        cmd = [sys.executable, __file__, "--mode", mode, *sys.argv[1:]]
        res = subprocess.run(cmd, capture_output=True, text=True, env=os.environ, check=True)
        out[mode] = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"market: {out['new']['store']}; {args.steps} rollouts x {len(CALLS)} tool calls, uniform random days")
    print(f"baseline RSS after building the store: old {out['old']['base_mb']:.0f} MB, new {out['new']['base_mb']:.0f} MB")
    print(f"{'step':>6} {'old: +MB':>10} {'new: +MB':>10}   (RSS above that baseline)")
    for (s, o, _), (_, n, _) in zip(out["old"]["rss"], out["new"]["rss"], strict=True):
        print(f"{s:>6} {o:>10.1f} {n:>10.1f}")
    (_, o_end, _), (_, n_end, _) = out["old"]["rss"][-1], out["new"]["rss"][-1]
    print(f"growth at the end, old / new: {o_end:.0f} MB / {max(n_end, 1.0):.0f} MB (new floored at 1 MB) "
          f"= {o_end / max(n_end, 1.0):.0f}x")
    same = out["old"]["digest"] == out["new"]["digest"]
    print(f"tool output identical in both modes: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
