"""`thesisgym score`: score a JSONL file of completions against a built dataset split.

Each JSONL line holds `completion` (a string or TRL conversational messages) and says which row
of the split it answers, either by `index` (the row number in the split) or by the row's keys
`ticker` + `asof` (+ `variation`, default 0): the same reader and join as `evaluate --completions`
(`thesisgym.evaluate.completions`); several lines may answer one row (samples of one prompt).
Every line is scored by `thesisgym.evaluate.score_rows` (the reward stack's `score_completion`
with the Trade-R1 consistency s of the configured judge: `--judge local` by default, `--judge llm`
on any OpenAI-compatible endpoint), so the fsr/dsr columns are the rewards the fsr/dsr recipes
train on. The command prints the mean of each component, the hallucination rate and the worst
examples (lowest `weighted`, with the reason their first bad bullet failed), or the same as JSON
with `--json`. `--output` writes one JSON line of scores per completion; `--details` one JSON line
per bullet with the verifier's verdict (verified / hallucinated / misfiled / unsupported) and why.
Bad input is one error line naming the file, line and field. Lines that answer a probe's
rewritten prompt (`probe` set) are not scored against the original row; their count is shown.

Naming: `decision` is the decision the thesis took (a label or INVALID); `decision_reward` is the
decision-matrix reward, as in every evaluation frame.
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from thesisgym.cli.common import fail

# components shown in the summary, in this order
SUMMARY_KEYS = (
    "structure", "evidence", "decision_reward", "market", "s", "fsr", "dsr", "weighted", "loop_penalty",
    "hallucination_rate", "citation_precision", "grounding", "loop_rate", "decision_valid", "decision_correct",
    "reward_errors",
)


class Judge(StrEnum):
    local = "local"
    llm = "llm"
    none = "none"


class Matrix(StrEnum):
    """The variants of configs/decision_matrix.yaml; `calibrated` is the default of every reward."""

    calibrated = "calibrated"
    text = "text"
    paper_printed = "paper_printed"


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("score")(score)


def score(
    completions: Path = typer.Argument(
        ..., help="JSONL: one object per line with 'completion' and 'index' (or 'ticker' + 'asof' [+ 'variation'])."),
    dataset: Path = typer.Option(..., "--dataset", help="Directory saved by `thesisgym build` (datasets.save_to_disk)."),
    split: str = typer.Option("test", "--split", help="Split of the DatasetDict to score against."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables."),
    worst: int = typer.Option(5, "--worst", min=0, help="How many lowest-scoring examples to show."),
    output: Path | None = typer.Option(None, "--output", help="Write per-completion scores as JSONL here."),
    details: Path | None = typer.Option(None, "--details", help="Write per-bullet verdicts (line, index, section, "
                                        "bullet, quote, ids, verdict, why) as JSONL here."),
    decision_matrix: Matrix = typer.Option(Matrix.calibrated, "--decision-matrix",
                                           help="decision matrix variant (calibrated: the rewards' default; text and "
                                                "paper_printed: the paper's graded matrices)"),
    clip: float = typer.Option(3.0, "--clip", min=0.01, help="Clip for the market reward r, in volatility units."),
    judge: Judge = typer.Option(Judge.local, "--judge", help="Consistency judge for s."),
    judge_model: str | None = typer.Option(None, "--judge-model", help="--judge llm: model name."),
    judge_base_url: str | None = typer.Option(None, "--judge-base-url", help="--judge llm: OpenAI-compatible base URL."),
) -> None:
    """Score completions with the full reward stack and summarise every component."""
    records, indices, split_ds, probe_lines, verifier = _load(completions, dataset, split, judge.value, judge_model,
                                                              judge_base_url)
    rows = _rows(split_ds, indices)
    scores = _score(records, rows, verifier, decision_matrix.value, clip, progress=not as_json)
    results = scores.to_dict("records")
    summary = {key: _mean([r.get(key) for r in results]) for key in SUMMARY_KEYS}
    worst_rows = _worst(records, indices, rows, results, worst)
    if output is not None:
        with output.open("w", encoding="utf-8") as fh:
            for record, idx, res in zip(records, indices, results, strict=True):
                fh.write(json.dumps({"line": record.line, "index": idx, **_jsonable(res)}) + "\n")
    if details is not None:
        n_bullets = write_details(details, records, indices, rows)
    if as_json:
        typer.echo(json.dumps({
            "n": len(results), "dataset": str(dataset), "split": split, "decision_matrix": decision_matrix.value,
            "judge": judge.value, "probe_lines_not_scored": probe_lines,
            "means": {k: _json_float(m) for k, (m, _) in summary.items()},
            "counts": {k: c for k, (_, c) in summary.items()}, "worst": [_jsonable(w) for w in worst_rows],
        }, indent=2))
        return
    _print(summary, worst_rows, len(results), dataset, split, judge.value, probe_lines)
    if details is not None:
        typer.echo(f"per-bullet verdicts of {n_bullets} bullets -> {details}")


def _load(completions: Path, dataset: Path, split: str, judge: str, judge_model: str | None,
          judge_base_url: str | None):
    from thesisgym.dataset.splits import load_split
    from thesisgym.evaluate.completions import join_completions, read_completions, split_keys
    from thesisgym.evaluate.policies import make_verifier

    try:
        verifier = make_verifier(judge, judge_model=judge_model, judge_base_url=judge_base_url)
        all_records = read_completions(completions)
        records = [r for r in all_records if not r.probe]
        if not records:
            raise ValueError(f"{completions}: every line answers a probe; nothing to score against the split")
        split_ds = load_split(dataset, split)
        _, indices = join_completions(records, split_keys(split_ds), path=completions, allow_duplicates=True)
    except ValueError as exc:
        fail(exc)
    return records, indices, split_ds, len(all_records) - len(records), verifier


def _rows(split_ds: Any, indices: list[int]) -> list[dict[str, Any]]:
    """The split row of each record (one dict per distinct row, shared by its samples)."""
    cache: dict[int, dict[str, Any]] = {}
    out = []
    for i in indices:
        if i not in cache:
            cache[i] = split_ds[i]
        out.append(cache[i])
    return out


def _score(records, rows, verifier, decision_matrix: str, clip: float, *, progress: bool):
    from thesisgym.evaluate.policies import score_rows
    from thesisgym.progress import Ticker

    with Ticker(len(records), "scoring", enabled=progress, unit="completions") as ticker:
        return score_rows([r.completion for r in records], rows, verifier=verifier, on_batch=ticker.advance,
                          decision_variant=decision_matrix, clip=clip)


def write_details(path: Path, records, indices: list[int], rows: list[dict[str, Any]]) -> int:
    """One JSON line per bullet: the verifier's verdict on it (`evaluate.report.bullet_marks`)."""
    from thesisgym.evaluate.report import bullet_marks

    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for record, idx, row in zip(records, indices, rows, strict=True):
            for k, mark in enumerate(bullet_marks(record.completion, row)):
                fh.write(json.dumps({"line": record.line, "index": idx, "ticker": row.get("ticker"),
                                     "asof": str(row.get("asof"))[:10], "bullet": k, **mark}) + "\n")
                n += 1
    return n


