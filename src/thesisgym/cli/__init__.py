"""The `thesisgym` command line: one sub-command per pipeline stage.

Each stage's commands live in their own module (`cli/<stage>.py`) and attach themselves to the
root app through `register(app)`, so the root stays a table of contents.
"""

from __future__ import annotations

import typer

from thesisgym.cli import audit, build, data, demo, distill, evaluate, experiment, export, score, serve, train

app = typer.Typer(
    name="thesisgym",
    help="Train and verify LLM trading analysts: point-in-time prompts, verifiable rewards, TRL training, leakage-safe backtests.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

for _module in (data, build, score, audit, distill, train, evaluate, demo, experiment, export, serve):
    _module.register(app)


@app.command("version")
def version() -> None:
    """Print the thesisgym version."""
    from thesisgym import __version__

    typer.echo(__version__)


def main() -> None:
    app()
