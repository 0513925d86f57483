"""The stack-free core of the verifiers and verl tool adapters: bind, run, replay and score tool calls.

A tool episode is bound by a `ToolBinding` (ticker, as-of day, MarketStore directory, optional
`ToolLimits`) that travels with the dataset row: verl's `extra_info.tools_kwargs.<tool>.create_kwargs`,
the verifiers task's data. The model never writes it; `ToolBinding.open()` gives the episode's
`MarketTools` over `store.as_of(asof)` (a store is read once per process and a day's view is shared by
the episodes of that day: the tools only read it).

Why replay: in verl and verifiers the tools run in one place (an agent-loop worker, an MCP tool
server) and the reward in another, so the episode's evidence ledger cannot be handed over as an
object. The tools are deterministic and their ids depend only on the calls made before, so replaying
the calls of a trajectory, in the order they ran, against the same binding rebuilds the ledger
exactly (same items, same ids, same usage). The stacks hand the reward that call log
(`ToolCall`s); `hermes_calls` and `message_calls` read it back from a transcript instead, for paths
that do not forward it and for offline re-scoring.

`score_with_ledger` then scores the model's text (all its turns, as TRL does; `model_text` cuts the
tool outputs out of a decoded transcript) through `thesisgym.integrations.core.score_batch` (the one
verifier path) with the row's `evidence`/`sections` replaced by the ledger's, as
`thesisgym.tools.with_tool_evidence` does for TRL: a quote of something no tool returned is a
hallucination. It adds the episode's usage (`tools/calls`, `tools/failed`, `tools/chars`,
`tools/items`) and, with `ToolPrices`, subtracts their price from the score (`tools/cost`).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
from pydantic import Field, ValidationError, field_validator

from thesisgym.data.asof import AsOfView
from thesisgym.data.store import MarketStore
from thesisgym.integrations.core import Recipe, VerifierRecord, describe_errors, score_batch, validate_record
from thesisgym.schema import StrictModel
from thesisgym.tools.env import MarketToolEnv
from thesisgym.tools.market import TOOL_NAMES, MarketTools, ToolError, ToolLimits
from thesisgym.tools.prompts import TOOL_SYSTEM_PROMPT, tool_messages

__all__ = [
    "TOOL_SYSTEM_PROMPT",
    "ToolBinding",
    "ToolCall",
    "ToolPrices",
    "episode_of_row",
    "hermes_calls",
    "load_store",
    "message_calls",
    "model_text",
    "replay_calls",
    "run_call",
    "score_with_ledger",
    "tool_prompt",
    "tool_schema",
]

logger = logging.getLogger(__name__)

# verl's hermes parser (verl/experimental/agent_loop/tool_parser.py, HermesToolParser): the same regex
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
# tool-response blocks left empty once the real outputs are cut, with the ChatML role lines around
# them that a decoder skipping special tokens leaves ("user" before a block, "assistant" after the last)
_ROLE_BEFORE_EMPTIED = re.compile(r"\n?user\n(?=\s*<tool_response>\s*</tool_response>)")
_EMPTIED_RESPONSES = re.compile(r"(?:\s*<tool_response>\s*</tool_response>)+\s*(?:assistant\n)?")


class ToolCall(TypedDict):
    """One tool call as it ran: the tool's name and the model's JSON arguments."""

    name: str
    arguments: Any


class ToolBinding(StrictModel, frozen=True):
    """What binds an episode's tools: set from the dataset row, never an argument the model writes."""

    ticker: str = Field(min_length=1)
    asof: str = Field(min_length=10, max_length=10, description="the as-of trading day, YYYY-MM-DD")
    store: str = Field(min_length=1, description="a MarketStore directory (MarketStore.save)")
    limits: dict[str, int] | None = None
    """ToolLimits fields (max_items, max_chars, ...); None = the defaults."""

    @field_validator("asof")
    @classmethod
    def _a_day(cls, v: str) -> str:
        try:
            day = pd.Timestamp(v)
        except (TypeError, ValueError):
            raise ValueError(f"expected a YYYY-MM-DD day, got {v!r}") from None
        if day.tzinfo is not None or day != day.normalize():
            raise ValueError(f"expected a YYYY-MM-DD day, got {v!r}")
        return v

    @field_validator("limits")
    @classmethod
    def _known_limits(cls, v: dict[str, int] | None) -> dict[str, int] | None:
        if v is not None:
            try:
                ToolLimits(**v)
            except TypeError as exc:
                raise ValueError(f"not ToolLimits fields: {exc}") from None
        return v

    @classmethod
    def parse(cls, data: Any, *, where: str) -> ToolBinding:
        """A binding from a mapping (create_kwargs, task data); ValueError names `where` and the field."""
        if isinstance(data, ToolBinding):
            return data
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected an object with ticker, asof, store, got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise ValueError(f"{where}: {describe_errors(exc.errors())}") from None

    def open(self) -> MarketTools:
        """A fresh episode: the tools over the store as it was at the cutoff of `asof`."""
        path = _store_dir(self.store)
        if self.ticker not in _load(path).tickers:
            raise ValueError(f"tool binding: ticker {self.ticker!r} is not in the store at {self.store}")
        limits = ToolLimits(**self.limits) if self.limits else None
        return MarketTools(_view(path, self.asof), self.ticker, limits=limits)


