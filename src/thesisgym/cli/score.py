"""`thesisgym score`: score a JSONL file of completions against a built dataset split.

Each JSONL line holds `completion` (a string or TRL conversational messages) and says which row
of the split it answers, either by `index` (the row number in the split, preferred) or by the
row's keys `ticker` + `asof` (+ `variation`, default 0). Every line is scored with
`thesisgym.rewards.score_completion`; the command prints the mean of each component, the
hallucination rate and the worst examples (lowest `weighted`, with the reason their first bad
bullet failed), or the same as JSON with `--json`. `--output` writes one JSON line of scores per
completion. Bad input (unreadable JSON, missing fields, unknown index/keys) raises an error that
names the file and line.
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


def read_completions(path: Path) -> list[dict[str, Any]]:
    """Parse the JSONL file; every line must be an object with a `completion`."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    records = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or "completion" not in record:
                raise ValueError(f"{path}:{lineno}: expected an object with a 'completion' field")
            record["_line"] = lineno
            records.append(record)
    if not records:
        raise ValueError(f"{path}: no completions")
    return records


def match_rows(records: list[dict[str, Any]], split: Any, *, path: Path) -> list[int]:
    """Row index in the split for each record (by `index`, else by ticker/asof/variation)."""
    n = len(split)
    key_index: dict[tuple, int] | None = None
    out = []
    for record in records:
        where = f"{path}:{record['_line']}"
        if "index" in record:
            idx = record["index"]
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
                raise ValueError(f"{where}: field 'index' must be an integer in [0, {n}), got {idx!r}")
            out.append(idx)
            continue
        if "ticker" not in record or "asof" not in record:
            raise ValueError(f"{where}: needs 'index' or both 'ticker' and 'asof' to find its dataset row")
        if key_index is None:
            missing = {"ticker", "asof"} - set(split.column_names)
            if missing:
                raise ValueError(
                    f"{where}: the split has no column(s) {sorted(missing)} to match on; use 'index'"
                )
            variations = split["variation"] if "variation" in split.column_names else [0] * n
            key_index = {}
            for i, key in enumerate(zip(split["ticker"], split["asof"], variations, strict=True)):
                key_index.setdefault(key, i)
        key = (record["ticker"], str(record["asof"]), record.get("variation", 0))
        if key not in key_index:
            raise ValueError(
                f"{where}: no row with ticker={key[0]!r} asof={key[1]!r} variation={key[2]!r} in the split"
            )
        out.append(key_index[key])
    return out


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
    ) -> None:
        """Score completions with the full reward stack and summarise every component."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        from rich.table import Table

        from thesisgym.rewards import load_decision_matrix, score_completion

        try:
            load_decision_matrix(decision_matrix)
            records = read_completions(completions)
            split_ds = _load_split(dataset, split)
            indices = match_rows(records, split_ds, path=completions)
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
            for record, idx in zip(records, indices, strict=True):
                if idx not in rows_cache:
                    if len(rows_cache) > 4096:  # completions usually come grouped by row; bound memory
                        rows_cache.clear()
                    rows_cache[idx] = split_ds[idx]
                results.append(
                    score_completion(
                        record["completion"], rows_cache[idx], decision_variant=decision_matrix, clip=clip
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
                    "line": records[i]["_line"],
                    "index": indices[i],
                    "ticker": row.get("ticker"),
                    "asof": row.get("asof"),
                    "weighted": results[i]["weighted"],
                    "evidence": results[i]["evidence"],
                    "decision": results[i]["decision"],
                    "reason": _first_failure(records[i]["completion"], row),
                }
            )
        if output is not None:
            with output.open("w", encoding="utf-8") as fh:
                for record, idx, res in zip(records, indices, results, strict=True):
                    fh.write(json.dumps({"line": record["_line"], "index": idx, **_jsonable(res)}) + "\n")

        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "n": len(results),
                        "dataset": str(dataset),
                        "split": split,
                        "decision_matrix": decision_matrix,
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


def _load_split(dataset: Path, split: str) -> Any:
    import datasets

    if not dataset.exists():
        raise ValueError(f"{dataset}: no such dataset directory")
    try:
        loaded = datasets.load_from_disk(str(dataset))
    except Exception as exc:  # datasets raises FileNotFoundError/ValueError variants
        raise ValueError(f"{dataset}: cannot load a dataset saved with save_to_disk ({exc})") from exc
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise ValueError(f"{dataset}: no split {split!r}; available: {sorted(loaded)}")
        return loaded[split]
    return loaded


def _sort_key(value: float) -> float:
    return math.inf if value is None or math.isnan(value) else value


def _json_float(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _json_float(v) for k, v in d.items()}
