"""`evaluate(policy, rows, store, config)`: generate -> score -> backtest vs baselines -> statistics -> probes -> report.

The one function the CLI, the demo and notebooks call; each step is a named stage function below,
in this order:

1. `select_rows`: every row, or with `max_rows` whole consecutive as-of dates from the start of the
   split (every ticker of each date). A completions file (`JsonlPolicy`) is first bound to the split;
2. `generate`: the policy writes a completion for every row (all variations). Requests that failed in
   transport (`policy.last_errors`) are counted apart from format errors; above `max_error_rate` the
   run stops with an `EndpointError` naming the endpoint;
3. `score`: each completion is scored by `thesisgym.rewards.score_completion` with the Trade-R1
   consistency s of the configured judge (local by default), so fsr/dsr are the training rewards;
4. `backtest_grid` + `run_backtests`: ONE decision per (ticker, asof), the `variation == 0` rows (the
   canonical rendering), goes through the same Backtest for the policy and every baseline: buy-and-hold
   (bought once, never rebalanced), the equal-weight long portfolio rebalanced daily, momentum, seeded
   random, the label oracle and, on synthetic stores, the true-expected-return oracle. Positions are
   held for at most `hold_days` trading days (default: the label horizon) or until the next decision;
5. `backtest_metrics` + `compare_sharpe` + `accuracy_table` + `skill_of`: date-block bootstrap intervals
   (`thesisgym.evaluate.stats`) for Sharpe, cumulative return, hit rate and accuracy; the paired Sharpe
   difference of the policy against each baseline; accuracy against the majority class of `train`,
   always-BUY, seeded random and any `accuracy_policies` / `accuracy_baselines` (e.g. the teacher);
   the skill measures no constant can fake (`evaluate.skill`: IC, market-neutral book, decision mix)
   of the same deciders beside the reader ceiling and the oracles;
6. `run_probes`: probes rewrite the backtest rows and re-ask the policy; a policy with `reseeded(seed)`
   is also re-asked the unchanged rows with a new seed, the noise a probe's flip rate is read against;
7. `heldout` (the held-out-ticker split) is the same call with `config.for_heldout()` (no probes);
8. with `config.out_dir`: report.html + PNGs, metrics.json, completions.jsonl (replayable with
   `JsonlPolicy`, probes included) and scores.csv (`save_result`).

`policy=None` evaluates the baselines alone (a dataset without any model).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.data.store import MarketStore
from thesisgym.evaluate import baselines as B
from thesisgym.evaluate import stats as S
from thesisgym.evaluate.backtest import Backtest, BacktestResult
from thesisgym.evaluate.completions import row_key, split_keys
from thesisgym.evaluate.config import EvalConfig
from thesisgym.evaluate.metrics import hit_cells, sharpe
from thesisgym.evaluate.policies import (
    INVALID,
    Policy,
    confusion_matrix,
    decision_of,
    make_verifier,
    reasoning_metrics,
    score_rows,
)
from thesisgym.evaluate.probes import flip_stats, injection_stats, probe_rows
from thesisgym.evaluate.report import write_report
from thesisgym.evaluate.result import BASELINES_ONLY, EvalResult
from thesisgym.evaluate.stats import rate_block, subset_indices
from thesisgym.progress import Ticker
from thesisgym.schema import LABELS

SIDE = {lab: int(np.sign(i - 2)) for i, lab in enumerate(LABELS)}
RESERVED = ("buy_and_hold", "equal_weight_long", "random", "label_oracle", "truth_oracle", BASELINES_ONLY)
# the baselines the policy's Sharpe is compared with (momentum is added with its lookback)
COMPARED = ("buy_and_hold", "equal_weight_long", "random")


class EndpointError(RuntimeError):
    """Too many requests to the policy's endpoint failed in transport (not the model's fault)."""


@dataclass
class Grid:
    """The backtest grid: the variation-0 rows, one per (ticker, asof)."""

    canon_idx: list[int]
    keys: pd.DataFrame  # ticker, date
    end: pd.Timestamp

    @property
    def n_dates(self) -> int:
        return int(self.keys["date"].nunique())


@dataclass
class Generation:
    completions: list[str] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    transport: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def evaluate(
    policy: Policy | None,
    rows: Any,
    store: MarketStore,
    config: EvalConfig | None = None,
    *,
    train: Any = None,
    heldout: Any = None,
    accuracy_policies: Mapping[str, Policy] | None = None,
    accuracy_baselines: Mapping[str, Mapping[tuple[str, str, int], str]] | None = None,
    scorer: Any = None,
    verifier: Any = None,
) -> EvalResult:
    """Evaluate `policy` on `rows` (a split: HF Dataset or list of dicts); `policy=None`: baselines only.

    train: the train split (its majority class is an accuracy baseline). heldout: the held-out-ticker
    split, evaluated with `config.for_heldout()`. accuracy_policies: other deciders asked the same rows
    (e.g. the teacher's theses); accuracy_baselines: fixed decisions keyed by (ticker, asof, variation).
    scorer(completion, row) -> dict replaces the reward stack; verifier replaces `config.judge`.
    """
    config = config or EvalConfig()
    started = time.monotonic()
    shared = dict(train=train, accuracy_policies=accuracy_policies, accuracy_baselines=accuracy_baselines,
                  scorer=scorer, verifier=verifier)
    selected = select_rows(rows, config.max_rows)
    name = policy_name(policy, config)
    if hasattr(policy, "bind"):
        policy.bind(split_keys(rows))
    gen = generate(policy, selected, name, config) if policy is not None else Generation()
    scores = score(gen, selected, config, scorer=scorer, verifier=verifier) if policy is not None \
        else baseline_scores(selected)
    grid = backtest_grid(selected, store, config)
    backtests = run_backtests(name if policy is not None else None, scores, selected, grid, store, config)
    metrics, sample_warnings = backtest_metrics(backtests, grid, config)
    refs, ref_warnings = references(rows, selected, accuracy_policies, accuracy_baselines,
                                    lenient=config.role == "heldout")
    probes, records = run_probes(policy, selected, scores, grid, store, config, gen.completions)
    held, held_warnings = run_heldout(policy, heldout, store, config, shared)
    result = EvalResult(
        policy=name, metrics=metrics, backtests=backtests,
        ticker_stats=backtests[next(iter(backtests))].ticker_stats(), scores=scores,
        reasoning=reasoning_metrics(scores) if policy is not None else {},
        confusion=confusion_matrix(scores) if policy is not None else pd.DataFrame(),
        probes=probes, accuracy=accuracy_table(policy, name, scores, selected, train, refs, grid, config),
        skill=skill_of(policy, name, scores, selected, train, refs, grid, config, store),
        comparisons=compare_sharpe(name, backtests, config) if policy is not None else {},
        transport=gen.transport, warnings=[*sample_warnings, *gen.warnings, *ref_warnings, *held_warnings],
        heldout=held, rows=selected, completions=records,
        config=run_settings(config, store, selected, grid, policy, verifier),
        card=describe_policy(policy), seconds=round(time.monotonic() - started, 1), sections=list(config.sections),
    )
    if config.out_dir is not None:
        save_result(result, config.out_dir)
    return result


# --- 1. rows -----------------------------------------------------------------------------------------
def select_rows(dataset: Any, max_rows: int | None) -> list[dict]:
    """The rows to evaluate (see `subset_indices`), checked for the columns every stage reads."""
    n = len(dataset)
    idx: list[int] = list(range(n))
    is_hf = hasattr(dataset, "column_names")
    if is_hf:
        missing = [c for c in ("ticker", "asof") if c not in dataset.column_names]
        if missing:
            raise ValueError(f"dataset: missing column {missing[0]!r}")
    if max_rows is not None and max_rows < n:
        asofs = dataset["asof"] if is_hf else [r.get("asof") for r in dataset]
        idx = subset_indices(asofs, max_rows)
    out = dataset.select(idx).to_list() if is_hf and hasattr(dataset, "to_list") else [dict(dataset[i]) for i in idx]
    if not out:
        raise ValueError("dataset: no rows to evaluate")
    for col in ("ticker", "asof"):
        if col not in out[0]:
            raise ValueError(f"dataset: missing column {col!r}")
    return out


def policy_name(policy: Policy | None, config: EvalConfig) -> str:
    if policy is None:
        return BASELINES_ONLY
    name = getattr(policy, "name", type(policy).__name__)
    if name in RESERVED or name == f"momentum_{config.momentum_lookback}d":
        raise ValueError(f"policy name {name!r} is taken by a baseline; give the policy another name")
    return name


def describe_policy(policy: Policy | None) -> dict[str, Any]:
    """What the report's model card says about where the theses came from."""
    from thesisgym.train.card import machine, read_card

    if policy is None:
        return {"source": "no policy (baselines only)", "machine": machine()}

    model_dir = getattr(policy, "model_path", None)
    out: dict[str, Any] = {"name": getattr(policy, "name", type(policy).__name__)}
    if model_dir:
        out["source"] = f"model {model_dir}"
        try:
            card = read_card(model_dir)
        except ValueError as exc:
            out["card_problem"] = str(exc)
        else:
            if card is not None:
                out["run"] = card.model_dump(mode="json")
            else:
                out["card_problem"] = (f"no training record (thesisgym_run.json) in {model_dir}: "
                                       "it was not trained by thesisgym's run_sft/run_grpo")
    elif getattr(policy, "path", None) is not None:
        out["source"] = f"completions file {policy.path}"
    elif getattr(policy, "endpoint", None):
        out["source"] = f"endpoint {policy.endpoint}"
    else:
        out["source"] = f"Python policy {type(policy).__name__}"
    for k in ("temperature", "max_new_tokens", "seed"):
        if getattr(policy, k, None) is not None:
            out[k] = getattr(policy, k)
    out["machine"] = machine()
    return out


# --- 2-3. generate and score -------------------------------------------------------------------------
def decide(policy: Policy, rows: list[dict], *, label: str, config: EvalConfig) -> tuple[list[str], list[str | None]]:
    """(completions, transport error or None per row), `config.chunk` rows per call, with progress."""
    out: list[str] = []
    errors: list[str | None] = []
    with Ticker(len(rows), label, enabled=config.progress, unit="rows") as ticker:
        for lo in range(0, len(rows), config.chunk):
            batch = rows[lo : lo + config.chunk]
            comps = list(policy.decide(batch))
            errs = list(getattr(policy, "last_errors", None) or [None] * len(batch))
            if len(comps) != len(batch) or len(errs) != len(batch):
                raise ValueError(f"policy {getattr(policy, 'name', policy)!r} returned {len(comps)} completions "
                                 f"for {len(batch)} rows")
            out.extend(comps)
            errors.extend(errs)
            ticker.advance(len(batch))
    return out, errors


def check_transport(policy: Any, errors: list[str | None], max_error_rate: float, what: str) -> dict[str, Any]:
    """Transport counts of one generation; an EndpointError above `max_error_rate`."""
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


def generate(policy: Policy, rows: list[dict], name: str, config: EvalConfig) -> Generation:
    completions, errors = decide(policy, rows, label=f"{name}: writing theses", config=config)
    transport = check_transport(policy, errors, config.max_error_rate, "generation")
    warnings = []
    if transport["endpoint"] is None:
        transport = {}  # no endpoint, nothing in transport to report
    elif transport["errors"]:
        warnings.append(
            f"{transport['errors']} of {transport['requests']} requests to {transport['endpoint']} failed in "
            f"transport; those rows are empty theses (flat in the backtest), not format errors of the model"
        )
    return Generation(completions, errors, transport, warnings)


def score(gen: Generation, rows: list[dict], config: EvalConfig, *, scorer: Any, verifier: Any) -> pd.DataFrame:
    """`score_rows` with the configured judge; an LLM judge that fails is a warning, or an error above
    `max_error_rate` (its failures fall back to the local verdict, which must not pass silently)."""
    judge = verifier
    if judge is None and scorer is None:
        judge = make_verifier(config.judge, judge_model=config.judge_model, judge_base_url=config.judge_base_url,
                              **(config.judge_options if config.judge == "llm" else {}))
    usage = getattr(getattr(getattr(judge, "judge", None), "client", None), "usage", None)
    before = usage.json_fallbacks if usage is not None else 0
    scores = score_rows(gen.completions, rows, scorer=scorer, verifier=judge)
    scores["transport_error"] = [float(e is not None) for e in gen.errors]
    if usage is not None:
        failed = usage.json_fallbacks - before
        client = judge.judge.client.config
        msg = (f"the LLM judge at {client.base_url} (model {client.model}) failed on {failed} of {len(rows)} "
               f"theses; their s is the local judge's (last error: {usage.last_error or 'malformed answer'})")
        if rows and failed / len(rows) > config.max_error_rate:
            raise EndpointError(msg)
        if failed:
            gen.warnings.append(msg)
    return scores


def baseline_scores(rows: list[dict]) -> pd.DataFrame:
    """The keys and labels of the rows, for a run without a policy."""
    return pd.DataFrame({
        "ticker": [r["ticker"] for r in rows],
        "asof": [str(r["asof"])[:10] for r in rows],
        "variation": [int(r.get("variation", 0) or 0) for r in rows],
        "label": [r.get("label") for r in rows],
    })


# --- 4. backtests ------------------------------------------------------------------------------------
def backtest_grid(rows: list[dict], store: MarketStore, config: EvalConfig) -> Grid:
    """The variation-0 rows (one decision per ticker-day) and the date the backtest ends."""
    canon_idx = [i for i, r in enumerate(rows) if int(r.get("variation", 0) or 0) == 0]
    if not canon_idx:
        raise ValueError("dataset: no rows with variation 0 to backtest")
    keys = pd.DataFrame({
        "ticker": [rows[i]["ticker"] for i in canon_idx],
        "date": pd.to_datetime([str(rows[i]["asof"])[:10] for i in canon_idx]),
    })
    dup = keys.duplicated()
    if dup.any():
        i = canon_idx[int(np.argmax(dup.to_numpy()))]
        raise ValueError(f"dataset: row {i}: a second variation-0 row for ({rows[i]['ticker']}, {rows[i]['asof']})")
    calendar = store.dates
    last = int(calendar.searchsorted(keys["date"].max()))
    return Grid(canon_idx, keys, calendar[min(last + config.hold, len(calendar) - 1)])


def run_backtests(name: str | None, scores: pd.DataFrame, rows: list[dict], grid: Grid, store: MarketStore,
                  config: EvalConfig) -> dict[str, BacktestResult]:
    """The policy (first) and every baseline and oracle through the same Backtest."""
    keys = grid.keys
    # realised returns are about what came after each day: the store's labelled door (thesisgym.data.asof)
    door = store.timeline()
    bars, truth = door.label_bars(), door.label_truth()
    kw = dict(positions=config.positions, long_only=config.long_only, cost_bps=config.cost_bps,
              hold_days=config.hold, end=grid.end, rf=config.rf)
    strategies: dict[str, pd.DataFrame] = {}
    if name is not None:
        dec = keys.assign(decision=[scores["decision"].iloc[i] for i in grid.canon_idx])
        # an invalid decision is a flat day, not a dropped one: the policy failed to commit
        strategies[name] = dec.assign(decision=dec["decision"].where(dec["decision"] != INVALID, "HOLD"))
    strategies["equal_weight_long"] = B.equal_weight_long(keys)
    strategies[f"momentum_{config.momentum_lookback}d"] = B.momentum(keys, bars, lookback=config.momentum_lookback)
    strategies["random"] = B.random_decisions(keys, seed=config.seed)
    labels = [rows[i].get("label") for i in grid.canon_idx]
    if any(labels):
        strategies["label_oracle"] = B.label_oracle(keys, labels)
    if truth is not None and "expected_return" in truth.columns:
        strategies["truth_oracle"] = B.truth_oracle(keys, truth)
    done = {k: Backtest(d, bars, **kw).run() for k, d in strategies.items()}
    once = Backtest(B.buy_and_hold(keys), bars, **{**kw, "hold_days": None, "start": keys["date"].min()})
    first = {name: done.pop(name)} if name is not None else {}
    return {**first, "buy_and_hold": B.bought_once(once.run()), **done}


def interval_columns(bt: BacktestResult, config: EvalConfig) -> dict[str, float]:
    """*_lo / *_hi of Sharpe, cumulative return and hit rate (date-block bootstrap)."""
    r = bt.returns.to_numpy()
    hits, cells = hit_cells(bt.held.to_numpy(), bt.asset_returns.to_numpy(), bt.covered.to_numpy())
    out = {}
    for metric, fn, arrays in (
        ("sharpe", lambda x: sharpe(x, rf=config.rf), (r,)),
        ("cumulative_return", lambda x: float(np.prod(1.0 + x) - 1.0), (r,)),
        ("hit_rate", S.ratio_of_sums, (hits, cells)),
    ):
        lo, hi = S.block_bootstrap(fn, *arrays, block=config.hold, reps=config.bootstrap_reps,
                                   confidence=config.confidence, seed=config.seed)
        out[f"{metric}_lo"], out[f"{metric}_hi"] = lo, hi
    return out


def backtest_metrics(backtests: dict[str, BacktestResult], grid: Grid, config: EvalConfig
                     ) -> tuple[pd.DataFrame, list[str]]:
    """Strategies x metrics with intervals, decisions and dates; warnings about the sample."""
    rows = {}
    for k, bt in backtests.items():
        st = bt.stats()
        st.update(interval_columns(bt, config))
        st["decisions"] = float(grid.keys["ticker"].nunique() if k == "buy_and_hold" else len(grid.keys))
        st["dates"] = float(grid.n_dates)  # the period every strategy is measured over
        if st.get("days", 0) < config.min_annualize_days:
            # an extrapolation, not a measurement (see EvalConfig.min_annualize_days); Calmar divides by it
            st["annualized_return"] = st["calmar"] = float("nan")
        rows[k] = st
    warnings = []
    if grid.n_dates < config.min_dates:
        warnings.append(f"every backtest figure rests on {grid.n_dates} decision date(s) ({len(grid.keys)} "
                        f"ticker-days); under {config.min_dates} dates a Sharpe ratio or hit rate is anecdote, "
                        "not evidence")
    return pd.DataFrame(rows).T, warnings


def compare_sharpe(name: str, backtests: dict[str, BacktestResult], config: EvalConfig) -> dict[str, dict[str, float]]:
    """Policy Sharpe minus each baseline's, with a paired (same dates) bootstrap interval."""
    p_ret = backtests[name].returns
    out = {}
    for k in (*COMPARED, f"momentum_{config.momentum_lookback}d"):
        b_ret = backtests[k].returns.reindex(p_ret.index, fill_value=0.0)
        lo, hi = S.block_bootstrap(
            lambda a, b: sharpe(a, rf=config.rf) - sharpe(b, rf=config.rf), p_ret.to_numpy(), b_ret.to_numpy(),
            block=config.hold, reps=config.bootstrap_reps, confidence=config.confidence, seed=config.seed,
        )
        diff = sharpe(p_ret.to_numpy(), rf=config.rf) - sharpe(b_ret.to_numpy(), rf=config.rf)
        out[k] = {"sharpe_diff": diff, "lo": lo, "hi": hi, "confidence": config.confidence}
    return out


# --- 5. accuracy -------------------------------------------------------------------------------------
def references(dataset: Any, rows: list[dict], policies: Mapping[str, Policy] | None,
               fixed: Mapping[str, Mapping[tuple[str, str, int], str]] | None, *, lenient: bool = False
               ) -> tuple[dict[str, list[str]], list[str]]:
    """Decisions of the accuracy references on `rows`. A reference that cannot answer them (a
    completions file of another split, fixed decisions without these keys) is a ValueError, or with
    `lenient` (the held-out run) left out with a warning."""
    out: dict[str, list[str]] = {}
    problems: list[str] = []
    quiet = EvalConfig(progress=False)
    for k, other in (policies or {}).items():
        try:
            if hasattr(other, "bind"):
                other.bind(split_keys(dataset))
            out[k] = [decision_of(c) for c in decide(other, rows, label=k, config=quiet)[0]]
        except ValueError as exc:
            if not lenient:
                raise
            problems.append(f"accuracy reference {k!r} left out of the held-out table: {exc}")
    keys = [row_key(r)[:3] for r in rows]
    for k, decisions in (fixed or {}).items():
        missing = [key for key in keys if key not in decisions]
        if missing:
            msg = f"accuracy_baselines[{k!r}]: no decision for {len(missing)} of {len(rows)} rows (first: {missing[0]})"
            if not lenient:
                raise ValueError(msg)
            problems.append(f"{msg}; left out of the held-out table")
            continue
        out[k] = [decisions[key] for key in keys]
    return out, problems


def decision_entries(policy: Policy | None, name: str, scores: pd.DataFrame, rows: list[dict], train: Any,
                     refs: dict[str, list[str]], config: EvalConfig) -> dict[str, list[str]]:
    """Decisions per row of the policy (first) and the references: the train majority class,
    always-BUY, seeded random and the caller's (e.g. the teacher's)."""
    entries: dict[str, list[str]] = {}
    if policy is not None:
        entries[name] = list(scores["decision"])
    if train is not None:
        tl = [lab for lab in (train["label"] if hasattr(train, "column_names") else [r.get("label") for r in train])
              if lab in LABELS]
        if tl:
            major = max(LABELS, key=tl.count)
            entries[f"majority of train ({major})"] = [major] * len(rows)
    entries["always BUY"] = ["BUY"] * len(rows)
    rng = np.random.default_rng(config.seed)
    entries["random"] = list(np.asarray(LABELS)[rng.integers(0, len(LABELS), size=len(rows))])
    entries.update(refs)
    return entries


def accuracy_table(policy: Policy | None, name: str, scores: pd.DataFrame, rows: list[dict], train: Any,
                   refs: dict[str, list[str]], grid: Grid, config: EvalConfig) -> pd.DataFrame:
    """Accuracy [CI] of the policy and the references over every labelled row (all variations); rows
    after the first also get the paired difference (first minus this) with its interval, and the caller's
    references (`refs`, e.g. the SFT checkpoint) theirs to the constants: `minus_majority` (the train
    majority class) and `minus_always_buy`, each with `_lo` / `_hi`."""
    entries = decision_entries(policy, name, scores, rows, train, refs, config)
    labelled = [i for i, r in enumerate(rows) if r.get("label") in LABELS]
    if not labelled:
        return pd.DataFrame()
    dates = [str(rows[i]["asof"])[:10] for i in labelled]
    truth = [rows[i]["label"] for i in labelled]
    kw = dict(block=rate_block([r["asof"] for r in rows], config.hold), reps=config.bootstrap_reps,
              confidence=config.confidence, seed=config.seed)
    table = {}
    reference: list[float] | None = None
    hits = {k: [float(decisions[i] == t) for i, t in zip(labelled, truth, strict=True)] for k, decisions in entries.items()}
    constants = {"minus_majority": next((k for k in entries if k.startswith("majority of train")), None),
                 "minus_always_buy": "always BUY"}
    for k, decisions in entries.items():
        pred = [decisions[i] for i in labelled]
        exact = hits[k]
        diff = {}
        if reference is None:
            reference = exact
        else:
            d, lo, hi, _, _ = S.rate_interval(dates, [a - b for a, b in zip(reference, exact, strict=True)], **kw)
            diff = {"first_minus_this": d, "first_minus_this_lo": lo, "first_minus_this_hi": hi}
        if k in refs:  # a second decider beside the policy: its own paired test against the constants
            for col, c in constants.items():
                if c is not None:
                    d, lo, hi, _, _ = S.rate_interval(dates, [a - b for a, b in zip(exact, hits[c], strict=True)], **kw)
                    diff.update({col: d, f"{col}_lo": lo, f"{col}_hi": hi})
        side = [float(SIDE.get(p, 9) == SIDE[t]) for p, t in zip(pred, truth, strict=True)]
        acc, lo, hi, n, nd = S.rate_interval(dates, exact, **kw)
        dacc, dlo, dhi, _, _ = S.rate_interval(dates, side, **kw)
        table[k] = {"accuracy": acc, "accuracy_lo": lo, "accuracy_hi": hi, "direction_accuracy": dacc,
                    "direction_accuracy_lo": dlo, "direction_accuracy_hi": dhi, "rows": float(n),
                    "dates": float(nd), **diff}
    return pd.DataFrame.from_dict(table, orient="index")


def skill_of(policy: Policy | None, name: str, scores: pd.DataFrame, rows: list[dict], train: Any,
             refs: dict[str, list[str]], grid: Grid, config: EvalConfig, store: MarketStore | None = None
             ) -> pd.DataFrame:
    """Skill measures (`evaluate.skill`: IC, market-neutral book, decision mix, date-block intervals) of
    the policy and the references on the backtest rows (variation 0), beside the reader ceiling (the
    learnability reader fitted on train), the label oracle and, on synthetic rows, the truth oracle."""
    from thesisgym.evaluate.skill import Sample, skill_table

    entries = decision_entries(policy, name, scores, rows, train, refs, config)
    canon = [rows[i] for i in grid.canon_idx]
    deciders = {k: [v[i] for i in grid.canon_idx] for k, v in entries.items()}
    deciders.update(ceilings(canon, train, config.seed))
    expected = store_expected(grid, store)
    if expected is not None:
        from thesisgym.evaluate.reward_audit import truth_decisions

        deciders["truth_oracle"] = truth_decisions(expected)
    sample = Sample([r["asof"] for r in canon], [r.get("fwd_return") for r in canon], [r.get("fwd_vol") for r in canon])
    if not sample.n_rows:
        return pd.DataFrame()
    return skill_table(deciders, sample, block=rate_block([r["asof"] for r in canon], config.hold),
                       reps=config.bootstrap_reps, confidence=config.confidence, seed=config.seed)


def store_expected(grid: Grid, store: MarketStore | None) -> list[float] | None:
    """The synthetic store's true expected return of each backtest row (None without one)."""
    truth = getattr(store, "truth", None)
    if truth is None or "expected_return" not in truth.columns or len(grid.keys) < 10:
        return None
    t = truth[["ticker", "date", "expected_return"]].assign(date=pd.to_datetime(truth["date"]).astype("datetime64[ns]"))
    keys = grid.keys.assign(date=grid.keys["date"].astype("datetime64[ns]"))
    er = keys.merge(t, on=["ticker", "date"], how="left")["expected_return"].to_numpy(dtype=float)
    return list(er) if np.isfinite(er).all() else None


def ceilings(rows: list[dict], train: Any, seed: int) -> dict[str, list[Any]]:
    """Decisions of the references that bound skill from above: the reader ceiling (an evidence-only
    reader fitted on train; left out when train has no evidence or labels), the label oracle and,
    where the rows carry the synthetic market's true expected return, the truth oracle."""
    from thesisgym.evaluate.learnability import canonical, fit_reader
    from thesisgym.evaluate.reward_audit import truth_decisions

    out: dict[str, list[Any]] = {}
    if train is not None and rows and isinstance(rows[0].get("evidence"), list):
        # no labelled train rows with evidence: no ceiling to show (the table lists what it has)
        with contextlib.suppress(ValueError, KeyError):
            out["reader ceiling"] = fit_reader(canonical(train), seed=seed).decide(rows)
    labels = [r.get("label") for r in rows]
    if any(lab in LABELS for lab in labels):
        out["label_oracle"] = labels
    truth = [r.get("true_expected_return") for r in rows]
    if len(rows) >= 10 and all(isinstance(t, (int, float)) and math.isfinite(t) for t in truth):
        out["truth_oracle"] = truth_decisions(truth)
    return out


# --- 6. probes ---------------------------------------------------------------------------------------
def run_probes(policy: Policy | None, rows: list[dict], scores: pd.DataFrame, grid: Grid, store: MarketStore,
               config: EvalConfig, completions: list[str]) -> tuple[dict[str, dict[str, Any]], list[dict]]:
    """(flip statistics per probe + the noise baseline, completion records incl. the probes')."""
    records = [{"ticker": r["ticker"], "asof": str(r["asof"])[:10], "variation": int(r.get("variation", 0) or 0),
                "probe": "", "completion": c} for r, c in zip(rows, completions, strict=False)]
    out: dict[str, dict[str, Any]] = {}
    if policy is None or not config.probes:
        return out, records
    idx = list(grid.canon_idx)
    if config.probe_rows and config.probe_rows < len(idx):  # a subset, spread evenly over the rows in date order
        idx = [idx[int(j * len(idx) / config.probe_rows)] for j in range(config.probe_rows)]
    canon_rows = [rows[i] for i in idx]
    canon_dec = [scores["decision"].iloc[i] for i in idx]
    companies = (store.meta or {}).get("companies") or {}
    for probe in config.probes:
        if hasattr(policy, "supports_probe") and not policy.supports_probe(probe):
            out[probe] = {"flip_rate": float("nan"), "rows": 0, "skipped": "the policy has no completions for this probe"}
            continue
        probed = probe_rows(canon_rows, probe, companies=companies, years=config.shift_years, seed=config.seed)
        comps, errs = decide(policy, probed, label=f"probe {probe}", config=config)
        check_transport(policy, errs, config.max_error_rate, f"probe {probe}")
        probed_dec = [decision_of(c) for c in comps]
        out[probe] = (injection_stats(canon_dec, probed_dec, [r["injected_label"] for r in probed])
                      if probe == "inject" else flip_stats(canon_dec, probed_dec))
        out[probe]["of_rows"] = len(grid.canon_idx)  # the backtest rows the probed ones were drawn from
        records.extend({"ticker": r["ticker"], "asof": str(r["asof"])[:10], "variation": 0, "probe": probe,
                        "completion": c} for r, c in zip(probed, comps, strict=True))
    if not hasattr(policy, "reseeded"):
        out["noise"] = {"flip_rate": float("nan"), "rows": 0, "skipped": "the policy cannot resample (fixed completions)"}
        return out, records
    if getattr(policy, "deterministic", False):  # greedy local decoding: a new seed writes the very same theses
        out["noise"] = {**flip_stats(canon_dec, canon_dec),
                        "what": "greedy decoding: a new seed writes the same theses, so sampling causes no flips"}
        return out, records
    again = policy.reseeded(config.seed + 1 if config.noise_seed is None else config.noise_seed)
    comps, errs = decide(again, canon_rows, label="noise (new seed)", config=config)
    check_transport(again, errs, config.max_error_rate, "noise")
    out["noise"] = {**flip_stats(canon_dec, [decision_of(c) for c in comps]),
                    "what": "same prompts, new sampling seed: the flip rate sampling alone causes"}
    return out, records


# --- 7. held-out tickers and the result ----------------------------------------------------------------
def run_heldout(policy: Policy | None, heldout: Any, store: MarketStore, config: EvalConfig,
                shared: dict[str, Any]) -> tuple[EvalResult | None, list[str]]:
    """The same evaluation on the held-out-ticker split with `config.for_heldout()`."""
    if heldout is None or not len(heldout):
        return None, []
    if hasattr(policy, "bind"):
        return None, ["held-out tickers not evaluated: a completions file answers one split"]
    return evaluate(policy, heldout, store, config.for_heldout(), **shared), []


def run_settings(config: EvalConfig, store: MarketStore, rows: list[dict], grid: Grid, policy: Policy | None,
                 verifier: Any) -> dict[str, Any]:
    """What the report's settings table and metrics.json record about this run."""
    out = {
        **config.settings(),
        "store": store.name,
        "rows": len(rows),
        "backtest_rows": len(grid.canon_idx),
        "decision_dates": grid.n_dates,
        "start": str(grid.keys["date"].min().date()),
        "end": str(pd.Timestamp(grid.end).date()),
        "hold_days": config.hold,
        "label_horizon": config.horizon,
        "bootstrap": f"circular block bootstrap by date, block {config.hold} days, {config.bootstrap_reps} "
                     f"resamples, {config.confidence:.0%} percentile intervals",
        "model_dir": getattr(policy, "model_path", None),
    }
    if verifier is not None:
        out["judge"] = type(verifier).__name__
    return out


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
