"""`evaluate(policy, dataset, store)`: generate -> score -> backtest vs baselines -> statistics -> probes -> report.

The one function the CLI, the demo and notebooks call. Order of work:
1. the policy writes a completion for every row (all variations; `max_rows` keeps whole consecutive
   as-of dates from the start of the split, every ticker of each date). A `JsonlPolicy` is first
   bound to the split (completions joined by split row index or by keys, validated). Requests that
   failed in transport (`policy.last_errors`) are counted apart from format errors; above
   `max_error_rate` the run stops with an `EndpointError` naming the endpoint;
2. each completion is scored by `thesisgym.rewards.score_completion` with the Trade-R1 consistency
   s of the configured judge (`verifier`, local by default), so fsr/dsr are the training rewards;
3. decisions for the backtest: ONE per (ticker, asof), the `variation == 0` rows (the canonical
   rendering; counting other variations would weight days by how many variations were built);
4. the same (ticker, asof) grid goes through the same Backtest for the policy and every baseline:
   buy-and-hold (bought once, never rebalanced), the equal-weight long portfolio rebalanced daily,
   momentum, seeded random, the label oracle and, on synthetic stores, the true-expected-return
   oracle. Positions are held for at most `hold_days` trading days, by default the label horizon
   the decisions were trained on (schema.REWARD_HORIZON), or until the ticker's next decision;
5. statistics: date-block bootstrap intervals (`thesisgym.evaluate.stats`) for Sharpe, cumulative
   return, hit rate and accuracy; the paired Sharpe difference of the policy against each
   baseline; accuracy baselines (majority class of the train split when `train` is given,
   always-BUY, seeded random, and any `accuracy_policies` / `accuracy_baselines`, e.g. the
   teacher's theses or decisions); a
   warning when a figure rests on fewer than `min_dates` decision dates;
6. probes rewrite the backtest rows and re-ask the policy (flip statistics in probes.flip_stats);
   a policy with `reseeded(seed)` is also re-asked the unchanged rows with a new seed: the
   resampling-noise baseline a probe's flip rate is read against;
7. `heldout` (the held-out-ticker split) is evaluated the same way, without probes, and kept in
   `result.heldout`;
8. when `out_dir` is given: report.html + PNGs, metrics.json, completions.jsonl (replayable with
   `JsonlPolicy`, probes included) and scores.csv.

`policy=None` evaluates the baselines alone (a dataset without any model).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.data.store import MarketStore
from thesisgym.evaluate import baselines as B
from thesisgym.evaluate import stats as S
from thesisgym.evaluate.backtest import Backtest, BacktestResult
from thesisgym.evaluate.completions import split_keys
from thesisgym.evaluate.metrics import DEFAULT_RF, hit_cells, sharpe
from thesisgym.evaluate.policies import (
    INVALID,
    Policy,
    confusion_matrix,
    decision_of,
    make_verifier,
    reasoning_metrics,
    score_rows,
)
from thesisgym.evaluate.probes import flip_stats, parse_probe_list, probe_rows
from thesisgym.evaluate.report import write_report
from thesisgym.evaluate.result import BASELINES_ONLY, EvalResult
from thesisgym.schema import DEFAULT_POSITIONS, LABELS, REWARD_HORIZON

SIDE = {lab: int(np.sign(i - 2)) for i, lab in enumerate(LABELS)}


class EndpointError(RuntimeError):
    """Too many requests to the policy's endpoint failed in transport (not the model's fault)."""


def _subset_indices(asofs: Sequence[str], max_rows: int) -> list[int]:
    """Row indices of whole, consecutive as-of dates from the start of the split.

    Consecutive, because a backtest of dates spread over months holds each position across a gap
    it was never trained for; whole dates, because every ticker of a day belongs to the same
    cross-section. As many dates as fit in `max_rows` (at least one; a single date with more rows
    than that is cut to its first rows).
    """
    by_date: dict[str, list[int]] = {}
    for i, d in enumerate(asofs):
        by_date.setdefault(str(d)[:10], []).append(i)
    out: list[int] = []
    for d in sorted(by_date):
        if out and len(out) + len(by_date[d]) > max_rows:
            break
        out.extend(by_date[d])
    return sorted(out)[:max_rows]


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


def _decide(
    policy: Policy, rows: list[dict], *, desc: str, chunk: int, progress: bool
) -> tuple[list[str], list[str | None]]:
    """(completions, transport error or None per row)."""
    out: list[str] = []
    errors: list[str | None] = []

    def one(batch: list[dict]) -> None:
        comps = list(policy.decide(batch))
        errs = list(getattr(policy, "last_errors", None) or [None] * len(batch))
        if len(comps) != len(batch) or len(errs) != len(batch):
            raise ValueError(
                f"policy {getattr(policy, 'name', policy)!r} returned {len(comps)} completions for {len(batch)} rows"
            )
        out.extend(comps)
        errors.extend(errs)

    if not progress or len(rows) <= chunk:
        for lo in range(0, len(rows), chunk):
            one(rows[lo : lo + chunk])
    else:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(desc, total=len(rows))
            for lo in range(0, len(rows), chunk):
                one(rows[lo : lo + chunk])
                bar.advance(task, len(rows[lo : lo + chunk]))
    return out, errors


def _check_transport(policy: Any, errors: list[str | None], max_error_rate: float, what: str) -> dict[str, Any]:
    n_err = sum(e is not None for e in errors)
    info = {
        "requests": len(errors),
        "errors": n_err,
        "error_rate": n_err / len(errors) if errors else 0.0,
        "endpoint": getattr(policy, "endpoint", None),
        "first_error": next((e for e in errors if e is not None), None),
    }
    if errors and info["error_rate"] > max_error_rate:
        raise EndpointError(
            f"{n_err} of {len(errors)} {what} requests to {info['endpoint'] or getattr(policy, 'name', policy)} "
            f"failed ({info['error_rate']:.0%} > max error rate {max_error_rate:.0%}); first error: {info['first_error']}"
        )
    return info


def _rate_block(dates: Sequence[Any], hold: int) -> int:
    """Block length (in decision dates) spanning one holding period."""
    ds = pd.DatetimeIndex(sorted({pd.Timestamp(str(d)[:10]) for d in dates}))
    if len(ds) < 2:
        return 1
    gap = float(np.median(np.diff(ds.asi8)) / 86_400e9) * 5 / 7  # calendar -> trading days
    return max(1, int(math.ceil(hold / max(gap, 1.0))))


def _intervals(bt: BacktestResult, *, rf: float, block: int, reps: int, confidence: float, seed: int) -> dict:
    r = bt.returns.to_numpy()
    hits, cells = hit_cells(bt.held.to_numpy(), bt.asset_returns.to_numpy(), bt.covered.to_numpy())
    out = {}
    for name, fn, arrays in (
        ("sharpe", lambda x: sharpe(x, rf=rf), (r,)),
        ("cumulative_return", lambda x: float(np.prod(1.0 + x) - 1.0), (r,)),
        ("hit_rate", S.ratio_of_sums, (hits, cells)),
    ):
        lo, hi = S.block_bootstrap(fn, *arrays, block=block, reps=reps, confidence=confidence, seed=seed)
        out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
    return out


def _accuracy_table(
    entries: Mapping[str, Sequence[str]],
    rows: Sequence[dict],
    *,
    block: int,
    reps: int,
    confidence: float,
    seed: int,
) -> pd.DataFrame:
    """Accuracy [CI] of each entry; entries after the first also get the paired difference
    (first minus entry) with its interval, resampled by date."""
    labelled = [i for i, r in enumerate(rows) if r.get("label") in LABELS]
    if not labelled:
        return pd.DataFrame()
    dates = [str(rows[i]["asof"])[:10] for i in labelled]
    truth = [rows[i]["label"] for i in labelled]
    table = {}
    reference: list[float] | None = None
    kw = dict(block=block, reps=reps, confidence=confidence, seed=seed)
    for name, decisions in entries.items():
        pred = [decisions[i] for i in labelled]
        exact = [float(p == t) for p, t in zip(pred, truth, strict=True)]
        diff = {}
        if reference is None:
            reference = exact
        else:
            d, dlo_, dhi_, _, _ = S.rate_interval(dates, [a - b for a, b in zip(reference, exact, strict=True)], **kw)
            diff = {"first_minus_this": d, "first_minus_this_lo": dlo_, "first_minus_this_hi": dhi_}
        side = [float(SIDE.get(p, 9) == SIDE[t]) for p, t in zip(pred, truth, strict=True)]
        acc, lo, hi, n, nd = S.rate_interval(dates, exact, block=block, reps=reps, confidence=confidence, seed=seed)
        dacc, dlo, dhi, _, _ = S.rate_interval(dates, side, block=block, reps=reps, confidence=confidence, seed=seed)
        table[name] = {
            "accuracy": acc, "accuracy_lo": lo, "accuracy_hi": hi,
            "direction_accuracy": dacc, "direction_accuracy_lo": dlo, "direction_accuracy_hi": dhi,
            "rows": float(n), "dates": float(nd), **diff,
        }
    return pd.DataFrame.from_dict(table, orient="index")


def evaluate(
    policy: Policy | None,
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
    verifier: Any = "local",
    chunk: int = 32,
    progress: bool = True,
    max_error_rate: float = 0.02,
    train: Any = None,
    accuracy_baselines: Mapping[str, Sequence[str]] | None = None,
    accuracy_policies: Mapping[str, Policy] | None = None,
    heldout: Any = None,
    bootstrap_reps: int = S.DEFAULT_REPS,
    confidence: float = S.DEFAULT_CONFIDENCE,
    min_dates: int = S.MIN_DATES,
    noise_seed: int | None = None,
    log_nav: bool = False,
) -> EvalResult:
    """Evaluate `policy` on `dataset` (see the module docstring); `policy=None`: baselines only.

    hold_days: holding period cap in trading days (default: `horizon`, the label horizon).
    """
    if not 0 <= max_error_rate <= 1:
        raise ValueError(f"max_error_rate: expected a fraction in [0, 1], got {max_error_rate}")
    hold = hold_days if hold_days is not None else horizon
    rows = _rows_of(dataset, max_rows)
    if not rows:
        raise ValueError("dataset: no rows to evaluate")
    for col in ("ticker", "asof"):
        if col not in rows[0]:
            raise ValueError(f"dataset: missing column {col!r}")
    name = getattr(policy, "name", type(policy).__name__) if policy is not None else BASELINES_ONLY
    reserved = ("buy_and_hold", "equal_weight_long", "random", "label_oracle", "truth_oracle", BASELINES_ONLY)
    if policy is not None and (name in reserved or name == f"momentum_{momentum_lookback}d"):
        raise ValueError(f"policy name {name!r} is taken by a baseline; give the policy another name")
    if hasattr(policy, "bind"):
        policy.bind(split_keys(dataset))
    warnings: list[str] = []
    transport: dict[str, Any] = {}
    if policy is not None:
        completions, errors = _decide(policy, rows, desc=f"{name}: writing theses", chunk=chunk, progress=progress)
        transport = _check_transport(policy, errors, max_error_rate, "generation")
        if transport["endpoint"] is None:
            transport = {}  # no endpoint, nothing in transport to report
        elif transport["errors"]:
            warnings.append(
                f"{transport['errors']} of {transport['requests']} requests to {transport['endpoint']} failed in "
                f"transport; those rows are empty theses (flat in the backtest), not format errors of the model"
            )
        judge_obj = make_verifier(verifier) if isinstance(verifier, str) and scorer is None else verifier
        judge_usage = getattr(getattr(getattr(judge_obj, "judge", None), "client", None), "usage", None)
        before = judge_usage.json_fallbacks if judge_usage is not None else 0
        scores = score_rows(completions, rows, scorer=scorer, verifier=judge_obj)
        scores["transport_error"] = [float(e is not None) for e in errors]
        if judge_usage is not None:
            # an LLM judge that fails falls back to the local verdict: say so, and stop above the threshold
            failed = judge_usage.json_fallbacks - before
            client = judge_obj.judge.client.config
            msg = (f"the LLM judge at {client.base_url} (model {client.model}) failed on {failed} of {len(rows)} "
                   f"theses; their s is the local judge's (last error: {judge_usage.last_error or 'malformed answer'})")
            if rows and failed / len(rows) > max_error_rate:
                raise EndpointError(msg)
            if failed:
                warnings.append(msg)
    else:
        completions, errors = [], []
        scores = pd.DataFrame(
            {
                "ticker": [r["ticker"] for r in rows],
                "asof": [str(r["asof"])[:10] for r in rows],
                "variation": [int(r.get("variation", 0) or 0) for r in rows],
                "label": [r.get("label") for r in rows],
            }
        )

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
    end = calendar[min(last + hold, len(calendar) - 1)]
    bt_kwargs = dict(positions=positions, long_only=long_only, cost_bps=cost_bps, hold_days=hold, end=end, rf=rf)

    strategies: dict[str, pd.DataFrame] = {}
    if policy is not None:
        policy_dec = keys.assign(decision=[scores["decision"].iloc[i] for i in canon_idx])
        # an invalid decision is a flat day, not a dropped one: the policy failed to commit
        policy_dec["decision"] = policy_dec["decision"].where(policy_dec["decision"] != INVALID, "HOLD")
        strategies[name] = policy_dec
    strategies.update(
        {
            "equal_weight_long": B.buy_and_hold(keys),
            f"momentum_{momentum_lookback}d": B.momentum(keys, store.bars, lookback=momentum_lookback),
            "random": B.random_decisions(keys, seed=seed),
        }
    )
    if any(rows[i].get("label") for i in canon_idx):
        strategies["label_oracle"] = B.label_oracle(keys, [rows[i].get("label") for i in canon_idx])
    if store.truth is not None and "expected_return" in store.truth.columns:
        strategies["truth_oracle"] = B.truth_oracle(keys, store.truth)
    backtests = {k: Backtest(d, store.bars, **bt_kwargs).run() for k, d in strategies.items()}
    bh = Backtest(B.buy_and_hold_once(keys), store.bars, **{**bt_kwargs, "hold_days": None, "start": keys["date"].min()})
    backtests = {
        **({name: backtests.pop(name)} if policy is not None else {}),
        "buy_and_hold": B.bought_once(bh.run()),
        **backtests,
    }

    n_dates = int(keys["date"].nunique())
    decisions_of = {k: float(len(d)) for k, d in strategies.items()}
    decisions_of["buy_and_hold"] = float(keys["ticker"].nunique())
    rows_metrics = {}
    for k, bt in backtests.items():
        st = bt.stats()
        st.update(_intervals(bt, rf=rf, block=hold, reps=bootstrap_reps, confidence=confidence, seed=seed))
        st["decisions"] = decisions_of[k]
        st["dates"] = float(n_dates)  # the period every strategy is measured over
        rows_metrics[k] = st
    metrics = pd.DataFrame(rows_metrics).T
    if n_dates < min_dates:
        warnings.append(
            f"every backtest figure rests on {n_dates} decision date(s) ({len(keys)} ticker-days); "
            f"under {min_dates} dates a Sharpe ratio or hit rate is anecdote, not evidence"
        )

    comparisons: dict[str, dict[str, float]] = {}
    if policy is not None:
        p_ret = backtests[name].returns
        for k in ("buy_and_hold", "equal_weight_long", f"momentum_{momentum_lookback}d", "random"):
            b_ret = backtests[k].returns.reindex(p_ret.index, fill_value=0.0)
            lo, hi = S.block_bootstrap(
                lambda a, b: sharpe(a, rf=rf) - sharpe(b, rf=rf),
                p_ret.to_numpy(), b_ret.to_numpy(),
                block=hold, reps=bootstrap_reps, confidence=confidence, seed=seed,
            )
            diff = sharpe(p_ret.to_numpy(), rf=rf) - sharpe(b_ret.to_numpy(), rf=rf)
            comparisons[k] = {"sharpe_diff": diff, "lo": lo, "hi": hi, "confidence": confidence}

    # --- accuracy against baselines, over every labelled row (all variations) ---
    acc_entries: dict[str, list[str]] = {}
    if policy is not None:
        acc_entries[name] = list(scores["decision"])
    if train is not None:
        tl = [lab for lab in (train["label"] if hasattr(train, "column_names") else [r.get("label") for r in train])
              if lab in LABELS]
        if tl:
            major = max(LABELS, key=tl.count)
            acc_entries[f"majority of train ({major})"] = [major] * len(rows)
    acc_entries["always BUY"] = ["BUY"] * len(rows)
    rng = np.random.default_rng(seed)
    acc_entries["random"] = list(np.asarray(LABELS)[rng.integers(0, len(LABELS), size=len(rows))])
    for k, other in (accuracy_policies or {}).items():
        # e.g. the teacher's theses: asked for the same rows, only their decisions are compared
        if hasattr(other, "bind"):
            other.bind(split_keys(dataset))
        acc_entries[k] = [decision_of(c) for c in _decide(other, rows, desc=k, chunk=chunk, progress=False)[0]]
    for k, decs in (accuracy_baselines or {}).items():
        if len(decs) != len(rows):
            raise ValueError(f"accuracy_baselines[{k!r}]: {len(decs)} decisions for {len(rows)} rows")
        acc_entries[k] = list(decs)
    accuracy = _accuracy_table(
        acc_entries, rows, block=_rate_block([r["asof"] for r in rows], hold),
        reps=bootstrap_reps, confidence=confidence, seed=seed,
    )

    # --- probes ---
    probe_out: dict[str, dict[str, Any]] = {}
    records = [
        {"ticker": r["ticker"], "asof": str(r["asof"])[:10], "variation": int(r.get("variation", 0) or 0),
         "probe": "", "completion": c}
        for r, c in zip(rows, completions, strict=False)
    ]
    if policy is not None:
        canon_rows = [rows[i] for i in canon_idx]
        canon_dec = [scores["decision"].iloc[i] for i in canon_idx]
        companies = (store.meta or {}).get("companies") or {}
        for probe in parse_probe_list(probes):
            if hasattr(policy, "supports_probe") and not policy.supports_probe(probe):
                probe_out[probe] = {"flip_rate": float("nan"), "rows": 0,
                                    "skipped": "the policy has no completions for this probe"}
                continue
            probed = probe_rows(canon_rows, probe, companies=companies, years=shift_years, seed=seed)
            comps, errs = _decide(policy, probed, desc=f"probe {probe}", chunk=chunk, progress=progress)
            _check_transport(policy, errs, max_error_rate, f"probe {probe}")
            probe_out[probe] = flip_stats(canon_dec, [decision_of(c) for c in comps])
            records.extend(
                {"ticker": r["ticker"], "asof": str(r["asof"])[:10], "variation": 0, "probe": probe, "completion": c}
                for r, c in zip(probed, comps, strict=True)
            )
        if probe_out:
            if hasattr(policy, "reseeded"):
                again = policy.reseeded(seed + 1 if noise_seed is None else noise_seed)
                comps, errs = _decide(again, canon_rows, desc="noise (new seed)", chunk=chunk, progress=progress)
                _check_transport(again, errs, max_error_rate, "noise")
                probe_out["noise"] = {**flip_stats(canon_dec, [decision_of(c) for c in comps]),
                                      "what": "same prompts, new sampling seed: the flip rate sampling alone causes"}
            else:
                probe_out["noise"] = {"flip_rate": float("nan"), "rows": 0,
                                      "skipped": "the policy cannot resample (fixed completions)"}

    held_result = None
    if heldout is not None and len(heldout) and hasattr(policy, "bind"):
        warnings.append("held-out tickers not evaluated: a completions file answers one split")
    elif heldout is not None and len(heldout):
        held_result = evaluate(
            policy, heldout, store, probes=None, out_dir=None,
            max_rows=max_rows, cost_bps=cost_bps, long_only=long_only, hold_days=hold_days, horizon=horizon,
            positions=positions, rf=rf, momentum_lookback=momentum_lookback, seed=seed, scorer=scorer,
            verifier=verifier, chunk=chunk, progress=progress, max_error_rate=max_error_rate, train=train,
            bootstrap_reps=bootstrap_reps, confidence=confidence, min_dates=min_dates,
        )

    first = name if policy is not None else next(iter(backtests))
    result = EvalResult(
        policy=name,
        metrics=metrics,
        backtests=backtests,
        ticker_stats=backtests[first].ticker_stats(),
        scores=scores,
        reasoning=reasoning_metrics(scores) if policy is not None else {},
        confusion=confusion_matrix(scores) if policy is not None else pd.DataFrame(),
        probes=probe_out,
        accuracy=accuracy,
        comparisons=comparisons,
        transport=transport,
        warnings=warnings,
        heldout=held_result,
        rows=rows,
        completions=records,
        config={
            "store": store.name,
            "rows": len(rows),
            "backtest_rows": len(canon_idx),
            "decision_dates": n_dates,
            "start": str(keys["date"].min().date()),
            "end": str(pd.Timestamp(end).date()),
            "hold_days": hold,
            "label_horizon": horizon,
            "cost_bps": cost_bps,
            "long_only": long_only,
            "rf": rf,
            "positions": dict(positions),
            "momentum_lookback": momentum_lookback,
            "seed": seed,
            "shift_years": shift_years,
            "bootstrap": f"circular block bootstrap by date, block {hold} days, {bootstrap_reps} resamples, "
                         f"{confidence:.0%} percentile intervals",
            "confidence": confidence,
            "max_rows": max_rows,
            "max_error_rate": max_error_rate,
            "judge": verifier if isinstance(verifier, str) or verifier is None else type(verifier).__name__,
            "model_dir": getattr(policy, "model_path", None),
            "log_nav": log_nav,
        },
    )
    if out_dir is not None:
        save_result(result, out_dir)
    return result


def save_result(result: EvalResult, out_dir: str | Path) -> Path:
    """Write report.html (+ PNGs), metrics.json, completions.jsonl and scores.csv into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(result.to_json(), indent=2, default=str))
    with (out / "completions.jsonl").open("w") as f:
        for rec in result.completions:
            f.write(json.dumps(rec) + "\n")
    result.scores.to_csv(out / "scores.csv", index=False)
    result.report_path = write_report(result, out)
    return result.report_path
