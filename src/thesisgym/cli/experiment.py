"""`thesisgym experiment ...`: research experiments built from the pipeline (see thesisgym.experiments).

    thesisgym experiment trade-r1 --out DIR [--arms market_only,fsr,dsr,weighted] [--seeds 0,1,2]
                                  [--size quick|default|large] [--preset reading|noisy]
                                  [--grpo-steps N] [--eval-rows N]

    thesisgym experiment tools --out DIR [--grpo-steps N] [--eval-rows N]

A rerun with the same --out resumes: finished arm-seeds (checkpoints) are skipped, the SFT start is reused.
"""

from __future__ import annotations

from pathlib import Path

import typer

from thesisgym.cli.common import THREADS_OPTION, fail, quiet_libraries, set_threads
from thesisgym.cli.options import config_command, given

# option name -> config field: default and help from TradeR1Config / ToolExperimentConfig (cli/options.py)
TRADE_R1_OPTIONS = {"out": "out", "arms": "arms", "seeds": "seeds", "size": "size", "preset": "preset",
                    "grpo_steps": "grpo_steps", "eval_rows": "eval_rows", "seed": "seed"}
TOOLS_OPTIONS = {"out": "out", "grpo_steps": "grpo_steps", "eval_rows": "eval_rows", "seed": "seed"}

experiment_app = typer.Typer(help="Research experiments: Trade-R1 in miniature; a tool-using analyst.",
                             no_args_is_help=True)


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what}: expected comma-separated integers, got {text!r}") from None


@experiment_app.command("trade-r1", cls=config_command("thesisgym.experiments.trade_r1:TradeR1Config",
                                                          TRADE_R1_OPTIONS))
def trade_r1_cmd(
    out: Path | None = typer.Option(None, "--out", help="experiment directory (rerun to resume)"),
    arms: str | None = typer.Option(None, "--arms", help="comma-separated GRPO arms"),
    seeds: str | None = typer.Option(None, "--seeds", help="comma-separated GRPO seeds per arm"),
    size: str | None = typer.Option(None, "--size", help="market/model/SFT sizes: quick | default | large"),
    preset: str | None = typer.Option(None, "--preset", help="synthetic-market knobs: reading | noisy"),
    grpo_steps: int | None = typer.Option(None, "--grpo-steps", help="GRPO steps per arm (the same budget for every arm)"),
    eval_rows: int | None = typer.Option(None, "--eval-rows", help="held-out rows per evaluation set"),
    seed: int | None = typer.Option(None, "--seed", help="market, split and SFT seed"),
    threads: int | None = THREADS_OPTION,
) -> None:
    """One SFT start, GRPO arms market_only / fsr / dsr / weighted x seeds, held-out + cross-market table."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.console import Console

    from thesisgym.experiments.demo import DEMO_SIZES, PRETRAINED
    from thesisgym.experiments.trade_r1 import TradeR1Config, format_table, run_trade_r1

    fields = given(dict(out=out and str(out), arms=arms and [a.strip() for a in arms.split(",") if a.strip()],
                        size=size, preset=preset, grpo_steps=grpo_steps, eval_rows=eval_rows, seed=seed), TRADE_R1_OPTIONS)
    console = Console()
    try:
        if seeds is not None:
            fields["seeds"] = _ints(seeds, "--seeds")
        cfg = TradeR1Config(**fields)
        quiet_libraries()
        set_threads(threads, model=DEMO_SIZES.get(cfg.size, {}).get("model", PRETRAINED))
        summary = run_trade_r1(cfg, log=console.print)
    except ValueError as exc:
        fail(exc)
    for line in format_table(summary["table"]):
        console.print(line, soft_wrap=True, highlight=False)
    console.print(f"total {summary['seconds']:.0f} s; table and plot in [bold]{cfg.out}[/]")


@experiment_app.command("tools", cls=config_command("thesisgym.experiments.tool_agent:ToolExperimentConfig",
                                                     TOOLS_OPTIONS))
def tools_cmd(
    out: Path | None = typer.Option(None, "--out", help="experiment directory (rerun to reuse checkpoints)"),
    grpo_steps: int | None = typer.Option(None, "--grpo-steps"),
    eval_rows: int | None = typer.Option(None, "--eval-rows"),
    sft_steps: int | None = typer.Option(None, "--sft-steps", show_default="the demo's", help="SFT steps of each"),
    model: str | None = typer.Option(None, "--model", show_default="smollm2-135m", help="base model of both"),
    seed: int | None = typer.Option(None, "--seed", help="market, split, teacher and training seed"),
    threads: int | None = THREADS_OPTION,
) -> None:
    """A tool-using analyst (point-in-time tools, SFT on tool traces, GRPO through the tool environment)
    against the single-prompt analyst on the same held-out rows."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.console import Console

    from thesisgym.experiments.demo import PRETRAINED
    from thesisgym.experiments.tool_agent import ToolExperimentConfig, format_tool_table, run_tool_experiment

    quiet_libraries()
    console = Console()
    demo = {k: v for k, v in (("sft_steps", sft_steps), ("model", model)) if v is not None}
    set_threads(threads, model=model or PRETRAINED)
    try:
        fields = given(dict(out=out and str(out), grpo_steps=grpo_steps, eval_rows=eval_rows, seed=seed), TOOLS_OPTIONS)
        cfg = ToolExperimentConfig(**fields, demo=demo)
        summary = run_tool_experiment(cfg, log=lambda line: console.print(line, markup=False, highlight=False))
    except ValueError as exc:
        fail(exc)
    for line in format_tool_table(summary["table"]):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    console.print(f"total {summary['seconds']:.0f} s; results in {cfg.out}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Attach `experiment` to the root app."""
    app.add_typer(experiment_app, name="experiment")
