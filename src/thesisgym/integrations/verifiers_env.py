"""A verifiers (v1) environment: a Taskset of a built dataset's rows, scored by thesisgym's verifier.

Needs `pip install 'thesisgym[verifiers]'`. Written against verifiers 0.4.0's `verifiers.v1`
(PrimeIntellect-ai/verifiers @ a60a606ecc4d309247edf9ff92c3eabca362781f: `verifiers/v1/task.py`,
`taskset.py`, `judge.py`, `utils/loaders.py`; the v0 `SingleTurnEnv`/`Rubric` API is deprecated):

- `ThesisTaskset(ThesisTasksetConfig(dataset=..., split=...))` yields one `ThesisTask` per row
  with a complete forward window (the others are skipped and counted, as `thesisgym export`
  does); the task's data carries the system and user prompt and the row's verifier record.
- `ThesisTask.thesisgym` is the task's one `@vf.reward` (weight 1): the recipe's total from
  `thesisgym.integrations.core`, which already weights the recipe's rewards exactly as TRL
  does, so `trace.reward` equals the TRL/verl/OpenRLHF/HTTP score. `ThesisTask.components` is
  a `@vf.metric` mapping with each recipe reward (`reward/<name>`) and the verifier's components
  and diagnostics (recorded, not summed).
- `ThesisTaskConfig.recipe` picks the recipe (default `$THESISGYM_RECIPE`, else dsr). With
  `consistency_judge` (a `vf.JudgeConfig`) set, the recipe's consistency judge (fsr/dsr's s)
  calls that model through verifiers' own `Judge.complete` client (usage lands on the trace),
  instead of the local judge or thesisgym's OpenAI client.

verifiers finds a taskset as an installed package exporting one Taskset subclass in `__all__`:
`environments/thesisgym_env/` in this repository is that package (`pip install -e
environments/thesisgym_env`, then `--env.taskset.id thesisgym-env`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from thesisgym.integrations.core import (
    VerifierRecord,
    default_recipe,
    load_recipe,
    recipe_with_judge_client,
    score_batch,
    verifier_record,
)

__all__ = ["ThesisData", "ThesisTask", "ThesisTaskConfig", "ThesisTaskset", "ThesisTasksetConfig",
           "ScoredOnce", "VerifiersJudgeClient"]

logger = logging.getLogger(__name__)


class VerifiersJudgeClient:
    """`thesisgym.llm.LLMClient`'s judge-facing surface (`ajson_batch`, `run`) on a verifiers Judge.

    Each thesis' judge prompt goes through `Judge.complete` (verifiers builds the OpenAI client
    from the JudgeConfig and records usage on `trace`); the JSON answer is validated against the
    schema thesisgym's LLM judge asks for, and a failed call returns None (the judge's fallback).
    """

    def __init__(self, config: Any, trace: Any = None) -> None:
        self.judge = vf.Judge(config)
        self.trace = trace

    async def ajson_batch(self, batch: Sequence[Sequence[dict]], schema: type, *, fallback: Any = None,
                          **sampling: Any) -> list[Any]:
        from thesisgym.llm import extract_json

        async def one(messages: Sequence[dict]) -> Any:
            wire = [_message(m) for m in messages]
            try:
                response = await self.judge.complete(wire, trace=self.trace, **sampling)
                return schema.model_validate(extract_json(response.text))
            except Exception as exc:  # noqa: BLE001 - the judge's fallback handles a failed call
                logger.warning("verifiers judge call failed (%s: %s); using the fallback", type(exc).__name__, exc)
                return fallback

        return list(await asyncio.gather(*(one(m) for m in batch)))

    def run(self, factory: Any) -> Any:
        return asyncio.run(factory())


def _message(m: Mapping[str, Any]) -> Any:
    role, content = m.get("role"), str(m.get("content", ""))
    if role == "system":
        return vf.SystemMessage(content=content)
    if role == "assistant":
        return vf.AssistantMessage(content=content)
    return vf.UserMessage(content=content)


class ThesisData(vf.TaskData):
    record: VerifierRecord
    """The row's verifier record: evidence, sections, label, fwd_return, fwd_vol."""
    split: str = ""
    ticker: str | None = None
    asof: str | None = None


