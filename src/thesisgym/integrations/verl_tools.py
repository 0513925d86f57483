"""verl glue for the point-in-time tools: `BaseTool`s for verl's tool agent loop, their config, rows and reward.

Read from verl 0.9.1's source (the PyPI wheel; volcengine/verl @ b178a3cd has the same `BaseTool`):
- `verl/tools/base_tool.py`: `BaseTool(config, tool_schema)`, async `create(instance_id=None, **kwargs)
  -> (instance_id, ToolResponse)`, `execute(instance_id, parameters, **kwargs) -> (ToolResponse,
  reward, metrics)`, `release(instance_id)`; `verl/tools/tool_registry.py::initialize_tools_from_config`
  builds one instance per YAML entry (`class_name`, `config.type: native`, `tool_schema`), shared by
  every trajectory of a worker.
- `verl/experimental/agent_loop/tool_agent_loop.py` (`tool_agent`): for EVERY call it runs
  `create(create_kwargs=extra_info.tools_kwargs[<tool>].create_kwargs)`, then `execute(instance_id,
  parsed_arguments, agent_data=<the trajectory's AgentData>)`, then `release`; an unknown tool name or
  invalid JSON never reaches a tool. `AgentData.extra_fields` becomes the output's `extra_fields`,
  which the agent reward loop hands to the reward manager as `tool_extra_fields`, merged into the
  `extra_info` of `compute_score` (`verl/experimental/reward_loop/reward_manager/naive.py`).

How the as-of time is bound: the exported row carries `ToolBinding` (ticker, asof, store path,
limits) as every tool's `create_kwargs`; the model's schema (the YAML's `tool_schema`, the same one TRL
shows) has only `days`/`query`. The first call of a trajectory opens its `MarketTools` from that
binding and keeps it for the trajectory (keyed by its `AgentData`, so one ledger and one id sequence
per trajectory); an argument the model adds (`asof=...`) is a tool error, never a new cutoff.

How the reward sees the ledger: every executed call is appended, in execution order, to
`agent_data.extra_fields["thesisgym_tool_calls"]`; `compute_score` replays that log against the same
binding (`tool_replay`: deterministic, so the same items, ids and outputs) and scores the model's own
text through the verifier: the decoded response with exactly those outputs and the parsed tool calls
cut out (`tool_replay.model_text`; the decoded text has no trustworthy turn boundaries, so only text
the tools produced is removed), which is what TRL scores (every assistant turn). When a reward path does not forward `extra_fields` (verl's legacy reward managers, an
offline re-score), it replays the `<tool_call>` blocks of the transcript instead (hermes format): then
calls the loop parsed but did not run (past `max_parallel_calls`, after the last turn) count too.

    python -c "from thesisgym.integrations.verl_tools import write_tool_config; write_tool_config('tools.yaml')"
    # verl config
    actor_rollout_ref.rollout.multi_turn.enable=true
    actor_rollout_ref.rollout.multi_turn.tool_config_path=tools.yaml
    actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1500   # the tools return <= ~1,250 chars
    reward.custom_reward_function.path=pkg://thesisgym.integrations.verl_tools
    reward.custom_reward_function.name=compute_score
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from thesisgym.integrations.core import ground_truth_json, no_score_reason, record_from_ground_truth
from thesisgym.integrations.export import ExportResult, complete_window
from thesisgym.integrations.tool_replay import (
    ToolBinding,
    ToolPrices,
    episode_of_row,
    hermes_calls,
    model_text,
    replay_calls,
    run_call,
    score_with_ledger,
    tool_prompt,
    tool_schema,
)
from thesisgym.integrations.verl import ABILITY, DATA_SOURCE, ID_COLUMNS, pick_recipe
from thesisgym.tools.market import TOOL_NAMES, MarketTools, ToolLimits

__all__ = ["CALLS_KEY", "TOOL_CLASS", "compute_score", "execute_call", "export_tool_rows", "market_tool_class",
           "tool_row", "write_tool_config"]

logger = logging.getLogger(__name__)

CALLS_KEY = "thesisgym_tool_calls"
TOOL_CLASS = f"{__name__}.MarketTool"
# the trajectory's AgentData -> (binding, its tools); weak, so an episode ends with its trajectory
_EPISODES: weakref.WeakKeyDictionary[Any, tuple[ToolBinding, MarketTools]] = weakref.WeakKeyDictionary()


# --- the tool side ---------------------------------------------------------------------------------------
def execute_call(name: str, parameters: Any, create_kwargs: Any, agent_data: Any) -> tuple[str, dict[str, Any]]:
    """One tool call of a verl trajectory: (text for the model, metrics). Never raises."""
    if agent_data is None or not isinstance(getattr(agent_data, "extra_fields", None), dict):
        return "error: thesisgym tools run in verl's tool agent loop (no trajectory state was passed)", {}
    try:
        binding = ToolBinding.parse(create_kwargs, where=f"extra_info.tools_kwargs.{name}.create_kwargs")
        bound = _EPISODES.get(agent_data)
        if bound is None:
            bound = _EPISODES[agent_data] = (binding, binding.open())
    except (ValueError, TypeError) as exc:  # a row exported without a (right) binding: a setup error, said loudly
        logger.error("%s", exc)
        return f"error: this tool is not set up for this row ({exc})", {}
    if bound[0] != binding:
        return "error: the tools of one trajectory must share one binding (ticker, as-of day, store)", {}
    agent_data.extra_fields.setdefault(CALLS_KEY, []).append({"name": name, "arguments": copy.deepcopy(parameters)})
    text, ok = run_call(bound[1], name, parameters)
    return text, {"ok": ok, "chars": len(text)}


def __getattr__(name: str) -> Any:
    # PEP 562: the BaseTool subclass needs verl, which this module does not need otherwise (rows, config
    # and reward work without it); verl's tool registry resolves `class_name` with getattr
    if name == "MarketTool":
        return market_tool_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def market_tool_class() -> type:
    """`MarketTool(config, tool_schema)`: a verl `BaseTool` for one of the six tools (named by its schema)."""
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    class MarketTool(BaseTool):
        """One point-in-time market tool; the trajectory's binding comes from `create_kwargs`."""

        def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
            name = tool_schema.function.name if tool_schema is not None else (config or {}).get("tool")
            if name not in TOOL_NAMES:
                raise ValueError(f"MarketTool: unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
            self._tool, self._instances = name, {}
            super().__init__(config, tool_schema)

        def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
            return OpenAIFunctionToolSchema.model_validate(tool_schema(self._tool))

        async def create(self, instance_id: str | None = None, create_kwargs: Any = None, **kwargs: Any):
            instance_id = instance_id or uuid4().hex
            self._instances[instance_id] = create_kwargs or {}
            return instance_id, ToolResponse()

        async def execute(self, instance_id: str, parameters: Any, **kwargs: Any):
            text, metrics = execute_call(self.name, parameters, self._instances.get(instance_id),
                                         kwargs.get("agent_data"))
            return ToolResponse(text=text), 0.0, metrics

        async def release(self, instance_id: str, **kwargs: Any) -> None:
            self._instances.pop(instance_id, None)

    MarketTool.__module__, MarketTool.__qualname__ = __name__, "MarketTool"
    return MarketTool


def write_tool_config(path: str | Path, *, tools: Sequence[str] = TOOL_NAMES, limits: ToolLimits | None = None) -> Path:
    """Write verl's `tool_config_path` YAML: one native `MarketTool` per tool, with its schema under `limits`
    (the rows' `limits`, so the ranges the model reads are the ones its calls get)."""
    import yaml

    unknown = [t for t in tools if t not in TOOL_NAMES]
    if unknown or not tools:
        raise ValueError(f"tools: expected names among {', '.join(TOOL_NAMES)}, got {list(tools)}")
    doc = {"tools": [{"class_name": TOOL_CLASS, "config": {"type": "native"}, "tool_schema": tool_schema(t, limits)}
                     for t in tools]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


# --- the reward side -------------------------------------------------------------------------------------
def _binding(extra_info: Mapping[str, Any]) -> ToolBinding:
    kwargs = extra_info.get("tools_kwargs")
    if not isinstance(kwargs, Mapping) or not kwargs:
        raise ValueError("extra_info: no 'tools_kwargs'; export tool rows with thesisgym.integrations.verl_tools")
    found = [ToolBinding.parse(v.get("create_kwargs") if isinstance(v, Mapping) else None,
                               where=f"extra_info.tools_kwargs.{k}.create_kwargs") for k, v in kwargs.items()]
    if any(b != found[0] for b in found):
        raise ValueError("extra_info.tools_kwargs: the tools of one row must share one binding")
    return found[0]


def _calls(solution_str: str, extra_info: Mapping[str, Any]) -> list[Any]:
    if CALLS_KEY in extra_info:
        return list(extra_info[CALLS_KEY] or [])
    if "tool_rewards" in extra_info:  # the tool agent loop's extra_fields arrived: no tool ran
        return []
    return hermes_calls(solution_str)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    recipe: str | None = None,
    per_call: float = 0.0,
    per_failed_call: float = 0.0,
    per_1k_chars: float = 0.0,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's per-response reward for a tool row: the model's text (`tool_replay.model_text`: every turn,
    tool calls and tool outputs cut) scored against the trajectory's ledger.

    {"score": recipe total - tool cost, "reward/<name>", the verifier's components, "tools/calls",
    "tools/failed", "tools/chars", "tools/items", "tools/cost"}; prices come from `reward_kwargs`
    (default 0). A row without a binding or a label raises ValueError (an export problem, not the model's).
    """
    extra_info = extra_info if isinstance(extra_info, Mapping) else {}
    binding = _binding(extra_info)
    record = record_from_ground_truth(ground_truth)
    tools, outputs = replay_calls(binding, _calls(solution_str, extra_info))
    prices = ToolPrices(per_call=per_call, per_failed_call=per_failed_call, per_1k_chars=per_1k_chars)
    result = score_with_ledger([model_text(solution_str, outputs)], [tools], [record],
                               pick_recipe(recipe, extra_info), prices=prices)[0]
    if result["score"] is None:
        raise ValueError(no_score_reason(result, "ground_truth"))
    return {k: (float("nan") if v is None else float(v)) for k, v in result.items()}


# --- rows ----------------------------------------------------------------------------------------------------
def tool_row(row: Mapping[str, Any], *, split: str, index: int, store: str | Path,
             limits: ToolLimits | None = None, recipe: str | None = None, data_source: str = DATA_SOURCE,
             tools: Sequence[str] = TOOL_NAMES) -> dict[str, Any]:
    """One verl parquet row of a tool episode: the tool prompt (no evidence), `agent_name: tool_agent`,
    the binding as every tool's `create_kwargs`, and a ground truth holding the label and returns (the
    ledger is the evidence)."""
    binding, record = episode_of_row(row, store, limits=limits, where=f"row {index}")
    extra: dict[str, Any] = {"split": split, "index": index, **{c: row[c] for c in ID_COLUMNS if c in row}}
    extra["tools_kwargs"] = {t: {"create_kwargs": binding.model_dump(exclude_none=True)} for t in tools}
    extra["need_tools_kwargs"] = True
    if recipe:
        extra["recipe"] = recipe
    # agent_name picks verl's tool agent loop for the row (as verl's examples/data_preprocess/gsm8k_tool_agent_loop.py)
    return {"data_source": data_source, "agent_name": "tool_agent", "prompt": tool_prompt(binding.ticker, binding.asof),
            "ability": ABILITY, "reward_model": {"style": "rule", "ground_truth": ground_truth_json(record)},
            "extra_info": extra}


def export_tool_rows(rows: Iterable[Mapping[str, Any]], out: str | Path, *, split: str, store: str | Path,
                     limits: ToolLimits | None = None, recipe: str | None = None,
                     keep_incomplete: bool = False) -> ExportResult:
    """Write `rows` (a built split) as verl tool rows to parquet `out`, atomically; rows without a
    complete forward window are skipped and counted unless `keep_incomplete`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records, skipped = [], 0
    for i, row in enumerate(rows):
        if not keep_incomplete and not complete_window(row):
            skipped += 1
            continue
        records.append(tool_row(row, split=split, index=i, store=store, limits=limits, recipe=recipe))
    if not records:
        raise ValueError(f"split {split!r}: no row to export ({skipped} without a complete forward window)")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        pq.write_table(pa.Table.from_pylist(records), tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportResult(out, len(records), skipped)
