"""Turn a `RewardConfig` into TRL `reward_funcs` + `reward_weights`, and check the dataset first.

Why a separate module: GRPO must fail *before* the first generation when the dataset lacks a
column a reward reads (`fwd_return` for the market reward, `label` for decision...), with the
column and the reward named, instead of silently scoring every completion as "not applicable".
The reward bodies live in `thesisgym.rewards` and `thesisgym.consistency`; this module only
names, wires and wraps them. Each callable keeps a unique `__name__`, which TRL turns into the
`rewards/<name>/mean` metric.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from thesisgym import rewards
from thesisgym.consistency import make_consistency_reward
from thesisgym.rewards import score_completion
from thesisgym.train.config import REWARD_COLUMNS, RewardConfig

RewardFunc = Callable[..., list]
# diagnostics of score_completion worth a curve in tensorboard (the rest are reward components)
DIAGNOSTIC_KEYS: tuple[str, ...] = ("hallucination_rate", "citation_precision", "grounding", "loop_rate",
                                    "decision_valid", "decision_correct", "n_sections", "n_bullets")


def _import_callable(spec: str) -> Callable:
    mod_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"reward {spec!r}: cannot import {attr!r} from {mod_name!r}: {exc}") from exc
    if not callable(fn):
        raise ValueError(f"reward {spec!r} is not callable")
    return fn


def _named(fn: Callable, name: str) -> Callable:
    """A thin wrapper with a fixed, unique `__name__` (TRL's metric key) around `fn`."""
    if getattr(fn, "__name__", None) == name:
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> list:
        return fn(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__qualname__ = name
    return wrapper


def make_consistency(config: RewardConfig) -> Callable:
    return make_consistency_reward(judge=config.consistency, **config.consistency_options)


def build_reward_funcs(config: RewardConfig) -> tuple[list[Callable], list[float]]:
    """(reward_funcs, reward_weights) for GRPOTrainer from the configured names."""
    weights = list(config.weights) if config.weights is not None else [1.0] * len(config.funcs)
    funcs: list[Callable] = []
    consistency: Callable | None = None
    for name in config.funcs:
        if ":" in name:
            funcs.append(_named(_import_callable(name), name.split(":")[-1]))
            continue
        if name in ("consistency", "fsr", "dsr") and consistency is None:
            consistency = make_consistency(config)
        if name == "consistency":
            funcs.append(_named(consistency, "consistency_reward"))
            continue
        if name in ("structure", "evidence", "decision", "market"):
            funcs.append(getattr(rewards, f"{name}_reward"))
        elif name == "loop":
            funcs.append(rewards.loop_penalty)
        else:  # combiners
            make = rewards.make_combined_reward
            fn = make(name, consistency=consistency if name in ("fsr", "dsr") else None, **config.combined_options)
            funcs.append(_named(fn, f"{name}_reward"))
    names = [getattr(f, "__name__", repr(f)) for f in funcs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"rewards: two reward functions share the name(s) {dupes}; TRL would merge their metrics")
    if config.diagnostics and funcs:
        funcs[0] = with_diagnostics(funcs[0])
    return funcs, weights


def with_diagnostics(fn: Callable) -> Callable:
    """Wrap a reward so each call also logs batch means of score_completion diagnostics (`diag/<key>`).

    Logging uses TRL's `log_metric` kwarg, so it costs nothing outside GRPO and never changes the
    reward; a failure in the diagnostics is swallowed (a metric must never break a training step).
    """
    @functools.wraps(fn)
    def wrapper(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any) -> list:
        out = fn(prompts=prompts, completions=completions, **kwargs)
        log = kwargs.get("log_metric")
        if callable(log) and completions:
            try:
                sums: dict[str, list[float]] = {}
                cols = {k: v for k, v in kwargs.items() if isinstance(v, list) and len(v) == len(completions)}
                for i, c in enumerate(completions):
                    row = {k: v[i] for k, v in cols.items()}
                    for key, val in score_completion(c, row).items():
                        if key in DIAGNOSTIC_KEYS and isinstance(val, (int, float)) and math.isfinite(val):
                            sums.setdefault(key, []).append(float(val))
                for key, vals in sums.items():
                    log(f"diag/{key}", sum(vals) / len(vals))
            except Exception:  # noqa: BLE001 - diagnostics are best effort by design
                pass
        return out

    return wrapper


def required_columns(config: RewardConfig) -> dict[str, tuple[str, ...]]:
    """reward name -> dataset columns it reads (custom 'module:function' rewards declare none)."""
    return {name: REWARD_COLUMNS.get(name, ()) for name in config.funcs}


def validate_reward_columns(dataset: Any, config: RewardConfig, *, where: str = "dataset",
                            provided: tuple[str, ...] = ()) -> None:
    """Raise ValueError naming the column and the reward when the dataset cannot feed a reward.

    `provided`: columns something else supplies at reward time (the tool environment's evidence ledger).

    Also rejects rows whose `label` is missing when the decision reward is on, naming the first
    such row, because TRL would score those as not applicable and the run would learn nothing.
    """
    columns = set(getattr(dataset, "column_names", []) or []) | set(provided)
    if "prompt" not in columns:
        raise ValueError(f"{where}: GRPO needs a 'prompt' column (got columns {sorted(columns)})")
    for reward, needs in required_columns(config).items():
        for col in needs:
            if col not in columns:
                raise ValueError(f"{where}: column {col!r} is missing but reward {reward!r} needs it "
                                 f"(columns: {sorted(columns)})")
    label_rewards = [r for r, needs in required_columns(config).items() if "label" in needs]
    if label_rewards and "label" in columns:
        for i, lab in enumerate(dataset["label"]):
            if lab is None:
                raise ValueError(f"{where}: row {i} has label=None but reward {label_rewards[0]!r} needs a label; "
                                 "build the split with complete forward windows")
    market_rewards = [r for r, needs in required_columns(config).items() if "fwd_return" in needs]
    if market_rewards and "fwd_return" in columns:
        for i, v in enumerate(dataset["fwd_return"]):
            if v is None or (isinstance(v, float) and math.isnan(v)):
                raise ValueError(f"{where}: row {i} has fwd_return=nan but reward {market_rewards[0]!r} needs it")
