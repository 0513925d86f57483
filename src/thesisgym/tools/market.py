"""Point-in-time market tools: what an analyst agent may look up, cut at its as-of time by construction.

`MarketTools(view, ticker)` holds one `AsOfView` (thesisgym.data.asof: copies of the rows visible at the
cutoff of one trading day, and no reference to the store) and the ticker of the episode. Neither is an
argument of any tool: an environment binds them from the dataset row, so a model cannot ask for another
day or reach past the cutoff by any argument it writes.

Each tool returns evidence lines exactly like a prompt's (`[N1] 2020-02-19 | source | text`) and records
every item it returned in the episode's ledger (`evidence()`): the verifier later accepts a quote or a
number only if it occurs in an item a tool actually returned in that episode. Ids are stable within an
episode (the same event returned twice keeps its id; a new one takes the next number of its section),
outputs are bounded (items and characters), ordered newest first, and deterministic. Bad arguments
raise `ToolError` with a message a model can act on; the trainers turn it into a tool error message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.data.asof import AsOfView
from thesisgym.dataset.indicators import bar_texts, price_decimals
from thesisgym.dataset.render import event_text, item_body
from thesisgym.schema import SECTIONS, EvidenceItem
from thesisgym.thesis import extract_numbers

__all__ = ["TOOL_NAMES", "MarketTools", "ToolError", "ToolLimits", "ToolUsage"]

# the tools, in the order their schemas are shown to a model
TOOL_NAMES: tuple[str, ...] = ("get_prices", "search_news", "get_fundamentals", "get_insider", "get_analyst",
                               "get_macro")
# event kind read by each event tool (search_news reads news)
_KIND_OF_TOOL = {"search_news": "news", "get_fundamentals": "fundamentals", "get_insider": "insider",
                 "get_analyst": "analyst", "get_macro": "macro"}


class ToolError(ValueError):
    """A tool call the tool cannot answer (a bad argument): the message says what to send instead."""


@dataclass(frozen=True)
class ToolLimits:
    """Bounds on what one call may return, so a tool output cannot flood the context."""

    max_items: int = 6
    max_chars: int = 1200
    max_days: int = 365
    max_bars: int = 10
    max_query_chars: int = 200


@dataclass
class ToolUsage:
    """What an episode spent on tools: calls, failed calls, characters returned, per tool."""

    calls: int = 0
    failed: int = 0
    chars: int = 0
    by_tool: dict[str, int] = field(default_factory=dict)


class MarketTools:
    """The tools of one episode: one ticker, one as-of day, one evidence ledger."""

    def __init__(self, view: AsOfView, ticker: str, *, limits: ToolLimits | None = None) -> None:
        if not isinstance(view, AsOfView):
            raise TypeError(f"MarketTools: `view` must be an AsOfView (store.as_of(day)), got {type(view).__name__}")
        self.view, self.ticker = view, str(ticker)
        self.limits = limits or ToolLimits()
        self.usage = ToolUsage()
        self._items: dict[str, EvidenceItem] = {}
        self._key_to_id: dict[tuple, str] = {}

    # --- the ledger --------------------------------------------------------------------------------
    def evidence(self) -> list[EvidenceItem]:
        """Every item the tools returned in this episode, in the order first returned."""
        return list(self._items.values())

    def sections(self) -> list[str]:
        """The sections of the returned items, in first-returned order."""
        return list(dict.fromkeys(it["section"] for it in self._items.values()))

    def _register(self, key: tuple, section: str, date: str, source: str, text: str) -> EvidenceItem:
        item_id = self._key_to_id.get(key)
        if item_id is None:
            prefix = SECTIONS[section]
            item_id = f"{prefix}{sum(1 for i in self._items if i[: len(prefix)] == prefix and i[len(prefix):].isdigit()) + 1}"
            self._key_to_id[key] = item_id
            self._items[item_id] = EvidenceItem(id=item_id, section=section, date=date, source=source, text=text,
                                                numbers=extract_numbers(text))
        return self._items[item_id]

    def call(self, name: str, **arguments: Any) -> str:
        """Run tool `name` with `arguments`, counting the call (and the failure, which re-raises)."""
        self.usage.calls += 1
        self.usage.by_tool[name] = self.usage.by_tool.get(name, 0) + 1
        fn: Callable[..., str] | None = getattr(self, name, None) if name in TOOL_NAMES else None
        if fn is None:
            self.usage.failed += 1
            raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        try:
            out = fn(**arguments)
        except (TypeError, ToolError) as exc:  # TypeError: a missing or unexpected argument
            self.usage.failed += 1
            raise ToolError(f"{name}: {exc}") from None
        except Exception as exc:  # a bug of ours must still reach the model as a failed call, counted
            self.usage.failed += 1
            raise ToolError(f"{name}: the tool failed ({type(exc).__name__}: {exc})") from exc
        self.usage.chars += len(out)
        return out

    # --- the tools -----------------------------------------------------------------------------------
    def get_prices(self, days: int = 5) -> str:
        """Daily bars of the ticker up to the as-of day (open, high, low, close, volume, change), newest first."""
        n = _int_arg("days", days, 1, self.limits.max_bars)
        bars = self.view.bars(self.ticker, last=n + 1)
        if len(bars) == 0:
            return "no price bars"
        close = bars["close"].to_numpy(dtype="float64")
        chg = np.full(len(bars), np.nan)
        chg[1:] = (close[1:] / close[:-1] - 1.0) * 100.0
        texts, _, _ = bar_texts(bars, chg, decimals=price_decimals(close))
        dates = pd.DatetimeIndex(bars["date"]).strftime("%Y-%m-%d").tolist()
        keep = list(range(len(bars)))[-n:][::-1]
        items = [self._register(("bar", dates[i]), "technical", dates[i], "prices", texts[i]) for i in keep]
        return self._render(items)

    def search_news(self, query: str, days: int = 30) -> str:
        """Headlines about the ticker that contain every word of `query`, newest first (market-wide: get_macro)."""
        if not isinstance(query, str) or len(query) > self.limits.max_query_chars:
            raise ToolError(f"`query` must be text of at most {self.limits.max_query_chars} characters")
        return self._events("search_news", days, query=query)

    def get_fundamentals(self, days: int = 120) -> str:
        """Earnings releases and reported figures of the ticker published in the last `days` days, newest first."""
        return self._events("get_fundamentals", days)

    def get_insider(self, days: int = 90) -> str:
        """Insider purchases and sales of the ticker published in the last `days` days, newest first."""
        return self._events("get_insider", days)

    def get_analyst(self, days: int = 90) -> str:
        """Analyst rating changes and price targets for the ticker from the last `days` days, newest first."""
        return self._events("get_analyst", days)

    def get_macro(self, days: int = 60) -> str:
        """Market-wide items of every kind (inflation, policy rates, macro news) from the last `days` days, newest
        first: what a prompt's macro section shows."""
        return self._events("get_macro", days)

    def _events(self, tool: str, days: int, *, query: str = "") -> str:
        n_days = _int_arg("days", days, 1, self.limits.max_days)
        kind = _KIND_OF_TOOL[tool]
        if kind == "macro":  # every market-wide event, whatever its kind, as the context builder shows them
            ev = self.view.events(None, days=n_days)
            ev = ev[ev["ticker"] == ""].iloc[::-1]
        else:
            ev = self.view.search(query, ticker=self.ticker, kinds=[kind], days=n_days, limit=10_000)
            ev = ev[ev["ticker"] == self.ticker]
        items = []
        for row in ev.head(self.limits.max_items).itertuples(index=False):
            section = "macro" if kind == "macro" else kind
            pub = pd.Timestamp(row.published_at).tz_convert(self.view.timezone)
            text = event_text(str(row.title), str(row.text))
            key = ("event", pub.value, str(row.ticker), str(row.title))
            items.append(self._register(key, section, pub.strftime("%Y-%m-%d"), str(row.source), text))
        return self._render(items) if items else f"no {kind} items in the last {n_days} days"

    def _render(self, items: list[EvidenceItem]) -> str:
        lines, size = [], 0
        for it in items:
            line = f"[{it['id']}] {item_body(it['date'], it['source'], it['text'])}"
            if lines and size + len(line) + 1 > self.limits.max_chars:
                lines.append(f"... {len(items) - len(lines)} more not shown (ask for fewer days)")
                break
            lines.append(line[: self.limits.max_chars])
            size += len(line) + 1
        return "\n".join(lines)


def _int_arg(name: str, value: Any, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi], or a ToolError naming the argument and the range."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ToolError(f"`{name}` must be a whole number from {lo} to {hi}, got {value!r}") from None
    if not math.isfinite(number) or number != int(number) or not lo <= number <= hi:
        raise ToolError(f"`{name}` must be a whole number from {lo} to {hi}, got {value!r}")
    return int(number)
