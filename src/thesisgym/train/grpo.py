"""GRPO through TRL's GRPOTrainer with the thesisgym reward stack as `reward_funcs`.

Every dataset column (evidence, sections, label, fwd_return, fwd_vol, ...) reaches the rewards as
keyword lists (TRL keeps unused columns for GRPO). The configured rewards are checked against the
columns before the model is even loaded, so a missing `fwd_return` fails in a second, naming
the column and the reward. Reward weights go to TRL's `reward_weights`; a weight of 0 keeps a
component as a logged metric. Diagnostics (hallucination rate, citation precision, loop...) are
logged as `diag/<name>` through TRL's `log_metric`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from thesisgym.train.card import write_card
from thesisgym.train.common import (
    finish,
    free_memory,
    load_split,
    prepare_policy,
    train_with_resume,
    write_run_info,
)
from thesisgym.train.config import GRPORunConfig, trl_args
from thesisgym.train.cpu_head import compact_heads_on_cpu
from thesisgym.train.generation import cast_weights_once_per_generate, reserve_kv_cache_per_generate
from thesisgym.train.models import is_tiny
from thesisgym.train.rewards import build_reward_funcs, validate_reward_columns


def build_grpo_trainer(
    config: GRPORunConfig,
    *,
    reward_funcs: list[Callable] | None = None,
    reward_weights: list[float] | None = None,
    callbacks: list | None = None,
):
    """(trainer, tokenizer, model_path) ready to `train()`.

    `reward_funcs` (Python API only) replaces the configured stack, e.g. for an experiment with a
    custom reward; its columns are then the caller's responsibility.
    """
    from transformers import set_seed
    from trl import GRPOTrainer

    set_seed(config.seed)
    where = f"{config.data.dataset}[{config.data.split}]"
    train = load_split(config.data.dataset, config.data.split, max_rows=config.data.max_rows)
    if reward_funcs is None:
        validate_reward_columns(train, config.rewards, where=where,
                                provided=("evidence", "sections") if config.tools is not None else ())
        funcs, weights = build_reward_funcs(config.rewards)
    else:
        if "prompt" not in train.column_names:
            raise ValueError(f"{where}: GRPO needs a 'prompt' column (got {train.column_names})")
        funcs = list(reward_funcs)
        weights = list(reward_weights) if reward_weights is not None else [1.0] * len(funcs)
    # a distilled set carries the accepted thesis as `completion`; GRPO samples its own
    train = train.remove_columns([c for c in ("completion", "trace") if c in train.column_names])
    model, tokenizer, model_path, peft_config = prepare_policy(config, train)
    tool_kwargs: dict = {}
    if config.tools is not None:
        train, funcs, weights, tool_kwargs = _with_tools(config, train, funcs, weights, tokenizer)
    args = trl_args(config, tiny=is_tiny(model_path))
    args.reward_weights = weights
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
        **tool_kwargs,
    )
    compact_heads_on_cpu(trainer, outputs=("log_probs", "entropy"), temperature=trainer.temperature)
    cast_weights_once_per_generate(trainer)
    reserve_kv_cache_per_generate(trainer)
    return trainer, tokenizer, model_path


def _with_tools(config: GRPORunConfig, train, funcs: list, weights: list, tokenizer):
    """(tool prompts, rewards verified against each rollout's tool results + the tool cost, weights, trainer kwargs)."""
    import os

    from thesisgym.data.store import MarketStore
    from thesisgym.dataset.splits import recorded_store
    from thesisgym.tools import ToolLimits, tool_env_factory, tool_usage_reward, with_tool_evidence
    from thesisgym.tools.prompts import tool_dataset, with_tool_template

    # TRL calls environment_factory experimental; docs/tools.md says so, the warning would repeat it per run
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tools = config.tools
    store_dir = tools.store or recorded_store(config.data.dataset)
    if store_dir is None:
        raise ValueError(f"tools.store: {config.data.dataset} records no MarketStore; set tools.store")
    store = MarketStore.load(store_dir)
    if "evidence" in train.column_names:  # a context split: the prompts must not show the evidence
        train = tool_dataset(train)
    train = train.remove_columns([c for c in ("tools",) if c in train.column_names])
    with_tool_template(tokenizer)
    cost = tool_usage_reward(per_call=tools.price_per_call, per_failed_call=tools.price_per_failed_call)
    priced = tools.price_per_call > 0 or tools.price_per_failed_call > 0
    factory = tool_env_factory(store, limits=ToolLimits(max_items=tools.max_items, max_chars=tools.max_chars))
    return train, [*with_tool_evidence(funcs), cost], [*weights, 1.0 if priced else 0.0], \
        {"environment_factory": factory}


def run_grpo(
    config: GRPORunConfig,
    *,
    resume: bool = False,
    reward_funcs: list[Callable] | None = None,
    reward_weights: list[float] | None = None,
    callbacks: list | None = None,
) -> Path:
    """Train, save `<output_dir>/final` and return its path. `resume` continues the last checkpoint."""
    if not isinstance(config, GRPORunConfig):
        raise TypeError(f"run_grpo expects a GRPORunConfig, got {type(config).__name__}")
    run_dir = Path(config.output_dir)
    started = time.time()
    trainer, tokenizer, model_path = build_grpo_trainer(config, reward_funcs=reward_funcs,
                                                        reward_weights=reward_weights, callbacks=callbacks)
    write_run_info(config, run_dir, resume=resume, extra={"model_path": model_path,
                                                          "reward_funcs": [f.__name__ for f in trainer.reward_funcs]})
    train_with_resume(trainer, run_dir, resume=resume)
    final = finish(trainer, tokenizer, run_dir, model_path=model_path)
    write_card(final, config, trainer, base_model=model_path, started=started)  # the report's model card
    del trainer
    free_memory()
    return final
