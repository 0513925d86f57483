"""Adapters that plug thesisgym's verifier into the RL stacks people train with.

Every adapter calls `thesisgym.integrations.core.score_batch` (one code path, the same rewards and
recipe totals as `thesisgym train grpo` hands to TRL):

- `thesisgym.integrations.verl`: `compute_score` / `compute_score_batch` for verl's
  `custom_reward_function`, and the parquet rows `thesisgym export --format verl` writes.
- `thesisgym.integrations.openrlhf`: `reward_func(queries, prompts, labels)` for `--remote_rm_url`
  (file form); the HTTP form is `thesisgym serve`'s `/openrlhf` route.
- `thesisgym.integrations.verifiers_env`: a verifiers (v1) Taskset (needs `pip install thesisgym[verifiers]`).
- `thesisgym.integrations.serve`: the HTTP reward service.
"""

from thesisgym.integrations.core import (
    DEFAULT_RECIPE,
    RECIPE_ENV,
    VERIFIER_FIELDS,
    Recipe,
    VerifierRecord,
    ascore_batch,
    ground_truth_json,
    load_recipe,
    record_from_ground_truth,
    score_batch,
    score_one,
    verifier_record,
)

__all__ = [
    "DEFAULT_RECIPE",
    "RECIPE_ENV",
    "VERIFIER_FIELDS",
    "Recipe",
    "VerifierRecord",
    "ascore_batch",
    "ground_truth_json",
    "load_recipe",
    "record_from_ground_truth",
    "score_batch",
    "score_one",
    "verifier_record",
]
