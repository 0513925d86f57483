"""The one adapter every RL stack goes through: (completion, verifier record, recipe) -> score dict.

Why one function: verl, verifiers, OpenRLHF and the HTTP service each hand us a completion and
*something* that identifies its dataset row (a parquet `ground_truth`, a label string, a task's
data, a JSON body). If each stack re-derived which evidence, label and forward return to use, or
re-implemented how a recipe combines its rewards, they would drift apart. Here:

- a **verifier record** is exactly what the verifier reads from a row: `evidence`, `sections`,
  `label`, `fwd_return`, `fwd_vol` (`VerifierRecord`, strict pydantic: an unknown key or a wrong
  type raises ValueError naming the field). `ground_truth_json(row)` serialises it for files
  (verl parquet, OpenRLHF JSONL) and `record_from_ground_truth` reads it back.
- a **recipe** is a shipped training recipe (`dsr`, `fsr`, `market_only`, `trading_r1[:stage]`) or
  a YAML path; its GRPO `rewards:` block is turned into reward functions by the same
  `thesisgym.train.rewards.build_reward_funcs` that `thesisgym train grpo` hands to TRL, and the
  total is TRL's: the weighted sum of the rewards that apply (TRL `nansum`s; None = not applicable),
  None when none applies, and None when a weighted reward failed on the row (it raised or returned
  a non-number): a failed part is unknown, so the total is too, and the failure is counted
  (`rewards.base.record_error`, per row in `reward_errors`, per call with `counting_errors`).
- `score_batch` returns, per completion, `score` (that total), `reward/<name>` for each of the
  recipe's reward functions, and the recipe-independent components and diagnostics of
  `thesisgym.rewards.score_completion` (structure, evidence, decision, market, loop_penalty,
  hallucination_rate, citation_precision, grounding, ...). Its `s`/`fsr`/`dsr`/`weighted` keys are
  left out: they use the placeholder s, and the recipe's own rewards carry the real combination.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError, field_validator

from thesisgym.schema import LABELS, StrictModel

__all__ = [
    "DEFAULT_RECIPE",
    "RECIPE_ENV",
    "VERIFIER_FIELDS",
    "EvidenceItemModel",
    "Recipe",
    "VerifierRecord",
    "ascore_batch",
    "default_recipe",
    "describe_errors",
    "ground_truth_json",
    "load_recipe",
    "recipe_with_judge_client",
    "record_from_ground_truth",
    "score_batch",
    "score_one",
    "validate_record",
    "verifier_record",
]

RECIPE_ENV = "THESISGYM_RECIPE"
DEFAULT_RECIPE = "dsr"
VERIFIER_FIELDS = ("evidence", "sections", "label", "fwd_return", "fwd_vol")
# score_completion keys that depend on the placeholder s or on one fixed combination; the recipe's
# reward functions (reward/<name>) carry the combination actually trained on
_RECIPE_DEPENDENT = frozenset({"s", "fsr", "dsr", "weighted", "s_is_placeholder"})


class EvidenceItemModel(StrictModel, strict=True):
    """One evidence item as `thesisgym build` writes it (schema.EvidenceItem)."""

    id: str = Field(min_length=1)
    text: str
    section: str | None = None
    date: str | None = None
    source: str | None = None
    numbers: list[float] | None = None

    @field_validator("numbers", mode="before")
    @classmethod
    def _ints_are_numbers(cls, v: Any) -> Any:
        # JSON has one number type: 187 and 187.0 are the same number to the verifier
        if isinstance(v, list):
            return [float(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v


class VerifierRecord(StrictModel, strict=True):
    """What the verifier needs from one dataset row; nothing else is accepted."""

    evidence: list[EvidenceItemModel]
    sections: list[str] | None = None
    label: str | None = None
    fwd_return: float | None = None
    fwd_vol: float | None = None

    @field_validator("fwd_return", "fwd_vol", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, float) and not math.isfinite(v):
            return None  # a built split marks an unknown forward return as nan
        return v

    @field_validator("label")
    @classmethod
    def _known_label(cls, v: str | None) -> str | None:
        if v is not None and v not in LABELS:
            raise ValueError(f"expected one of {list(LABELS)} or null, got {v!r}")
        return v

    def columns(self) -> dict[str, Any]:
        """The row as the plain dict TRL passes to reward functions (evidence items as dicts)."""
        return self.model_dump(exclude_none=False)


def describe_errors(errors: list[dict[str, Any]], *, skip: tuple[str, ...] = ()) -> str:
    """pydantic error dicts as "field 'a.b': message; ..." (the first three), `skip` dropped from locations."""
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x not in skip) or "<record>"
        msg = "unknown field" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
        parts.append(f"field '{loc}': {msg}")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def _describe(exc: ValidationError, where: str) -> str:
    return f"{where}: {describe_errors(exc.errors())}"


def validate_record(data: Any, *, where: str = "record") -> VerifierRecord:
    """A VerifierRecord from a mapping with exactly the verifier's fields; ValueError names the field."""
    if isinstance(data, VerifierRecord):
        return data
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected an object with {list(VERIFIER_FIELDS)}, got {type(data).__name__}")
    try:
        return VerifierRecord.model_validate(dict(data))
    except ValidationError as exc:
        raise ValueError(_describe(exc, where)) from None


