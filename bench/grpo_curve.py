"""Decision skill and grounding against GRPO steps, several seeds, from one demo's SFT checkpoint.

Does a longer GRPO run than the demo's 8 steps move the policy's decisions, and from which budget does
the reward, not the seed, decide where it goes? This script takes a finished `thesisgym demo --out
DEMO_OUT` (its dataset and `sft/final`), runs the demo's GRPO (same rewards, rates and sizes) for
`--steps` steps per seed, saving a checkpoint every `--every` steps, and scores the SFT checkpoint
(step 0) and every saved one on the same held-out test rows (`--rows`, two tickers per date, greedy):
the demo's decision reward, IC pooled and per date, the market-neutral book, accuracy, the decision
mix, grounding and hallucination, with 95 % intervals (experiments.compare: the skill measures resample
dates in blocks of one holding period; the per-thesis means resample theses).

    PYTHONPATH=src python bench/grpo_curve.py DEMO_OUT [--seeds 0,1,2] [--steps 24] [--every 8]
        [--rows 40] [--out docs/experiments/grpo_curve]

Writes OUT.json (every figure), OUT.md (the table) and OUT.png (the curves, one line per seed).
Each seed's GRPO run goes to DEMO_OUT/curve/seed<k>; its checkpoints are removed once scored.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

from thesisgym.evaluate.stats import fmt_interval
from thesisgym.experiments import demo as D
from thesisgym.experiments.compare import (
    decision_skill,
    mean_ci,
    score_with_s,
    skill_cells,
    train_majority,
    with_row_fields,
)

CURVE_KEYS = ("decision", "grounding", "hallucination_rate", "evidence")


def score_checkpoint(model: Path, rows: list[dict], config: D.DemoConfig, majority: str | None, *,
                     drafts: list[str] | None = None) -> tuple[dict, list[str]]:
    """(every figure of one checkpoint on `rows`: reward means with intervals, then the decision skill;
    its theses). `drafts`: the previous checkpoint's theses, to decode from (generation.generate_texts)."""
    theses = D.generate_for(model, rows, config, drafts=drafts)
    scored = with_row_fields(score_with_s(theses, rows), rows)
    out: dict = {"skill": decision_skill(scored, majority=majority, seed=config.seed)}
    for key in CURVE_KEYS:
        vals = [float(s[key]) for s in scored if isinstance(s.get(key), (int, float)) and math.isfinite(s[key])]
        m, lo, hi, n = mean_ci(vals, seed=config.seed)
        out[key] = {"mean": m, "lo": lo, "hi": hi, "n": n} if n else None
    return out, theses


def run_seed(demo_out: Path, seed: int, args: argparse.Namespace, config: D.DemoConfig) -> list[tuple[int, Path]]:
    """GRPO from the demo's SFT checkpoint for one seed; (step, checkpoint dir) of every saved step."""
    from thesisgym.train import CompactProgress, RewardConfig, run_grpo

    run_dir = demo_out / "curve" / f"seed{seed}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    cfg = D.grpo_config(config.model_copy(update={"grpo_steps": args.steps}), demo_out / "sft" / "final",
                        demo_out / "dataset", run_dir,
                        RewardConfig(funcs=list(D.DEMO_REWARDS), weights=list(D.DEMO_REWARDS.values())), seed=seed)
    run_grpo(cfg.model_copy(update={"save_steps": args.every}), callbacks=[CompactProgress(label=f"GRPO seed {seed}")])
    steps = sorted(int(p.name.split("-")[1]) for p in run_dir.glob("checkpoint-*"))
    return [(k, run_dir / f"checkpoint-{k}") for k in steps]


