"""Which teacher layout a small model learns to read and decide from: held-out grounding and decision
skill after SFT, per layout.

Distils the demo's SFT set with each `TemplateTeacher(layout=...)` (optionally with the tally
conclusion, `+tally`, and bullets on each section's first item, `+first`) from one built demo dataset,
runs the demo's SFT (`experiments.demo.train_sft`: the same steps, rate and held-out curve on the same
val rows), and prints per arm the curve points: grounding, hallucination rate, valid decisions and
evidence reward after each number of SFT examples, with the distillation acceptance and SFT wall time.
With `--test-rows N` the SFT checkpoint also writes theses for the demo's N evaluation rows of the test
split (two tickers per date, greedy, as the demo's SFT-vs-GRPO table) and the arm's decision skill is
printed: IC with its date-block interval, accuracy against always-BUY and the train majority (paired),
the decision mix, grounding and hallucination. docs/training.md, sections 5g and 5h hold the figures.

    thesisgym demo --out demo_out                      # or any earlier demo run: only its dataset is read
    PYTHONPATH=src python bench/sft_layout.py demo_out [--arms opinion,id,id+tally+first] [--sft-steps 32] \
        [--test-rows 80]

Each arm trains a model (about 9-11 minutes each for SmolLM2-135M on 2 cores): run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import datasets

from thesisgym.experiments import demo as D


def run_arm(arm: str, dataset: Path, out: Path, steps: int, test_rows: int) -> dict:
    """Distil + SFT with the teacher of `arm` ("<layout>[+tally][+first]"); the curve points and, with
    `test_rows`, the checkpoint's decision skill on that many test rows."""
    layout, *flags = arm.split("+")
    unknown = set(flags) - {"tally", "first"}
    if unknown:
        raise SystemExit(f"--arms: unknown flag(s) {sorted(unknown)} in {arm!r} (known: tally, first)")
    config = D.DemoConfig(out=str(out), sft_steps=steps)
    stored = datasets.load_from_disk(str(dataset))
    splits = {name: stored[name] for name in stored}
    sft_dir, stats = D.distil_sft_data(config, splits, out, log=lambda _: None, layout=layout,
                                       conclusion="tally" if "tally" in flags else "prose",
                                       pick="first" if "first" in flags else "random")
    start = time.perf_counter()
    model, curve = D.train_sft(config, splits, sft_dir, out / "sft", log=lambda _: None)
    keys = ("examples_seen", "grounding", "hallucination_rate", "decision_valid", "evidence")
    result = {"arm": arm, "acceptance": stats["acceptance_rate"], "sft_seconds": round(time.perf_counter() - start),
              "points": [{k: p[k] for k in keys} for p in (curve.points if curve else [])]}
    if test_rows:
        rows = D.rows_by_date(splits["test"], test_rows, per_date=config.eval_per_date)
        theses = D.generate_for(model, rows, config)
        (out / "test_theses.json").write_text(json.dumps(
            [{"ticker": r["ticker"], "asof": str(r["asof"]), "label": r["label"], "thesis": t}
             for r, t in zip(rows, theses, strict=True)], indent=1))
        result["test"] = decision_skill(theses, rows, splits["train"], config.seed)
    return result


def decision_skill(theses: list[str], rows: list[dict], train: object, seed: int) -> dict:
    """IC (pooled, per date, with intervals), paired accuracy against always-BUY and the train majority,
    decision mix, grounding and hallucination of `theses` on `rows`."""
    from collections import Counter

    from thesisgym.evaluate.policies import decision_of
    from thesisgym.evaluate.skill import Sample, paired_accuracy, skill_measures
    from thesisgym.evaluate.stats import rate_block
    from thesisgym.experiments import score_with_s
    from thesisgym.schema import REWARD_HORIZON

    decisions = [decision_of(t) for t in theses]
    dates = [r["asof"] for r in rows]
    block = rate_block(dates, REWARD_HORIZON)
    sample = Sample(dates, [r.get("fwd_return") for r in rows], [r.get("fwd_vol") for r in rows])
    majority = Counter(train["label"]).most_common(1)[0][0]
    labels = [r["label"] for r in rows]
    out = skill_measures(decisions, sample, block=block, seed=seed)
    out.update(paired_accuracy(decisions, labels, dates, {"always_BUY": ["BUY"] * len(rows),
                                                          f"majority_{majority}": [majority] * len(rows)},
                               block=block, seed=seed))
    scored = score_with_s(theses, rows)
    for key in ("grounding", "hallucination_rate"):
        out[key] = sum(s[key] for s in scored) / len(scored)
    out["mix"] = D.decision_mix_text(decisions)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_out", type=Path, help="a demo output folder (its dataset/ is read)")
    parser.add_argument("--arms", default="opinion,id,id+tally+first",
                        help="layouts (opinion|quote|id), each optionally with '+tally' and '+first'")
    parser.add_argument("--sft-steps", type=int, default=32)
    parser.add_argument("--test-rows", type=int, default=0, help="test rows to measure decision skill on (0: none)")
    parser.add_argument("--out", type=Path, default=Path("sft_layout_out"))
    args = parser.parse_args()
    dataset = args.demo_out / "dataset"
    if not dataset.is_dir():
        raise SystemExit(f"{dataset}: no demo dataset there (run `thesisgym demo --out {args.demo_out}` first)")
    results = []
    for arm in args.arms.split(","):
        result = run_arm(arm.strip(), dataset, args.out / arm.strip().replace("+", "_"), args.sft_steps,
                         args.test_rows)
        results.append(result)
        for p in result["points"]:
            print(f"{result['arm']:>12}  after {p['examples_seen']:3d} examples: grounding {p['grounding']:.3f}, "
                  f"hallucination {p['hallucination_rate']:.3f}, valid decisions {p['decision_valid']:.0%}, "
                  f"evidence {p['evidence']:.3f}", flush=True)
        print(f"{result['arm']:>12}  acceptance {result['acceptance']:.0%}, SFT {result['sft_seconds']} s", flush=True)
        if "test" in result:
            t = result["test"]
            print(f"{result['arm']:>12}  test {t['rows']:.0f} rows / {t['dates']:.0f} dates: IC {t['ic']:.3f} "
                  f"[{t['ic_lo']:.3f}, {t['ic_hi']:.3f}], per date {t['ic_date']:.3f} [{t['ic_date_lo']:.3f}, "
                  f"{t['ic_date_hi']:.3f}]; accuracy {t['accuracy']:.1%}, minus always-BUY "
                  f"{t['acc_vs_always_BUY']:+.1%} [{t['acc_vs_always_BUY_lo']:+.1%}, {t['acc_vs_always_BUY_hi']:+.1%}]; "
                  f"mix {t['mix']}; grounding {t['grounding']:.3f}, hallucination {t['hallucination_rate']:.3f}",
                  flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
