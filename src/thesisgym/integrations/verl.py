"""verl glue: the `custom_reward_function` and the parquet rows `thesisgym export --format verl` writes.

Signatures read from verl's source (volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7):
- `verl/workers/reward_manager/naive.py` and the reward-loop manager
  (`verl/experimental/reward_loop/reward_manager/naive.py`) call
  `compute_score(data_source=, solution_str=, ground_truth=, extra_info=)` per response, with
  `extra_info` gaining `num_turns` and `rollout_reward_scores`; a dict result must hold "score"
  and every key is logged (`reward_extra_info[key].append(value)`, so every call returns the same
  keys).
- `verl/workers/reward_manager/batch.py` calls
  `compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)`
  once per batch and reads one score (or dict) per response: that is `compute_score_batch`.
- `verl/trainer/ppo/reward.py::get_custom_reward_fn` merges `custom_reward_function.reward_kwargs`
  into every call, so `reward_kwargs.recipe=fsr` picks the recipe from the config.

The recipe is, in order: the `recipe` keyword (reward_kwargs), `extra_info["recipe"]` (written by
`thesisgym export --recipe`), `$THESISGYM_RECIPE`, then "dsr". The row's `ground_truth` is the
JSON verifier record (evidence, sections, label, fwd_return, fwd_vol) of `core.ground_truth_json`.

    # verl config
    custom_reward_function:
      path: pkg://thesisgym.integrations.verl      # or the file path of this module
      name: compute_score                          # compute_score_batch with reward_model.reward_manager=batch
      reward_kwargs: {recipe: dsr}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from thesisgym.integrations.core import (
    default_recipe,
    ground_truth_json,
    no_score_reason,
    record_from_ground_truth,
    score_batch,
)

__all__ = ["ABILITY", "DATA_SOURCE", "compute_score", "compute_score_batch", "export_row", "pick_recipe"]

DATA_SOURCE = "thesisgym"
ABILITY = "investment-thesis"
# identification columns copied into extra_info (for logging and joining results back to the split)
ID_COLUMNS = ("ticker", "asof", "variation", "market")


def pick_recipe(recipe: str | None, extra_info: Mapping[str, Any] | None) -> str:
    """The recipe for one call: explicit > extra_info["recipe"] > $THESISGYM_RECIPE > "dsr"."""
    if isinstance(recipe, str) and recipe.strip():
        return recipe.strip()
    chosen = extra_info.get("recipe") if isinstance(extra_info, Mapping) else None
    if isinstance(chosen, str) and chosen.strip():
        return chosen.strip()
    return default_recipe()


def _result(score: dict[str, Any], where: str) -> dict[str, Any]:
    if score["score"] is None:
        raise ValueError(no_score_reason(score, where))
    return {k: (math.nan if v is None else float(v)) for k, v in score.items()}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    recipe: str | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's per-response reward: {"score": recipe total, "reward/<name>": ..., components...}.

    `data_source` is not used for routing (any value works); `kwargs` takes what verl adds
    (reward_router_address, ...). A malformed `ground_truth` raises ValueError naming the field.
    """
    name = pick_recipe(recipe, extra_info)
    record = record_from_ground_truth(ground_truth)
    return _result(score_batch([solution_str], [record], name)[0], "ground_truth")


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    recipe: str | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """verl's BatchRewardManager form: one score dict per response, rows grouped by recipe."""
    n = len(solution_strs)
    if len(ground_truths) != n:
        raise ValueError(f"{n} solution_strs but {len(ground_truths)} ground_truths")
    extras = list(extra_infos) if extra_infos is not None else [None] * n
    groups: dict[str, list[int]] = {}
    for i in range(n):
        groups.setdefault(pick_recipe(recipe, extras[i]), []).append(i)
    out: list[dict[str, float] | None] = [None] * n
    for name, idx in groups.items():
        records = [record_from_ground_truth(ground_truths[i], where=f"ground_truths[{i}]") for i in idx]
        scores = score_batch([solution_strs[i] for i in idx], records, name)
        for i, s in zip(idx, scores, strict=True):
            out[i] = _result(s, f"ground_truths[{i}]")
    return out  # type: ignore[return-value]


def export_row(
    row: Mapping[str, Any],
    *,
    split: str,
    index: int,
    data_source: str = DATA_SOURCE,
    recipe: str | None = None,
) -> dict[str, Any]:
    """One verl parquet row for a built dataset row (chat-message prompt, rule-style reward model)."""
    extra: dict[str, Any] = {"split": split, "index": index}
    extra.update({c: row[c] for c in ID_COLUMNS if c in row})
    if recipe:
        extra["recipe"] = recipe
    return {
        "data_source": data_source,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in _messages(row, index)],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": ground_truth_json(row, where=f"row {index}")},
        "extra_info": extra,
    }


def _messages(row: Mapping[str, Any], index: int) -> Iterable[Mapping[str, Any]]:
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not all(
        isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in prompt
    ):
        raise ValueError(f"row {index}: field 'prompt' must be a list of {{role, content}} messages")
    return prompt
