"""`evaluate(policy, dataset, store)`: generate -> score -> backtest vs baselines -> probes -> report.

The one function the CLI and notebooks call. Order of work:
1. the policy writes a completion for every row (all variations; `max_rows` keeps the first N rows);
2. each completion is parsed and scored (thesisgym.rewards.score_completion) -> reasoning metrics;
3. decisions for the backtest: ONE per (ticker, asof) — rows with `variation == 0` (the canonical
   rendering; other variations are the same day seen through other section subsets/orders, and
   counting them would weight days by how many variations were built);
4. the same (ticker, asof) grid goes through the same Backtest for the policy and every baseline
   (buy-and-hold, momentum, random, label oracle, and on synthetic stores the true-expected-return
   oracle); the window runs from the first as-of date to `horizon` trading days after the last;
5. probes rewrite the backtest rows and re-ask the policy; the decision flip rate is reported;
6. when `out_dir` is given: report.html + PNGs, metrics.json, completions.jsonl (replayable with
   `JsonlPolicy`, probes included) and scores.csv.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.data.store import MarketStore
from thesisgym.evaluate import baselines as B
from thesisgym.evaluate.backtest import Backtest, BacktestResult
from thesisgym.evaluate.metrics import DEFAULT_RF
from thesisgym.evaluate.policies import Policy, confusion_matrix, decision_of, reasoning_metrics, score_rows
from thesisgym.evaluate.probes import flip_rate, parse_probe_list, probe_rows
from thesisgym.schema import DEFAULT_POSITIONS, REWARD_HORIZON


@dataclass
class EvalResult:
    """Everything one evaluation produced; `write_report` renders it."""

    policy: str
    metrics: pd.DataFrame  # strategies x metrics (policy first)
    backtests: dict[str, BacktestResult]
    ticker_stats: pd.DataFrame  # the policy's per-ticker metrics
    scores: pd.DataFrame  # one row per completion
    reasoning: dict[str, float]
    confusion: pd.DataFrame
    probes: dict[str, dict[str, Any]]
    completions: list[dict] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    report_path: Path | None = None

    def to_json(self) -> dict[str, Any]:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            return x

        return clean(
            {
                "policy": self.policy,
                "metrics": {
                    k: {m: float(v) for m, v in row.items()}
                    for k, row in self.metrics.to_dict("index").items()
                },
                "reasoning": self.reasoning,
                "confusion": self.confusion.to_dict("index"),
                "probes": self.probes,
                "config": self.config,
            }
        )


def _subset_indices(asofs: Sequence[str], max_rows: int) -> list[int]:
    """Row indices of a representative subset: every ticker, as-of dates spread over the period.

    The first N rows of a split sorted by ticker are one ticker's first weeks; a backtest of those
    says nothing about the period (buy-and-hold and the oracle can coincide). Instead keep whole
    dates (all tickers, all variations of that day), evenly spaced across the sorted dates, as many
    as fit in `max_rows`; a single date with more rows than that is cut to its first rows.
    """
    by_date: dict[str, list[int]] = {}
    for i, d in enumerate(asofs):
        by_date.setdefault(str(d)[:10], []).append(i)
    dates = sorted(by_date)
    per_date = max(len(v) for v in by_date.values())
    k = max(1, min(len(dates), max_rows // per_date))
    picks = [dates[int(j)] for j in np.unique(np.linspace(0, len(dates) - 1, k).round().astype(int))]
    out = sorted(i for d in picks for i in by_date[d])
    return out[:max_rows]


def _rows_of(dataset: Any, max_rows: int | None) -> list[dict]:
    n = len(dataset)
    idx: list[int] = list(range(n))
    if max_rows is not None:
        if max_rows < 1:
            raise ValueError(f"max_rows: expected >= 1, got {max_rows}")
        if max_rows < n:
            if hasattr(dataset, "column_names") and "asof" not in dataset.column_names:
                raise ValueError("dataset: missing column 'asof'")
            asofs = dataset["asof"] if hasattr(dataset, "column_names") else [r.get("asof") for r in dataset]
            idx = _subset_indices(asofs, max_rows)
    if hasattr(dataset, "select") and hasattr(dataset, "to_list"):
        return dataset.select(idx).to_list()
    return [dict(dataset[i]) for i in idx]


def _decide(policy: Policy, rows: list[dict], *, desc: str, chunk: int, progress: bool) -> list[str]:
    if not progress or len(rows) <= chunk:
        out = policy.decide(rows)
    else:
        from rich.progress import Progress

        out = []
        with Progress(transient=True) as bar:
            task = bar.add_task(desc, total=len(rows))
            for lo in range(0, len(rows), chunk):
                out.extend(policy.decide(rows[lo : lo + chunk]))
                bar.advance(task, len(rows[lo : lo + chunk]))
    if len(out) != len(rows):
        raise ValueError(
            f"policy {getattr(policy, 'name', policy)!r} returned {len(out)} completions for {len(rows)} rows"
        )
    return list(out)


def evaluate(
    policy: Policy,
    dataset: Any,
    store: MarketStore,
    *,
    probes: str | Sequence[str] | None = ("anon", "shift", "digits"),
    out_dir: str | Path | None = None,
    max_rows: int | None = None,
    cost_bps: float = 5.0,
    long_only: bool = False,
    hold_days: int | None = None,
    horizon: int = REWARD_HORIZON,
    positions: Mapping[str, float] = DEFAULT_POSITIONS,
    rf: float = DEFAULT_RF,
    momentum_lookback: int = 20,
    seed: int = 0,
    shift_years: int = 10,
    scorer: Any = None,
    chunk: int = 32,
    progress: bool = True,
) -> EvalResult:
    rows = _rows_of(dataset, max_rows)
    if not rows:
        raise ValueError("dataset: no rows to evaluate")
    for col in ("ticker", "asof"):
        if col not in rows[0]:
            raise ValueError(f"dataset: missing column {col!r}")
    name = getattr(policy, "name", type(policy).__name__)
    completions = _decide(policy, rows, desc=f"{name}: writing theses", chunk=chunk, progress=progress)
    scores = score_rows(completions, rows, scorer=scorer)

    # --- backtest grid: variation 0 only, one decision per (ticker, asof) ---
    canon_idx = [i for i, r in enumerate(rows) if int(r.get("variation", 0) or 0) == 0]
    if not canon_idx:
        raise ValueError("dataset: no rows with variation 0 to backtest")
    keys = pd.DataFrame(
        {
            "ticker": [rows[i]["ticker"] for i in canon_idx],
            "date": pd.to_datetime([str(rows[i]["asof"])[:10] for i in canon_idx]),
        }
    )
    dup = keys.duplicated()
    if dup.any():
        i = canon_idx[int(np.argmax(dup.to_numpy()))]
        raise ValueError(
            f"dataset: row {i}: a second variation-0 row for ({rows[i]['ticker']}, {rows[i]['asof']})"
        )
    calendar = store.dates
    last = int(calendar.searchsorted(keys["date"].max()))
    end = calendar[min(last + (hold_days or horizon), len(calendar) - 1)]
    bt_kwargs = dict(
        positions=positions, long_only=long_only, cost_bps=cost_bps, hold_days=hold_days, end=end, rf=rf
    )

    policy_dec = keys.assign(decision=[scores["decision"].iloc[i] for i in canon_idx])
    # an invalid decision is a flat day, not a dropped one: the policy failed to commit
    policy_dec["decision"] = policy_dec["decision"].where(policy_dec["decision"] != "INVALID", "HOLD")
    strategies: dict[str, pd.DataFrame] = {
        name: policy_dec,
        "buy_and_hold": B.buy_and_hold(keys),
        f"momentum_{momentum_lookback}d": B.momentum(keys, store.bars, lookback=momentum_lookback),
        "random": B.random_decisions(keys, seed=seed),
    }
    if any(rows[i].get("label") for i in canon_idx):
        strategies["label_oracle"] = B.label_oracle(keys, [rows[i].get("label") for i in canon_idx])
    if store.truth is not None and "expected_return" in store.truth.columns:
        strategies["truth_oracle"] = B.truth_oracle(keys, store.truth)
    backtests = {k: Backtest(d, store.bars, **bt_kwargs).run() for k, d in strategies.items()}
    metrics = pd.DataFrame({k: bt.stats() for k, bt in backtests.items()}).T

    # --- probes ---
    probe_out: dict[str, dict[str, Any]] = {}
    canon_rows = [rows[i] for i in canon_idx]
    canon_dec = [scores["decision"].iloc[i] for i in canon_idx]
    companies = (store.meta or {}).get("companies") or {}
    records = [
        {
            "ticker": r["ticker"],
            "asof": str(r["asof"])[:10],
            "variation": int(r.get("variation", 0) or 0),
            "probe": "",
            "completion": c,
        }
        for r, c in zip(rows, completions, strict=True)
    ]
    for probe in parse_probe_list(probes):
        if hasattr(policy, "supports_probe") and not policy.supports_probe(probe):
            probe_out[probe] = {
                "flip_rate": float("nan"),
                "rows": 0,
                "skipped": "the policy has no completions for this probe",
            }
            continue
        probed = probe_rows(canon_rows, probe, companies=companies, years=shift_years, seed=seed)
        comps = _decide(policy, probed, desc=f"probe {probe}", chunk=chunk, progress=progress)
        decs = [decision_of(c) for c in comps]
        probe_out[probe] = {
            "flip_rate": flip_rate(canon_dec, decs),
            "rows": len(decs),
            "invalid_rate": float(np.mean([d == "INVALID" for d in decs])),
        }
        records.extend(
            {
                "ticker": r["ticker"],
                "asof": str(r["asof"])[:10],
                "variation": 0,
                "probe": probe,
                "completion": c,
            }
            for r, c in zip(probed, comps, strict=True)
        )

    result = EvalResult(
        policy=name,
        metrics=metrics,
        backtests=backtests,
        ticker_stats=backtests[name].ticker_stats(),
        scores=scores,
        reasoning=reasoning_metrics(scores),
        confusion=confusion_matrix(scores),
        probes=probe_out,
        completions=records,
        config={
            **{k: v for k, v in bt_kwargs.items() if k != "positions"},
            "end": str(pd.Timestamp(end).date()),
            "positions": dict(positions),
            "rows": len(rows),
            "backtest_rows": len(canon_idx),
            "store": store.name,
            "momentum_lookback": momentum_lookback,
            "seed": seed,
            "shift_years": shift_years,
        },
    )
    if out_dir is not None:
        save_result(result, out_dir)
    return result


def save_result(result: EvalResult, out_dir: str | Path) -> Path:
    """Write report.html (+ PNGs), metrics.json, completions.jsonl and scores.csv into out_dir."""
    from thesisgym.evaluate.report import write_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(result.to_json(), indent=2, default=str))
    with (out / "completions.jsonl").open("w") as f:
        for rec in result.completions:
            f.write(json.dumps(rec) + "\n")
    result.scores.to_csv(out / "scores.csv", index=False)
    result.report_path = write_report(result, out)
    return result.report_path
