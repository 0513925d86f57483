"""Copy warm-up: teach a fresh `tiny` model to copy from its context before it sees a thesis.

Why: a thesis is grounded only when its quotes are verbatim spans of the cited evidence, so the
policy must copy tokens from the prompt. A transformer copies with an induction circuit (a head that
finds the earlier occurrence of the current token and predicts what followed it), and a small model
forms that circuit only after many examples in which copying is the only way to lower the loss. In
a distilled thesis that signal is thin: a few quoted words among ~1,000 prompt and opinion tokens,
and 800 such examples (the demo's SFT budget) never formed it (docs/training.md, section 4).

The warm-up is plain causal-LM training (TRL's SFTTrainer on a `text` dataset) on texts in which
copying is the only way to lower the loss: random whole-word tokens of the model's own vocabulary
followed by the same words again, and evidence-like lines followed by a citation that quotes the
start of the cited line's body. `copy_accuracy` (teacher-forced, the copied half) and
`verified_quote_rate` (greedy quotes checked by the verifier's span check) measure the skill on fresh
texts.

Measured so far (docs/training.md, section 4): with a fixed sequence length a small model reaches
copy accuracy 0.5-0.75 within 300-500 steps of 32, but by a positional shortcut ("the token `length`
back") that fails on other lengths and never quotes; with random lengths (the texts here) a 2-layer,
128-wide, 8-head model had not formed the circuit after 800 steps. The demo runs no warm-up: its
default base is a pretrained model, which copies from its prompt already.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

# between the two copies: a newline keeps the halves apart without adding a token the data lacks
SEPARATOR = "\n"
_SOURCES = ("wire", "prices", "filing", "estimates", "macro", "blog")


def _word_tokens(tokenizer: Any) -> list[str]:
    """Whole-word vocabulary entries (a leading space, then letters) that decode and re-encode to themselves."""
    words = []
    for token in tokenizer.get_vocab():
        text = tokenizer.convert_tokens_to_string([token])
        if len(text) > 2 and text[0] == " " and text[1:].isalpha() and text[1:].isascii():
            words.append(text)
    # keep only words that are one token on their own, so a copied sequence is copied token for token
    return sorted(w for w in words if len(tokenizer(w, add_special_tokens=False)["input_ids"]) == 1)


def copy_texts(tokenizer: Any, n: int, *, length: int = 12, seed: int = 0) -> list[str]:
    """`n` warm-up texts of two kinds, alternating (both are pure copying: the words are random).

    - repeat: `length // 2` to `2 * length` random word tokens, a newline, the same words again (forms
      the induction circuit);
    - lookup: three evidence-like lines `[K2] 2024-03-05 | wire | <random words>`, then a citation
      `[K2] "<the first words of K2's body>"`, the move a thesis makes (find the cited id, skip its date
      and source, copy the start of the body).

    Copy targets are the second half of a repeat text and the quoted words of a lookup text; see
    `copy_targets`.
    """
    if n <= 0 or length <= 0:
        raise ValueError(f"copy_texts: n and length must be positive, got n={n}, length={length}")
    words = _word_tokens(tokenizer)
    if len(words) < 2 * length:
        raise ValueError(f"copy_texts: the tokenizer has only {len(words)} whole-word tokens; "
                         f"need at least {2 * length} for length={length}")
    rng = random.Random(seed)
    texts = []

    def span() -> str:
        # a random length: with a fixed one, "copy the token `length + 1` back" solves the repeat texts
        # without looking at content, and that shortcut does not carry over to quoting evidence
        return "".join(rng.choice(words) for _ in range(rng.randint(max(2, length // 2), 2 * length)))

    for i in range(n):
        if i % 2 == 0:
            seq = span()  # each word keeps its leading space
            texts.append(seq + SEPARATOR + seq)
            continue
        prefix = rng.choice("TFNAM")
        ids = [f"{prefix}{k}" for k in rng.sample(range(1, 10), 3)]
        bodies = [span().lstrip() for _ in ids]
        lines = [f"[{i_}] 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} | {rng.choice(_SOURCES)} | {b}"
                 for i_, b in zip(ids, bodies, strict=True)]
        k = rng.randrange(3)
        quote = " ".join(bodies[k].split()[: rng.randint(3, 7)])
        texts.append("\n".join(lines) + SEPARATOR + f'[{ids[k]}] "{quote}"')
    return texts


def copy_targets(tokenizer: Any, text: str) -> tuple[list[int], int]:
    """(token ids of `text`, index of its first copy target): the repeated half, or the quoted words."""
    begin = text.rindex(' "') + 2 if text.endswith('"') else text.rindex(SEPARATOR) + len(SEPARATOR)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    # offsets point into the original text, whatever the normaliser inserted
    start = next(i for i, (lo, hi) in enumerate(enc["offset_mapping"]) if hi > begin and lo >= begin - 1)
    return list(enc["input_ids"]), start


def copy_accuracy(model: Any, tokenizer: Any, texts: Sequence[str]) -> float:
    """Share of second-half tokens the model predicts exactly (greedy, teacher-forced) on `texts`."""
    import torch

    if not texts:
        raise ValueError("copy_accuracy: `texts` is empty")
    was_training = model.training
    model.eval()
    hits = total = 0
    try:
        with torch.no_grad():
            for text in texts:
                token_ids, start = copy_targets(tokenizer, text)
                ids = torch.tensor([token_ids], device=model.device)
                pred = model(ids).logits[0, start - 1:-1].argmax(-1)
                hits += int((pred == ids[0, start:]).sum())
                total += ids.shape[1] - start
    finally:
        model.train(was_training)
    return hits / max(1, total)


def verified_quote_rate(model: Any, tokenizer: Any, texts: Sequence[str], *, min_words: int = 3) -> float:
    """Share of lookup `texts` whose greedy quote (written after `[K2] "`) is a verified span of K2's body.

    The model gets each lookup text up to the opening quote mark and writes up to 16 tokens; the quote is
    what comes before the closing mark. It counts when it has at least `min_words` words and is a
    word-bounded span of the cited line's body under the verifier's own check
    (`thesisgym.rewards.evidence.quote_in_text`). Repeat texts in `texts` are skipped.
    """
    import torch

    from thesisgym.rewards.evidence import quote_in_text

    lookups = [t for t in texts if t.endswith('"')]
    if not lookups:
        raise ValueError("verified_quote_rate: no lookup texts (ending in a quote) in `texts`")
    was_training = model.training
    model.eval()
    verified = 0
    try:
        for text in lookups:
            *lines, citation = text.split(SEPARATOR)
            cited = citation.split(" ", 1)[0]
            body = next(line.split(" | ", 2)[2] for line in lines if line.startswith(cited + " "))
            prefix = text[: text.rindex(' "') + 2]
            ids = tokenizer(prefix, return_tensors="pt", add_special_tokens=False)["input_ids"].to(model.device)
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id)
            quote = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).split('"', 1)[0].strip()
            verified += len(quote.split()) >= min_words and quote_in_text(quote, body)
    finally:
        model.train(was_training)
    return verified / len(lookups)


class CopyAccuracy(TrainerCallback):
    """Records `copy_accuracy` on fixed held-out `texts` every `every` steps and at the end (`.points`)."""

    def __init__(self, texts: Sequence[str], *, every: int) -> None:
        if every <= 0:
            raise ValueError(f"CopyAccuracy: `every` must be positive, got {every}")
        self.texts = list(texts)
        self.every = every
        self.points: list[dict[str, float]] = []

    def _point(self, state: Any, model: Any, tokenizer: Any) -> None:
        self.points.append({"step": state.global_step, "copy_accuracy": copy_accuracy(model, tokenizer, self.texts)})

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.global_step % self.every == 0 and state.global_step < state.max_steps:
            self._point(state, model, processing_class)

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._point(state, model, processing_class)


def copy_warmup(model_path: str | Path, out_dir: str | Path, *, steps: int = 500, batch_size: int = 32,
                learning_rate: float = 1e-3, length: int = 12, seed: int = 0, eval_texts: int = 32,
                callbacks: list | None = None) -> tuple[Path, list[dict[str, float]]]:
    """Causal-LM warm-up of the model at `model_path` on copy texts; (final model dir, held-out curve).

    The curve is `copy_accuracy` on `eval_texts` fresh texts (another seed) every `steps // 5` steps
    and at the end. The result is a normal saved checkpoint (with the tiny marker when the input had
    one), so the SFT stage starts from it like from any model path.
    """
    from datasets import Dataset, DatasetDict

    from thesisgym.train.config import DataConfig, ModelConfig, SFTRunConfig
    from thesisgym.train.models import load_tokenizer
    from thesisgym.train.sft import run_sft

    if steps <= 0 or batch_size <= 0:
        raise ValueError(f"copy_warmup: steps and batch_size must be positive, got {steps}, {batch_size}")
    out = Path(out_dir)
    tokenizer = load_tokenizer(model_path)
    data_dir = out / "copy_data"
    texts = copy_texts(tokenizer, steps * batch_size, length=length, seed=seed)
    DatasetDict({"train": Dataset.from_dict({"text": texts})}).save_to_disk(str(data_dir))
    held_out = copy_texts(tokenizer, eval_texts, length=length, seed=seed + 10_007)
    curve = CopyAccuracy(held_out, every=max(1, steps // 5))
    config = SFTRunConfig(
        output_dir=str(out), model=ModelConfig(name_or_path=str(model_path)),
        data=DataConfig(dataset=str(data_dir), split="train"), seed=seed, max_steps=steps,
        learning_rate=learning_rate, warmup_ratio=0.05, per_device_train_batch_size=batch_size,
        logging_steps=max(1, steps // 5), save_steps=10**6, report_to="none", max_length=8 * length + 64,
    )
    final = run_sft(config, callbacks=[curve, *(callbacks or [])])
    return final, curve.points