class ThesisTaskConfig(vf.TaskConfig):
    recipe: str = Field(default_factory=default_recipe)
    """Reward recipe: dsr, fsr, market_only, trading_r1[:stage] or a GRPO YAML path."""
    consistency_judge: vf.JudgeConfig | None = None
    """Run the recipe's consistency judge on this model through verifiers' judge client."""


class ScoredOnce:
    """The reward and the metrics of a thesisgym task: `_score(trace)` (the subclass's) runs once per
    trace; verifiers runs the metrics, then the rewards, on the same trace (an LLM judge call is not free)."""

    async def _scores(self, trace: vf.Trace, *, keep: bool) -> dict[str, Any]:
        # verifiers runs the metrics, then the rewards, on the same trace: score once (an LLM
        # judge call is not free), hand the result from the metric to the reward
        memo: dict[str, dict[str, Any]] = self.__dict__.setdefault("_thesisgym_memo", {})
        result = memo.pop(trace.id, None) or await self._score(trace)
        if keep:
            memo[trace.id] = result
        return result

    @vf.metric
    async def components(self, trace: vf.Trace) -> Mapping[str, float]:
        result = await self._scores(trace, keep=True)
        return {k: float(v) for k, v in result.items()
                if k != "score" and isinstance(v, float) and math.isfinite(v)}

    @vf.reward(weight=1.0)
    async def thesisgym(self, trace: vf.Trace) -> float:
        result = await self._scores(trace, keep=False)
        if result["score"] is None:
            raise ValueError(f"task {self.data.id}: no reward of recipe {self.config.recipe!r} applies "
                             "(the row has no label or forward return)")
        return float(result["score"])


class ThesisTask(ScoredOnce, vf.Task[ThesisData, vf.State, ThesisTaskConfig]):
    async def _score(self, trace: vf.Trace) -> dict[str, Any]:
        completion = trace.last_reply
        if self.config.consistency_judge is not None:
            from thesisgym.integrations.core import ascore_batch

            recipe = recipe_with_judge_client(self.config.recipe,
                                              VerifiersJudgeClient(self.config.consistency_judge, trace))
            return (await ascore_batch([completion], [self.data.record], recipe))[0]
        load_recipe(self.config.recipe)
        return (await asyncio.to_thread(score_batch, [completion], [self.data.record], self.config.recipe))[0]

class ThesisTasksetConfig(vf.TasksetConfig):
    dataset: str = ""
    """Directory saved by `thesisgym build`."""
    split: str = "train"
    keep_incomplete: bool = False
    """Also yield rows without a label/forward return (their recipe total may be undefined)."""
    task: ThesisTaskConfig = ThesisTaskConfig()


class ThesisTaskset(vf.Taskset[ThesisTask, ThesisTasksetConfig]):
    def load(self) -> list[ThesisTask]:
        from pathlib import Path

        from thesisgym.dataset.splits import load_split
        from thesisgym.integrations.export import complete_window

        if not self.config.dataset:
            raise ValueError("ThesisTasksetConfig.dataset: set it to a directory saved by `thesisgym build`")
        rows = load_split(Path(self.config.dataset), self.config.split)
        tasks, skipped = [], 0
        for i, row in enumerate(rows):
            if not self.config.keep_incomplete and not complete_window(row):
                skipped += 1
                continue
            messages = row.get("prompt") or []
            system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system") or None
            user = "\n\n".join(m["content"] for m in messages if m.get("role") != "system")
            data = ThesisData(
                id=f"{self.config.split}/{i}", prompt=user, system_prompt=system,
                record=verifier_record(row, where=f"{self.config.dataset} [{self.config.split}] row {i}"),
                split=self.config.split, ticker=row.get("ticker"), asof=row.get("asof"),
            )
            tasks.append(ThesisTask(data, self.config.task))
        if skipped:
            logger.warning("thesisgym taskset: skipped %d of %d rows without a complete forward window",
                           skipped, len(rows))
        return tasks