def verifier_record(row: Mapping[str, Any], *, where: str = "row") -> VerifierRecord:
    """The verifier's fields of a built dataset row (its other columns are ignored, `evidence` required)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"{where}: expected a dataset row (mapping), got {type(row).__name__}")
    if "evidence" not in row:
        raise ValueError(f"{where}: no 'evidence' column; build the dataset with `thesisgym build`")
    return validate_record({k: row[k] for k in VERIFIER_FIELDS if k in row}, where=where)


def ground_truth_json(row: Mapping[str, Any] | VerifierRecord, *, where: str = "row") -> str:
    """The verifier record of a row as one JSON string (verl `ground_truth`, OpenRLHF `label`)."""
    record = row if isinstance(row, VerifierRecord) else verifier_record(row, where=where)
    return json.dumps(record.model_dump(exclude_none=True), sort_keys=True, separators=(",", ":"))


def record_from_ground_truth(ground_truth: Any, *, where: str = "ground_truth") -> VerifierRecord:
    """Read back what `ground_truth_json` wrote (a JSON string, or the already decoded mapping)."""
    if isinstance(ground_truth, (str, bytes)):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{where}: not the JSON verifier record written by `thesisgym export` ({exc.msg})"
            ) from None
    return validate_record(ground_truth, where=where)


# --- recipes ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recipe:
    """A recipe's reward functions and weights, exactly as `thesisgym train grpo` passes them to TRL."""

    name: str
    funcs: tuple[Callable[..., Any], ...]
    weights: tuple[float, ...]

    @property
    def reward_names(self) -> tuple[str, ...]:
        return tuple(getattr(f, "__name__", repr(f)) for f in self.funcs)

    @property
    def is_async(self) -> bool:
        return any(inspect.iscoroutinefunction(f) for f in self.funcs)


def default_recipe() -> str:
    """The recipe named by $THESISGYM_RECIPE, else DEFAULT_RECIPE ("dsr")."""
    return os.environ.get(RECIPE_ENV, "").strip() or DEFAULT_RECIPE


def _rewards_config(name: str) -> Any:
    from thesisgym.train.config import load_config
    from thesisgym.train.recipes import recipe_path

    base, _, stage = name.partition(":")
    config = load_config(recipe_path(base))
    kind = getattr(config, "kind", None)
    if kind == "curriculum":
        from thesisgym.train.curriculum import stage_configs

        names = [s.name for s in config.stages]
        k = names.index(stage) if stage in names else (len(names) - 1 if not stage else -1)
        if k < 0:
            raise ValueError(f"recipe {name!r}: no stage {stage!r}; stages: {names}")
        config = stage_configs(config, k, model="<integration>", sft_set="<integration>")[1]
    elif stage:
        raise ValueError(f"recipe {name!r}: only curriculum recipes have stages")
    if getattr(config, "kind", None) != "grpo":
        raise ValueError(f"recipe {name!r} is a {kind!r} config; a reward recipe needs `kind: grpo` or a curriculum")
    return config.rewards


@functools.lru_cache(maxsize=32)
def _load_recipe(name: str) -> Recipe:
    from thesisgym.train.rewards import build_reward_funcs

    rewards = _rewards_config(name).model_copy(update={"diagnostics": False})
    funcs, weights = build_reward_funcs(rewards)
    return Recipe(name=name, funcs=tuple(funcs), weights=tuple(float(w) for w in weights))


def load_recipe(name: str | Recipe | None = None) -> Recipe:
    """A Recipe by name (`dsr`, `fsr`, `market_only`, `trading_r1`, `trading_r1:evidence`) or YAML path.

    None means `default_recipe()`. Built once per name (the reward functions keep their caches).
    """
    if isinstance(name, Recipe):
        return name
    name = default_recipe() if name is None else name
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"recipe: expected a recipe name or YAML path, got {name!r}")
    return _load_recipe(name.strip())


