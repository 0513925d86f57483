"""The analyst's tool environment for TRL's GRPOTrainer (`environment_factory`), and its rewards.

TRL builds one `MarketToolEnv` per rollout, calls `reset(**row)` with the dataset row, and exposes every
public method as a tool (their docstrings, `thesisgym.tools.prompts.TOOL_DOCS` with the environment's
`ToolLimits` filled in, are the schemas the model sees). `reset` binds the row's
ticker and as-of day: the store is seen through `store.as_of(day)` (thesisgym.data.asof), so no argument
of any tool can move the cutoff. The row's own `evidence` column is never read here.

`with_tool_evidence(funcs)` wraps reward functions of the usual TRL signature so that each completion is
verified against what ITS rollout's tools returned (TRL passes the rollout environments as
`environments=`): the `evidence` and `sections` columns are replaced by the environment's ledger, and the
same verifier code path scores the final thesis (tool messages are not part of it: `completion_text`
keeps assistant turns only). A quote of something no tool returned is a hallucination. `tool_usage_reward`
prices calls, failed calls and returned characters (zero-weight diagnostics by default).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from thesisgym.data.asof import AsOfView, Timeline
from thesisgym.data.store import MarketStore
from thesisgym.tools.market import MarketTools, ToolLimits
from thesisgym.tools.prompts import tool_docs

__all__ = ["MarketToolEnv", "tool_env_factory", "tool_usage_reward", "with_tool_evidence"]

# As-of views are cheap (thesisgym.data.asof: slices of the visible rows, no copies), so this bounds
# the bookkeeping, not a copy of the market per day: the rollouts of one prompt, and the prompts of one
# day, share a view. One cache for every environment of the process.
VIEW_CACHE_SIZE = 64


@functools.lru_cache(maxsize=VIEW_CACHE_SIZE)
def _view(timeline: Timeline, day: str) -> AsOfView:
    """The view of `day` through `timeline`. The key holds all the view depends on: the timeline itself
    (a strong reference, so never confused with a later object at the same address; a store whose
    frames change builds a new timeline) and the day."""
    return timeline.view(day)


class MarketToolEnv:
    """One rollout's market tools (TRL `environment_factory` protocol: `reset(**row)` + public tool methods)."""

    def __init__(self, timeline: Timeline, limits: ToolLimits | None = None) -> None:
        self._timeline = timeline
        self._limits = limits or ToolLimits()
        self._tools: MarketTools | None = None
        # the tools as the model sees them: descriptions with this environment's limits (tools/prompts.py)
        for name, doc in tool_docs(self._limits).items():
            setattr(self, name, _described(getattr(self, name), doc))

    def reset(self, **row: Any) -> str | None:
        if "ticker" not in row or "asof" not in row:
            raise ValueError(f"MarketToolEnv.reset: the row needs `ticker` and `asof` (got {sorted(row)})")
        day = str(row["asof"])[:10]  # "2020-01-13", a datetime or a Timestamp: one key per day
        self._tools = MarketTools(_view(self._timeline, day), row["ticker"], limits=self._limits)
        return None

    @property
    def tools(self) -> MarketTools:
        if self._tools is None:
            raise RuntimeError("MarketToolEnv: call reset(**row) before the tools")
        return self._tools

    def get_prices(self, days: int = 5) -> str:
        return self.tools.call("get_prices", days=days)

    def search_news(self, query: str, days: int = 30) -> str:
        return self.tools.call("search_news", query=query, days=days)

    def get_fundamentals(self, days: int = 120) -> str:
        return self.tools.call("get_fundamentals", days=days)

    def get_insider(self, days: int = 90) -> str:
        return self.tools.call("get_insider", days=days)

    def get_analyst(self, days: int = 90) -> str:
        return self.tools.call("get_analyst", days=days)

    def get_macro(self, days: int = 60) -> str:
        return self.tools.call("get_macro", days=days)


# the class's own tool docstrings (what schemas read off the class show) carry the default limits
for _name, _doc in tool_docs().items():
    getattr(MarketToolEnv, _name).__doc__ = _doc
del _name, _doc


def _described(method: Callable, doc: str) -> Callable:
    """`method` with the docstring `doc`: TRL lists the tools on the class and reads them off the instance."""

    @functools.wraps(method)
    def tool(*args: Any, **kwargs: Any) -> Any:
        return method(*args, **kwargs)

    tool.__doc__ = doc
    return tool


def tool_env_factory(store: MarketStore, *, limits: ToolLimits | None = None) -> Callable[[], MarketToolEnv]:
    """A zero-argument factory for TRL: every environment shares the store's one point-in-time door, and the
    read-only view of each as-of day (`_view`: the rollouts of one prompt, and of one day's tickers, reuse it)."""
    timeline = store.timeline()
    return functools.partial(MarketToolEnv, timeline, limits)


def _ledgers(environments: Sequence[Any] | None, n: int) -> list[MarketTools | None]:
    if environments is None:
        return [None] * n
    return [getattr(env, "_tools", None) for env in environments]


def with_tool_evidence(funcs: Sequence[Callable]) -> list[Callable]:
    """Each reward in `funcs`, scoring every completion against its own rollout's tool ledger."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def reward(prompts, completions, environments=None, **columns):
            tools = _ledgers(environments, len(completions))
            columns["evidence"] = [t.evidence() if t is not None else [] for t in tools]
            columns["sections"] = [t.sections() if t is not None else [] for t in tools]
            return fn(prompts, completions, **columns)

        return reward

    return [wrap(fn) for fn in funcs]


def tool_usage_reward(*, per_call: float = 0.0, per_failed_call: float = 0.0, per_1k_chars: float = 0.0,
                      name: str = "tool_cost") -> Callable:
    """-(price of the calls, failed calls and returned characters) per rollout; logs the counts as metrics."""

    def reward(prompts, completions, environments=None, log_metric=None, **_):
        tools = _ledgers(environments, len(completions))
        usage = [t.usage if t is not None else None for t in tools]
        out = [-(per_call * u.calls + per_failed_call * u.failed + per_1k_chars * u.chars / 1000) if u else 0.0
               for u in usage]
        if log_metric is not None and any(usage):
            known = [u for u in usage if u]
            log_metric("tools/calls", sum(u.calls for u in known) / len(known))
            log_metric("tools/failed", sum(u.failed for u in known) / len(known))
            log_metric("tools/chars", sum(u.chars for u in known) / len(known))
        return out

    reward.__name__ = name
    return reward