def _first_failure(completion: Any, row: dict[str, Any]) -> str:
    from thesisgym.evaluate.report import bullet_marks
    from thesisgym.rewards.base import parsed

    thesis = parsed(completion)
    if thesis.errors:
        return thesis.errors[0]
    bad = next((m for m in bullet_marks(completion, row) if m["verdict"] != "verified"), None)
    if bad is not None:
        return bad["why"].split("; ")[0]
    label = row.get("label")
    if label is not None and thesis.decision != label:
        return f"decided {thesis.decision}, label {label}"
    return ""


def _worst(records, indices, rows, results, k: int) -> list[dict[str, Any]]:
    order = sorted(range(len(results)),
                   key=lambda i: (_sort_key(results[i].get("weighted")), _sort_key(results[i].get("evidence"))))
    return [{"line": records[i].line, "index": indices[i], "ticker": rows[i].get("ticker"), "asof": rows[i].get("asof"),
             "weighted": results[i].get("weighted"), "evidence": results[i].get("evidence"),
             "decision": results[i].get("decision"), "reason": _first_failure(records[i].completion, rows[i])}
            for i in order[:k]]


def _print(summary, worst_rows, n: int, dataset: Path, split: str, judge: str, probe_lines: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from thesisgym.evaluate.stats import NA

    console = Console()
    table = Table(title=f"{n} completions vs {dataset} [{split}]")
    for col, just in (("component", "left"), ("mean", "right"), ("n", "right")):
        table.add_column(col, justify=just)
    for key, (mean, count) in summary.items():
        table.add_row(key, NA if math.isnan(mean) else f"{mean:.3f}", str(count))
    console.print(table)
    console.print(f"s from the {judge} judge" + ("" if judge != "none" else
                  " (none: s is the grounding placeholder, so fsr/dsr are not the training rewards)"), markup=False)
    if probe_lines:
        console.print(f"{probe_lines} lines answer probe prompts and were not scored against the split")
    hall, _ = summary["hallucination_rate"]
    console.print(f"hallucination rate: {NA if math.isnan(hall) else f'{hall:.1%}'} of bullets (mean per completion)")
    if worst_rows:
        bad = Table(title=f"worst {len(worst_rows)} (lowest weighted)")
        for col in ("line", "index", "ticker", "asof", "weighted", "evidence", "decision", "reason"):
            bad.add_column(col)
        for w in worst_rows:
            bad.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in w.values()))
        console.print(bad)


def _mean(values: list[Any]) -> tuple[float, int]:
    finite = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return (sum(finite) / len(finite) if finite else math.nan), len(finite)


def _sort_key(value: Any) -> float:
    return math.inf if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _json_float(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_float(v) for k, v in d.items()}
