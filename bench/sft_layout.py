"""Which teacher layout a small model learns to read: held-out grounding after SFT, per layout.

Distils the demo's SFT set with each `TemplateTeacher(layout=...)` (and optionally the tally
conclusion) from one built demo dataset, runs the demo's SFT (`experiments.demo.train_sft`: the same
steps, rate and held-out curve on the same val rows), and prints per arm the curve points: grounding,
hallucination rate, valid decisions and evidence reward after each number of SFT examples, with the
distillation acceptance and SFT wall time. docs/training.md, section 5g holds the figures.

    thesisgym demo --out demo_out                      # or any earlier demo run: only its dataset is read
    PYTHONPATH=src python bench/sft_layout.py demo_out [--arms opinion,id,id+tally] [--sft-steps 32]

Each arm trains a model (about 9-11 minutes each for SmolLM2-135M on 2 cores): run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import datasets

from thesisgym.experiments import demo as D


def run_arm(arm: str, dataset: Path, out: Path, steps: int) -> dict:
    """Distil + SFT with the teacher of `arm` ("<layout>" or "<layout>+tally"); the curve points."""
    layout, _, conclusion = arm.partition("+")
    config = D.DemoConfig(out=str(out), sft_steps=steps)
    stored = datasets.load_from_disk(str(dataset))
    splits = {name: stored[name] for name in stored}
    sft_dir, stats = D.distil_sft_data(config, splits, out, log=lambda _: None, layout=layout,
                                       conclusion=conclusion or "prose")
    start = time.perf_counter()
    _, curve = D.train_sft(config, splits, sft_dir, out / "sft", log=lambda _: None)
    keys = ("examples_seen", "grounding", "hallucination_rate", "decision_valid", "evidence")
    return {"arm": arm, "acceptance": stats["acceptance_rate"], "sft_seconds": round(time.perf_counter() - start),
            "points": [{k: p[k] for k in keys} for p in (curve.points if curve else [])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_out", type=Path, help="a demo output folder (its dataset/ is read)")
    parser.add_argument("--arms", default="opinion,id,id+tally", help="layouts (opinion|quote|id), '+tally' optional")
    parser.add_argument("--sft-steps", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("sft_layout_out"))
    args = parser.parse_args()
    dataset = args.demo_out / "dataset"
    if not dataset.is_dir():
        raise SystemExit(f"{dataset}: no demo dataset there (run `thesisgym demo --out {args.demo_out}` first)")
    results = []
    for arm in args.arms.split(","):
        result = run_arm(arm.strip(), dataset, args.out / arm.strip().replace("+", "_"), args.sft_steps)
        results.append(result)
        for p in result["points"]:
            print(f"{result['arm']:>12}  after {p['examples_seen']:3d} examples: grounding {p['grounding']:.3f}, "
                  f"hallucination {p['hallucination_rate']:.3f}, valid decisions {p['decision_valid']:.0%}, "
                  f"evidence {p['evidence']:.3f}", flush=True)
        print(f"{result['arm']:>12}  acceptance {result['acceptance']:.0%}, SFT {result['sft_seconds']} s", flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
