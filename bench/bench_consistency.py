"""Benchmark of the Trade-R1 consistency verifier (local judge) on the synthetic market.

Prints:
- theses/s of the local judge with BM25 on GRPO-shaped batches (G completions per prompt, adjacent),
  against a naive verifier that re-indexes the evidence for every completion (same run);
- theses/s with the embedding retriever when sentence-transformers and a local model are available;
- the judge-input compression: full prompt tokens / compressed judge context tokens, on contexts with
  40+ evidence items, against the naive "judge reads the whole prompt" (1x);
- Spearman correlation, over rows, of the local judge's evidence<->decision score for a fixed bullish
  decision (and of the raw evidence stance E) with the synthetic truth `true_expected_return`.

    python bench/bench_consistency.py [--tickers 8 --days 160 --group 8 --rows 64 --model PATH]

Run on one core (the script pins BLAS/OpenMP threads to 1 before importing numpy).
"""

from __future__ import annotations

import argparse
import os
import re
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402


def build_rows(tickers: int, days: int, seed: int):
    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.contexts import build_contexts

    store = generate_market(SynthConfig(n_tickers=tickers, n_days=days, seed=seed))
    return build_contexts(store, show_progress=False)


def tiny_sentence_transformer(path: str, corpus: list[str]) -> str:
    """A random tiny BERT + WordPiece tokenizer built locally and loadable by sentence-transformers
    (mean pooling): retrieval quality is meaningless, the throughput figure is not."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(path)
    BertModel(BertConfig(vocab_size=fast.vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, max_position_embeddings=256)).save_pretrained(path)
    return path


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    import pandas as pd

    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tickers", type=int, default=8)
    ap.add_argument("--days", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--group", type=int, default=8, help="completions per prompt (GRPO num_generations)")
    ap.add_argument("--rows", type=int, default=64, help="prompts in the throughput run")
    ap.add_argument("--model", default=None, help="sentence-transformers model id or local path (optional)")
    args = ap.parse_args()

    from thesisgym.consistency import ConsistencyVerifier
    from thesisgym.consistency.judges import stance
    from thesisgym.teachers import TemplateTeacher

    t0 = time.perf_counter()
    ds = build_rows(args.tickers, args.days, args.seed)
    print(f"contexts: {len(ds)} rows built in {time.perf_counter() - t0:.1f}s "
          f"(evidence items per row: median {int(np.median([len(e) for e in ds['evidence']]))})")
    teacher = TemplateTeacher()
    rng = np.random.default_rng(args.seed)
    pick = rng.choice(len(ds), size=min(args.rows, len(ds)), replace=False)
    rows = [ds[int(i)] for i in pick]
    completions, evidences, prompts = [], [], []
    for r in rows:
        for text in teacher.write(r, n=args.group, seed=int(rng.integers(1 << 30))):
            completions.append(text)
            evidences.append(r["evidence"])
            prompts.append(r["prompt"])
    n = len(completions)
    print(f"theses: {n} ({len(rows)} prompts x {args.group}), "
          f"median {int(np.median([c.count(chr(10) + '- ') for c in completions]))} bullets")

    def throughput(make, batch: int, *, repeats: int = 3) -> tuple[float, float]:
        """Best of `repeats` fresh verifiers (cold index cache and stance memo each time), as theses per
        second of wall time and of this process's CPU time (the shared bench machine is noisy)."""
        best_wall = best_cpu = 0.0
        for _ in range(repeats):
            stance.cache_clear()
            verifier = make()
            w, c = time.perf_counter(), time.process_time()
            for lo in range(0, n, batch):
                verifier.score_batch(completions[lo:lo + batch], evidences[lo:lo + batch],
                                     prompts=prompts[lo:lo + batch])
            best_wall = max(best_wall, n / (time.perf_counter() - w))
            best_cpu = max(best_cpu, n / max(time.process_time() - c, 1e-9))
        return best_wall, best_cpu

    batch = args.group * 4  # a per-process GRPO batch: 4 prompts x G completions
    fast_w, fast_c = throughput(ConsistencyVerifier, batch)

    class Naive(ConsistencyVerifier):
        """Re-indexes the evidence for every completion and scores one completion per call."""

        def score_batch(self, cs, es, *, prompts=None):
            out = []
            for i, (c, e) in enumerate(zip(cs, es, strict=True)):
                self.retriever._cache.clear()
                out += super().score_batch([c], [e], prompts=None if prompts is None else [prompts[i]])
            return out

    slow_w, slow_c = throughput(Naive, batch)
    print(f"local judge + BM25: {fast_w:,.0f} theses/s wall, {fast_c:,.0f} theses/s per CPU-second (batches of "
          f"{batch}, index cached per prompt); naive re-index per thesis: {slow_w:,.0f} wall, {slow_c:,.0f} CPU; "
          f"ratio {fast_c / slow_c:.2f}x  [target >= 500/s on one core]")

    try:
        import tempfile

        import torch

        torch.set_num_threads(1)
        model = args.model
        label = model
        if model is None:
            model = tiny_sentence_transformer(tempfile.mkdtemp(), [it["text"] for e in evidences[::8] for it in e])
            label = "tiny random 2-layer BERT built locally"
        emb = ConsistencyVerifier(retriever="embedding", retriever_options={"model": model, "device": "cpu"})
        ew, ec = throughput(lambda: emb, batch, repeats=1)
        print(f"local judge + embeddings ({label}): {ew:,.0f} theses/s wall, {ec:,.0f} per CPU-second")
    except Exception as exc:  # noqa: BLE001 - optional path
        print(f"embedding retriever unavailable: {type(exc).__name__}: {exc}")

    # compression on contexts with 40+ items
    results = ConsistencyVerifier().score_batch(completions, evidences, prompts=prompts)
    big = [r for r, e in zip(results, evidences, strict=False) if len(e) >= 40]
    if big:
        comp = np.array([r.compression for r in big])
        print(f"compression on {len(big)} theses with 40+ evidence items: median {np.median(comp):.2f}x, "
              f"p10 {np.percentile(comp, 10):.2f}x, mean judge context {np.mean([r.judge_tokens for r in big]):.0f} "
              f"vs full prompt {np.mean([r.full_tokens for r in big]):.0f} tokens (naive: 1.00x)  [target >= 5x]")
    unbounded = ConsistencyVerifier(max_context_tokens=None).score_batch(completions[:batch], evidences[:batch],
                                                                          prompts=prompts[:batch])
    print(f"  (without the token budget: median {np.median([r.compression for r in unbounded]):.2f}x)")
    print("s by decision agreement with the template's own call: mean s "
          f"{np.mean([r.s for r in results]):.3f}, factuality {np.mean([r.factuality for r in results]):.3f}")

    # truth correlation over all rows with a known truth: one bullish thesis per row, per market
    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.contexts import build_contexts

    for market in ("A", "B"):
        mds = ds if market == "A" else build_contexts(
            generate_market(SynthConfig(n_tickers=args.tickers, n_days=args.days, seed=args.seed, market=market)),
            show_progress=False)
        truth_rows = [r for r in mds if np.isfinite(r["true_expected_return"])]
        bull = [re.sub(r"<decision>.*?</decision>", "<decision>STRONG_BUY</decision>",
                       teacher.write(r, n=1, seed=0)[0], flags=re.S) for r in truth_rows]
        res = ConsistencyVerifier().score_batch(bull, [r["evidence"] for r in truth_rows])
        truth_a = np.array([r["true_expected_return"] for r in truth_rows])
        c_buy = np.array([r.consistency for r in res])
        print(f"truth, market {market} ({len(res)} rows): Spearman(evidence<->decision score of a STRONG_BUY "
              f"thesis, true_expected_return) = {spearman(c_buy, truth_a):+.3f}")


if __name__ == "__main__":
    main()
