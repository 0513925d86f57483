"""Let a trained tool-using analyst work through held-out rows, and score what it wrote against what it saw.

`ToolAgent(model_path, store)` runs each row as an episode: the tool prompt (ticker and as-of day only), a
generation, the tool calls it asked for run against `store.as_of(asof)` (thesisgym.tools: bound to the
row, bounded, point in time), their results appended, and another generation, up to `max_rounds` rounds of
tool calls; the last assistant text is the thesis. Tool calls are parsed with TRL's own parser
(`trl.chat_template_utils.parse_response`), the one GRPO training uses, and a bad call gets the tool's
error message back, as in training. Generation goes through `thesisgym.train.generation`, batched over
the rows that are still working.

`Episode.row()` is the row as the verifier must see it: its evidence is the episode's tool ledger, so
`score_completion(episode.thesis, episode.row())` counts a quote of anything no tool returned as a
hallucination, exactly as the GRPO reward did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thesisgym.data.store import MarketStore
from thesisgym.teachers.tool_traces import tool_schemas
from thesisgym.tools.market import MarketTools, ToolError, ToolLimits
from thesisgym.tools.prompts import tool_messages, with_tool_template

__all__ = ["Episode", "ToolAgent"]


@dataclass
class Episode:
    """One row's episode: the conversation, the final thesis, the tools (ledger and usage), tokens written."""

    source: dict
    messages: list[dict]
    tools: MarketTools
    thesis: str = ""
    generated_tokens: int = 0
    tool_tokens: int = 0
    rounds: int = 0
    problems: list[str] = field(default_factory=list)

    def row(self) -> dict:
        return {**self.source, "evidence": self.tools.evidence(), "sections": self.tools.sections()}


class ToolAgent:
    """A checkpoint trained on tool traces (and GRPO through the tool environment), run on held-out rows."""

    def __init__(self, model_path: str | Path, store: MarketStore, *, max_new_tokens: int = 320,
                 max_rounds: int = 2, limits: ToolLimits | None = None, batch_size: int = 16,
                 temperature: float = 0.0, seed: int = 0, name: str | None = None) -> None:
        self.model_path, self.store = str(model_path), store
        self.max_new_tokens, self.max_rounds = max_new_tokens, max_rounds
        self.limits = limits or ToolLimits()
        self.batch_size, self.temperature, self.seed = batch_size, temperature, seed
        self.name = name or Path(self.model_path).name
        self._model = self._tok = None

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            from thesisgym.train.models import load_model

            model, tok = load_model(self.model_path)
            self._model, self._tok = model.eval(), with_tool_template(tok)
        return self._model, self._tok

    def run(self, rows: Sequence[dict]) -> list[Episode]:
        """One finished episode per row, in order."""
        timeline = self.store.timeline()
        episodes = [Episode(source=dict(r), messages=tool_messages(r),
                            tools=MarketTools(timeline.view(r["asof"]), r["ticker"], limits=self.limits))
                    for r in rows]
        active = list(range(len(episodes)))
        for round_no in range(self.max_rounds + 1):
            if not active:
                break
            replies = self._generate([episodes[i] for i in active])
            still = []
            for i, (text, calls) in zip(active, replies, strict=True):
                ep = episodes[i]
                ep.rounds = round_no + 1
                if calls and round_no < self.max_rounds:
                    self._run_calls(ep, text, calls)
                    still.append(i)
                else:
                    ep.thesis = "" if calls else text
                    if calls:
                        ep.problems.append("still calling tools after the last round")
                    ep.messages.append({"role": "assistant", "content": ep.thesis})
            active = still
        return episodes

    def _generate(self, episodes: list[Episode]) -> list[tuple[str, list[dict]]]:
        """(assistant text, tool calls) of the next turn of each episode."""
        from trl.chat_template_utils import parse_response

        from thesisgym.train.generation import generate_texts

        model, tok = self._load()
        schemas = tool_schemas(self.limits)
        prompts = [tok.apply_chat_template(ep.messages, tools=schemas, add_generation_prompt=True, tokenize=False)
                   for ep in episodes]
        outs = generate_texts(model, tok, prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                              batch_size=self.batch_size, seed=self.seed, skip_special_tokens=False)
        replies = []
        for ep, prompt, out in zip(episodes, prompts, outs, strict=True):
            out = out.split(tok.eos_token)[0].replace(tok.pad_token or "\0", "") + tok.eos_token
            ids = tok(out, add_special_tokens=False)["input_ids"]
            ep.generated_tokens += len(ids)
            parsed = parse_response(tok, ids, prefix=tok(prompt, add_special_tokens=False)["input_ids"],
                                    tools=schemas)
            replies.append((str(parsed.get("content") or ""), list(parsed.get("tool_calls") or [])))
        return replies

    def _run_calls(self, ep: Episode, text: str, calls: list[dict]) -> None:
        ep.messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for call in calls:
            fn = call.get("function", call)
            name, args = str(fn.get("name", "")), fn.get("arguments") or {}
            try:
                if isinstance(args, str):
                    args = json.loads(args)
                content = ep.tools.call(name, **dict(args))
            except (ToolError, TypeError, ValueError) as exc:
                content = json.dumps({"error": str(exc)})
            ep.tool_tokens += len(self._tok(content, add_special_tokens=False)["input_ids"])
            ep.messages.append({"role": "tool", "name": name, "content": content})
