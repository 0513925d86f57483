"""Policy models: load any HF causal LM or named preset (optionally with a LoRA adapter), or build `tiny`.

Named pretrained presets (`smollm2-135m`) resolve offline through `thesisgym.train.presets`; every
loader here accepts them wherever it accepts a hub id or a path.

Why a local preset: tests, the demo and CI must train offline on two CPU cores, and no hub download
is allowed. `build_tiny` trains a byte-level BPE tokenizer on the dataset's own prompts and theses
(so evidence ids, section tags and labels become cheap tokens) and initialises a small Qwen2
model around it. Everything is saved with `save_pretrained`, so downstream code (TRL, evaluation,
`AutoModelForCausalLM.from_pretrained`) treats it exactly like a hub checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thesisgym.train.presets import resolve_model

# Qwen-like chat format: TRL's prompt/completion masking needs the rendered prompt (with the
# generation prompt) to be a prefix of the rendered prompt+completion, which this template keeps.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
TINY_MARKER = "thesisgym_tiny.json"


def _require_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"build_tiny: `{name}` must be a positive int, got {value!r}")


def build_tokenizer(corpus_texts: Iterable[str], *, vocab_size: int = 4096, copy_tokens: bool = True):
    """Train a byte-level BPE tokenizer on `corpus_texts` and wrap it as a PreTrainedTokenizerFast.

    `copy_tokens` (the default) makes the tokens of a quoted span the same as in the evidence it is
    copied from, so a small model can learn to copy token for token:
    - every digit is its own token, as in the Qwen and Llama tokenizers (merged runs made "878314"
      one token in a prompt and "23.20" split differently after a space than after a quote mark);
    - a double quote never glues to its neighbours: the normaliser writes a space after it (the
      decoder removes it again, so decode(encode(text)) == text), so the first quoted word is the
      same " word" token as in the evidence, and a closing quote is not merged into "%\"".
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [t for t in corpus_texts if isinstance(t, str) and t]
    if not texts:
        raise ValueError("build_tiny: `corpus_texts` is empty; pass the prompts and theses to train the tokenizer on")
    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if copy_tokens:
        tok.normalizer = normalizers.Replace('"', '" ')
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split('"', behavior="isolated"),
                                                     pre_tokenizers.Digits(individual_digits=True), byte_level])
        tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace('" ', '"')])
    else:
        tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        # every byte is representable, so nothing is ever <unk> on unseen text
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        unk_token=None,
        padding_side="left",
        model_max_length=1 << 16,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny(
    corpus_texts: Iterable[str],
    out_dir: str | Path,
    *,
    vocab_size: int = 4096,
    hidden_size: int = 192,
    layers: int = 4,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 8192,
    copy_tokens: bool = True,
    seed: int = 0,
) -> Path:
    """Build the `tiny` preset (Qwen2 architecture, a few M params) and save it to `out_dir`.

    The defaults give ~3.5M parameters with a 4096-token vocabulary, small enough to train on CPU.
    In the demo (800 distilled SFT examples of the compact teacher's word-run quotes) every held-out
    decision is valid and about one bullet in seven verifies its quote (docs/training.md, section 4c:
    the measured curves). Returns `out_dir`.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("layers", layers),
                        ("heads", heads), ("kv_heads", kv_heads), ("max_position_embeddings", max_position_embeddings)):
        _require_positive(name, value)
    if hidden_size % heads:
        raise ValueError(f"build_tiny: hidden_size={hidden_size} must be divisible by heads={heads}")
    if heads % kv_heads:
        raise ValueError(f"build_tiny: heads={heads} must be divisible by kv_heads={kv_heads}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus_texts, vocab_size=vocab_size, copy_tokens=copy_tokens)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 3 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        use_cache=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    (out / TINY_MARKER).write_text(json.dumps({"preset": "tiny", "params": n_params, "seed": seed,
                                               "vocab_size": len(tokenizer), "copy_tokens": copy_tokens},
                                              indent=2))
    return out


def lora_config(spec: dict[str, Any] | None):
    """Turn a plain dict (from YAML) into a peft LoraConfig; None stays None."""
    if spec is None:
        return None
    from peft import LoraConfig

    spec = dict(spec)
    spec.setdefault("task_type", "CAUSAL_LM")
    spec.setdefault("target_modules", "all-linear")
    try:
        return LoraConfig(**spec)
    except TypeError as exc:
        raise ValueError(f"model.lora: {exc}") from exc


def load_tokenizer(name_or_path: str | Path):
    """Load the tokenizer of a model, forcing left padding (generation in GRPO) and a pad token.

    A `tiny` model's tokenizer is loaded as the PreTrainedTokenizerFast it was saved as: transformers 5's
    AutoTokenizer maps model_type qwen2 to Qwen2Tokenizer, which rebuilds the pipeline from the vocabulary
    with Qwen's own pre-tokenizer and drops ours (the quote-mark normaliser), so the first word of every
    quote became different tokens from the same word in the evidence and could not be copied.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = resolve_model(str(name_or_path))
    loader = PreTrainedTokenizerFast if is_tiny(path) else AutoTokenizer
    tok = loader.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if tok.chat_template is None:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def load_model(
    name_or_path: str | Path,
    *,
    lora: dict[str, Any] | None = None,
    dtype: str = "auto",
    trust_remote_code: bool = False,
):
    """Load any HF causal LM id or local path (offline when HF_HUB_OFFLINE=1) and its tokenizer.

    `lora` (a dict of peft.LoraConfig fields) wraps the model in a fresh LoRA adapter. Returns
    `(model, tokenizer)`; the model's generation_config gets the tokenizer's eos/pad ids so
    sampling stops at the end of the assistant turn.
    """
    import torch
    from transformers import AutoModelForCausalLM

    if not str(name_or_path):
        raise ValueError("load_model: `name_or_path` is empty")
    path = resolve_model(str(name_or_path))
    local = Path(path)
    if (local.exists() or path.startswith((".", "/"))) and not (local / "config.json").exists():
        raise ValueError(f"load_model: {path} has no config.json; is it a saved model directory?")
    tokenizer = load_tokenizer(path)
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code)
    gen = model.generation_config
    if gen.pad_token_id is None:
        gen.pad_token_id = tokenizer.pad_token_id
    if gen.eos_token_id is None:
        gen.eos_token_id = tokenizer.eos_token_id
    cfg = lora_config(lora)
    if cfg is not None:
        from peft import get_peft_model

        model = get_peft_model(model, cfg)
    return model, tokenizer


def is_tiny(path: str | Path) -> bool:
    """True when `path` holds a model built by `build_tiny` (used to pick CPU-friendly defaults)."""
    return (Path(path) / TINY_MARKER).exists()
