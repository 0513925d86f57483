"""`thesisgym audit`: red-team the reward stack on a built dataset (see `thesisgym.evaluate.audit`).

Writes an honest reference thesis per row, applies every mutation family, and prints a table of
how often each hack scores >= the honest thesis on each component and on the shipped recipes'
totals (fsr, dsr), with the mean margin. `--json` prints the same as JSON, `--output` saves it.
Exits 1 when a family wins on more than `--threshold` of its rows on a column it is judged on,
2 on bad input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from thesisgym.cli.common import fail


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:+.3f}"


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""

    @app.command("audit")
    def audit(
        dataset: Path = typer.Argument(..., help="Directory saved by `thesisgym build` (datasets.save_to_disk)."),
        split: str = typer.Option("train", "--split", help="Split of the DatasetDict to audit on."),
        rows: int = typer.Option(200, "--rows", min=1, help="Audit the first N rows of the split."),
        families: str | None = typer.Option(
            None, "--families", help="Comma-separated mutation families (default: all)."
        ),
        threshold: float = typer.Option(
            0.01, "--threshold", min=0.0, max=1.0,
            help="Fail when a family scores >= the honest thesis on more than this share of rows.",
        ),
        workers: int = typer.Option(2, "--workers", min=1, help="Worker processes."),
        seed: int = typer.Option(0, "--seed", help="Seed of the honest teacher and the mutations."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
        output: Path | None = typer.Option(None, "--output", help="Also write the JSON report here."),
    ) -> None:
        """Score every mutation family against an honest thesis per row; exit 1 if a hack wins."""
        from rich.console import Console
        from rich.table import Table

        from thesisgym.build.splits import load_split
        from thesisgym.evaluate.audit import RECIPES, run_audit

        try:
            split_ds = load_split(dataset, split)
            picked = [split_ds[i] for i in range(min(rows, len(split_ds)))]
            names = [f.strip() for f in families.split(",") if f.strip()] if families else None
            result = run_audit(picked, families=names, seed=seed, workers=workers)
        except ValueError as exc:
            fail(exc)

        report = result.as_dict(threshold)
        report.update(dataset=str(dataset), split=split)
        if output is not None:
            output.write_text(json.dumps(report, indent=2), encoding="utf-8")
        failed = report["failed"]
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            from rich.markup import escape

            console = Console()
            if not console.is_terminal:  # piped or captured: wide enough for the table, not 80
                console = Console(width=132)
            table = Table(
                title=escape(f"reward audit: {result.n_rows} rows of {dataset} [{split}], hack >= honest (lower is better)")
            )
            for col in ("family", "target", "rows", "evidence", "s", *RECIPES, "margin evidence",
                        *(f"margin {r}" for r in RECIPES), "verdict"):
                table.add_column(col, justify="left" if col in ("family", "target", "verdict") else "right")
            for r in result.table:
                judged = set(r["judged_on"])
                cells = [
                    (_pct(r["win"][c]) + ("" if c in judged else "*")) for c in ("evidence", "s", *RECIPES)
                ]
                table.add_row(
                    r["family"], r["target"], str(r["rows"]), *cells, _num(r["margin"]["evidence"]),
                    *(_num(r["margin"][c]) for c in RECIPES),
                    "[red]FAIL[/]" if r["family"] in failed else "ok",
                )
            console.print(table)
            h = result.honest_means
            console.print(
                "honest thesis means: " + ", ".join(f"{k} {v:.3f}" for k, v in h.items() if not math.isnan(v))
                + f"  ({result.seconds:.1f} s, * = not judged on this column)"
            )
            console.print(
                f"[red]{len(failed)} famil{'y' if len(failed) == 1 else 'ies'} above the {threshold:.0%} threshold: "
                f"{', '.join(failed)}[/]" if failed else f"every family stays at or below {threshold:.0%}"
            )
        if failed:
            raise typer.Exit(1)
