"""Shipped recipes (package data under `thesisgym/configs/`) addressed by name.

`thesisgym train grpo --config fsr` finds `configs/recipes/fsr.yaml`; a path that exists always
wins, so user files shadow nothing by accident.
"""

from __future__ import annotations

from pathlib import Path

CONFIG_ROOT = Path(__file__).resolve().parent.parent / "configs"
RECIPES = CONFIG_ROOT / "recipes"
ACCELERATE = CONFIG_ROOT / "accelerate"


def list_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def recipe_path(name_or_path: str | Path) -> Path:
    """A config file path: an existing path as given, else a shipped recipe of that name."""
    p = Path(name_or_path)
    if p.exists():
        return p
    # one spelling: shipped recipes use underscores; `market-only` is accepted as `market_only`
    stem = p.stem if p.suffix in ('.yaml', '.yml') else p.name
    candidate = RECIPES / f"{stem.replace('-', '_')}.yaml"
    if candidate.exists():
        return candidate
    raise ValueError(f"config {name_or_path!s} is neither a file nor a shipped recipe ({', '.join(list_recipes())})")
