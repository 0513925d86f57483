"""Held-out grounding of the tiny policy vs SFT examples seen, for one data/tokenizer/model setting.

    python bench/bench_grounding_curve.py --out /tmp/curve [--teacher compact|random] [--tokenizer copy|bpe]
        [--steps 120] [--batch 4] [--every 40] [--rows 12] [--hidden 192] [--layers 4] [--threads 1]

Builds the demo's market A, embargoed splits and template-teacher SFT set (`thesisgym.experiments.demo` stage
functions; `--teacher random` = quotes from a random place with the id after the quote, the old demo
data; `compact` = the id first and the quote from the start of the body), SFTs a fresh tiny model
(`--tokenizer copy` = one token per digit and quote marks apart, `bpe` = plain byte-level BPE) and
scores greedy theses for `--rows` held-out test rows every `--every` steps with the shared verifier
(`thesisgym.train.curves.GroundingCurve`). Prints one JSON line per point and the wall time;
the points are also in `<out>/curve.json`. Baseline in the same run: the teacher's own grounding
on those rows is 1 by construction (rejection-filtered), the untrained model's is the first point.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--teacher", choices=("compact", "random"), default="compact")
    ap.add_argument("--tokenizer", choices=("copy", "bpe"), default="copy")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--rows", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    import datasets
    import torch
    from datasets import DatasetDict

    from thesisgym.experiments.demo import DemoConfig, build_market_data, distil_sft_data, spread
    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from thesisgym.train import DataConfig, ModelConfig, SFTRunConfig, run_sft
    from thesisgym.train.config import TinyConfig
    from thesisgym.train.curves import GroundingCurve

    torch.set_num_threads(a.threads)
    datasets.disable_progress_bars()
    out = Path(a.out)
    demo = DemoConfig(out=str(out))
    t0 = time.perf_counter()
    _, splits, _ = build_market_data(demo, out)
    if a.teacher == "compact":
        sft_dir, _ = distil_sft_data(demo, splits, out)
    else:  # the previous demo's data: random quote place, id after the quote
        teacher = TemplateTeacher(noise=0.15, wrong_decision_rate=0.2, seed=0, bullets=(1, 1), quote_words=(3, 8),
                                  think=False).calibrate(list(splits["train"]))
        result = distill(splits["train"], teacher, n=demo.distill_n, min_grounding=0.75, decision_tolerance=1, seed=0)
        sft_dir = out / "sft_data"
        DatasetDict({"train": result.dataset}).save_to_disk(str(sft_dir))
    test = splits["test"]
    rows = [test[i] for i in spread(len(test), a.rows)]
    cfg = SFTRunConfig(
        output_dir=str(out / "sft"),
        model=ModelConfig(tiny=TinyConfig(hidden_size=a.hidden, layers=a.layers, copy_tokens=a.tokenizer == "copy")),
        data=DataConfig(dataset=str(sft_dir)), max_steps=a.steps, learning_rate=a.lr, warmup_ratio=0.05,
        per_device_train_batch_size=a.batch, logging_steps=max(1, a.steps // 5), save_steps=10**6,
        report_to="none", max_length=2048,
    )
    curve = GroundingCurve(rows, every=a.every, max_new_tokens=demo.max_completion_length,
                           path=out / "curve.json", label=f"{a.teacher}/{a.tokenizer}")
    run_sft(cfg, callbacks=[curve])
    for p in curve.points:
        print(json.dumps({k: v for k, v in p.items() if k != "example"}))
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
