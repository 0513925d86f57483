"""Greedy decoding with the reserved KV cache against transformers' default (concatenating) cache.

transformers' DynamicLayer stores a layer's keys and values by concatenating a new copy of them for every
decoded token; `thesisgym.train.generation` hands `generate` a DynamicCache whose layers write each token
into storage reserved for the whole call (`_reserved_cache`). This script takes a finished `thesisgym demo
--out DEMO_OUT`, writes greedy theses for its evaluation rows with the SFT checkpoint four times, default /
reserved / default / reserved (alternating, since this machine's speed drifts within minutes), and prints
each wall time, the ratio of the summed times and how many theses the two caches share (all of them: the
attention reads views of the same values).

    PYTHONPATH=src python bench/bench_kv_cache.py DEMO_OUT [--rows 160] [--per-date 4] [--batch 32]
"""

from __future__ import annotations

import sys
import time

from bench_drafts import demo_parser, demo_rows

from thesisgym.train import generation
from thesisgym.train.generation import generate_theses
from thesisgym.train.models import load_model


def main(argv: list[str] | None = None) -> int:
    ap = demo_parser(__doc__)
    ap.add_argument("--checkpoint", default="sft/final", help="checkpoint under DEMO_OUT")
    args = ap.parse_args(argv)
    import torch

    rows = demo_rows(args, args.checkpoint)
    model, tok = load_model(str(args.demo_out / args.checkpoint))
    reserved = generation._reserved_cache
    if not reserved(model, 1):
        sys.exit("this transformers or model has no layered DynamicCache: nothing to compare")
    times: dict[str, list[float]] = {"default": [], "reserved": []}
    theses: dict[str, list[str]] = {}
    for name in ("default", "reserved", "default", "reserved"):
        generation._reserved_cache = reserved if name == "reserved" else (lambda *_a, **_k: {})
        t0 = time.perf_counter()
        theses[name] = generate_theses(model, tok, rows, max_new_tokens=args.max_new_tokens, batch_size=args.batch)
        times[name].append(time.perf_counter() - t0)
        print(f"{name:>8} cache: {times[name][-1]:7.1f} s", flush=True)
    generation._reserved_cache = reserved
    same = sum(a == b for a, b in zip(theses["default"], theses["reserved"], strict=True))
    print(f"{len(rows)} test rows on {len({str(r['asof'])[:10] for r in rows})} dates, {args.checkpoint}, batch "
          f"{args.batch}, greedy, torch threads {torch.get_num_threads()}")
    print(f"default {sum(times['default']):.1f} s, reserved {sum(times['reserved']):.1f} s: "
          f"speed-up {sum(times['default']) / sum(times['reserved']):.2f}x; identical theses {same} of {len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