@dataclass(frozen=True)
class ToolPrices:
    """What a trajectory's tool use costs in reward units (all zero: free, the recipe total unchanged)."""

    per_call: float = 0.0
    per_failed_call: float = 0.0
    per_1k_chars: float = 0.0

    def cost(self, tools: MarketTools) -> float:
        u = tools.usage
        return self.per_call * u.calls + self.per_failed_call * u.failed + self.per_1k_chars * u.chars / 1000


@functools.lru_cache(maxsize=4)
def _load(path: str) -> MarketStore:
    return MarketStore.load(path)


# One as-of view serves every episode of that day: the rollouts of a GRPO group, and the reward's
# replay of each. A view holds copies of the visible rows and the tools only read it; building one
# costs ~0.5 s on a 100-ticker x 2,000-day store (~30 MB), hence a small cache.
@functools.lru_cache(maxsize=8)
def _view(path: str, asof: str) -> AsOfView:
    return _load(path).as_of(asof)


def _store_dir(path: str | Path) -> str:
    resolved = Path(path).expanduser().resolve()
    if not (resolved / "bars.parquet").exists():
        raise ValueError(f"tool binding field 'store': {path} is not a MarketStore directory (no bars.parquet)")
    return str(resolved)


def load_store(path: str | Path) -> MarketStore:
    """The MarketStore at `path`, read once per process (the tools only read it)."""
    return _load(_store_dir(path))


# --- running and replaying calls ----------------------------------------------------------------------
def run_call(tools: MarketTools, name: Any, arguments: Any) -> tuple[str, bool]:
    """Run one model tool call: (output, True), or (an error message for the model, False).

    A bad call (unknown tool, arguments that are not an object, a bad value) is a tool error, counted
    in `tools.usage`, never an exception. An unexpected exception inside a tool is logged and counted
    as a failed call too, so the live episode and its replay fail the same way.
    """
    name = str(name)
    if not isinstance(arguments, Mapping):
        _count_failure(tools, name)
        return f"error: {name}: the arguments must be a JSON object, got {type(arguments).__name__}", False
    try:
        return tools.call(name, **{str(k): v for k, v in arguments.items()}), True
    except ToolError as exc:
        return f"error: {exc}", False
    except Exception as exc:  # noqa: BLE001 - a tool bug must not end the episode; it is logged
        logger.error("tool %s raised %s: %s (counted as a failed call)", name, type(exc).__name__, exc)
        tools.usage.failed += 1
        return f"error: {name} failed ({type(exc).__name__})", False


def _count_failure(tools: MarketTools, name: str) -> None:
    usage = tools.usage
    usage.calls += 1
    usage.failed += 1
    usage.by_tool[name] = usage.by_tool.get(name, 0) + 1


def replay_calls(binding: ToolBinding, calls: Iterable[Mapping[str, Any]]) -> tuple[MarketTools, list[str]]:
    """A fresh episode for `binding` with `calls` run in order, and what each call returned: the
    ledger, usage and outputs of the original episode."""
    tools, outputs = binding.open(), []
    for k, call in enumerate(calls):
        if not isinstance(call, Mapping) or "name" not in call:
            raise ValueError(f"tool call {k}: expected {{name, arguments}}, got {call!r}")
        outputs.append(run_call(tools, call["name"], call.get("arguments", {}))[0])
    return tools, outputs


def hermes_calls(text: str) -> list[ToolCall]:
    """The tool calls in a hermes-format transcript (`<tool_call>{"name", "arguments"}</tool_call>`),
    parsed as verl's HermesToolParser parses them: a block that is not JSON with both keys is skipped."""
    calls: list[ToolCall] = []
    for block in _TOOL_CALL.findall(text or ""):
        try:
            obj = json.loads(block)
            calls.append(ToolCall(name=obj["name"], arguments=obj["arguments"]))
        except (ValueError, KeyError, TypeError):
            continue
    return calls


