"""`RunCard`: what one training run did, saved as `thesisgym_run.json` beside the model it produced.

Why: an evaluation report must say what was trained (base model and size, data, steps, recipe
and reward weights, seed, wall time, machine) before any metric, and the model directory is the
one thing evaluation is handed. `run_sft` and `run_grpo` write the card into `<output_dir>/final`;
a card found in the starting model's directory becomes `previous`, so a GRPO model's card carries
its SFT run too (`chain()` lists them oldest first). `read_card(model_dir)` is what evaluation
calls; a missing card is None, an unreadable one a ValueError naming the file.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from thesisgym.schema import StrictModel

CARD_FILE = "thesisgym_run.json"


class RunCard(StrictModel):
    """One training run, as the report's model card shows it."""

    kind: Literal["sft", "grpo"] = Field(description="the trainer")
    base_model: str = Field(description="the model training started from (path or hub id)")
    parameters: int = Field(ge=0, description="parameters of the trained model")
    architecture: str = Field("", description="model class, layers, hidden size, vocabulary")
    dataset: str = Field(description="training data (dataset directory)")
    split: str = Field("train", description="split trained on")
    train_rows: int = Field(0, ge=0, description="rows in that split (after max_rows)")
    steps: int = Field(ge=0, description="optimizer steps done")
    batch_size: int = Field(ge=1, description="examples per step (per device x accumulation x devices)")
    learning_rate: float
    rewards: dict[str, float] = Field(default_factory=dict, description="GRPO: reward name -> weight")
    settings: dict[str, Any] = Field(default_factory=dict, description="other trainer settings worth reading")
    seed: int
    wall_seconds: float = Field(ge=0, description="wall-clock time of the run (loading, training, saving)")
    finished_at: str = ""
    machine: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    command: str = Field("", description="the command line that started the run")
    previous: RunCard | None = Field(None, description="the card of the model this run started from")

    def chain(self) -> list[RunCard]:
        """This run and the runs before it, oldest first (e.g. [sft, grpo])."""
        out: list[RunCard] = []
        card: RunCard | None = self
        while card is not None:
            out.append(card)
            card = card.previous
        return out[::-1]


def machine() -> dict[str, Any]:
    """Where a run happened: OS, CPU count and, when torch is loaded, its threads and device."""
    import sys

    out: dict[str, Any] = {"platform": platform.platform(terse=True), "cpus": os.cpu_count(),
                           "world_size": int(os.environ.get("WORLD_SIZE", "1"))}
    torch = sys.modules.get("torch")  # not imported just to describe the machine
    if torch is not None:
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        out.update(torch_threads=torch.get_num_threads(), device=f"cuda ({gpu})" if gpu else "cpu")
    return out


def read_card(model_dir: str | Path | None) -> RunCard | None:
    """The card in `model_dir` (None when there is none); a malformed card is a ValueError."""
    if not model_dir:
        return None
    path = Path(model_dir) / CARD_FILE
    if not path.is_file():
        return None
    try:
        return RunCard.model_validate_json(path.read_text())
    except (ValidationError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ValueError(f"{path}: not a thesisgym run card ({first})") from None


def write_card(final_dir: str | Path, config: Any, trainer: Any, *, base_model: str, started: float) -> Path | None:
    """Write `thesisgym_run.json` into the saved model dir (rank 0 only); returns its path."""
    import sys

    from thesisgym.train.common import package_versions

    if not trainer.is_world_process_zero():
        return None
    model = trainer.model
    args = trainer.args
    cfg = getattr(model, "config", None)
    arch = ""
    if cfg is not None:
        arch = (f"{(getattr(cfg, 'architectures', None) or [type(model).__name__])[0]}: "
                f"{getattr(cfg, 'num_hidden_layers', '?')} layers, hidden {getattr(cfg, 'hidden_size', '?')}, "
                f"vocabulary {getattr(cfg, 'vocab_size', '?')}")
    rewards: dict[str, float] = {}
    settings: dict[str, Any] = {"max_steps": config.max_steps}
    if config.kind == "grpo":
        weights = config.rewards.weights or [1.0] * len(config.rewards.funcs)
        rewards = dict(zip(config.rewards.funcs, weights, strict=True))
        settings.update(num_generations=config.num_generations, max_completion_length=config.max_completion_length,
                        temperature=config.temperature, beta=config.beta, consistency=config.rewards.consistency)
    else:
        settings.update(max_length=config.max_length)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    card = RunCard(
        kind=config.kind, base_model=str(base_model),
        parameters=sum(p.numel() for p in model.parameters()), architecture=arch,
        dataset=str(config.data.dataset), split=config.data.split, train_rows=len(trainer.train_dataset or []),
        steps=int(trainer.state.global_step),
        batch_size=args.per_device_train_batch_size * args.gradient_accumulation_steps * world,
        learning_rate=config.learning_rate, rewards=rewards, settings=settings, seed=config.seed,
        wall_seconds=round(time.time() - started, 1), finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        machine=machine(), versions=package_versions(), command=" ".join(sys.argv),
        previous=_previous(base_model),
    )
    path = Path(final_dir) / CARD_FILE
    path.write_text(card.model_dump_json(indent=2))
    return path


def _previous(base_model: str) -> RunCard | None:
    try:
        return read_card(base_model)
    except ValueError:
        return None  # a foreign or damaged card upstream does not stop this run from recording itself


def card_summary(card: RunCard) -> dict[str, str]:
    """The card as the report's rows: what was trained, on what, how long, where."""
    chain = card.chain()
    first = chain[0]
    rows = {"base model": f"{first.base_model} ({_count(card.parameters)} parameters; {card.architecture})"}
    for run in chain:
        what = f"{run.steps} steps x {run.batch_size} {'completions' if run.kind == 'grpo' else 'examples'}, " \
               f"lr {run.learning_rate:g}, seed {run.seed}, {run.wall_seconds:.0f} s"
        if run.kind == "grpo" and run.rewards:
            what += "; rewards " + ", ".join(f"{k} {w:g}" for k, w in run.rewards.items())
        rows[run.kind.upper()] = what
        rows[f"{run.kind.upper()} data"] = f"{run.dataset} [{run.split}], {run.train_rows} rows"
    rows["training wall time"] = f"{sum(r.wall_seconds for r in chain):.0f} s"
    m = card.machine
    rows["machine"] = (f"{m.get('device', '?')}, {m.get('cpus', '?')} CPUs, {m.get('torch_threads', '?')} torch "
                       f"threads, {m.get('platform', '?')}")
    return rows


def _count(n: int) -> str:
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


RunCard.model_rebuild()
