"""The `thesisgym` command line: one sub-command per pipeline stage.

Each stage's commands live in their own module (`cli/<stage>.py`) and attach themselves to the
root app through `register(app)`, so the root stays a table of contents. `cli/common.py` holds what
they share: the one error printer (`error: ...`, exit 2 for usage errors, 1 for failed runs), the
CPU thread default and the pipeline order of `--help`.
"""

from __future__ import annotations

import typer

from thesisgym.cli import audit, build, data, demo, distill, evaluate, experiment, export, score, serve, train
from thesisgym.cli.common import ThesisgymGroup

app = typer.Typer(
    name="thesisgym",
    cls=ThesisgymGroup,
    help="Train and verify LLM trading analysts: point-in-time prompts, verifiable rewards, TRL training, "
         "leakage-safe backtests. Commands in pipeline order; `thesisgym demo --size quick` runs them all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

for _module in (data, build, score, audit, distill, train, evaluate, demo, experiment, export, serve):
    _module.register(app)


def _print_version(value: bool) -> None:
    if value:
        from thesisgym import __version__

        typer.echo(f"thesisgym {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print the thesisgym version and exit."),
) -> None:
    """Train and verify LLM trading analysts: point-in-time prompts, verifiable rewards, TRL training,
    leakage-safe backtests. Commands in pipeline order; `thesisgym demo --size quick` runs them all."""


@app.command("version")
def version() -> None:
    """Print the thesisgym version."""
    from thesisgym import __version__

    typer.echo(f"thesisgym {__version__}")


def main() -> None:
    app(prog_name="thesisgym")
