"""Tool-use traces for SFT: the teacher looks the evidence up with the point-in-time tools, then writes.

For each context row the teacher decides from the row which tools to call: one call per section the row's
context had, with the arguments in `SECTION_CALLS` (a rule, like the template teacher's writing). The calls
run against `store.as_of(asof)` through `MarketTools`, so the trace shows exactly what the tools return at
that cutoff; the teacher then writes its thesis from the tools' ledger (not from the row's prompt), and the
usual rejection filter (`thesisgym.teachers.distill`: decision near the label, every quote verified against
the ledger) keeps or drops it. An accepted trace is a row with

    prompt:     [system (tool instructions), user (ticker, as-of day)]
    trace:      JSON of the completion: [assistant with tool_calls, one tool message per call, assistant
                with the thesis] (JSON because Arrow would give every tool call the union of all tools'
                argument names)
    tools:      JSON of the environment's tool schemas

plus the row's label and return columns. `tokenize_traces(dataset, tokenizer)` renders them with the
tokenizer's tool chat template into `input_ids` and a `completion_mask` that is 1 on the assistant's tokens
only (tool calls and thesis), so SFT never trains the model to write a tool's output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from thesisgym.data.store import MarketStore
from thesisgym.teachers.distill import DistillResult, distill
from thesisgym.tools.env import MarketToolEnv
from thesisgym.tools.market import MarketTools, ToolLimits
from thesisgym.tools.prompts import tool_messages

__all__ = ["SECTION_CALLS", "distill_tool_traces", "tokenize_traces", "tool_schemas"]

# section -> (tool, arguments) the teacher calls to see it
SECTION_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "technical": ("get_prices", {"days": 3}),
    "news": ("search_news", {"query": "", "days": 10}),
    "fundamentals": ("get_fundamentals", {"days": 120}),
    "insider": ("get_insider", {"days": 90}),
    "analyst": ("get_analyst", {"days": 90}),
    "macro": ("get_macro", {"days": 30}),
}


def tool_schemas(limits: ToolLimits | None = None) -> list[dict]:
    """The JSON schemas of `MarketToolEnv`'s tools under `limits`, as TRL shows them to the model."""
    from transformers.utils import get_json_schema

    env = MarketToolEnv(None, limits)  # type: ignore[arg-type] - the schemas need no store
    return [get_json_schema(getattr(env, name)) for name, _ in SECTION_CALLS.values()]


def _look_up(row: dict, timeline: Any, limits: ToolLimits) -> dict:
    """The row with the ledger of the teacher's tool calls as its evidence, and the calls' transcript."""
    tools = MarketTools(timeline.view(row["asof"]), row["ticker"], limits=limits)
    calls = [SECTION_CALLS[s] for s in row.get("sections") or [] if s in SECTION_CALLS]
    results = [[name, args, tools.call(name, **args)] for name, args in calls]
    return {**row, "evidence": tools.evidence(), "sections": tools.sections(), "tool_transcript": json.dumps(results)}


def _trace(row: dict, thesis: str) -> list[dict]:
    results = json.loads(row["tool_transcript"])
    calls = [{"type": "function", "function": {"name": name, "arguments": args}} for name, args, _ in results]
    tool_msgs = [{"role": "tool", "name": name, "content": out} for name, _, out in results]
    return [{"role": "assistant", "content": "", "tool_calls": calls}, *tool_msgs,
            {"role": "assistant", "content": thesis}]


def distill_tool_traces(rows: Sequence[dict] | Any, store: MarketStore, teacher: Any, *,
                        limits: ToolLimits | None = None, **filter_options: Any) -> DistillResult:
    """Accepted tool-use traces for `rows` (a built split), written by `teacher` from its tool results.

    `filter_options` go to `thesisgym.teachers.distill.distill` (n, min_grounding, decision_tolerance, seed...).
    The result's dataset has prompt/completion/tools plus the rows' label and return columns.
    """
    from datasets import Dataset

    timeline = store.timeline()
    looked_up = [_look_up(dict(r), timeline, limits or ToolLimits()) for r in rows]
    looked_up = [r for r in looked_up if r["evidence"]]
    result = distill(looked_up, teacher, **filter_options)
    schemas = json.dumps(tool_schemas(limits))
    traces = []
    for row in result.dataset:
        thesis = row["completion"][-1]["content"]
        out = {k: v for k, v in row.items()
               if k not in ("evidence", "sections", "prompt_text", "tool_transcript", "completion")}
        out.update(prompt=tool_messages(row), trace=json.dumps(_trace(row, thesis)), tools=schemas)
        traces.append(out)
    stats = {**result.stats, "rows_without_tool_results": len(rows) - len(looked_up)}
    return DistillResult(dataset=Dataset.from_list(traces), stats=stats)


def tokenize_traces(dataset: Any, tokenizer: Any, *, max_length: int | None = None) -> Any:
    """`input_ids` + `completion_mask` (assistant tokens only) of each trace, rendered with tool schemas.

    The mask comes from TRL's training variant of the Qwen2.5 ChatML template (the same text, with
    generation markers), so it is exact; a trace longer than `max_length` tokens is cut at the end.
    """
    from trl.chat_template_utils import qwen2_5_training_chat_template

    from thesisgym.tools.prompts import with_tool_template

    with_tool_template(tokenizer)

    def one(row: dict) -> dict:
        messages = list(row["prompt"]) + json.loads(row["trace"])
        out = tokenizer.apply_chat_template(messages, tools=json.loads(row["tools"]), tokenize=True, return_dict=True,
                                            chat_template=qwen2_5_training_chat_template,
                                            return_assistant_tokens_mask=True)
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        if max_length is not None:
            ids, mask = ids[:max_length], mask[:max_length]
        return {"input_ids": ids, "completion_mask": mask}

    return dataset.map(one, remove_columns=list(dataset.column_names))