def table_lines(points: list[dict]) -> list[str]:
    """The markdown table: one row per (seed, step)."""
    head = ["seed", "step", "decision reward", "grounding", "hallucination", "IC pooled", "IC per date",
            "neutral book / date", "accuracy", "acc - always BUY", "decision mix"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in sorted(points, key=lambda p: (p["seed"], p["step"])):
        cells = skill_cells(p["skill"])
        def ci(key: str, p: dict = p, **kw) -> str:
            c = p.get(key)
            return fmt_interval(c["mean"], c["lo"], c["hi"], **kw) if c else "n/a"
        lines.append("| " + " | ".join([str(p["seed"]), str(p["step"]), ci("decision"), ci("grounding"),
                                        ci("hallucination_rate", pct=True), cells[2], cells[3], cells[4], cells[5],
                                        cells[7], cells[8]]) + " |")
    return lines


def plot(points: list[dict], path: Path) -> None:
    """Decision reward, IC pooled and grounding against step, one line per seed (intervals shaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("decision reward", lambda p: (p["decision"]["mean"], p["decision"]["lo"], p["decision"]["hi"])),
              ("IC pooled", lambda p: (p["skill"]["ic"], p["skill"]["ic_lo"], p["skill"]["ic_hi"])),
              ("grounding", lambda p: (p["grounding"]["mean"], p["grounding"]["lo"], p["grounding"]["hi"]))]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (name, get) in zip(axes, panels, strict=True):
        for seed in sorted({p["seed"] for p in points}):
            pts = sorted((p for p in points if p["seed"] == seed), key=lambda p: p["step"])
            xs = [p["step"] for p in pts]
            m, lo, hi = zip(*(get(p) for p in pts), strict=True)
            ax.plot(xs, m, marker="o", label=f"seed {seed}")
            ax.fill_between(xs, lo, hi, alpha=0.12)
        ax.set_xlabel("GRPO step")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"GRPO from the demo's SFT checkpoint: {points[0]['skill'].get('rows', 0):.0f} test rows, "
                 f"{points[0]['skill'].get('dates', 0):.0f} dates (95 % intervals)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("demo_out", type=Path)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--temperature", type=float, default=None, help="GRPO sampling temperature (default: the demo's)")
    ap.add_argument("--out", type=Path, default=Path("docs/experiments/grpo_curve"))
    args = ap.parse_args()
    if not (args.demo_out / "sft" / "final").is_dir() or not (args.demo_out / "dataset").is_dir():
        raise SystemExit(f"{args.demo_out}: not a finished demo run (needs sft/final and dataset/)")
    import datasets

    config = D.DemoConfig(out=str(args.demo_out))
    if args.temperature is not None:
        config = config.model_copy(update={"grpo_temperature": args.temperature})
    splits = datasets.load_from_disk(str(args.demo_out / "dataset"))
    rows = D.rows_by_date(splits["test"], args.rows, per_date=config.eval_per_date)
    majority = train_majority(splits["train"])
    t0 = time.perf_counter()
    start, start_theses = score_checkpoint(args.demo_out / "sft" / "final", rows, config, majority)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    points = [{"seed": s, "step": 0, **start} for s in seeds]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        theses = start_theses
        for step, ckpt in run_seed(args.demo_out, seed, args, config):
            figures, theses = score_checkpoint(ckpt, rows, config, majority, drafts=theses)
            points.append({"seed": seed, "step": step, **figures})
            shutil.rmtree(ckpt)
            print(f"seed {seed} step {step}: decision {points[-1]['decision']['mean']:.3f}, "
                  f"IC {points[-1]['skill'].get('ic', math.nan):.3f}, grounding {points[-1]['grounding']['mean']:.3f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
            save(points, args, seeds, rows, time.perf_counter() - t0)  # a stopped run keeps what it scored
    plot(points, args.out.with_suffix(".png"))
    print("\n".join(table_lines(points)))
    return 0


def save(points: list[dict], args: argparse.Namespace, seeds: list[int], rows: list[dict], seconds: float) -> None:
    """OUT.json (every figure) and OUT.md (the table) of the points scored so far."""
    meta = {"demo_out": str(args.demo_out), "seeds": seeds, "steps": args.steps, "every": args.every,
            "temperature": args.temperature,
            "rows": len(rows), "dates": len({str(r["asof"])[:10] for r in rows}), "seconds": round(seconds)}
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "points": points}, indent=2, default=str))
    args.out.with_suffix(".md").write_text("\n".join(table_lines(points)) + "\n")


if __name__ == "__main__":
    sys.exit(main())
