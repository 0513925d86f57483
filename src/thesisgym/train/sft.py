"""Supervised fine-tuning through TRL's SFTTrainer (the warm start of every Trading-R1 stage).

The dataset is a distilled set written by `thesisgym.teachers.distill` (conversational prompt/completion
pairs, the completion being one accepted thesis) or any TRL-ready set with `messages` / `text`.
Only the training columns are kept, so the reward columns riding along in a distilled set never
reach the collator. Loss is on the completion only (TRL's default for prompt/completion data).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from thesisgym.train.card import write_card
from thesisgym.train.common import (
    finish,
    free_memory,
    load_split,
    prepare_policy,
    train_with_resume,
    write_run_info,
)
from thesisgym.train.config import SFTRunConfig, trl_args
from thesisgym.train.cpu_head import compact_heads_on_cpu
from thesisgym.train.models import is_tiny

# prompt + trace: tool-use traces (thesisgym.teachers.tool_traces), tokenized here with the tool template
SFT_LAYOUTS: tuple[tuple[str, ...], ...] = (("prompt", "trace", "tools"), ("prompt", "completion"), ("messages",),
                                            ("text",))


def sft_columns(dataset: Any, *, where: str = "dataset") -> tuple[str, ...]:
    """The TRL layout this dataset follows, or a ValueError saying what is missing."""
    cols = set(dataset.column_names)
    for layout in SFT_LAYOUTS:
        if set(layout) <= cols:
            return layout
    hint = " (a context split has no completion: run `thesisgym distill` first)" if "prompt" in cols else ""
    raise ValueError(f"{where}: SFT needs columns prompt+completion, messages or text; got {sorted(cols)}{hint}")


def build_sft_trainer(config: SFTRunConfig, *, callbacks: list | None = None):
    """(trainer, tokenizer, model_path) ready to `train()`; nothing is trained yet."""
    from transformers import set_seed
    from trl import SFTTrainer

    set_seed(config.seed)
    where = f"{config.data.dataset}[{config.data.split}]"
    train = load_split(config.data.dataset, config.data.split, max_rows=config.data.max_rows)
    layout = sft_columns(train, where=where)
    eval_ds = None
    if config.data.eval_split:
        eval_ds = load_split(config.data.dataset, config.data.eval_split, max_rows=config.data.max_rows)
        eval_ds = eval_ds.select_columns(list(sft_columns(eval_ds, where=f"{config.data.dataset}[eval]")))
    model, tokenizer, model_path, peft_config = prepare_policy(config, train)
    args = trl_args(config, tiny=is_tiny(model_path))
    train = train.select_columns(list(layout))
    if "trace" in layout:
        from thesisgym.teachers.tool_traces import tokenize_traces

        train = tokenize_traces(train, tokenizer, max_length=config.max_length)
    if eval_ds is not None:
        args.eval_strategy = "steps"
        args.eval_steps = config.save_steps
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    # TRL's metrics need the entropy and the top-1 hit of every completion token
    compact_heads_on_cpu(trainer, outputs=("log_probs", "entropy", "is_top1"))
    return trainer, tokenizer, model_path


def run_sft(config: SFTRunConfig, *, resume: bool = False, callbacks: list | None = None) -> Path:
    """Train, save `<output_dir>/final` and return its path. `resume` continues the last checkpoint."""
    if not isinstance(config, SFTRunConfig):
        raise TypeError(f"run_sft expects an SFTRunConfig, got {type(config).__name__}")
    run_dir = Path(config.output_dir)
    started = time.time()
    trainer, tokenizer, model_path = build_sft_trainer(config, callbacks=callbacks)
    write_run_info(config, run_dir, resume=resume, extra={"model_path": model_path})
    train_with_resume(trainer, run_dir, resume=resume)
    final = finish(trainer, tokenizer, run_dir, model_path=model_path)
    write_card(final, config, trainer, base_model=model_path, started=started)  # the report's model card
    del trainer
    free_memory()
    return final
