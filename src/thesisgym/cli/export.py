"""`thesisgym export`: write a built split as another RL stack's dataset (verl parquet, OpenRLHF JSONL).

The rows carry the verifier record as their ground truth, so the stack's reward function
(`thesisgym.integrations.verl.compute_score`, `thesisgym.integrations.openrlhf.reward_func`)
scores exactly as `thesisgym score` and TRL training do. See `thesisgym.integrations.export`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from thesisgym.cli.common import fail


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("export")(export)


def export(
    dataset: Path = typer.Option(..., "--dataset", help="Directory saved by `thesisgym build`."),
    split: str = typer.Option("train", "--split", help="Split of the DatasetDict to export."),
    fmt: str = typer.Option("verl", "--format", help="verl (parquet) | openrlhf (JSONL)."),
    out: Path = typer.Option(..., "--out", help="Output file (.parquet for verl, .jsonl for openrlhf)."),
    recipe: str | None = typer.Option(
        None, "--recipe", help="Write this reward recipe into each row's extra_info (verl); default: "
        "the reward function's recipe keyword, $THESISGYM_RECIPE, else dsr."
    ),
    data_source: str = typer.Option("thesisgym", "--data-source", help="verl data_source value."),
    keep_incomplete: bool = typer.Option(
        False, "--keep-incomplete", help="Also export rows without a label/forward return (skipped by default)."
    ),
) -> None:
    """Export a built split for verl or OpenRLHF, with the verifier's ground truth in every row."""
    from thesisgym.dataset.splits import load_split
    from thesisgym.integrations.core import load_recipe
    from thesisgym.integrations.export import export_rows

    try:
        if recipe is not None:
            load_recipe(recipe)  # fail on a typo now, not in the trainer
        rows = load_split(dataset, split)
        result = export_rows(
            rows, out, fmt=fmt, split=split, recipe=recipe, data_source=data_source,
            keep_incomplete=keep_incomplete,
        )
    except ValueError as exc:
        fail(exc)
    skipped = f"; skipped {result.skipped_incomplete} without a complete forward window" if result.skipped_incomplete else ""
    typer.echo(f"wrote {result.written} {fmt} rows from {dataset} [{split}] -> {result.path}{skipped}")
