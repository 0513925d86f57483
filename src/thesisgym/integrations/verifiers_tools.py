"""A verifiers (v1) tool environment: the six point-in-time tools as an MCP Toolset, scored on the ledger.

Needs `pip install 'thesisgym[verifiers]'`. Written against verifiers 0.4.0 (the PyPI wheel ships only
`verifiers.v1`; PrimeIntellect-ai/verifiers @ a60a606e: `verifiers/v1/mcp/toolset.py`,
`verifiers/v1/mcp/server.py`, `verifiers/v1/task.py`, `verifiers/v1/utils/decorators.py`). The legacy
`StatefulToolEnv.add_tool(fn, args_to_skip=[...])` of the git tree is not in that release.

- `MarketToolset` is a `vf.Toolset` (an MCP tool server that verifiers launches per rollout, in its
  own process: `python -m thesisgym.integrations.verifiers_tools`). Its `@vf.tool` methods are the six
  tools with exactly the arguments TRL's `MarketToolEnv` shows (`days`, `query`) and its docstrings.
  The ticker, the as-of day and the store are not arguments at all: verifiers hands the server the
  rollout's task (`setup_task(task)`), whose `ToolBinding` opens the episode's `MarketTools`. A key the
  model adds to a call (`asof=...`) is dropped by the MCP argument model. A value the tools refuse
  (`days=400`, an unknown tool) is answered with an `error: ...` text, never a crash; a JSON type the
  MCP argument model rejects (`days="many"`) is an MCP error result and never reaches the server.
- Each call the server runs is appended to the rollout's `MarketToolState.calls`, which verifiers
  syncs between the server and the trace (`trace.state`).
- `ThesisToolTask`'s one `@vf.reward` (`thesisgym`) replays those calls against the task's binding
  (`thesisgym.integrations.tool_replay`: deterministic, so the same ledger and ids the model saw) and
  scores the text of every assistant turn (what TRL scores) through `thesisgym.integrations.core`
  with the ledger as its evidence;
  `@vf.metric components` records the recipe rewards, the verifier's diagnostics and the tool usage.
  A trace read back from disk has no state (verifiers excludes it): the calls are then read from its
  messages (`tool_replay.message_calls`).
- `ThesisToolTaskset(ThesisToolTasksetConfig(dataset=..., split=..., store=...))` yields one task per
  built row with a complete forward window; `store` defaults to the store recorded in the build's meta.

Caveat: verifiers syncs state last-write-wins per call; a harness that runs several calls of one turn
concurrently can lose a log entry (verifiers' own chat loop runs them in order).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from thesisgym.integrations.core import VerifierRecord, default_recipe
from thesisgym.integrations.tool_replay import (
    ToolBinding,
    ToolPrices,
    episode_of_row,
    message_calls,
    replay_calls,
    run_call,
    score_with_ledger,
    tool_prompt,
)
from thesisgym.integrations.verifiers_env import ScoredOnce
from thesisgym.tools.env import MarketToolEnv
from thesisgym.tools.market import TOOL_NAMES, MarketTools, ToolError

__all__ = ["MarketToolState", "MarketToolset", "ThesisToolData", "ThesisToolTask", "ThesisToolTaskConfig",
           "ThesisToolTaskset", "ThesisToolTasksetConfig"]

logger = logging.getLogger(__name__)


class MarketToolState(vf.State):
    calls: list[dict[str, Any]] = Field(default_factory=list)
    """Every call the tool server ran, in order: {"name", "arguments"}."""


class ThesisToolData(vf.TaskData):
    record: VerifierRecord
    """Label and forward return of the row; its evidence is empty (the ledger is the evidence)."""
    tools: ToolBinding
    """Ticker, as-of day and store of the episode's tools."""
    split: str = ""


class MarketToolset(vf.Toolset[vf.ToolsetConfig, MarketToolState]):
    TOOL_PREFIX = None  # bare names, as TRL shows them: get_prices, search_news, ...

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.episode: MarketTools | None = None

    async def setup_task(self, task: Any) -> None:
        binding = task.tools if isinstance(task.tools, ToolBinding) else ToolBinding.parse(task.tools, where="task")
        self.episode = await asyncio.to_thread(binding.open)

    def _run(self, name: str, **arguments: Any) -> str:
        if self.episode is None:
            raise ToolError("no task is bound to this tool server")
        self.state.calls.append({"name": name, "arguments": arguments})
        # a refused call answers "error: ..." rather than raising: verifiers drops the state changes of a
        # tool that raises, and the failed call must stay in the log to be counted (and priced)
        return run_call(self.episode, name, arguments)[0]

    @vf.tool
    def get_prices(self, days: int = 5) -> str:
        return self._run("get_prices", days=days)

    @vf.tool
    def search_news(self, query: str, days: int = 30) -> str:
        return self._run("search_news", query=query, days=days)

    @vf.tool
    def get_fundamentals(self, days: int = 120) -> str:
        return self._run("get_fundamentals", days=days)

    @vf.tool
    def get_insider(self, days: int = 90) -> str:
        return self._run("get_insider", days=days)

    @vf.tool
    def get_analyst(self, days: int = 90) -> str:
        return self._run("get_analyst", days=days)

    @vf.tool
    def get_macro(self, days: int = 60) -> str:
        return self._run("get_macro", days=days)


