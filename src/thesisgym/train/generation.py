"""One way to let an in-memory model write theses for dataset rows: curves, the demo and `HFPolicy` share it.

Chat template, left padding, a stop at the end of the turn, greedy or seeded sampling. Two things make
it fit a CPU: rows are generated in batches of similar prompt length (the prefill of a left-padded
batch costs its longest prompt times its size, so sorting first removes most of the padding; the output
order is the rows' order), and a pretrained model generates under bf16 autocast where the CPU computes
bf16 natively (`thesisgym.train.config.cpu_has_bf16`; measured in bench/bench_train.py). A third
is the KV cache (`_reserved_cache`): transformers' default cache concatenates a new copy of every
layer's keys and values for each decoded token, a fifth of a decoding step for 32 rows here; ours
writes each token into storage reserved for the whole call, and decodes the same tokens.

A trainer's own generation (GRPO's rollouts) needs `cast_weights_once_per_generate`: accelerate runs each
forward call under its own autocast, and autocast forgets its bf16 copies of the weights when the
outermost autocast exits, so every decoded token re-cast all 135M weights. On the CPU it also gets the
reserved KV cache (`reserve_kv_cache_per_generate`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["bf16_pays_off", "cast_weights_once_per_generate", "generate_texts", "generate_theses",
           "reserve_kv_cache_per_generate"]

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


def reserve_kv_cache_per_generate(trainer: Any) -> bool:
    """Hand each `model.generate` call of a CPU trainer (GRPO's rollouts) the reserved KV cache
    (`_reserved_cache`, sized by the call's `max_new_tokens`): the same tokens, sampled ones included,
    without a copy of the whole cache per decoded token (4-6 % of a 4-completion rollout here). False (and
    nothing changed) off the CPU or where the model has no layered cache; a call that brings its own
    cache or whose generation config names a cache implementation is left as it is."""
    model = trainer.model
    if trainer.args.device.type != "cpu" or not _reserved_cache(model, 1):
        return False
    generate = model.generate

    @functools.wraps(generate)
    def generate_with_reserved_cache(*args: Any, **kwargs: Any) -> Any:
        config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
        named = kwargs.get("cache_implementation", getattr(config, "cache_implementation", None))
        if named is None and not {"cache", "past_key_values"} & set(kwargs):
            reserve = kwargs.get("max_new_tokens") or getattr(config, "max_new_tokens", None) or 256
            kwargs.update(_reserved_cache(model, reserve))
        return generate(*args, **kwargs)

    model.generate = generate_with_reserved_cache
    return True


def generate_theses(model: Any, tokenizer: Any, rows: Sequence[dict], *, max_new_tokens: int = 384,
                    temperature: float = 0.0, batch_size: int = 16, seed: int = 0,
                    drafts: Sequence[str] | None = None) -> list[str]:
    """One completion per row (in the rows' order); the model's train/eval mode is restored.

    Greedy when `temperature` is 0, else seeded sampling (seed + the batch's first sorted position).
    Rows need a chat `prompt`, or a `prompt_text` for a tokenizer without a chat template. `drafts`:
    see `generate_texts`.
    """
    texts = [_prompt_text(tokenizer, row, i) for i, row in enumerate(rows)]
    return generate_texts(model, tokenizer, texts, max_new_tokens=max_new_tokens, temperature=temperature,
                          batch_size=batch_size, seed=seed, templated=bool(getattr(tokenizer, "chat_template", None)),
                          drafts=drafts)


def generate_texts(model: Any, tokenizer: Any, texts: Sequence[str], *, max_new_tokens: int = 384,
                   temperature: float = 0.0, batch_size: int = 16, seed: int = 0, templated: bool = True,
                   skip_special_tokens: bool = True, drafts: Sequence[str] | None = None) -> list[str]:
    """The continuation of each rendered prompt text, in order (see `generate_theses`).

    `templated`: the texts were rendered by a chat template (it wrote the special tokens already).
    `drafts`: one guessed continuation per text (e.g. the theses of the checkpoint this one was trained
    from). Greedy decoding then checks each draft in one forward pass and decodes only from the first
    token the model would not have chosen (`_from_drafts`); sampling ignores them.
    """
    if drafts is not None and len(drafts) != len(texts):
        raise ValueError(f"drafts: {len(drafts)} drafts for {len(texts)} prompts (one per prompt)")
    with _decoding(model, tokenizer):
        if (drafts is not None and temperature == 0 and skip_special_tokens and tokenizer.eos_token_id is not None
                and _checks_drafts(model)):
            return _from_drafts(model, tokenizer, texts, drafts, max_new_tokens=max_new_tokens,
                                batch_size=batch_size, templated=templated)
        return _in_batches(model, tokenizer, texts, max_new_tokens=max_new_tokens, temperature=temperature,
                           batch_size=batch_size, seed=seed, templated=templated,
                           skip_special_tokens=skip_special_tokens)


@contextmanager
def _decoding(model: Any, tokenizer: Any) -> Iterator[None]:
    """Eval mode, left padding, no gradients and bf16 autocast where it pays (`bf16_pays_off`); the model's
    mode and the tokenizer's padding side are restored."""
    import torch

    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_pays_off(model)):
            yield
    finally:
        tokenizer.padding_side = side
        model.train(was_training)


def _generate_kwargs(tokenizer: Any, max_new_tokens: int, temperature: float) -> dict[str, Any]:
    gen: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id,
                           "eos_token_id": tokenizer.eos_token_id, "use_cache": True}  # trainers switch it off
    gen.update(do_sample=True, temperature=temperature, top_k=0) if temperature > 0 else gen.update(do_sample=False)
    return gen


def _in_batches(model: Any, tokenizer: Any, texts: Sequence[str], *, max_new_tokens: int, temperature: float,
                batch_size: int, seed: int, templated: bool, skip_special_tokens: bool) -> list[str]:
    import torch

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    gen = _generate_kwargs(tokenizer, max_new_tokens, temperature)
    out: list[str] = [""] * len(texts)
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        torch.manual_seed(seed + lo)
        batch = tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True,
                          add_special_tokens=not templated)
        batch = {k: v.to(model.device) for k, v in batch.items()}
        ids = model.generate(**batch, **gen, **_reserved_cache(model, max_new_tokens))
        new = tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1]:], skip_special_tokens=skip_special_tokens)
        for i, text in zip(idx, new, strict=True):
            out[i] = text
    return out


