"""Plumbing shared by the SFT and GRPO runs: datasets, the policy, run directories, provenance.

Why: a run must be reproducible and resumable from its directory alone, so every run writes the
resolved config (`config.yaml`), the package versions and seed (`run_info.json`), TRL checkpoints
(`checkpoint-N/`), the log history (`log_history.json`) and the final model (`final/`). The
`tiny` policy is built once per run directory (`tiny-base/`) and reused on resume.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from thesisgym.train.config import RunConfig, dump_config
from thesisgym.train.models import TINY_MARKER, build_tiny, is_tiny, load_model

VERSION_PACKAGES: tuple[str, ...] = ("torch", "transformers", "trl", "datasets", "peft", "accelerate", "tokenizers",
                                     "thesisgym")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in VERSION_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_run_info(config: RunConfig, run_dir: Path, *, resume: bool, extra: dict[str, Any] | None = None) -> None:
    """Save the resolved config and the environment next to the checkpoints."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) != 0:  # one writer under accelerate/torchrun
        return
    (run_dir / "config.yaml").write_text(dump_config(config))
    info = {
        "kind": getattr(config, "kind", "run"),
        "seed": config.seed,
        "resume": resume,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "versions": package_versions(),
        **(extra or {}),
    }
    name = "run_info.json" if not resume else f"run_info.resume-{int(time.time())}.json"
    (run_dir / name).write_text(json.dumps(info, indent=2, default=str))


def load_split(path: str | Path, split: str, *, max_rows: int | None = None, what: str = "data.dataset"):
    """`splits.load_split` for training: the config field in every message, an empty split refused,
    at most `max_rows` rows."""
    from thesisgym.dataset import splits

    try:
        ds = splits.load_split(path, split)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if len(ds) == 0:
        raise ValueError(f"{what}: split {split!r} of {path} is empty")
    if max_rows is not None and len(ds) > max_rows:
        ds = ds.select(range(max_rows))
    return ds


def messages_text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    if isinstance(messages, list):
        return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    return ""


def corpus_of(dataset: Any, *, max_rows: int) -> list[str]:
    """Texts to train the tiny tokenizer on: prompts plus any completions present."""
    texts: list[str] = []
    cols = set(dataset.column_names)
    n = min(len(dataset), max_rows)
    for row in dataset.select(range(n)):
        if "prompt_text" in cols and row["prompt_text"]:
            texts.append(row["prompt_text"])
        elif "prompt" in cols:
            texts.append(messages_text(row["prompt"]))
        for c in ("completion", "messages", "text"):
            if c in cols:
                texts.append(messages_text(row[c]))
    # the system prompt repeats in every row: once is enough for the tokenizer's merges
    return list(dict.fromkeys(t for t in texts if t))


def prepare_policy(config: RunConfig, dataset: Any):
    """(model, tokenizer, model_path, peft_config): builds the tiny preset when asked to."""
    from thesisgym.train.models import lora_config

    name = config.model.name_or_path
    run_dir = Path(config.output_dir)
    if name == "tiny":
        base = run_dir / "tiny-base"
        if int(os.environ.get("WORLD_SIZE", "1")) > 1 and int(os.environ.get("RANK", "0")) != 0:
            _wait_for(base / TINY_MARKER)
        elif not is_tiny(base):
            t = config.model.tiny
            build_tiny(corpus_of(dataset, max_rows=t.max_corpus_rows), base, vocab_size=t.vocab_size,
                       hidden_size=t.hidden_size, layers=t.layers, heads=t.heads, kv_heads=t.kv_heads,
                       copy_tokens=t.copy_tokens, seed=config.seed)
        name = str(base)
    model, tokenizer = load_model(name, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code)
    return model, tokenizer, name, lora_config(config.model.lora)


def _wait_for(path: Path, *, timeout_s: float = 600.0) -> None:
    """Non-zero ranks wait for rank 0 to build the shared tiny preset (same seed, same files)."""
    deadline = time.time() + timeout_s
    while not path.exists():
        if time.time() > deadline:
            raise ValueError(f"timed out waiting for rank 0 to build {path.parent}")
        time.sleep(0.5)
    time.sleep(1.0)  # let rank 0 finish flushing the weights after the marker


def free_memory() -> None:
    """Give a finished run's memory back: collect the trainer's reference cycles (accelerate hooks, callbacks)
    and return freed heap pages to the OS (glibc keeps them otherwise, so the next stage of a pipeline would
    start on top of the last one's peak)."""
    import gc

    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Return glibc's freed heap pages to the OS (elsewhere the memory is still freed, just not trimmed)."""
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _trim_callback():
    """A TrainerCallback returning freed heap to the OS after every optimizer step: steps of varying sequence
    lengths fragment glibc's heap, and a CPU run's resident memory otherwise creeps up step after step.
    A step's tensors are freed by reference counting, so no cycle collection is needed here (a full one
    over the trainer's heap cost about 0.1-0.3 s a step)."""
    from transformers import TrainerCallback

    class TrimMemory(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            trim_heap()

    return TrimMemory()


def finish(trainer: Any, tokenizer: Any, run_dir: Path, *, model_path: str | None = None) -> Path:
    """Save the final model + tokenizer and the log history; return the final model directory.

    A LoRA run saves its adapter under `final/adapter` and the merged full model in `final`, so
    every stage hands the next one (and evaluation) a plain model directory. Under DeepSpeed ZeRO-3
    the sharded LoRA weights cannot be merged in place: `final` then holds the adapter only, and
    says so (`final/saved.json`, and a warning). `saved.json` records what `final` holds:
    "full", "merged" (LoRA merged into the base) or "adapter".
    """
    import warnings

    final = run_dir / "final"
    model = trainer.model
    lora = hasattr(model, "merge_and_unload")
    if lora and not getattr(trainer, "is_deepspeed_enabled", False):
        trainer.save_model(str(final / "adapter"))
        if trainer.is_world_process_zero():
            model.merge_and_unload().save_pretrained(str(final))
        kind = "merged"
    else:
        trainer.save_model(str(final))
        kind = "adapter" if lora else "full"
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(final))
        (final / "saved.json").write_text(json.dumps({"kind": kind, "base_model": model_path}, indent=2))
        if kind == "adapter":
            warnings.warn(f"{final} holds a LoRA adapter only (DeepSpeed ZeRO-3 shards the weights, so it is not "
                          f"merged); load it with peft on top of {model_path}", stacklevel=2)
        if model_path and is_tiny(model_path):  # later stages keep the CPU-friendly tiny defaults
            shutil.copy(Path(model_path) / TINY_MARKER, final / TINY_MARKER)
        (run_dir / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=2, default=str))
    return final


def train_with_resume(trainer: Any, run_dir: Path, *, resume: bool) -> None:
    """`trainer.train`, resuming from the last `checkpoint-N` in the run dir when asked."""
    from thesisgym.train.progress import use_compact_progress

    use_compact_progress(trainer)
    if trainer.args.device.type == "cpu":
        trainer.add_callback(_trim_callback())
    ckpt: bool | None = None
    if resume:
        if not any(p.name.startswith("checkpoint-") for p in run_dir.glob("checkpoint-*")):
            raise ValueError(f"--resume: no checkpoint-N directory in {run_dir} to resume from")
        ckpt = True
    trainer.train(resume_from_checkpoint=ckpt)
