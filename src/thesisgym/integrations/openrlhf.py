"""OpenRLHF glue: the `--remote_rm_url reward.py` file form; the HTTP form is `thesisgym serve`.

Read from OpenRLHF's source (OpenRLHF/OpenRLHF @ 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
`openrlhf/utils/agent.py::SingleTurnAgentExecutor`): a `--reward.remote_url` (older releases:
`--remote_rm_url`) ending in `.py` is loaded
with `spec_from_file_location` and its `reward_func(queries, prompts, labels)` is called (in a
thread) with `queries` = prompt + response decoded *with* special tokens, `prompts` = the prompt
string, `labels` = the `--label_key` column; the result's `rewards`, `scores` (falling back to
`rewards`) and `extra_logs` are read. Any other URL gets an HTTP POST of
`{"query": [...], "prompts": [...], "labels": [...]}` and the same keys back as JSON.

`thesisgym export --format openrlhf` writes `label` as the JSON verifier record, so

    openrlhf.cli.train_ppo_ray ... --data.prompt_dataset train.jsonl --data.input_key prompt \
        --data.label_key label --data.apply_chat_template \
        --reward.remote_url $(python -c "import thesisgym.integrations.openrlhf as m; print(m.__file__)")

scores with the recipe in $THESISGYM_RECIPE (default dsr). Only the response is scored: the
prompt is cut off the query (the system prompt shows the thesis format, which must not be parsed
as the answer) and trailing special tokens (`<|im_end|>`, `</s>`, ...) are dropped.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from thesisgym.integrations.core import default_recipe, no_score_reason, record_from_ground_truth, score_batch

__all__ = ["LOG_KEYS", "openrlhf_rewards", "response_text", "reward_func"]

logger = logging.getLogger(__name__)
# diagnostics sent as extra_logs (OpenRLHF turns each into a per-sample tensor for wandb)
LOG_KEYS = ("structure", "evidence", "decision", "market", "grounding", "hallucination_rate",
            "loop_penalty", "decision_valid")
_TRAILING_SPECIAL = re.compile(r"(?:\s*(?:<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<end_of_turn>))+\s*$")
_PROMPT_TAIL = 200


def response_text(query: str, prompt: str | None) -> str:
    """The generated response inside an OpenRLHF query (prompt + response, special tokens kept)."""
    text = query if isinstance(query, str) else ""
    if isinstance(prompt, str) and prompt:
        if text.startswith(prompt):
            text = text[len(prompt):]
        else:
            # detokenising the prompt ids can differ from the prompt string at its start (BOS,
            # whitespace); its end is what precedes the response
            tail = prompt[-_PROMPT_TAIL:]
            at = text.rfind(tail)
            if at >= 0:
                text = text[at + len(tail):]
            else:
                logger.warning("openrlhf: prompt not found in the query; scoring the whole query")
    return _TRAILING_SPECIAL.sub("", text).strip()


def openrlhf_rewards(
    queries: Sequence[str],
    prompts: Sequence[str] | None,
    labels: Sequence[Any],
    recipe: str | None = None,
) -> dict[str, Any]:
    """{"rewards": [...], "scores": [...], "extra_logs": {key: [...]}} as plain lists.

    `scores` (OpenRLHF's dynamic-filtering value) is the same recipe total. A diagnostic is logged
    only when it is defined for every sample of the call (a NaN would poison the wandb mean).
    """
    queries = list(queries)
    n = len(queries)
    prompts = list(prompts) if prompts is not None else [None] * n
    if len(prompts) != n or len(labels) != n:
        raise ValueError(f"{n} queries but {len(prompts)} prompts and {len(labels)} labels")
    records = [record_from_ground_truth(lab, where=f"labels[{i}]") for i, lab in enumerate(labels)]
    completions = [response_text(q, p) for q, p in zip(queries, prompts, strict=True)]
    results = score_batch(completions, records, recipe or default_recipe())
    rewards = []
    for i, r in enumerate(results):
        if r["score"] is None:
            raise ValueError(no_score_reason(r, f"labels[{i}]"))
        rewards.append(float(r["score"]))
    logs = {}
    for key in LOG_KEYS:
        values = [r.get(key) for r in results]
        if all(isinstance(v, float) and math.isfinite(v) for v in values):
            logs[key] = values
    return {"rewards": rewards, "scores": list(rewards), "extra_logs": logs}


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict:
    """OpenRLHF's file-form reward function; tensors, as OpenRLHF's own example returns."""
    import torch

    out = openrlhf_rewards(queries, prompts, labels, kwargs.get("recipe"))
    return {
        "rewards": torch.tensor(out["rewards"], dtype=torch.float32),
        "scores": torch.tensor(out["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in out["extra_logs"].items()},
    }
