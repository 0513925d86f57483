"""torch intra-op threads for small models on CPU: 1 vs 2 threads, idle and with one core kept busy.

Why: `thesisgym demo --size quick` took 28 min instead of ~2 on a 2-core machine where another job
used one core; torch's default (one thread per core) made generation ~12x slower there. The CLI
now defaults to 1 thread on CPU for small models (thesisgym.cli.common.choose_threads); this bench
is the measurement behind that default. It builds randomly initialised Qwen2 models of the tiny
preset's shape and larger (no download: the weights do not change the arithmetic), then times, in
one process and interleaved (so drift in the machine's load hits every arm alike):

- generation: `generate` of NEW tokens after a PROMPT-token prompt, batch 1 and batch 8 (greedy,
  forced length), the shape of evaluation and of GRPO's sampling;
- an SFT step: forward + backward at batch 4 x 512 tokens.

"busy" starts a second process spinning on one core for the duration of the arm (another job on
the machine). Prints seconds per arm and the ratio 2 threads / 1 thread; > 1 means 1 thread wins.

    OMP_NUM_THREADS= python bench/bench_threads.py [--sizes tiny,small,medium] [--repeats 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

PROMPT, NEW = 300, 64
SHAPES = {  # name -> (hidden, layers, heads, kv heads, intermediate, vocab)
    "tiny": (192, 4, 4, 2, 512, 4096),  # the tiny preset (~3.5M parameters with its vocabulary)
    "small": (512, 8, 8, 4, 1408, 8192),  # ~30M
    "medium": (1024, 12, 16, 4, 2816, 16384),  # ~150M
}


def spin(stop) -> None:  # pragma: no cover - runs in the busy process
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def build(shape: tuple[int, ...]):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    h, layers, heads, kv, inter, vocab = shape
    cfg = Qwen2Config(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                      intermediate_size=inter, vocab_size=vocab, max_position_embeddings=2048, tie_word_embeddings=True)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).eval()


def time_generate(model, batch: int) -> float:
    import torch

    ids = torch.randint(10, model.config.vocab_size, (batch, PROMPT))
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, min_new_tokens=NEW,
                       do_sample=False, pad_token_id=0)
    return time.perf_counter() - t0


def time_sft_step(model) -> float:
    import torch

    model.train()
    ids = torch.randint(10, model.config.vocab_size, (4, 512))
    t0 = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    model.eval()
    return time.perf_counter() - t0


def arm(fn, threads: int, busy: bool, repeats: int) -> float:
    """Median seconds of `fn()` with `threads` intra-op threads, with or without a spinning neighbour."""
    import torch

    torch.set_num_threads(threads)
    stop = mp.Event()
    proc = mp.Process(target=spin, args=(stop,)) if busy else None
    if proc is not None:
        proc.start()
        time.sleep(0.5)  # let the neighbour take its core
    try:
        fn()  # warm-up
        return statistics.median(fn() for _ in range(repeats))
    finally:
        if proc is not None:
            stop.set()
            proc.join()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="tiny,small,medium")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"cpus {os.cpu_count()}, load average before {os.getloadavg()[0]:.2f}; prompt {PROMPT} tokens, {NEW} new")
    print(f"{'model':<8}{'params':>8} {'work':<14}{'load':<6}{'1 thread':>10}{'2 threads':>11}{'2t / 1t':>9}")
    for name in args.sizes.split(","):
        model = build(SHAPES[name])
        params = sum(p.numel() for p in model.parameters())
        work = {"generate b1": lambda m=model: time_generate(m, 1), "generate b8": lambda m=model: time_generate(m, 8),
                "SFT step b4": lambda m=model: time_sft_step(m)}
        for what, fn in work.items():
            for busy in (False, True):
                one = arm(fn, 1, busy, args.repeats)
                two = arm(fn, 2, busy, args.repeats)
                print(f"{name:<8}{params / 1e6:>7.1f}M {what:<14}{'busy' if busy else 'idle':<6}{one:>9.2f}s"
                      f"{two:>10.2f}s{two / one:>9.2f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f} (the machine is shared: compare ratios within a row)")


if __name__ == "__main__":
    main()
