"""Trade-R1 in miniature: one SFT start, GRPO arms with different rewards, held-out and cross-market tests.

Why: the product rests on Trade-R1's claim that RL on market returns alone chases returns and stops
grounding its reasoning, while gating the return by a semantic consistency score (FSR, and DSR with
its asymmetric effect) keeps reasoning grounded and transfers better. This runs that comparison at
a CPU size with the same public pieces as the demo (`thesisgym.experiments.demo` stage functions, the shipped
GRPO recipes' reward stacks, `thesisgym.rewards.score_completion`, the local consistency judge and
`thesisgym.evaluate.evaluate` for the backtest):

1. synthetic market A (momentum pays; the knobs of `preset`, by default "reading": the evidence predicts
   the label) -> embargoed splits -> compact template-teacher distillation
   -> one SFT start of the demo's base model (the pretrained SmolLM2-135M-Instruct by default);
2. per arm (`market_only`, `fsr`, `dsr`, `weighted` = Trading-R1's decision-stage weighted reward)
   and seed: GRPO from that start with the same budget;
3. each checkpoint writes theses (greedy) for A's test period, for market B's test period (same
   generator, momentum reverses) and for the lucky ticker's rows after its drift flipped; every
   thesis is scored by the shared verifier with the local judge's `s`.

The table's first row is the SFT start itself (`sft_start`), scored on the same held-out sets: each arm's
change is read against it. Per arm: in-sample reward (the arm's own reward, mean over its last logged GRPO steps), held-out
hallucination rate, grounding, s, decision accuracy, the share of BUY decisions, Sharpe (backtest of
the decisions on A's test rows) and the cross-market drop (A minus B) in accuracy (with its own
interval, each market's rows resampled on their own) and in Sharpe (per seed, with the seed range);
row metrics carry a 95 % bootstrap interval over the pooled (seed, row) sample. Per arm and held-out set, the
decision-skill table (`experiments.decision_skill`, through `evaluate.skill`): IC pooled and mean per date,
market-neutral book, accuracy paired against A's train majority class and always-BUY, the decision mix,
each with a block-bootstrap-over-dates interval. Every arm-seed writes `metrics.json` when
done, so a rerun with the same `--out` skips finished arms (resumable) and a changed setting is
refused instead of silently mixed.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from thesisgym.experiments.compare import (
    SKILL_HEAD,
    decision_skill,
    difference_ci,
    mean_ci,
    score_with_s,
    skill_cells,
    train_majority,
    with_row_fields,
)
from thesisgym.progress import Ticker
from thesisgym.schema import StrictModel

# arm -> (recipe whose reward stack it trains on, override of rewards.funcs or None)
ARMS: dict[str, tuple[str, list[str] | None]] = {
    "market_only": ("market_only", None),
    "fsr": ("fsr", None),
    "dsr": ("dsr", None),
    "weighted": ("dsr", ["weighted", "structure", "evidence", "decision", "loop"]),
}
# the SFT checkpoint every arm starts from, scored on the same held-out sets: the row each arm is read against
START_ARM = "sft_start"
ROW_METRICS: tuple[str, ...] = ("hallucination_rate", "grounding", "s", "decision_correct", "decision_valid")


class TradeR1Config(StrictModel):
    """Sizes of the experiment; `demo` holds the shared market/model/SFT sizes (`DemoConfig` fields)."""

    out: str = "trade_r1_out"
    arms: list[str] = Field(default_factory=lambda: ["market_only", "fsr", "dsr", "weighted"])
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    size: str = "default"
    preset: str = Field("reading", description="synthetic-market knobs of both markets (data.synth.PRESETS): "
                                               "reading (the evidence predicts the label) or noisy")
    grpo_steps: int = Field(5, ge=1)
    eval_rows: int = Field(16, ge=2)
    seed: int = 0
    demo: dict[str, Any] = Field(default_factory=dict, description="DemoConfig field overrides (e.g. sft_steps)")

    @field_validator("arms")
    @classmethod
    def _arms(cls, v: list[str]) -> list[str]:
        unknown = [a for a in v if a not in ARMS]
        if unknown or not v:
            raise ValueError(f"unknown arm(s) {unknown}; known: {sorted(ARMS)}")
        return v

    @field_validator("preset")
    @classmethod
    def _preset(cls, v: str) -> str:
        from thesisgym.data.synth import PRESETS

        if v not in PRESETS:
            raise ValueError(f"preset: unknown {v!r}; known: {sorted(PRESETS)}")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct and non-empty, got {v}")
        return v


def arm_rewards(arm: str):
    """The RewardConfig of an arm: the shipped recipe's stack (weights 1 for the trained reward, 0 for logged)."""
    from thesisgym.train.config import RewardConfig, load_config
    from thesisgym.train.recipes import recipe_path

    recipe, funcs = ARMS[arm]
    rewards = load_config(recipe_path(recipe), kind="grpo").rewards
    if funcs is None:
        return rewards
    return RewardConfig(funcs=funcs, weights=[1.0] + [0.0] * (len(funcs) - 1), consistency=rewards.consistency)


