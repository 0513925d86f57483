"""One way to let an in-memory model write theses for dataset rows: curves, the demo and `HFPolicy` share it.

Chat template, left padding, a stop at the end of the turn, greedy or seeded sampling. Two things make
it fit a CPU: rows are generated in batches of similar prompt length (the prefill of a left-padded
batch costs its longest prompt times its size, so sorting first removes most of the padding; the output
order is the rows' order), and a pretrained model generates under bf16 autocast where the CPU computes
bf16 natively (`thesisgym.train.config.cpu_has_bf16`; measured in bench/bench_train.py).

A trainer's own generation (GRPO's rollouts) needs `cast_weights_once_per_generate`: accelerate runs each
forward call under its own autocast, and autocast forgets its bf16 copies of the weights when the
outermost autocast exits, so every decoded token re-cast all 135M weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["bf16_pays_off", "cast_weights_once_per_generate", "generate_texts", "generate_theses"]

# below this many parameters (the tiny preset) bf16 saves little time and costs precision
_BF16_MIN_PARAMS = 50_000_000


def bf16_pays_off(model: Any) -> bool:
    """True when `model` should run under bf16 autocast: a float32 model of real size on a bf16-capable CPU."""
    import torch

    from thesisgym.train.config import cpu_has_bf16

    param = next(model.parameters(), None)
    if param is None or param.device.type != "cpu" or param.dtype != torch.float32:
        return False
    return cpu_has_bf16() and model.num_parameters() >= _BF16_MIN_PARAMS


def cast_weights_once_per_generate(trainer: Any) -> bool:
    """Make a bf16 CPU trainer's `model.generate` cast the weights to bf16 once per call, not once per token.

    Autocast keeps the bf16 copy of a weight until its outermost context exits; accelerate opens and
    closes one around every forward, so in a rollout each decoded token paid a cast of every weight
    (measured: GRPO's 4 rollouts of 84 tokens, 13-17 s -> 8 s on 2 cores). An outer context held over
    the whole `generate` makes accelerate's the inner ones, so the copies live for the call. It is
    opened *disabled*: it only holds the nesting level (torch drops the cache when the level returns to
    0), so what runs in bf16 is exactly what ran before. Sampling stays float32, and a LoRA policy,
    whose `generate` runs the base model's forward outside accelerate's wrapper, still rolls out in
    float32. The copies go when `generate` returns, before the optimizer moves the weights.
    False (and nothing changed) off the CPU or without bf16.
    """
    import functools

    import torch

    model = trainer.model
    if trainer.args.device.type != "cpu" or not trainer.args.bf16:
        return False
    generate = model.generate

    @functools.wraps(generate)
    def generate_with_cached_casts(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            return generate(*args, **kwargs)

    model.generate = generate_with_cached_casts
    return True


def generate_theses(model: Any, tokenizer: Any, rows: Sequence[dict], *, max_new_tokens: int = 384,
                    temperature: float = 0.0, batch_size: int = 16, seed: int = 0) -> list[str]:
    """One completion per row (in the rows' order); the model's train/eval mode is restored.

    Greedy when `temperature` is 0, else seeded sampling (seed + the batch's first sorted position).
    Rows need a chat `prompt`, or a `prompt_text` for a tokenizer without a chat template.
    """
    texts = [_prompt_text(tokenizer, row, i) for i, row in enumerate(rows)]
    return generate_texts(model, tokenizer, texts, max_new_tokens=max_new_tokens, temperature=temperature,
                          batch_size=batch_size, seed=seed, templated=bool(getattr(tokenizer, "chat_template", None)))


def generate_texts(model: Any, tokenizer: Any, texts: Sequence[str], *, max_new_tokens: int = 384,
                   temperature: float = 0.0, batch_size: int = 16, seed: int = 0, templated: bool = True,
                   skip_special_tokens: bool = True) -> list[str]:
    """The continuation of each rendered prompt text, in order (see `generate_theses`).

    `templated`: the texts were rendered by a chat template (it wrote the special tokens already).
    """
    import torch

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    gen: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id,
                           "eos_token_id": tokenizer.eos_token_id, "use_cache": True}  # trainers switch it off
    gen.update(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else gen.update(do_sample=False)
    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    out: list[str] = [""] * len(texts)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_pays_off(model)):
            for lo in range(0, len(order), batch_size):
                idx = order[lo:lo + batch_size]
                torch.manual_seed(seed + lo)
                batch = tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True,
                                  add_special_tokens=not templated)
                batch = {k: v.to(model.device) for k, v in batch.items()}
                ids = model.generate(**batch, **gen)
                new = tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1]:],
                                             skip_special_tokens=skip_special_tokens)
                for i, text in zip(idx, new, strict=True):
                    out[i] = text
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return out


def _prompt_text(tokenizer: Any, row: dict, i: int) -> str:
    if getattr(tokenizer, "chat_template", None) and row.get("prompt"):
        return tokenizer.apply_chat_template(list(row["prompt"]), tokenize=False, add_generation_prompt=True)
    if row.get("prompt_text"):
        return str(row["prompt_text"])
    raise ValueError(f"row {i}: neither a chat prompt (with a chat template) nor prompt_text to generate from")
