"""Benchmark: SFT and GRPO throughput of the tiny preset on CPU, and the reward stack's share of a GRPO step.

    python bench/bench_train.py [--rows 16] [--sft-steps 4] [--grpo-steps 2] [--threads 1]

Data: contexts built from the synthetic market (thesisgym.data.synth + thesisgym.build.splits) when
available, else hand-built toy rows; the SFT set is distilled from them with the TemplateTeacher.
Figures printed:
- SFT tokens/s (TRL's `num_tokens` / train time)
- GRPO generation tokens/s (completion tokens / time inside `model.generate`), update tokens/s
  (prompt+completion tokens / the rest of the step), and the reward stack's share of the step
  (time inside TRL's `_calculate_rewards`; target < 5 %)
- the prompt-length price of the copy-friendly tokenizer (one token per digit, quote marks apart)
  vs a plain byte-level BPE trained on the same corpus
- naive baselines measured in the same run: the tokenizer's compression vs raw bytes (what a
  byte-level model would have to process) and the GRPO step time with torch's default threads.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def contexts(rows: int):
    try:
        from thesisgym.build.splits import SplitConfig, build_splits
        from thesisgym.data.synth import SynthConfig, generate_market

        store = generate_market(SynthConfig(n_tickers=6, n_days=260, seed=0))
        dd = build_splits(store, SplitConfig(stride=5), show_progress=False)
        ds = dd["train"].filter(lambda r: r["label"] is not None)
        return ds.shuffle(seed=0).select(range(min(rows, len(ds)))), "synthetic market"
    except ImportError:
        from thesisgym.train.toy import toy_dataset

        return toy_dataset(rows), "toy rows"


class Timer:
    """Wrap a bound method and accumulate the seconds spent inside it."""

    def __init__(self, obj, name: str):
        self.total = 0.0
        self.calls = 0
        fn = getattr(obj, name)

        def wrapped(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.total += time.perf_counter() - t
                self.calls += 1

        setattr(obj, name, wrapped)


def grpo_once(config, threads: int | None) -> dict:
    import torch

    from thesisgym.train.grpo import build_grpo_trainer

    if threads:
        torch.set_num_threads(threads)
    trainer, _, _ = build_grpo_trainer(config)
    gen = Timer(trainer.model, "generate")
    rew = Timer(trainer, "_calculate_rewards")
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    n_completions = config.per_device_train_batch_size * config.gradient_accumulation_steps * len(logs)
    completion_tokens = sum(h["completions/mean_length"] for h in logs) * (n_completions / max(1, len(logs)))
    all_tokens = logs[-1]["num_tokens"] if logs else 0.0
    update = max(1e-9, total - gen.total - rew.total)
    return {"total_s": total, "generate_s": gen.total, "reward_s": rew.total, "update_s": update,
            "gen_tok_s": completion_tokens / max(1e-9, gen.total), "update_tok_s": all_tokens / update,
            "reward_share": rew.total / total, "steps": len(logs),
            "reward_mean": sum(h["reward"] for h in logs) / max(1, len(logs))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--sft-steps", type=int, default=4)
    ap.add_argument("--grpo-steps", type=int, default=2)
    ap.add_argument("--completion-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch
    from datasets import DatasetDict

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from thesisgym.train.config import build_config
    from thesisgym.train.sft import run_sft

    default_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    ctx, source = contexts(args.rows)
    DatasetDict({"train": ctx}).save_to_disk(str(tmp / "ctx"))
    teacher = TemplateTeacher()
    if len(ctx) >= 10:
        teacher.calibrate(ctx)
    res = distill(ctx, teacher, n=2, decision_tolerance=4, min_grounding=0.5, max_hallucination_rate=0.2)
    res.save(tmp / "sft_set")
    print(f"data: {len(ctx)} {source} contexts, distilled {res.stats['kept_rows']} theses "
          f"(acceptance {res.stats['acceptance_rate']:.0%})")

    sft_cfg = build_config({"output_dir": str(tmp / "sft"), "data": {"dataset": str(tmp / "sft_set")},
                            "max_steps": args.sft_steps, "per_device_train_batch_size": 4, "learning_rate": 1e-3,
                            "report_to": "none", "save_steps": 10_000, "max_length": 4096}, kind="sft")
    final = run_sft(sft_cfg)
    hist = json.loads((tmp / "sft" / "log_history.json").read_text())
    end = hist[-1]
    sft_tokens = max(h.get("num_tokens", 0) for h in hist)
    tiny_info = json.loads((tmp / "sft" / "tiny-base" / "thesisgym_tiny.json").read_text())
    print(f"tiny preset: {tiny_info['params'] / 1e6:.2f}M params, vocab {tiny_info['vocab_size']}")
    print(f"SFT : {sft_tokens / end['train_runtime']:,.0f} tokens/s "
          f"({sft_tokens:,.0f} tokens in {end['train_runtime']:.1f}s, {args.sft_steps} steps x 4 seqs)")

    from thesisgym.train.models import load_tokenizer

    tok = load_tokenizer(final)
    texts = list(ctx["prompt_text"])
    n_tok = sum(len(tok(t).input_ids) for t in texts)
    n_bytes = sum(len(t.encode()) for t in texts)
    print(f"tokenizer: {n_bytes / n_tok:.2f} bytes/token on prompts (mean {n_tok / len(texts):,.0f} tokens/prompt); "
          f"a byte-level model would process {n_bytes / n_tok:.1f}x more positions")
    # the price of copy-friendly tokens (digits one by one, quote marks apart) vs a plain byte-level BPE
    from thesisgym.train.common import corpus_of
    from thesisgym.train.models import build_tokenizer

    plain = build_tokenizer(corpus_of(res.dataset, max_rows=4000), copy_tokens=False)  # the SFT corpus, as the tiny preset
    n_plain = sum(len(plain(t).input_ids) for t in texts)
    print(f"copy tokens: {n_tok / n_plain:.2f}x the prompt tokens of a plain BPE ({n_plain / len(texts):,.0f} per prompt)")

    grpo = {"output_dir": str(tmp / "grpo"), "model": {"name_or_path": str(final)},
            "data": {"dataset": str(tmp / "ctx")}, "max_steps": args.grpo_steps, "per_device_train_batch_size": 4,
            "num_generations": 4, "max_completion_length": args.completion_length, "report_to": "none",
            "save_steps": 10_000, "rewards": {"funcs": ["fsr", "structure", "evidence", "decision", "market", "loop"],
                                              "weights": [1, 0.2, 0.2, 0.2, 0, 0.5]}}
    r = grpo_once(build_config(grpo, kind="grpo"), args.threads)
    print(f"GRPO: generation {r['gen_tok_s']:,.0f} completion tokens/s ({r['generate_s']:.1f}s), "
          f"update {r['update_tok_s']:,.0f} tokens/s ({r['update_s']:.1f}s), step {r['total_s'] / r['steps']:.1f}s")
    print(f"GRPO: reward stack (fsr with local consistency judge + 5 components + diagnostics) "
          f"{r['reward_s']:.2f}s = {r['reward_share']:.1%} of the step (target < 5%)")
    if default_threads != args.threads:
        grpo["output_dir"] = str(tmp / "grpo_default_threads")
        naive = grpo_once(build_config(grpo, kind="grpo"), default_threads)
        print(f"naive threads: torch default ({default_threads}) threads: step {naive['total_s'] / naive['steps']:.1f}s "
              f"vs {args.threads} thread(s) {r['total_s'] / r['steps']:.1f}s -> "
              f"ratio {naive['total_s'] / r['total_s']:.2f}x")
    print(f"(run dir {tmp})")


if __name__ == "__main__":
    main()