# generation settings that change which token greedy decoding picks: a draft is checked by the plain
# argmax of the logits, so a model whose generation config sets any of them decodes without drafts
_PROCESSED = ("repetition_penalty", "encoder_repetition_penalty", "no_repeat_ngram_size", "bad_words_ids",
              "suppress_tokens", "begin_suppress_tokens", "sequence_bias", "forced_bos_token_id",
              "forced_eos_token_id", "min_new_tokens", "min_length", "exponential_decay_length_penalty")


def _backbone(model: Any) -> Any:
    """The decoder under a causal LM's output head, or None. `get_decoder` sees through a PEFT wrapper
    (whose `base_model` is the LoRA wrapper, not the decoder) to the decoder that holds its adapters."""
    get = getattr(model, "get_decoder", None)
    decoder = get() if callable(get) else None
    return decoder if decoder is not None and decoder is not model else None


def _checks_drafts(model: Any) -> bool:
    """Whether drafts can be checked on `model`: a causal LM with a separate decoder and output head
    whose greedy pick is the plain argmax of its logits."""
    if _backbone(model) is None or model.get_output_embeddings() is None:
        return False
    config = getattr(model, "generation_config", None)
    return all(getattr(config, name, None) in (None, 0, 1.0, [], {}) for name in _PROCESSED)


def _from_drafts(model: Any, tokenizer: Any, texts: Sequence[str], drafts: Sequence[str], *, max_new_tokens: int,
                 batch_size: int, templated: bool) -> list[str]:
    """Greedy continuations that start from drafts: each draft's tokens are checked against the model's
    own greedy picks in one teacher-forced pass; the checked prefix and the model's first differing token
    are kept and decoding goes on from there (a draft checked to its end of turn is the answer).

    After a few GRPO steps most theses are the SFT checkpoint's, token for token: its theses as drafts
    skip most decoding (docs/training.md, 5r). The result is greedy decoding of this model, but the
    teacher-forced pass sums in another order than decoding one token at a time, so a near tie may break
    the other way than `_in_batches` would break it, as a different batch can.
    """
    eos = tokenizer.eos_token_id
    prompts = [tokenizer(t, add_special_tokens=not templated)["input_ids"] for t in texts]
    guesses = [tokenizer(d, add_special_tokens=False)["input_ids"][:max_new_tokens] for d in drafts]
    guesses = [g + [eos] if len(g) < max_new_tokens else g for g in guesses]
    picks = _greedy_picks(model, tokenizer, prompts, guesses, batch_size=batch_size)
    done: dict[int, list[int]] = {}
    todo: dict[int, list[int]] = {}
    for i, (guess, pick) in enumerate(zip(guesses, picks, strict=True)):
        agree = next((t for t, (a, b) in enumerate(zip(guess, pick, strict=True)) if a != b), len(guess))
        kept = guess[:agree] if agree == len(guess) else [*guess[:agree], pick[agree]]
        if kept and kept[-1] == eos:
            done[i] = kept[:-1]
        elif len(kept) >= max_new_tokens:
            done[i] = kept
        else:
            todo[i] = kept
    if todo:
        rest = _continue(model, tokenizer, [prompts[i] + todo[i] for i in todo],
                         [max_new_tokens - len(todo[i]) for i in todo], batch_size=batch_size)
        done.update({i: todo[i] + more for i, more in zip(todo, rest, strict=True)})
    return [tokenizer.decode(done[i], skip_special_tokens=True) for i in range(len(texts))]


