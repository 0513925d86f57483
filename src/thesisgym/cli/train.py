"""CLI for the `train` stage: SFT, GRPO and the Trading-R1 curriculum through TRL.

    thesisgym train sft --config FILE.yaml [--set key=value ...] [--resume]
    thesisgym train grpo --config FILE.yaml [--set rewards.consistency=local ...] [--resume]
    thesisgym train curriculum --config trading_r1 --set data.dataset=DIR
    thesisgym train tiny --dataset DIR --out DIR     (build the tiny preset alone)
    thesisgym train recipes                          (list shipped recipes)

`--config` takes a path or the name of a shipped recipe. Config errors (unknown key, wrong type,
a dataset column a reward needs) are reported before any model is loaded. Trainers print through
`thesisgym.train.progress` (a bar in a terminal, plain lines at a steady cadence in a log, one
short line per logging step) instead of TRL's own output; every final model gets its run card
(`thesisgym_run.json`, read by `thesisgym evaluate`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from thesisgym.cli.common import THREADS_OPTION, fail, quiet_libraries, set_threads

train_app = typer.Typer(help="Train a policy with TRL: SFT, GRPO with the reward stack, the Trading-R1 curriculum.",
                        no_args_is_help=True)

_CONFIG = typer.Option(..., "--config", "-c", help="YAML config file or shipped recipe name (see `train recipes`).")
_SET = typer.Option(None, "--set", "-s", show_default="none",
                    help="Override a config key: dotted.key=value (repeatable).")
_RESUME = typer.Option(False, "--resume", help="Continue from the last checkpoint in output_dir.")


def _load(config: str, overrides: list[str] | None, kind: str, threads: int | None):
    """The validated run config, with the libraries quietened and the CPU threads set for its model."""
    from thesisgym.train.config import load_config
    from thesisgym.train.recipes import recipe_path

    try:
        cfg = load_config(recipe_path(config), overrides=overrides, kind=kind)
    except (ValueError, TypeError) as exc:
        fail(exc)
    quiet_libraries()
    set_threads(threads, model=cfg.model.name_or_path)
    return cfg


def _done(path: Path) -> None:
    typer.echo(f"done: final model in {path}")


@train_app.command("sft")
def sft_cmd(config: str = _CONFIG, set_: list[str] | None = _SET, resume: bool = _RESUME,
            threads: int | None = THREADS_OPTION) -> None:
    """Supervised fine-tuning (TRL SFTTrainer) on a distilled prompt/completion set."""
    cfg = _load(config, set_, "sft", threads)
    from thesisgym.train.sft import run_sft

    try:
        _done(run_sft(cfg, resume=resume))
    except (ValueError, TypeError) as exc:
        fail(exc)


@train_app.command("grpo")
def grpo_cmd(config: str = _CONFIG, set_: list[str] | None = _SET, resume: bool = _RESUME,
             threads: int | None = THREADS_OPTION) -> None:
    """GRPO (TRL GRPOTrainer) with the configured reward stack."""
    cfg = _load(config, set_, "grpo", threads)
    from thesisgym.train.grpo import run_grpo

    try:
        _done(run_grpo(cfg, resume=resume))
    except (ValueError, TypeError) as exc:
        fail(exc)


@train_app.command("curriculum")
def curriculum_cmd(config: str = _CONFIG, set_: list[str] | None = _SET, resume: bool = _RESUME,
                   threads: int | None = THREADS_OPTION) -> None:
    """Trading-R1 curriculum: per stage SFT -> GRPO -> self-distillation (resumable)."""
    cfg = _load(config, set_, "curriculum", threads)
    from thesisgym.train.curriculum import run_curriculum

    try:
        _done(run_curriculum(cfg, resume=resume))
    except (ValueError, TypeError) as exc:
        fail(exc)


@train_app.command("tiny")
def tiny_cmd(
    dataset: Path = typer.Option(..., "--dataset", help="A built or distilled dataset (save_to_disk dir)."),
    out: Path = typer.Option(..., "--out", help="Where to save the model and tokenizer."),
    split: str = typer.Option("train", "--split", help="Split whose texts train the tokenizer."),
    vocab_size: int = typer.Option(4096, "--vocab-size", min=257, help="Tokenizer vocabulary."),
    hidden_size: int = typer.Option(192, "--hidden-size", min=8, help="Model width."),
    layers: int = typer.Option(4, "--layers", min=1, help="Transformer layers."),
    seed: int = typer.Option(0, "--seed", help="Initialisation seed."),
) -> None:
    """Build the tiny Qwen2 preset with a BPE tokenizer trained on the dataset's texts."""
    try:
        from thesisgym.train.common import corpus_of, load_split
        from thesisgym.train.models import build_tiny

        ds = load_split(dataset, split, what="--dataset")
        path = build_tiny(corpus_of(ds, max_rows=4000), out, vocab_size=vocab_size, hidden_size=hidden_size,
                          layers=layers, seed=seed)
        _done(path)
    except (ValueError, TypeError) as exc:
        fail(exc)


@train_app.command("recipes")
def recipes_cmd() -> None:
    """List the shipped recipes and accelerate configs."""
    from thesisgym.train.recipes import ACCELERATE, RECIPES, list_recipes

    for name in list_recipes():
        typer.echo(f"{name:16s} {RECIPES / (name + '.yaml')}")
    for p in sorted(ACCELERATE.glob("*.yaml")):
        typer.echo(f"accelerate:{p.stem:10s} {p}")


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.add_typer(train_app, name="train")
