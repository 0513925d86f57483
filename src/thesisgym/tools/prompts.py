"""Prompts for the tool-using analyst, and a chat template that can show tool calls.

`TOOL_DOCS` holds what the model reads about each tool (`tool_docs(limits)` fills in the ranges of a run's
`ToolLimits`; `MarketToolEnv` carries them as its tools' docstrings, which TRL renders as the tool schemas).

A tool prompt names the ticker and the as-of day and nothing else: the evidence is whatever the agent's
tool calls return (bound to that day by the environment). `tool_dataset(split)` turns a built split into
such rows, keeping every label and return column the rewards read; the split's `evidence`, `sections` and
`prompt_text` are dropped so nothing but the tools can show the agent a fact.

Small instruct models (SmolLM2's plain ChatML) have no tool syntax in their chat template. `with_tool_template`
gives such a tokenizer TRL's Qwen2.5 ChatML template, which renders tool schemas and
`<tool_call>{json}</tool_call>` blocks with the same `<|im_start|>`/`<|im_end|>` tokens, and sets TRL's
response parser for it; a tokenizer whose template already handles tools is left as it is.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from thesisgym.tools.market import ToolLimits

__all__ = ["TOOL_DOCS", "TOOL_SYSTEM_PROMPT", "tool_dataset", "tool_docs", "tool_messages", "with_tool_template"]

# What the model reads about each tool: TRL (and transformers' get_json_schema) turn these Google-style
# docstrings of `MarketToolEnv`'s methods into the tool schemas of the prompt. The ranges are `ToolLimits`
# fields, filled in per environment, so a run with other limits tells the model its own bounds.
TOOL_DOCS: dict[str, str] = {
    "get_prices": """Daily price bars of the ticker up to the as-of day, newest first.

        Args:
            days: how many trading days to show, from 1 to {max_bars}.
        """,
    "search_news": """Headlines about the ticker that contain every word of the query, newest first.

        Args:
            query: words every headline must contain; an empty query returns the latest headlines.
            days: how far back to search, in calendar days, from 1 to {max_days}.
        """,
    "get_fundamentals": """Earnings releases and reported figures of the ticker, newest first.

        Args:
            days: how far back to look, in calendar days, from 1 to {max_days}.
        """,
    "get_insider": """Insider purchases and sales of the ticker, newest first.

        Args:
            days: how far back to look, in calendar days, from 1 to {max_days}.
        """,
    "get_analyst": """Analyst rating changes and price targets for the ticker, newest first.

        Args:
            days: how far back to look, in calendar days, from 1 to {max_days}.
        """,
    "get_macro": """Market-wide releases and news: inflation, policy rates, macro headlines, newest first.

        Args:
            days: how far back to look, in calendar days, from 1 to {max_days}.
        """,
}


def tool_docs(limits: ToolLimits | None = None) -> dict[str, str]:
    """Each tool's docstring (the description the model sees) with the ranges of `limits` (default: ToolLimits())."""
    values = asdict(limits or ToolLimits())
    return {name: doc.format(**values) for name, doc in TOOL_DOCS.items()}

TOOL_SYSTEM_PROMPT = (
    "You are an equity analyst. Look up the evidence you need with the tools (each result line starts with its "
    "id), then write an investment thesis: one tag per evidence section you looked up, each bullet an opinion "
    "that quotes the cited item word for word in double quotes and cites its id in square brackets, then "
    "<conclusion>, then one <decision> of STRONG_BUY, BUY, HOLD, SELL or STRONG_SELL."
)
_DROPPED = ("evidence", "sections", "prompt_text", "completion")


def tool_messages(row: dict, *, system_prompt: str = TOOL_SYSTEM_PROMPT) -> list[dict]:
    """The chat prompt of a tool episode: the ticker and the as-of day, no evidence."""
    for key in ("ticker", "asof"):
        if not row.get(key):
            raise ValueError(f"tool_messages: the row has no `{key}`")
    user = (f"Ticker: {row['ticker']}\nAs of: {str(row['asof'])[:10]} (the tools show what was public before the "
            "close of that day; the position is taken at the close)")
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user}]


def tool_dataset(split: Any, *, system_prompt: str = TOOL_SYSTEM_PROMPT) -> Any:
    """A `datasets.Dataset` of tool prompts for the rows of `split`, with its label and return columns."""
    keep = [c for c in split.column_names if c not in _DROPPED]
    out = split.select_columns(keep)
    return out.map(lambda row: {"prompt": tool_messages(row, system_prompt=system_prompt)})


def with_tool_template(tokenizer: Any) -> Any:
    """`tokenizer` able to render and parse tool calls (see the module docstring); returns it."""
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        tokenizer.chat_template = qwen2_5_chat_template
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    return tokenizer