def _greedy_picks(model: Any, tokenizer: Any, prompts: list[list[int]], guesses: list[list[int]], *,
                  batch_size: int) -> list[list[int]]:
    """For each row, the model's greedy token at every position of its guess, given the prompt and the
    guess before it: one teacher-forced pass of the backbone per batch (right-padded, so positions count
    from each row's start), the output head only on the guessed positions."""
    backbone, head = _backbone(model), model.get_output_embeddings()
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]) + len(guesses[i]))
    picks: list[list[int]] = [[] for _ in prompts]
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        batch = _padded([prompts[i] + guesses[i] for i in idx], _pad_id(tokenizer), left=False, device=model.device)
        hidden = backbone(**batch).last_hidden_state
        for row, i in enumerate(idx):
            start = len(prompts[i]) - 1  # the position whose output is the guess's first token
            picks[i] = head(hidden[row, start:start + len(guesses[i])]).argmax(-1).tolist()
    return picks


def _continue(model: Any, tokenizer: Any, prefixes: list[list[int]], budgets: list[int], *,
              batch_size: int) -> list[list[int]]:
    """Greedy decoding from token prefixes, each up to its own budget of new tokens (a batch decodes to
    its largest budget; greedy decoding is causal, so cutting a row at its budget is exact)."""
    order = sorted(range(len(prefixes)), key=lambda i: len(prefixes[i]))
    out: list[list[int]] = [[] for _ in prefixes]
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        batch = _padded([prefixes[i] for i in idx], _pad_id(tokenizer), left=True, device=model.device)
        budget = max(budgets[i] for i in idx)
        gen = _generate_kwargs(tokenizer, budget, 0.0)
        new = model.generate(**batch, **gen, **_reserved_cache(model, budget))[:, batch["input_ids"].shape[1]:].tolist()
        for i, tokens in zip(idx, new, strict=True):
            tokens = tokens[:budgets[i]]
            out[i] = tokens[:tokens.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in tokens else tokens
    return out


def _reserved_cache(model: Any, reserve: int) -> dict[str, Any]:
    """`generate` keyword arguments for one call: a DynamicCache whose layers keep their keys and values in
    storage reserved for the prompt and `reserve` more tokens, written in place (`_reserved_layer`).

    Each step attends over views of the same values transformers' own layer would have concatenated, so
    the decoded tokens are the same (a default-suite test compares them). Empty (transformers' default
    cache) where the model's cache has layers of another kind (sliding windows, linear attention) or the
    installed transformers has no layered DynamicCache."""
    import inspect

    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return {}
    backbone = _backbone(model)
    params = inspect.signature(backbone.forward).parameters if backbone is not None else {}
    name = "cache" if "cache" in params else "past_key_values" if "past_key_values" in params else None
    try:
        cache = DynamicCache(config=model.config)
    except (TypeError, ValueError, AttributeError):
        return {}
    if name is None or not getattr(cache, "layers", None) or any(type(x) is not DynamicLayer for x in cache.layers):
        return {}
    layer = _reserved_layer()
    cache.layers = [layer(reserve) for _ in cache.layers]
    return {name: cache}


@functools.cache
def _reserved_layer() -> type:
    """transformers' DynamicLayer, writing each update into reserved storage instead of concatenating.

    `keys`/`values` stay views of that storage from its start, so the layer's own `crop` (a shorter view)
    keeps working; a layer whose tensors were replaced (`batch_select_indices`, `reset`) reserves anew."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        def __init__(self, reserve: int) -> None:
            super().__init__()
            self.reserve = reserve
            self.store: tuple[Any, Any] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.store = None
            used = self.keys.shape[-2] if self.keys.numel() else 0
            need = used + key_states.shape[-2]
            store = self.store
            if (store is None or need > store[0].shape[-2] or store[0].shape[:2] != key_states.shape[:2]
                    or (used and self.keys.data_ptr() != store[0].data_ptr())):
                store = tuple(new.new_empty((*new.shape[:-2], need + self.reserve, new.shape[-1]))
                              for new in (key_states, value_states))
                if used:
                    store[0][..., :used, :] = self.keys
                    store[1][..., :used, :] = self.values
                self.store = store
            store[0][..., used:need, :] = key_states
            store[1][..., used:need, :] = value_states
            self.keys, self.values = store[0][..., :need, :], store[1][..., :need, :]
            return self.keys, self.values

    return ReservedLayer


def _pad_id(tokenizer: Any) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def _padded(seqs: list[list[int]], pad: int, *, left: bool, device: Any) -> dict[str, Any]:
    """`input_ids` and `attention_mask` of token lists padded to the longest, on the left (to decode
    from their ends) or on the right (so each row's positions count from its first token)."""
    import torch

    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, seq in enumerate(seqs):
        cols = slice(width - len(seq), width) if left else slice(0, len(seq))
        ids[row, cols] = torch.tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def _prompt_text(tokenizer: Any, row: dict, i: int) -> str:
    if getattr(tokenizer, "chat_template", None) and row.get("prompt"):
        return tokenizer.apply_chat_template(list(row["prompt"]), tokenize=False, add_generation_prompt=True)
    if row.get("prompt_text"):
        return str(row["prompt_text"])
    raise ValueError(f"row {i}: neither a chat prompt (with a chat template) nor prompt_text to generate from")
