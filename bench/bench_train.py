"""Benchmark: our SFT and GRPO paths against a plain PyTorch loop, on the same examples and model.

    python bench/bench_train.py [--model smollm2-135m] [--examples 8] [--threads 1] [--grpo-steps 2]

Each path runs in its own process (so its peak RSS is its own) on the demo's distilled theses
(synthetic market -> template teacher -> rejection filter), one example per step:
- plain: the loop a researcher writes first: `model(input_ids, labels=labels).loss` (logits for every
  position), AdamW, bf16 autocast where the CPU has native bf16, else float32;
- sft: `thesisgym.train.sft.build_sft_trainer` (TRL SFTTrainer with our CPU defaults and compact head);
- sft-trl-head: the same with TRL's own fused head (what our path did before), for the head's share;
- grpo: `build_grpo_trainer` (TRL GRPOTrainer, 4 generations per prompt, the demo's reward stack).
Printed per path: tokens per second of wall time and per CPU-second (CPU time is the steadier figure on
a shared machine), the first step excluded as warm-up, and peak RSS; then our SFT path over the plain
loop (target >= 0.8x).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_data(out: Path, examples: int) -> tuple[Path, Path]:
    """(distilled SFT set, context dataset) of the default demo's market, `examples` rows each."""
    from datasets import DatasetDict

    from thesisgym.experiments.demo import DemoConfig, build_market_data, distil_sft_data

    cfg = DemoConfig(out=str(out))
    _, splits, data_dir = build_market_data(cfg, out, log=lambda _m: None)
    sft_dir, _ = distil_sft_data(cfg, splits, out, log=lambda _m: None)
    import datasets

    sft = datasets.load_from_disk(str(sft_dir))["train"].select(range(examples))
    DatasetDict({"train": sft}).save_to_disk(str(out / "bench_sft"))
    return out / "bench_sft", data_dir


class StepClock:
    """A TRL callback timing each optimizer step in wall and process CPU seconds."""

    def __init__(self):
        from transformers import TrainerCallback

        clock = self

        class _CB(TrainerCallback):
            def on_step_begin(self, *a, **k):
                clock.t = (time.perf_counter(), time.process_time())

            def on_step_end(self, *a, **k):
                clock.steps.append((time.perf_counter() - clock.t[0], time.process_time() - clock.t[1]))

        self.steps: list[tuple[float, float]] = []
        self.callback = _CB()


def run_plain(model_name: str, sft_dir: str) -> dict:
    import datasets
    import torch

    from thesisgym.train.config import cpu_has_bf16
    from thesisgym.train.models import load_model

    model, tok = load_model(model_name)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    bf16 = cpu_has_bf16()
    steps, tokens = [], []
    for row in datasets.load_from_disk(sft_dir)["train"]:
        prompt = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        full = tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        ids = torch.tensor([tok(full, add_special_tokens=False)["input_ids"]])
        labels = ids.clone()
        labels[:, : len(tok(prompt, add_special_tokens=False)["input_ids"])] = -100
        t = (time.perf_counter(), time.process_time())
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        steps.append((time.perf_counter() - t[0], time.process_time() - t[1]))
        tokens.append(ids.shape[1])
    return {"steps": steps, "tokens": tokens, "bf16": bf16}


def run_sft_path(model_name: str, sft_dir: str, out: str, *, trl_head: bool) -> dict:
    import datasets

    from thesisgym.train import cpu_head
    from thesisgym.train.config import SFTRunConfig
    from thesisgym.train.sft import build_sft_trainer

    if trl_head:  # what the path did before: TRL's fused head scores every position on CPU
        cpu_head.use_compact_head = lambda *a, **k: False
    n = len(datasets.load_from_disk(sft_dir)["train"])
    cfg = SFTRunConfig(output_dir=out, model={"name_or_path": model_name}, data={"dataset": sft_dir},
                       max_steps=n, per_device_train_batch_size=1, learning_rate=5e-5, report_to="none",
                       save_steps=10_000, logging_steps=1)
    trainer, tok, _ = build_sft_trainer(cfg)
    clock = StepClock()
    trainer.add_callback(clock.callback)
    trainer.train()
    lengths = [len(x) for x in trainer.train_dataset["input_ids"]][: len(clock.steps)]
    return {"steps": clock.steps, "tokens": lengths, "bf16": bool(trainer.args.bf16)}