# consistency options that still apply when the judge's client is replaced
_JUDGE_KEEP = frozenset({"top_k", "decision_k", "max_context_tokens", "combine", "retriever", "retriever_options",
                         "fallback", "temperature", "max_tokens"})


def recipe_with_judge_client(name: str | None, client: Any) -> Recipe:
    """The recipe with its consistency judge (fsr/dsr's s, the `consistency` reward) run by the LLM
    judge on `client`: any object with `thesisgym.llm.LLMClient`'s `ajson_batch` and `run`, e.g.
    the verifiers judge adapter. The rewards become async; not cached (the client is per caller)."""
    from thesisgym.train.rewards import build_reward_funcs

    name = default_recipe() if name is None else name
    rewards = _rewards_config(name)
    keep = {k: v for k, v in rewards.consistency_options.items() if k in _JUDGE_KEEP}
    rewards = rewards.model_copy(update={
        "diagnostics": False, "consistency": "llm",
        "consistency_options": {**keep, "client": client, "asynchronous": True},
    })
    funcs, weights = build_reward_funcs(rewards)
    return Recipe(name=f"{name}+judge", funcs=tuple(funcs), weights=tuple(float(w) for w in weights))


# --- scoring ---------------------------------------------------------------------------------------
def _records(records: Sequence[Any], n: int) -> list[VerifierRecord]:
    if len(records) != n:
        raise ValueError(f"{n} completions but {len(records)} records")
    return [r if isinstance(r, VerifierRecord) else verifier_record(r, where=f"record {i}")
            for i, r in enumerate(records)]


def _columns(records: list[VerifierRecord]) -> dict[str, list[Any]]:
    rows = [r.columns() for r in records]
    return {field: [row[field] for row in rows] for field in VERIFIER_FIELDS}


_FAILED = object()  # a reward's value for a row where it raised or returned something not a number


def _total(values: Sequence[Any], weights: Sequence[float]) -> float | None:
    """TRL's sum_then_normalize total before normalisation: nansum(w * v), None when nothing applies,
    and None when a part with a weight failed for this row (a failed part is unknown, not zero)."""
    if any(v is _FAILED for w, v in zip(weights, values, strict=True) if w != 0):
        return None
    applicable = [(w, v) for w, v in zip(weights, values, strict=True)
                  if v is not None and v is not _FAILED and not math.isnan(v)]
    if not applicable:
        return None
    return float(sum(w * v for w, v in applicable))


def _assemble(
    recipe: Recipe,
    completions: Sequence[Any],
    rows: list[VerifierRecord],
    per_func: list[list[Any]],
) -> list[dict[str, Any]]:
    from thesisgym.rewards import score_completion

    out = []
    for i, completion in enumerate(completions):
        values = [col[i] for col in per_func]
        result: dict[str, Any] = {"score": _total(values, recipe.weights)}
        for name, v in zip(recipe.reward_names, values, strict=True):
            result[f"reward/{name}"] = math.nan if v is None or v is _FAILED else v
        for key, v in score_completion(completion, rows[i].columns()).items():
            if key not in _RECIPE_DEPENDENT:
                result[key] = v
        # the row's errors: the verifier's own (score_completion) plus each recipe reward that failed on it
        result["reward_errors"] = result.get("reward_errors", 0.0) + float(sum(v is _FAILED for v in values))
        out.append(result)
    return out


def _failed(fn: Callable[..., Any], exc: BaseException) -> None:
    from thesisgym.rewards.base import record_error

    # the verifier's one counted error path: process-wide count, the caller's `counting_errors`
    # tally, the traceback logged once, re-raised in strict mode
    record_error(getattr(fn, "__name__", repr(fn)), exc)


def _checked(fn: Callable[..., Any], column: Any, n: int) -> list[Any]:
    """A reward's returned column as n values (float, None = not applicable, or _FAILED, counted)."""
    try:
        values = list(column) if not isinstance(column, (str, bytes, Mapping)) else None
    except TypeError:
        values = None
    if values is None or len(values) != n:
        got = f"{len(values)} values" if values is not None else type(column).__name__
        _failed(fn, ValueError(f"returned {got} for {n} completions"))
        return [_FAILED] * n
    for i, v in enumerate(values):
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            values[i] = float(v)
        elif v is not None:
            _failed(fn, TypeError(f"returned {v!r} for completion {i}, not a number or None"))
            values[i] = _FAILED
    return values