def _sharpe(completions: Sequence[str], rows: Sequence[dict], store: Any, name: str) -> float:
    from thesisgym.evaluate import CallablePolicy, EvalConfig, evaluate

    by_key = {(r["ticker"], str(r["asof"]), int(r.get("variation", 0) or 0)): c
              for r, c in zip(rows, completions, strict=True)}
    policy = CallablePolicy(lambda r: by_key[(r["ticker"], str(r["asof"]), int(r.get("variation", 0) or 0))],
                            name=name)
    res = evaluate(policy, list(rows), store, EvalConfig(probes=[], progress=False))
    sharpe = res.to_json()["metrics"].get(name, {}).get("sharpe")
    return float(sharpe) if isinstance(sharpe, (int, float)) and sharpe is not None else math.nan


def run_trade_r1(config: TradeR1Config, *, log: Callable[[str], None] = print, progress: bool = True) -> dict:
    """Run (or resume) every arm and seed; returns the summary (also `<out>/results.json`)."""
    import datasets

    from thesisgym.experiments.demo import (
        DemoConfig,
        build_market_data,
        distil_sft_data,
        drop_checkpoints,
        grpo_config,
        train_sft,
    )
    from thesisgym.train import CompactProgress, run_grpo

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    settings = config.model_dump(exclude={"out", "arms", "seeds"})
    saved = out / "settings.json"
    if saved.exists() and json.loads(saved.read_text()) != settings:
        raise ValueError(f"{out}: was run with other settings ({saved}); use a new --out or the same options")
    saved.write_text(json.dumps(settings, indent=2))
    demo = DemoConfig.sized(config.size, **{**config.demo, "seed": config.seed, "grpo_steps": config.grpo_steps,
                                            "curve_rows": 0, "out": str(out)})
    t0 = time.perf_counter()

    log("==> market A, market B, SFT start")
    store_a, splits_a, data_a = build_market_data(demo, out / "A", market="A", preset=config.preset, log=log)
    store_b, splits_b, _ = build_market_data(demo, out / "B", market="B", preset=config.preset, log=log)
    sft_final = out / "sft" / "final"
    if not (sft_final / "config.json").exists():
        sft_dir, _ = distil_sft_data(demo, splits_a, out / "A", log=log)
        train_sft(demo, splits_a, sft_dir, out / "sft", log=log)
    else:
        log(f"    reusing the SFT start {sft_final}")
    sets = _eval_sets(store_a, splits_a, splits_b, config.eval_rows)
    majority = train_majority(splits_a["train"])  # the constant the skill table's paired accuracy names
    log("    eval rows: " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()))

    start = out / "arms" / START_ARM / "metrics.json"  # the baseline every arm's change is read against
    start_theses = start.with_name("theses.json")  # each arm's greedy theses decode from these as drafts
    if not start.exists() or not start_theses.exists():
        scored, theses = _score_sets(sft_final, sets, demo, store_a, store_b, START_ARM)
        res = {"arm": START_ARM, "seed": config.seed, "in_sample_reward": math.nan, "train_majority": majority,
               **scored}
        start.parent.mkdir(parents=True, exist_ok=True)
        start.write_text(json.dumps(res, default=float))
        start_theses.write_text(json.dumps(theses))
        log("    the SFT start scored on the held-out sets")
    drafts = json.loads(start_theses.read_text())

    jobs = [(arm, seed) for arm in config.arms for seed in config.seeds]
    with Ticker(len(jobs), "arms x seeds", enabled=progress, unit="runs", print_fn=log) as bar:
        for arm, seed in jobs:
            run_dir = out / "arms" / f"{arm}-s{seed}"
            done = run_dir / "metrics.json"
            if done.exists():
                log(f"    {arm} seed {seed}: done earlier, skipped")
            else:
                t_arm = time.perf_counter()
                cfg = grpo_config(demo, sft_final, data_a, run_dir / "grpo", arm_rewards(arm), seed=seed)
                final = run_grpo(cfg, callbacks=[CompactProgress(label=f"{arm} s{seed}", print_fn=log, show_bar=False)])
                drop_checkpoints(run_dir / "grpo")
                scored, _ = _score_sets(final, sets, demo, store_a, store_b, arm, drafts=drafts)
                res: dict[str, Any] = {"arm": arm, "seed": seed, "in_sample_reward": _in_sample(run_dir / "grpo", arm),
                                       "train_majority": majority, **scored}
                res["seconds"] = round(time.perf_counter() - t_arm, 1)
                done.write_text(json.dumps(res, default=float))
                log(f"    {arm} seed {seed}: {res['seconds']:.0f} s")
            bar.advance()

    table = summarize(out, config)
    summary = {"config": config.model_dump(), "table": table, "seconds": round(time.perf_counter() - t0, 1)}
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=float))
    (out / "table.md").write_text("\n".join(format_table(table)) + "\n")
    plot_table(table, out / "trade_r1.png")
    return summary


