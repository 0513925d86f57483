"""Distillation with rejection sampling: teacher theses -> verifier filter -> an SFT-ready dataset.

Forward distillation (Trading-R1): the teacher sees the context and writes `n` theses; a sample is
kept only if (1) it parses with a valid decision, (2) the decision matches the row's label (or is
within `decision_tolerance` classes of it; the teacher itself never sees the label, and the stats say
which share of its decisions agree with it before and after this filter), and (3) its grounding passes: the evidence score of
`thesisgym.rewards.score_completion` is at least `min_grounding` and its hallucination rate at most
`max_hallucination_rate`. Reverse distillation gives the teacher the label to explain (teacher
`mode="reverse"`); the same filter then checks grounding, so a rationalisation that invents
evidence is still rejected. The same function filters a policy's own samples for the
self-distillation step of the curriculum.

Output rows are conversational prompt/completion pairs (TRL SFT format) that keep every other
context column (evidence, sections, label, fwd_return, fwd_vol, ...) so the same set also feeds
GRPO, plus the filter's scores. Nothing is dropped silently: every reject is counted by reason in
`DistillResult.stats`, with the acceptance rate.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thesisgym.progress import Ticker
from thesisgym.rewards import score_completion
from thesisgym.schema import LABEL_TO_ID, LABELS

Scorer = Callable[[Any, dict], dict]
REJECT_REASONS: tuple[str, ...] = ("empty", "no_decision", "decision", "grounding", "hallucination", "duplicate",
                                   "teacher_error")


@dataclass
class DistillResult:
    """The accepted rows (`datasets.Dataset`) and the counts behind the acceptance rate."""

    dataset: Any
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def acceptance_rate(self) -> float:
        return float(self.stats.get("acceptance_rate", 0.0))

    def save(self, out_dir: str | Path, *, split: str = "train") -> Path:
        """`save_to_disk` a DatasetDict {split: rows} plus `distill_stats.json`; returns out_dir."""
        from datasets import DatasetDict

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        DatasetDict({split: self.dataset}).save_to_disk(str(out))
        (out / "distill_stats.json").write_text(json.dumps(self.stats, indent=2, default=str))
        return out


def _decision_of(text: str) -> str | None:
    from thesisgym.thesis import parse_thesis

    return parse_thesis(text).decision


def judge_sample(
    text: str,
    row: dict,
    *,
    scorer: Scorer,
    min_grounding: float,
    max_hallucination_rate: float,
    decision_tolerance: int,
) -> tuple[str | None, dict[str, float]]:
    """(reject reason or None when accepted, scores) for one sample against one row."""
    if not isinstance(text, str) or not text.strip():
        return "empty", {}
    decision = _decision_of(text)
    if decision not in LABEL_TO_ID:
        return "no_decision", {}
    label = row.get("label")
    if abs(LABEL_TO_ID[decision] - LABEL_TO_ID[label]) > decision_tolerance:
        return "decision", {"decision_id": float(LABEL_TO_ID[decision])}
    scores = scorer([{"role": "assistant", "content": text}], row)
    grounding = float(scores.get("evidence", 0.0) or 0.0)
    halluc = scores.get("hallucination_rate", 0.0)
    halluc = 1.0 if halluc is None or (isinstance(halluc, float) and math.isnan(halluc)) else float(halluc)
    out = {"grounding": grounding, "hallucination_rate": halluc, "decision_id": float(LABEL_TO_ID[decision])}
    if not math.isfinite(grounding) or grounding < min_grounding:
        return "grounding", out
    if halluc > max_hallucination_rate:
        return "hallucination", out
    return None, out


def _rows(dataset: Any) -> list[dict]:
    if isinstance(dataset, list):
        return [dict(r) for r in dataset]
    return [dict(r) for r in dataset]


def distill(
    dataset: Any,
    teacher: Any,
    *,
    n: int = 4,
    min_grounding: float = 0.8,
    max_hallucination_rate: float = 0.0,
    decision_tolerance: int = 0,
    keep_per_prompt: int = 1,
    seed: int = 0,
    workers: int = 1,
    scorer: Scorer | None = None,
    progress: bool = False,
) -> DistillResult:
    """Sample `n` theses per row from `teacher`, keep the verified ones (module docstring).

    `dataset` is a `datasets.Dataset` (or a list of row dicts) with schema.CONTEXT_COLUMNS;
    `keep_per_prompt` keeps the best accepted samples of a row (by grounding). `workers` > 1 runs
    the teacher on several rows at once (useful for LLM teachers; results do not depend on it).
    """
    _check_params(n=n, min_grounding=min_grounding, max_hallucination_rate=max_hallucination_rate,
                  decision_tolerance=decision_tolerance, keep_per_prompt=keep_per_prompt, teacher=teacher)
    judge = functools.partial(judge_sample, scorer=scorer or score_completion, min_grounding=min_grounding,
                              max_hallucination_rate=max_hallucination_rate, decision_tolerance=decision_tolerance)
    rows, labelled = _labelled_rows(dataset)

    def sample(item: tuple[int, dict]) -> tuple[int, list[str], str | None]:
        i, row = item
        try:
            texts = list(teacher.write(row, n=n, seed=seed + i))
        except Exception as exc:  # noqa: BLE001 - one failing row is a counted reject, not a crash
            return i, [], f"{type(exc).__name__}: {exc}"
        return i, texts, None

    tally = _Tally()
    with (Ticker(len(labelled), "distilling", enabled=progress, unit="rows") as ticker,
          ThreadPoolExecutor(max_workers=max(1, workers)) as pool):
        for i, texts, err in pool.map(sample, labelled) if workers > 1 else map(sample, labelled):
            tally.add_row(i, rows[i], texts, err, n=n, judge=judge, keep_per_prompt=keep_per_prompt)
            ticker.advance()
    params = {"n": n, "min_grounding": min_grounding, "max_hallucination_rate": max_hallucination_rate,
              "decision_tolerance": decision_tolerance, "keep_per_prompt": keep_per_prompt, "seed": seed,
              "teacher": repr(teacher)}
    return DistillResult(dataset=_to_dataset(tally.kept, rows), stats=tally.stats(rows, labelled, params))


def _check_params(*, n: int, min_grounding: float, max_hallucination_rate: float, decision_tolerance: int,
                  keep_per_prompt: int, teacher: Any) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"distill: n must be a positive int, got {n!r}")
    if not 0.0 <= min_grounding <= 1.0:
        raise ValueError(f"distill: min_grounding must be in [0, 1], got {min_grounding}")
    if not 0.0 <= max_hallucination_rate <= 1.0:
        raise ValueError(f"distill: max_hallucination_rate must be in [0, 1], got {max_hallucination_rate}")
    if decision_tolerance not in range(len(LABELS)):
        raise ValueError(f"distill: decision_tolerance must be 0..{len(LABELS) - 1}, got {decision_tolerance}")
    if keep_per_prompt < 1:
        raise ValueError(f"distill: keep_per_prompt must be >= 1, got {keep_per_prompt}")
    if not callable(getattr(teacher, "write", None)):
        raise TypeError(f"distill: teacher {teacher!r} has no write(row, *, n, seed) method")


def _labelled_rows(dataset: Any) -> tuple[list[dict], list[tuple[int, dict]]]:
    """(every row, the (index, row) pairs with a label), after checking the columns and labels."""
    rows = _rows(dataset)
    for i, row in enumerate(rows):
        for col in ("prompt", "evidence", "sections"):
            if col not in row:
                raise ValueError(f"distill: row {i} has no column {col!r} (expected schema.CONTEXT_COLUMNS)")
    labelled = [(i, r) for i, r in enumerate(rows) if r.get("label") in LABEL_TO_ID]
    bad = [(i, r.get("label")) for i, r in enumerate(rows) if r.get("label") is not None and r.get("label") not in LABEL_TO_ID]
    if bad:
        raise ValueError(f"distill: row {bad[0][0]} has unknown label {bad[0][1]!r}; expected one of {LABELS}")
    return rows, labelled


@dataclass
class _Tally:
    """The filter's running counts: every sample is either kept or counted under one reject reason."""

    reasons: Counter[str] = field(default_factory=Counter)
    kept: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    total: int = 0
    rows_covered: int = 0
    decided: int = 0  # teacher samples with a valid decision
    agreed: int = 0  # ... of which equal to the row's label

    def add_row(self, i: int, row: dict, texts: list[str], err: str | None, *, n: int,
                judge: Callable[[Any, dict], tuple[str | None, dict[str, float]]], keep_per_prompt: int) -> None:
        """Judge one row's samples; keep its best `keep_per_prompt` accepted ones (by grounding)."""
        if err is not None:
            self.reasons["teacher_error"] += n
            self.total += n
            self.errors.append(f"row {i}: {err}")
        seen: set[str] = set()
        accepted: list[tuple[float, int, str, dict]] = []
        for j, text in enumerate(texts[:n]):
            self.total += 1
            if isinstance(text, str) and text in seen:
                self.reasons["duplicate"] += 1
                continue
            seen.add(text if isinstance(text, str) else "")
            reason, scores = judge(text, row)
            if "decision_id" in scores:
                self.decided += 1
                self.agreed += int(scores["decision_id"]) == LABEL_TO_ID[row["label"]]
            if reason is None:
                accepted.append((scores["grounding"], -j, text, scores))
            else:
                self.reasons[reason] += 1
        if len(texts) < n and err is None:
            self.reasons["empty"] += n - len(texts)
            self.total += n - len(texts)
        accepted.sort(reverse=True)
        for grounding, neg_j, text, scores in accepted[:keep_per_prompt]:
            out = {k: v for k, v in row.items() if k != "completion"}
            out["completion"] = [{"role": "assistant", "content": text}]
            out["grounding"] = grounding
            out["hallucination_rate"] = scores["hallucination_rate"]
            out["teacher_decision"] = LABELS[int(scores["decision_id"])]
            out["sample_index"] = -neg_j
            self.kept.append(out)
        self.rows_covered += bool(accepted)

    def stats(self, rows: list[dict], labelled: list, params: dict[str, Any]) -> dict[str, Any]:
        accepted_samples = self.total - sum(self.reasons.values())
        return {
            "rows": len(rows),
            "rows_without_label": len(rows) - len(labelled),
            "samples": self.total,
            "accepted_samples": accepted_samples,
            "acceptance_rate": accepted_samples / self.total if self.total else 0.0,
            "rows_covered": self.rows_covered,
            "row_coverage": self.rows_covered / len(labelled) if labelled else 0.0,
            "kept_rows": len(self.kept),
            # the teacher decides from the evidence alone: how often that matches the label, before the
            # filter (what reading earns) and after it (what the SFT set teaches; the filter reads the label)
            "teacher_label_agreement": self.agreed / self.decided if self.decided else math.nan,
            "kept_label_agreement": (sum(r["teacher_decision"] == r["label"] for r in self.kept) / len(self.kept)
                                     if self.kept else math.nan),
            "rejects": {r: self.reasons.get(r, 0) for r in REJECT_REASONS},
            "params": params,
            "teacher_errors": self.errors[:20],
        }


def _to_dataset(kept: list[dict], rows: list[dict]):
    from datasets import Dataset

    if kept:
        return Dataset.from_list(kept)
    # an empty result keeps the schema so downstream code fails on emptiness, not on a column
    cols = {k: [] for k in (rows[0] if rows else {})}
    cols.update({"completion": [], "grounding": [], "hallucination_rate": [], "teacher_decision": [],
                 "sample_index": []})
    return Dataset.from_dict(cols)


def iter_theses(result: DistillResult) -> Iterable[str]:
    """The accepted thesis texts, in row order (handy for building a tokenizer corpus)."""
    for c in result.dataset["completion"]:
        yield c[0]["content"]