# one source for what every stack shows the model: the TRL environment's docstrings
for _tool in TOOL_NAMES:
    getattr(MarketToolset, _tool).__doc__ = getattr(MarketToolEnv, _tool).__doc__
del _tool


class ThesisToolTaskConfig(vf.TaskConfig):
    recipe: str = Field(default_factory=default_recipe)
    """Reward recipe: dsr, fsr, market_only, trading_r1[:stage] or a GRPO YAML path."""
    tools: vf.ToolsetConfig = vf.ToolsetConfig()
    per_call: float = 0.0
    """Reward units subtracted per tool call (and per failed call, per 1,000 returned characters)."""
    per_failed_call: float = 0.0
    per_1k_chars: float = 0.0


class ThesisToolTask(ScoredOnce, vf.Task[ThesisToolData, MarketToolState, ThesisToolTaskConfig]):
    @classmethod
    def toolsets(cls, config: ThesisToolTaskConfig) -> list[vf.Toolset]:
        return [MarketToolset(config.tools)]

    def calls(self, trace: vf.Trace) -> list[dict[str, Any]]:
        """The calls of `trace`: its state's log, or its messages' tool calls when the state is empty
        (a trace read back from disk); calls that never reached the server fail the same way on replay."""
        logged = list(getattr(trace.state, "calls", None) or [])
        return logged or [_as_served(c) for c in message_calls(trace.messages)]

    async def _score(self, trace: vf.Trace) -> dict[str, Any]:
        tools, _ = await asyncio.to_thread(replay_calls, self.data.tools, self.calls(trace))
        prices = ToolPrices(self.config.per_call, self.config.per_failed_call, self.config.per_1k_chars)
        return (await asyncio.to_thread(score_with_ledger, [_completion(trace)], [tools], [self.data.record],
                                        self.config.recipe, prices=prices))[0]


class ThesisToolTasksetConfig(vf.TasksetConfig):
    dataset: str = ""
    """Directory saved by `thesisgym build`."""
    split: str = "train"
    store: str = ""
    """MarketStore directory the tools read; default: the store recorded in the build's meta."""
    keep_incomplete: bool = False
    task: ThesisToolTaskConfig = ThesisToolTaskConfig()


class ThesisToolTaskset(vf.Taskset[ThesisToolTask, ThesisToolTasksetConfig]):
    def load(self) -> list[ThesisToolTask]:
        from thesisgym.dataset.splits import load_split
        from thesisgym.integrations.export import complete_window

        if not self.config.dataset:
            raise ValueError("ThesisToolTasksetConfig.dataset: set it to a directory saved by `thesisgym build`")
        from thesisgym.dataset.splits import recorded_store

        store = self.config.store or recorded_store(Path(self.config.dataset))
        if store is None:
            raise ValueError(f"ThesisToolTasksetConfig.store: {self.config.dataset} records no store path; set `store`")
        tasks, skipped = [], 0
        for i, row in enumerate(load_split(Path(self.config.dataset), self.config.split)):
            if not self.config.keep_incomplete and not complete_window(row):
                skipped += 1
                continue
            binding, record = episode_of_row(row, store, where=f"{self.config.dataset} [{self.config.split}] row {i}")
            system, user = tool_prompt(binding.ticker, binding.asof)
            data = ThesisToolData(id=f"{self.config.split}/{i}", prompt=user["content"],
                                  system_prompt=system["content"], record=record, tools=binding,
                                  split=self.config.split)
            tasks.append(ThesisToolTask(data, self.config.task))
        if skipped:
            logger.warning("thesisgym tool taskset: skipped %d of %d rows without a complete forward window",
                           skipped, skipped + len(tasks))
        return tasks


def _completion(trace: vf.Trace) -> Any:
    """What TRL scores for a tool episode: every assistant turn's text (tool calls are not text)."""
    turns = [{"role": "assistant", "content": m.content} for m in trace.messages
             if getattr(m, "role", None) == "assistant" and isinstance(m.content, str) and m.content.strip()]
    return turns or trace.last_reply


def _as_served(call: Mapping[str, Any]) -> dict[str, Any]:
    """A transcript call as the MCP server would have run it: keys the tool does not take are dropped
    (its argument model ignores them), so a transcript replay matches the live episode."""
    name, arguments = call["name"], call["arguments"]
    if name in TOOL_NAMES and isinstance(arguments, Mapping):
        params = inspect.signature(getattr(MarketTools, name)).parameters
        arguments = {k: v for k, v in arguments.items() if k in params and k != "self"}
    return {"name": name, "arguments": arguments}


if __name__ == "__main__":  # verifiers launches the per-rollout tool server as this module
    MarketToolset.run()
