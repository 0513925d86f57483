"""`thesisgym score`: score a JSONL file of completions against a built dataset split.

Each JSONL line holds `completion` (a string or TRL conversational messages) and says which row
of the split it answers, either by `index` (the row number in the split) or by the row's keys
`ticker` + `asof` (+ `variation`, default 0): the same reader and join as `evaluate --completions`
(`thesisgym.evaluate.completions`); several lines may answer one row (samples of one prompt).
Every line is scored with `thesisgym.rewards.score_completion`, with the Trade-R1 consistency s of
the configured judge (`--judge local` by default, `--judge llm` on any OpenAI-compatible endpoint),
so the fsr/dsr columns are the rewards the fsr/dsr recipes train on. The command prints the mean of
each component, the hallucination rate and the worst examples (lowest `weighted`, with the reason
their first bad bullet failed), or the same as JSON with `--json`. `--output` writes one JSON line
of scores per completion. Bad input (unreadable JSON, missing or non-string fields, unknown
index/keys) is one error line naming the file, line and field. Lines that answer a probe's
rewritten prompt (`probe` set) are not scored against the original row; their count is shown.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

# components shown in the summary, in this order
SUMMARY_KEYS = (
    "structure",
    "evidence",
    "decision",
    "market",
    "s",
    "fsr",
    "dsr",
    "weighted",
    "loop_penalty",
    "hallucination_rate",
    "citation_precision",
    "grounding",
    "loop_rate",
    "decision_valid",
    "decision_correct",
    "reward_errors",
)


def _mean(values: list[float]) -> tuple[float, int]:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return (sum(finite) / len(finite) if finite else math.nan), len(finite)


def _first_failure(completion: Any, row: dict[str, Any]) -> str:
    from thesisgym.rewards.base import evidence_index, parsed
    from thesisgym.rewards.evidence import evidence_report

    thesis = parsed(completion)
    if thesis.errors:
        return thesis.errors[0]
    report = evidence_report(thesis, evidence_index(row.get("evidence")))
    for check in report.bullets:
        if check.reasons:
            return check.reasons[0]
    label = row.get("label")
    if label is not None and thesis.decision != label:
        return f"decided {thesis.decision}, label {label}"
    return ""


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""

    @app.command("score")
    def score(
        completions: Path = typer.Argument(
            ...,
            help="JSONL: one object per line with 'completion' and 'index' (or 'ticker' + 'asof' [+ 'variation']).",
        ),
        dataset: Path = typer.Option(
            ..., "--dataset", help="Directory saved by `thesisgym build` (datasets.save_to_disk)."
        ),
        split: str = typer.Option("test", "--split", help="Split of the DatasetDict to score against."),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables."),
        worst: int = typer.Option(5, "--worst", min=0, help="How many lowest-scoring examples to show."),
        output: Path | None = typer.Option(
            None, "--output", help="Write per-completion scores as JSONL here."
        ),
        decision_matrix: str = typer.Option(
            "text", "--decision-matrix", help="Decision matrix variant: text | paper_printed."
        ),
        clip: float = typer.Option(
            3.0, "--clip", min=0.01, help="Clip for the market reward r, in volatility units."
        ),
        judge: str = typer.Option("local", "--judge", help="Consistency judge for s: local | llm | none."),
        judge_model: str | None = typer.Option(None, "--judge-model", help="--judge llm: model name."),
        judge_base_url: str | None = typer.Option(
            None, "--judge-base-url", help="--judge llm: OpenAI-compatible base URL."
        ),
    ) -> None:
        """Score completions with the full reward stack and summarise every component."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        from rich.table import Table

        from thesisgym.build.splits import load_split
        from thesisgym.evaluate.completions import join_completions, read_completions, split_keys
        from thesisgym.evaluate.policies import consistency_scores, make_verifier
        from thesisgym.rewards import load_decision_matrix, score_completion

        try:
            load_decision_matrix(decision_matrix)
            verifier = make_verifier(judge, model=judge_model, base_url=judge_base_url)
            all_records = read_completions(completions)
            records = [r for r in all_records if not r.probe]
            probe_lines = len(all_records) - len(records)
            if not records:
                raise ValueError(f"{completions}: every line answers a probe; nothing to score against the split")
            split_ds = load_split(dataset, split)
            _, indices = join_completions(records, split_keys(split_ds), path=completions, allow_duplicates=True)
        except ValueError as exc:
            # plain one-line message (a rich box would wrap the file:line reference)
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(2) from exc

        err = Console(stderr=True)
        results: list[dict[str, float]] = []
        rows_cache: dict[int, dict[str, Any]] = {}
        with Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=as_json,
        ) as progress:
            task = progress.add_task("score", total=len(records))
            batch = 256  # s is judged a batch at a time (one request batch for an LLM judge)
            for lo in range(0, len(records), batch):
                chunk = list(zip(records[lo : lo + batch], indices[lo : lo + batch], strict=True))
                for _, idx in chunk:
                    if idx not in rows_cache:
                        if len(rows_cache) > 4096:  # completions usually come grouped by row; bound memory
                            rows_cache.clear()
                        rows_cache[idx] = split_ds[idx]
                s_values = consistency_scores(
                    verifier, [r.completion for r, _ in chunk], [rows_cache[i] for _, i in chunk]
                )
                for (record, idx), s_val in zip(chunk, s_values, strict=True):
                    results.append(
                        score_completion(
                            record.completion, rows_cache[idx], consistency_s=s_val,
                            decision_variant=decision_matrix, clip=clip,
                        )
                    )
                    progress.advance(task)

        summary = {key: _mean([r[key] for r in results]) for key in SUMMARY_KEYS}
        order = sorted(
            range(len(results)),
            key=lambda i: (_sort_key(results[i]["weighted"]), _sort_key(results[i]["evidence"])),
        )
        worst_rows = []
        for i in order[:worst]:
            row = split_ds[indices[i]]
            worst_rows.append(
                {
                    "line": records[i].line,
                    "index": indices[i],
                    "ticker": row.get("ticker"),
                    "asof": row.get("asof"),
                    "weighted": results[i]["weighted"],
                    "evidence": results[i]["evidence"],
                    "decision": results[i]["decision"],
                    "reason": _first_failure(records[i].completion, row),
                }
            )
        if output is not None:
            with output.open("w", encoding="utf-8") as fh:
                for record, idx, res in zip(records, indices, results, strict=True):
                    fh.write(json.dumps({"line": record.line, "index": idx, **_jsonable(res)}) + "\n")

        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "n": len(results),
                        "dataset": str(dataset),
                        "split": split,
                        "decision_matrix": decision_matrix,
                        "judge": judge,
                        "probe_lines_not_scored": probe_lines,
                        "means": {k: _json_float(m) for k, (m, _) in summary.items()},
                        "counts": {k: c for k, (_, c) in summary.items()},
                        "worst": [_jsonable(w) for w in worst_rows],
                    },
                    indent=2,
                )
            )
            return

        console = Console()
        table = Table(title=f"{len(results)} completions vs {dataset} [{split}]")
        table.add_column("component")
        table.add_column("mean", justify="right")
        table.add_column("n", justify="right")
        for key, (mean, count) in summary.items():
            table.add_row(key, "nan" if math.isnan(mean) else f"{mean:.3f}", str(count))
        console.print(table)
        console.print(f"s from the {judge} judge" + ("" if judge != "none" else " (none: s is the grounding placeholder, so fsr/dsr are not the training rewards)"))
        if probe_lines:
            console.print(f"{probe_lines} lines answer probe prompts and were not scored against the split")
        hall, _ = summary["hallucination_rate"]
        console.print(
            f"hallucination rate: {'nan' if math.isnan(hall) else f'{hall:.1%}'} of bullets (mean per completion)"
        )
        if worst_rows:
            bad = Table(title=f"worst {len(worst_rows)} (lowest weighted)")
            for col in ("line", "index", "ticker", "asof", "weighted", "evidence", "decision", "reason"):
                bad.add_column(col)
            for w in worst_rows:
                bad.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in w.values()))
            console.print(bad)


def _sort_key(value: float) -> float:
    return math.inf if value is None or math.isnan(value) else value


def _json_float(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_float(v) for k, v in d.items()}
