"""Held-out learning curves: generate theses for fixed held-out rows during training and score them.

Why: a training loss says nothing about whether the policy quotes its evidence. `GroundingCurve`
is a TRL/transformers callback that, every `every` optimiser steps (and at the end), lets the model
being trained write one thesis per held-out row (greedy or seeded sampling, batched, stopping at the
end of turn) and scores it with the same verifier as the rewards and the evaluation
(`thesisgym.rewards.score_completion`). Each point records the step, the training examples seen so
far (`step * batch * grad_accum * world`) and the held-out grounding, hallucination rate,
valid-decision rate and decision accuracy, so "grounding vs SFT examples seen" is a measured curve.

Two diagnostics tell copying from recall: `quotes_in_prompt`, the share of quotes of three or more
words found word for word in any evidence item of their own prompt (cited or not; a one-word "open"
is in every price line and proves nothing), and `distinct_quotes`, distinct quotes over all quotes
across the rows. A policy that writes the same memorised theses whatever the prompt
scores low on both, and grounding then only counts the prompts its stock phrases happen to fit.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from thesisgym.train.generation import generate_theses

# score_completion keys averaged into a curve point (nan entries are skipped)
CURVE_KEYS: tuple[str, ...] = ("grounding", "hallucination_rate", "decision_valid", "decision_correct", "structure",
                               "evidence", "decision")


def _mean(values: Sequence[float]) -> float:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(float(v))]
    return sum(vals) / len(vals) if vals else float("nan")


def score_theses(completions: Sequence[str], rows: Sequence[dict]) -> dict[str, float]:
    """Means of CURVE_KEYS over the rows, scored by the shared verifier, plus `quotes_in_prompt` and
    `distinct_quotes` (module docstring; nan when no thesis quotes anything)."""
    from thesisgym.rewards import score_completion
    from thesisgym.rewards.base import parsed
    from thesisgym.thesis import normalize_text

    scores = [score_completion(c, r) for c, r in zip(completions, rows, strict=True)]
    out = {k: _mean([s.get(k, float("nan")) for s in scores]) for k in CURVE_KEYS}
    quotes: list[str] = []
    found = 0
    for completion, row in zip(completions, rows, strict=True):
        bodies = [normalize_text(str(it.get("text", ""))) for it in row.get("evidence") or [] if isinstance(it, dict)]
        for bullet in parsed(completion).bullets:
            for q in (normalize_text(q) for q in bullet.quotes):
                quotes.append(q)
                found += len(q.split()) >= 3 and any(q in body for body in bodies)
    out["quotes_in_prompt"] = found / len(quotes) if quotes else float("nan")
    out["distinct_quotes"] = len(set(quotes)) / len(quotes) if quotes else float("nan")
    return out


class GroundingCurve(TrainerCallback):
    """Score the policy on held-out `rows` every `every` steps; points in `.points` and `path` (JSON)."""

    def __init__(self, rows: Sequence[dict], *, every: int, tokenizer: Any = None, max_new_tokens: int = 384,
                 temperature: float = 0.0, seed: int = 0, path: str | Path | None = None,
                 label: str = "curve", at_start: bool = False) -> None:
        if not rows:
            raise ValueError("GroundingCurve: `rows` is empty; pass held-out rows with prompt and evidence")
        if every <= 0:
            raise ValueError(f"GroundingCurve: `every` must be positive, got {every}")
        self.rows = list(rows)
        self.every = every
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self.path = Path(path) if path else None
        self.label = label
        self.at_start = at_start
        self.points: list[dict[str, float]] = []

    def _point(self, args: Any, state: Any, model: Any, tokenizer: Any) -> None:
        if not state.is_world_process_zero:
            return
        tok = self.tokenizer or tokenizer
        t0 = time.perf_counter()
        comps = generate_theses(model, tok, self.rows, max_new_tokens=self.max_new_tokens,
                                temperature=self.temperature, seed=self.seed)
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)
        point = {"label": self.label, "step": state.global_step, "examples_seen": state.global_step * per_step,
                 "rows": len(self.rows), **score_theses(comps, self.rows),
                 "seconds": round(time.perf_counter() - t0, 2), "example": comps[0][:600]}
        self.points.append(point)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.points, indent=2))

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.at_start:
            self._point(args, state, model, processing_class)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.global_step % self.every == 0 and state.global_step < state.max_steps:
            self._point(args, state, model, processing_class)

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        self._point(args, state, model, processing_class)
