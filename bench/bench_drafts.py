"""Greedy decoding from a parent checkpoint's theses as drafts, against plain batched decoding.

The demo writes greedy theses for the same held-out rows with its SFT checkpoint and then with the GRPO
checkpoint trained from it. After a few GRPO steps most GRPO theses are SFT's token for token, so
`generate_texts(..., drafts=sft_theses)` checks each SFT thesis in one teacher-forced pass and decodes
only from the first token GRPO would not have chosen. This script takes a finished `thesisgym demo
--out DEMO_OUT`, writes the SFT theses for its evaluation rows, then the GRPO theses both ways, back to
back, and prints the wall time of each, the speed-up, and how many theses and decisions the two ways
share (bf16 sums differ in order between a teacher-forced pass and one-token-at-a-time decoding, so a
near tie may break differently, as it may between two batch layouts of plain decoding; the script also
prints how many theses plain decoding changes when the rows come in another order).

    PYTHONPATH=src python bench/bench_drafts.py DEMO_OUT [--rows 160] [--per-date 4] [--batch 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from thesisgym.evaluate.policies import decision_of
from thesisgym.experiments import demo as D
from thesisgym.train.generation import generate_theses
from thesisgym.train.models import load_model


def demo_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a decoding bench on a finished demo run (this script's and bench_kv_cache.py's)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("demo_out", type=Path)
    ap.add_argument("--rows", type=int, default=160)
    ap.add_argument("--per-date", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=320)
    return ap


def demo_rows(args: argparse.Namespace, *needed: str) -> list[dict]:
    """The demo's evaluation rows (`--rows` test rows, `--per-date` per decision date) of `args.demo_out`,
    after checking that it holds `needed` (checkpoint folders); 2 torch threads at most."""
    import datasets
    import torch

    torch.set_num_threads(min(2, torch.get_num_threads()))
    for sub in ("dataset", *needed):
        if not (args.demo_out / sub).exists():
            sys.exit(f"{args.demo_out / sub}: missing (run `thesisgym demo --out {args.demo_out}` first)")
    test = datasets.load_from_disk(str(args.demo_out / "dataset"))["test"]
    return D.rows_by_date(test, args.rows, per_date=args.per_date)


def main(argv: list[str] | None = None) -> int:
    args = demo_parser(__doc__).parse_args(argv)
    import torch

    rows = demo_rows(args, "sft/final", "grpo/final")
    kw = dict(max_new_tokens=args.max_new_tokens, batch_size=args.batch)

    def timed(path: Path, rows: list[dict], **extra) -> tuple[list[str], float]:
        model, tok = load_model(str(path))
        t0 = time.perf_counter()
        out = generate_theses(model, tok, rows, **kw, **extra)
        return out, time.perf_counter() - t0

    sft, t_sft = timed(args.demo_out / "sft/final", rows)
    plain, t_plain = timed(args.demo_out / "grpo/final", rows)
    drafted, t_drafted = timed(args.demo_out / "grpo/final", rows, drafts=sft)
    flipped, _ = timed(args.demo_out / "grpo/final", rows[::-1])
    flipped = flipped[::-1]

    def same(a: list[str], b: list[str]) -> str:
        return (f"{sum(x == y for x, y in zip(a, b, strict=True))} theses, "
                f"{sum(decision_of(x) == decision_of(y) for x, y in zip(a, b, strict=True))} decisions")

    n = len(rows)
    print(f"{n} test rows on {len({str(r['asof'])[:10] for r in rows})} dates, batch {args.batch}, greedy, "
          f"torch threads {torch.get_num_threads()}")
    print(f"SFT, plain decoding:         {t_sft:7.1f} s")
    print(f"GRPO, plain decoding:        {t_plain:7.1f} s")
    print(f"GRPO, SFT theses as drafts:  {t_drafted:7.1f} s   speed-up {t_plain / t_drafted:.2f}x")
    print(f"GRPO theses equal to SFT's:  plain {same(plain, sft)}; drafts {same(drafted, sft)} (of {n})")
    print(f"drafts vs plain:             {same(drafted, plain)} (of {n})")
    print(f"plain, rows in reverse order vs plain: {same(flipped, plain)} (of {n})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
