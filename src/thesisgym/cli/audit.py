"""`thesisgym audit`: red-team the reward stack on a built dataset (see `thesisgym.evaluate.reward_audit`).

Writes an honest reference thesis per row, applies every mutation family, and prints a table of
how often each hack scores >= the honest thesis on each component and on the shipped recipes'
totals (fsr, dsr, weighted, trading_r1), with the mean margin; then the constant-decision check:
each recipe's expected reward against the skill of a reader (an oracle's decision with probability
p, else a random one) next to the best constant decision (`thesisgym.rewards.skill`), and the curve
of s alone against a reader's skill in three vocabularies (`reward_audit.reading_curve`). `--json`
prints the same as JSON, `--output` saves it. Exits 1 when a family wins on more than `--threshold`
of its rows on a column it is judged on, or when a reward-vs-skill check (or the s curve) fails; 2 on bad input.
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


def _family_table(result: object, source: str, failed: list[str]) -> object:
    """Per family: the share of rows where the hack scores >= the honest thesis and, in brackets, the
    mean margin (honest - hack) on each column; * marks a column the family is not judged on."""
    from rich.markup import escape
    from rich.table import Table

    from thesisgym.evaluate.reward_audit import RECIPES

    table = Table(title=escape(f"reward audit: {result.n_rows} rows of {source}, share of rows where hack >= "
                               "honest (mean margin honest - hack); lower share is better"))
    for col in ("family", "target", "rows", "evidence", "s", *RECIPES, "verdict"):
        table.add_column(col, justify="left" if col in ("family", "target", "verdict") else "right")
    for r in result.table:
        judged = set(r["judged_on"])
        cells = [f"{_pct(r['win'][c])}{'' if c in judged else '*'} ({_num(r['margin'][c])})"
                 for c in ("evidence", "s", *RECIPES)]
        table.add_row(r["family"], r["target"], str(r["rows"]), *cells,
                      "[red]FAIL[/]" if r["family"] in failed else "ok")
    return table


def _skill_table(curves: list) -> object:
    """The reward-vs-skill curves as a rich table (one row per recipe and oracle)."""
    from rich.table import Table

    table = Table(title="constant-decision check: expected reward of a reader of skill p (oracle w.p. p, else random)")
    for col in ("recipe", "oracle", "rows", *(f"p={p:.1f}" for p in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)),
                "best constant", "p*", "p @ majority acc.", "verdict"):
        table.add_column(col, justify="left" if col in ("recipe", "oracle", "best constant", "verdict") else "right")
    for c in curves:
        name, value = max(c.constants.items(), key=lambda kv: kv[1])
        checks = ", ".join(k.replace("_", " ") for k, ok in c.checks.items() if not ok)
        table.add_row(
            c.recipe, c.oracle, str(c.rows), *(f"{c.reward_at[p]:+.3f}" for p in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)),
            f"{name} {value:+.3f}", "never" if c.p_star is None else f"{c.p_star:.2f}",
            "-" if c.p_majority is None else f"{c.p_majority:.2f}",
            "ok" if c.passes else f"[red]FAIL[/] ({checks})",
        )
    return table


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
        skill: bool = typer.Option(True, "--skill/--no-skill", help="Run the constant-decision (reward-vs-skill) check."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
        output: Path | None = typer.Option(None, "--output", help="Also write the JSON report here."),
    ) -> None:
        """Score every mutation family against an honest thesis per row; exit 1 if one wins on more than --threshold
        of its rows (it scores >= the honest thesis there) or the reward-vs-skill check fails."""
        from rich.console import Console

        from thesisgym.dataset.splits import load_split
        from thesisgym.evaluate.reward_audit import run_audit

        try:
            split_ds = load_split(dataset, split)
            picked = [split_ds[i] for i in range(min(rows, len(split_ds)))]
            names = [f.strip() for f in families.split(",") if f.strip()] if families else None
            result = run_audit(picked, families=names, seed=seed, workers=workers, skill=skill)
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

            console = Console()
            if not console.is_terminal:  # piped or captured: wide enough for the tables, not 80
                console = Console(width=170)
            table = _family_table(result, f"{dataset} [{split}]", failed)
            console.print(table)
            if result.skill:
                console.print(_skill_table(result.skill))
            if result.reading:
                r = result.reading
                console.print(
                    f"s alone vs a reader's skill p ({r['rows']} rows, p = "
                    + ", ".join(f"{p:g}" for p in r["skills"]) + "): "
                    + "; ".join(f"{v} " + " ".join(f"{x:.3f}" for x in c) for v, c in r["s"].items())
                    + f"; spread across vocabularies {r['spread']:.3f}: "
                    + ("ok" if r["passes"] else "[red]FAIL[/] (must rise with skill and not move with the words)")
                )
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