def run_grpo_path(model_name: str, data_dir: str, out: str, steps: int) -> dict:
    from thesisgym.experiments.demo import DEMO_REWARDS
    from thesisgym.train.config import GRPORunConfig, RewardConfig
    from thesisgym.train.grpo import build_grpo_trainer

    cfg = GRPORunConfig(output_dir=out, model={"name_or_path": model_name}, data={"dataset": data_dir},
                        max_steps=steps, per_device_train_batch_size=4, num_generations=4, max_completion_length=256,
                        learning_rate=1e-6, report_to="none", save_steps=10_000, logging_steps=1,
                        rewards=RewardConfig(funcs=list(DEMO_REWARDS), weights=list(DEMO_REWARDS.values())))
    trainer, _, _ = build_grpo_trainer(cfg)
    clock = StepClock()
    trainer.add_callback(clock.callback)
    generate = _time_calls(trainer.model, "generate")
    rewards = _time_calls(trainer, "_calculate_rewards")
    trainer.train()
    logs = [h for h in trainer.state.log_history if "num_tokens" in h]
    total_tokens = logs[-1]["num_tokens"] if logs else 0
    per_step = total_tokens / max(1, len(clock.steps))
    wall = sum(s[0] for s in clock.steps)
    return {"steps": clock.steps, "tokens": [per_step] * len(clock.steps), "bf16": bool(trainer.args.bf16),
            "completion_len": [h.get("completions/mean_length") for h in logs],
            "generate_share": generate[0] / wall, "reward_share": rewards[0] / wall}


def _time_calls(obj, name: str) -> list[float]:
    """Wrap `obj.name` so the returned one-item list accumulates the wall seconds spent inside it."""
    spent = [0.0]
    fn = getattr(obj, name)

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    setattr(obj, name, timed)
    return spent


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    if args.path == "plain":
        res = run_plain(args.model, args.sft_dir)
    elif args.path in ("sft", "sft-trl-head"):
        res = run_sft_path(args.model, args.sft_dir, args.out, trl_head=args.path == "sft-trl-head")
    else:
        res = run_grpo_path(args.model, args.data_dir, args.out, args.grpo_steps)
    res["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print("RESULT " + json.dumps(res))


def summarise(res: dict) -> dict:
    steps, tokens = res["steps"][1:], res["tokens"][1:]  # the first step pays for lazy init
    n = sum(tokens)
    out = {"wall_tok_s": n / sum(s[0] for s in steps), "cpu_tok_s": n / sum(s[1] for s in steps),
           "steps": len(steps), "tokens": n, "peak_rss_gib": res["peak_rss_gib"], "bf16": res["bf16"]}
    return out | {k: res[k] for k in ("generate_share", "reward_share", "completion_len") if k in res}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--examples", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--paths", default="plain,sft,sft-trl-head,grpo")
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--sft-dir", help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.path:
        return child(args)

    from thesisgym.train.models import load_tokenizer

    load_tokenizer(args.model)  # resolve a preset once, outside the timed children
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    sft_dir, data_dir = make_data(tmp, args.examples)
    print(f"model {args.model}, {args.examples} distilled demo examples, 1 example per step, {args.threads} thread(s)")
    results = {}
    for path in args.paths.split(","):
        cmd = [sys.executable, __file__, "--path", path, "--model", args.model, "--sft-dir", str(sft_dir),
               "--data-dir", str(data_dir), "--out", str(tmp / path), "--threads", str(args.threads),
               "--grpo-steps", str(args.grpo_steps)]
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{path}: failed\n{done.stderr[-2000:]}")
            continue
        results[path] = summarise(json.loads(line[7:]))
        r = results[path]
        print(f"{path:13s} {r['wall_tok_s']:7.1f} tok/s wall  {r['cpu_tok_s']:7.1f} tok/CPU-s  "
              f"peak RSS {r['peak_rss_gib']:.2f} GiB  bf16 {r['bf16']}  ({r['steps']} timed steps, {r['tokens']:.0f} tokens)")
        if "generate_share" in r:
            print(f"{'':13s} generation {r['generate_share']:.0%} of the step, rewards {r['reward_share']:.1%}")
    if "plain" in results and "sft" in results:
        p, s = results["plain"], results["sft"]
        print(f"our SFT path / plain loop: {s['wall_tok_s'] / p['wall_tok_s']:.2f}x wall, "
              f"{s['cpu_tok_s'] / p['cpu_tok_s']:.2f}x CPU (target >= 0.8x)")
    if "sft-trl-head" in results and "sft" in results:
        print(f"compact head vs TRL's fused head on CPU: "
              f"{results['sft']['cpu_tok_s'] / results['sft-trl-head']['cpu_tok_s']:.2f}x CPU")
    (tmp / "bench_train.json").write_text(json.dumps(results, indent=2))
    print(f"(run dir {tmp})")


if __name__ == "__main__":
    main()
