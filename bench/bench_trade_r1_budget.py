"""What `thesisgym experiment trade-r1` costs before anyone runs it: one GRPO step of each arm, timed.

Builds the experiment's markets A and B (the `--preset` knobs), distils the SFT set, trains a short SFT
start (`--sft-steps`, the full run trains the size's 32), then runs ONE GRPO step of every shipped arm
from that start and writes greedy theses for `--gen-rows` of A's held-out rows. Prints each stage's
seconds, each arm's step time and its ratio to market_only's (the baseline, measured in the same run),
and the estimate of the full run (3 seeds x 4 arms x `--grpo-steps` steps, 3 held-out sets of
`--eval-rows` rows each):

    markets + distil + SFT(32 steps)
      + seeds x sum over arms (load/save + steps x step + 3 x (checkpoint load + eval_rows x per-row))

(the backtest of each set's decisions is left out: seconds against minutes).

The short SFT start writes longer, less compact theses than the 32-step one, so its GRPO steps and its
generation per row are, if anything, slower than the full run's: the estimate leans high.

    PYTHONPATH=src python bench/bench_trade_r1_budget.py [--threads 2] [--preset reading]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _seconds(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _train_runtime(run_dir: Path) -> float:
    """Seconds the trainer's loop took (its own `train_runtime`), without loading and saving the model."""
    logs = json.loads((run_dir / "log_history.json").read_text())
    return float(next(e["train_runtime"] for e in reversed(logs) if "train_runtime" in e))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--preset", default="reading")
    ap.add_argument("--size", default="default")
    ap.add_argument("--sft-steps", type=int, default=2, help="SFT steps of the timed start")
    ap.add_argument("--gen-rows", type=int, default=4, help="held-out rows whose greedy theses are timed")
    ap.add_argument("--grpo-steps", type=int, default=None, help="steps per arm-seed of the estimated run")
    ap.add_argument("--eval-rows", type=int, default=None, help="rows per held-out set of the estimated run")
    ap.add_argument("--arms", default=None, help="comma-separated arms to time (default: every shipped arm; the "
                                                 "estimate counts each untimed arm at market_only's step time)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import datasets
    import torch

    from thesisgym.experiments.compare import score_with_s
    from thesisgym.experiments.demo import (
        DemoConfig,
        build_market_data,
        distil_sft_data,
        generate_for,
        grpo_config,
    )
    from thesisgym.experiments.demo import train_sft as sft
    from thesisgym.experiments.trade_r1 import ARMS, TradeR1Config, _eval_sets, arm_rewards
    from thesisgym.train import run_grpo

    torch.set_num_threads(args.threads)
    datasets.disable_progress_bars()
    cfg = TradeR1Config(size=args.size, preset=args.preset,
                        **{k: v for k, v in (("grpo_steps", args.grpo_steps), ("eval_rows", args.eval_rows)) if v})
    out = Path(args.out or tempfile.mkdtemp(prefix="trade_r1_budget_"))
    full = DemoConfig.sized(cfg.size, seed=cfg.seed, grpo_steps=1, curve_rows=0, out=str(out))
    demo = full.model_copy(update={"sft_steps": args.sft_steps})
    quiet = lambda _line: None  # noqa: E731
    t: dict[str, float] = {}
    (store_a, splits_a, data_a), t["market A"] = _seconds(build_market_data, demo, out / "A", market="A",
                                                          preset=cfg.preset, log=quiet)
    (_, splits_b, _), t["market B"] = _seconds(build_market_data, demo, out / "B", market="B", preset=cfg.preset,
                                               log=quiet)
    (sft_dir, _), t["distil"] = _seconds(distil_sft_data, demo, splits_a, out / "A", log=quiet)
    (start, _), t[f"SFT {args.sft_steps} steps"] = _seconds(sft, demo, splits_a, sft_dir, out / "sft", log=quiet)
    sft_loop = _train_runtime(out / "sft")
    arms: dict[str, dict[str, float]] = {}
    final = None
    timed = args.arms.split(",") if args.arms else list(ARMS)
    if "market_only" not in timed:
        timed.insert(0, "market_only")  # the baseline of the ratios
    for arm in timed:
        run_cfg = grpo_config(demo, start, data_a, out / "arms" / arm, arm_rewards(arm), seed=0)
        final, wall = _seconds(run_grpo, run_cfg)
        step = _train_runtime(out / "arms" / arm)
        arms[arm] = {"wall": wall, "step": step, "overhead": wall - step}
    rows = _eval_sets(store_a, splits_a, splits_b, args.gen_rows)["A"]
    _, gen_one = _seconds(generate_for, final, rows[:1], demo)  # loading the checkpoint + one thesis
    comps, gen = _seconds(generate_for, final, rows, demo)
    _, score = _seconds(score_with_s, comps, rows)
    per_row = (gen - gen_one) / max(1, len(rows) - 1) + score / len(rows)
    load = max(0.0, gen_one - (gen - gen_one) / max(1, len(rows) - 1))

    sft_full = t[f"SFT {args.sft_steps} steps"] + sft_loop * (full.sft_steps / args.sft_steps - 1)
    per_seed = sum(a["overhead"] + cfg.grpo_steps * a["step"] + 3 * (load + cfg.eval_rows * per_row)
                   for a in (arms.get(arm, arms["market_only"]) for arm in cfg.arms))
    total = t["market A"] + t["market B"] + t["distil"] + sft_full + len(cfg.seeds) * per_seed
    base = arms["market_only"]["step"]
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.1f} at the end, this process's CPU time "
          f"{(cpu.ru_utime + cpu.ru_stime) / 60:.1f} min; preset {cfg.preset}, "
          f"size {cfg.size} ({full.model})")
    for k, v in t.items():
        print(f"{k:<24}{v:>8.1f} s")
    print(f"{'arm':<14}{'1 GRPO step':>12}{'load+save':>11}{'vs market_only':>16}")
    for arm, a in arms.items():
        print(f"{arm:<14}{a['step']:>10.1f} s{a['overhead']:>9.1f} s{a['step'] / base:>15.2f}x")
    print(f"greedy thesis + scoring: {per_row:.1f} s per row ({len(rows)} rows), checkpoint load {load:.1f} s")
    print(f"estimate of the full run ({len(cfg.arms)} arms x {len(cfg.seeds)} seeds x {cfg.grpo_steps} steps, "
          f"3 x {cfg.eval_rows} eval rows): SFT {sft_full / 60:.1f} min, per seed of all arms {per_seed / 60:.1f} min, "
          f"total {total / 60:.0f} min")


if __name__ == "__main__":
    main()