def message_calls(messages: Iterable[Any]) -> list[ToolCall]:
    """The tool calls of OpenAI-style chat messages (dicts or pydantic messages: TRL completions,
    verifiers traces), in order. Arguments that are not valid JSON are skipped, as the harnesses do."""
    calls: list[ToolCall] = []
    for message in messages:
        m = message.model_dump() if hasattr(message, "model_dump") else message
        if not isinstance(m, Mapping) or m.get("role") != "assistant":
            continue
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
            arguments = fn.get("arguments", {})
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except ValueError:
                    continue
            if fn.get("name"):
                calls.append(ToolCall(name=fn["name"], arguments=arguments))
    return calls


def model_text(transcript: str, outputs: Sequence[str]) -> str:
    """The model's own text in a decoded hermes/ChatML transcript (verl decodes with special tokens
    skipped, so turn boundaries are plain text a model could forge): the text with the real tool
    outputs removed, each found in order after the previous one, then the emptied
    `<tool_response>` blocks with the role lines around them, then the tool calls verl would parse.

    Nothing the model wrote can be hidden from scoring: a forged `<tool_response>` block keeps its
    content (only a real output is cut), and a tool-call block is cut only when it parses as a call.
    A tool output verl truncated (`max_tool_response_length`) is not found and stays in the text."""
    text, kept, pos = transcript or "", [], 0
    for out in outputs:
        k = text.find(out, pos) if out else -1
        if k >= 0:
            kept.append(text[pos:k])
            pos = k + len(out)
    text = "".join(kept) + text[pos:]
    text = _EMPTIED_RESPONSES.sub("\n", _ROLE_BEFORE_EMPTIED.sub("", text))
    text = _TOOL_CALL.sub(lambda m: "" if hermes_calls(m.group(0)) else m.group(0), text)
    return text.strip()


# --- scoring -------------------------------------------------------------------------------------------
def score_with_ledger(
    completions: Sequence[Any],
    ledgers: Sequence[MarketTools],
    records: Sequence[VerifierRecord],
    recipe: str | Recipe | None = None,
    *,
    prices: ToolPrices | None = None,
) -> list[dict[str, Any]]:
    """`core.score_batch` with each record's evidence and sections replaced by its episode's ledger,
    plus the usage keys; `score` pays `prices` for the calls (None stays None: nothing applies)."""
    if not len(completions) == len(ledgers) == len(records):
        raise ValueError(f"{len(completions)} completions, {len(ledgers)} ledgers, {len(records)} records")
    prices = prices or ToolPrices()
    rows = [
        validate_record({**rec.model_dump(), "evidence": [dict(it) for it in tools.evidence()],
                         "sections": tools.sections()}, where=f"ledger {i}")
        for i, (rec, tools) in enumerate(zip(records, ledgers, strict=True))
    ]
    out = score_batch(completions, rows, recipe)
    for result, tools in zip(out, ledgers, strict=True):
        cost = prices.cost(tools)
        u = tools.usage
        result.update({"tools/calls": float(u.calls), "tools/failed": float(u.failed), "tools/chars": float(u.chars),
                       "tools/items": float(len(tools.evidence())), "tools/cost": float(cost)})
        if result["score"] is not None:
            result["score"] = float(result["score"]) - cost
    return out


# --- rows and schemas ------------------------------------------------------------------------------------
def tool_prompt(ticker: str, asof: str, *, system_prompt: str = TOOL_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat prompt of a tool episode (`thesisgym.tools.prompts.tool_messages`: the same text as in TRL)."""
    return tool_messages({"ticker": ticker, "asof": asof}, system_prompt=system_prompt)


def episode_of_row(row: Mapping[str, Any], store: str | Path, *, limits: ToolLimits | None = None,
                   where: str = "row") -> tuple[ToolBinding, VerifierRecord]:
    """(binding, verifier record without evidence) of a built dataset row: what a tool row carries."""
    for key in ("ticker", "asof"):
        if not row.get(key):
            raise ValueError(f"{where}: field '{key}' is missing; a tool episode needs the row's ticker and as-of day")
    binding = ToolBinding.parse(
        {"ticker": str(row["ticker"]), "asof": str(row["asof"])[:10], "store": str(Path(store).expanduser().resolve()),
         "limits": asdict(limits) if limits is not None else None},
        where=where,
    )
    record = validate_record({"evidence": [], **{k: row.get(k) for k in ("label", "fwd_return", "fwd_vol")}},
                             where=where)
    return binding, record


def tool_schema(name: str, limits: ToolLimits | None = None) -> dict[str, Any]:
    """The OpenAI function schema of tool `name` under `limits`: the one TRL shows for `MarketToolEnv`."""
    from transformers.utils import get_json_schema

    if name not in TOOL_NAMES:
        raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    # an environment without a store: the schema reads only the method's signature and docstring
    schema = get_json_schema(getattr(MarketToolEnv(None, limits), name))  # type: ignore[arg-type]
    schema["function"].pop("return", None)
    return schema
