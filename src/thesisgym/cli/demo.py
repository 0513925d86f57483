"""CLI commands for the `demo` stage (placeholder until the stage lands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