def _one_row(i: int, prompts: Any, completions: list[Any], columns: dict[str, Any]) -> tuple[Any, list, dict]:
    return (None if prompts is None else [prompts[i]], [completions[i]], {k: [v[i]] for k, v in columns.items()})


def _call(fn: Callable[..., Any], prompts: Any, completions: list[Any], columns: dict[str, Any]) -> list[Any]:
    """One reward over the batch. The rewards never raise; if one does, the batch is scored again a
    row at a time (they are pure per row), so the failure costs only the rows that raise."""
    n = len(completions)
    try:
        result = fn(prompts=prompts, completions=completions, **columns)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except Exception as exc:  # noqa: BLE001 - counted below, on the rows that raise
        if n == 1:
            _failed(fn, exc)
            return [_FAILED]
        batch_exc = exc
    else:
        return _checked(fn, result, n)  # outside the try: in strict mode its error propagates once
    values = [_call(fn, *_one_row(i, prompts, completions, columns))[0] for i in range(n)]
    return _batch_only(fn, batch_exc, values)


def _batch_only(fn: Callable[..., Any], exc: BaseException, values: list[Any]) -> list[Any]:
    # no single row raises alone: the batch itself broke the reward, and none of its values is known
    if any(v is _FAILED for v in values):
        return values
    _failed(fn, exc)
    return [_FAILED] * len(values)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


async def _acall(fn: Callable[..., Any], prompts: Any, completions: list[Any], columns: dict[str, Any]) -> list[Any]:
    """`_call` for async callers: an async reward awaited here, a CPU-bound one in a worker thread."""
    if not inspect.iscoroutinefunction(fn):
        return await asyncio.to_thread(_call, fn, prompts, completions, columns)
    n = len(completions)
    try:
        result = await fn(prompts=prompts, completions=completions, **columns)
    except Exception as exc:  # noqa: BLE001 - see _call
        if n == 1:
            _failed(fn, exc)
            return [_FAILED]
        batch_exc = exc
    else:
        return _checked(fn, result, n)
    rows = await asyncio.gather(*(_acall(fn, *_one_row(i, prompts, completions, columns)) for i in range(n)))
    return _batch_only(fn, batch_exc, [r[0] for r in rows])


def score_batch(
    completions: Sequence[Any],
    records: Sequence[Any],
    recipe: str | Recipe | None = None,
    *,
    prompts: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """Score completions (strings or TRL conversational messages) against their verifier records.

    `records[i]` is a VerifierRecord or a dataset row (columns other than the verifier's are
    ignored; `validate_record` is the strict form for untrusted input). Completion problems never raise
    (they score the documented minimum); a malformed record raises ValueError naming the field.
    A recipe reward that raises (or returns a non-number) on a row is counted
    (`rewards.base.record_error`; a caller's `counting_errors()` block sees exactly its own call's
    errors) and makes that row's `score` None when the reward has a weight; `reward_errors` per row
    counts them. Async rewards (an LLM consistency judge) are awaited on a private event loop; from
    async code use `ascore_batch`.
    """
    completions = list(completions)
    recipe = load_recipe(recipe)
    rows = _records(records, len(completions))
    columns = _columns(rows)
    per_func = [_call(fn, prompts, completions, columns) for fn in recipe.funcs]
    return _assemble(recipe, completions, rows, per_func)


async def ascore_batch(
    completions: Sequence[Any],
    records: Sequence[Any],
    recipe: str | Recipe | None = None,
    *,
    prompts: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """`score_batch` for async callers: async rewards run concurrently (TRL does the same), the
    CPU-bound ones in a worker thread so the caller's event loop keeps serving."""
    completions = list(completions)
    recipe = load_recipe(recipe)
    rows = _records(records, len(completions))
    columns = _columns(rows)
    per_func = list(await asyncio.gather(*(_acall(fn, prompts, completions, columns) for fn in recipe.funcs)))
    return await asyncio.to_thread(_assemble, recipe, completions, rows, per_func)


def score_one(completion: Any, record: Any, recipe: str | Recipe | None = None) -> dict[str, Any]:
    """`score_batch` for a single completion."""
    return score_batch([completion], [record], recipe)[0]


def no_score_reason(result: Mapping[str, Any], where: str) -> str:
    """Why a scored row has no total: a weighted reward failed (counted), or no reward of the recipe applies."""
    errors = result.get("reward_errors") or 0
    if errors:
        return (f"{where}: {int(errors)} reward(s) of the recipe failed on this row (counted in reward_errors; "
                "the log names the reward), so it has no total")
    return (f"{where}: no reward of the recipe applies (the row has no label or forward return); "
            "`thesisgym export` writes only rows with a complete forward window")