def _score_sets(model: Path, sets: dict[str, list], demo: Any, store_a: Any, store_b: Any, name: str, *,
                drafts: dict[str, list[str]] | None = None) -> tuple[dict, dict[str, list[str]]]:
    """(greedy theses of one checkpoint for every held-out set, scored, and A's and B's backtest Sharpe;
    the theses). `drafts`: the SFT start's theses per set, which a GRPO arm's decode from."""
    from thesisgym.experiments.demo import generate_for

    res: dict[str, Any] = {}
    written: dict[str, list[str]] = {}
    for split, rows in sets.items():
        guess = (drafts or {}).get(split)
        comps = written[split] = generate_for(model, rows, demo, drafts=guess if guess and len(guess) == len(rows)
                                              else None)
        res[split] = with_row_fields(score_with_s(comps, rows), rows)
        if split in ("A", "B"):
            res[f"sharpe_{split}"] = _sharpe(comps, rows, store_a if split == "A" else store_b, name)
    return res, written


def _eval_sets(store_a: Any, splits_a: dict, splits_b: dict, n: int) -> dict[str, list]:
    """The held-out sets: A's and B's test periods, and the lucky ticker's rows after its drift flipped."""
    from thesisgym.experiments.demo import spread_rows

    sets = {"A": spread_rows(splits_a["test"], n), "B": spread_rows(splits_b["test"], n)}
    lucky, switch = store_a.meta.get("lucky_ticker"), str(store_a.meta.get("lucky_switch_date") or "")
    lucky_rows = [r for split in ("test", "heldout", "val") for r in splits_a.get(split, [])
                  if r["ticker"] == lucky and str(r["asof"])[:10] >= switch[:10] and int(r.get("variation", 0)) == 0]
    if lucky_rows:
        sets["lucky"] = spread_rows(lucky_rows, n)
    return sets


def _in_sample(run_dir: Path, arm: str) -> float:
    """Mean of the arm's own reward over the second half of its logged GRPO steps."""
    path = run_dir / "log_history.json"
    logs = json.loads(path.read_text()) if path.exists() else []
    vals = [e[f"rewards/{arm}_reward/mean"] for e in logs if f"rewards/{arm}_reward/mean" in e]
    vals = vals[len(vals) // 2:] if len(vals) > 1 else vals
    return float(np.mean(vals)) if vals else math.nan


def summarize(out: Path, config: TradeR1Config) -> list[dict]:
    """One row per arm from the finished arm-seed `metrics.json` files."""
    table = []
    start = out / "arms" / START_ARM / "metrics.json"
    groups = [(START_ARM, [json.loads(start.read_text())] if start.exists() else [])]
    groups += [(arm, [json.loads(p.read_text()) for s in config.seeds
                      if (p := out / "arms" / f"{arm}-s{s}" / "metrics.json").exists()]) for arm in config.arms]
    for arm, runs in groups:
        if not runs:
            continue
        row: dict[str, Any] = {"arm": arm, "seeds": len(runs),
                               "in_sample_reward": _nanmean([r["in_sample_reward"] for r in runs])}
        for split in ("A", "B", "lucky"):
            scored = [s for r in runs for s in r.get(split, [])]
            for m in ROW_METRICS:
                if scored:
                    mean, lo, hi, n = mean_ci([s.get(m, math.nan) for s in scored], seed=config.seed)
                    row[f"{split}.{m}"] = {"mean": mean, "lo": lo, "hi": hi, "n": n}
        for split in ("A", "B"):
            vals = [r.get(f"sharpe_{split}", math.nan) for r in runs]
            row[f"sharpe_{split}"] = {"mean": float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan,
                                      "min": float(np.nanmin(vals)) if np.isfinite(vals).any() else math.nan,
                                      "max": float(np.nanmax(vals)) if np.isfinite(vals).any() else math.nan}
        # A and B are different rows: the accuracy drop resamples each market on its own; Sharpe is one
        # figure per seed, so its drop is paired by seed and shown with the seed range
        row["drop_accuracy"] = difference_ci([s.get("decision_correct", math.nan) for r in runs for s in r.get("A", [])],
                                             [s.get("decision_correct", math.nan) for r in runs for s in r.get("B", [])],
                                             seed=config.seed)
        drops = [r.get("sharpe_A", math.nan) - r.get("sharpe_B", math.nan) for r in runs]
        finite = np.isfinite(drops).any()
        row["drop_sharpe"] = {"mean": float(np.nanmean(drops)) if finite else math.nan,
                              "min": float(np.nanmin(drops)) if finite else math.nan,
                              "max": float(np.nanmax(drops)) if finite else math.nan}
        row["A.buy_share"] = float(np.mean([s.get("decision_id") == 3.0 for r in runs for s in r.get("A", [])] or [math.nan]))
        for split in ("A", "B", "lucky"):
            row[f"{split}.skill"] = _pooled_skill(runs, split, config.seed)
        table.append(row)
    return table


def _nanmean(values: Sequence[float]) -> float:
    """Mean of the finite values; NaN when there are none (the SFT start has no in-sample reward)."""
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _pooled_skill(runs: Sequence[dict], split: str, seed: int) -> dict[str, Any]:
    """`decision_skill` of every seed's decisions on one held-out set: the seeds' rows pooled, resampled
    together by date, each seed ranked and booked as its own cross-section; the paired accuracy is
    against A's train majority class. {} for runs saved without the row fields."""
    scored = [s for r in runs for s in r.get(split, [])]
    seeds = [r["seed"] for r in runs for _ in r.get(split, [])]
    majority = next((r["train_majority"] for r in runs if r.get("train_majority")), None)
    return decision_skill(scored, majority=majority, sections=seeds, seed=seed)


def _ci(cell: Any, fmt: str = ".2f") -> str:
    if not isinstance(cell, dict) or not math.isfinite(cell.get("mean", math.nan)):
        return "n/a"
    if "lo" in cell:
        if not math.isfinite(cell["lo"]):
            return f"{cell['mean']:{fmt}} [n/a]"
        return f"{cell['mean']:{fmt}} [{cell['lo']:{fmt}}, {cell['hi']:{fmt}}]"
    return f"{cell['mean']:{fmt}} ({cell['min']:{fmt}}..{cell['max']:{fmt}})"


def format_table(table: Sequence[dict]) -> list[str]:
    """A markdown table: one row per arm, 95 % bootstrap intervals over (seed, row), Sharpe range over seeds."""
    head = ("arm", "seeds", "in-sample reward", "halluc (A)", "grounding (A)", "s (A)", "accuracy (A)", "accuracy (B)",
            "accuracy (lucky)", "BUY share (A)", "Sharpe A (seed range)", "Sharpe B", "drop acc A-B [95% CI]",
            "drop Sharpe A-B (seed range)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        reward = r["in_sample_reward"]
        cells = (r["arm"], str(r["seeds"]), f"{reward:.3f}" if math.isfinite(reward) else "n/a",
                 _ci(r.get("A.hallucination_rate")),
                 _ci(r.get("A.grounding")), _ci(r.get("A.s")), _ci(r.get("A.decision_correct")),
                 _ci(r.get("B.decision_correct")), _ci(r.get("lucky.decision_correct")),
                 f"{r.get('A.buy_share', math.nan):.0%}", _ci(r["sharpe_A"]), _ci(r["sharpe_B"]),
                 _ci(r["drop_accuracy"], "+.3f"), _ci(r["drop_sharpe"], "+.2f"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines + skill_lines(table)


def skill_lines(table: Sequence[dict]) -> list[str]:
    """The decision-skill table (`experiments.decision_skill`): one row per arm and held-out set, seeds
    pooled, 95 % intervals from a block bootstrap over dates; n/a where a figure is undefined. Empty
    when no arm carries it."""
    rows = [(r["arm"], split, r[f"{split}.skill"]) for r in table for split in ("A", "B", "lucky")
            if f"{split}.skill" in r]
    if not rows:
        return []
    head = ("arm", "set", *SKILL_HEAD)
    lines = ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm, split, sk in rows:
        lines.append("| " + " | ".join((arm, split, *skill_cells(sk))) + " |")
    return lines


def plot_table(table: Sequence[dict], path: Path) -> None:
    """Bar chart per arm: held-out grounding, hallucination rate and accuracy on A and B, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (("A.grounding", "grounding (A)"), ("A.hallucination_rate", "halluc (A)"),
               ("A.decision_correct", "accuracy (A)"), ("B.decision_correct", "accuracy (B)"))
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / max(1, len(table))
    for j, r in enumerate(table):
        means = [r.get(k, {}).get("mean", math.nan) for k, _ in metrics]
        los = [m - r.get(k, {}).get("lo", m) for (k, _), m in zip(metrics, means, strict=True)]
        his = [r.get(k, {}).get("hi", m) - m for (k, _), m in zip(metrics, means, strict=True)]
        ax.bar(np.arange(len(metrics)) + j * width, means, width, yerr=[los, his], capsize=3, label=r["arm"])
    ax.set_xticks(np.arange(len(metrics)) + width * (len(table) - 1) / 2, [name for _, name in metrics])
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("Trade-R1 in miniature: held-out metrics per GRPO arm (95 % bootstrap)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
