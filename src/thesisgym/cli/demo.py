"""`thesisgym demo`: the whole pipeline offline on CPU, on the synthetic market (see thesisgym.experiments.demo)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from thesisgym.cli.common import THREADS_OPTION, fail, quiet_libraries, set_threads
from thesisgym.cli.options import config_command

# option name -> DemoConfig field whose default and help the option shows (cli/options.py); the sizes'
# own options (--tickers, --days, --sft-steps, --grpo-steps) default per --size instead
DEMO_OPTIONS = {"out": "out", "seed": "seed", "model": "model"}


class Size(StrEnum):
    quick = "quick"
    default = "default"
    large = "large"


def register(app: typer.Typer) -> None:
    """Attach `demo` to the root app."""
    app.command("demo", cls=config_command("thesisgym.experiments.demo:DemoConfig", DEMO_OPTIONS))(demo)


def demo(
    out: Path | None = typer.Option(None, "--out", help="directory for every artefact and the report"),
    quick: bool = typer.Option(False, "--quick", help="the smoke version: the same as --size quick"),
    size: Size = typer.Option(Size.default, "--size",
                              help="quick (the tiny model, a smoke run) | default | large (more SFT, GRPO and rows)"),
    model: str | None = typer.Option(None, "--model", help="(tiny for --size quick)"),
    seed: int | None = typer.Option(None, "--seed", help="market, split, teacher, training and evaluation seed"),
    tickers: int | None = typer.Option(None, "--tickers", show_default="per --size", help="synthetic tickers (>= 3)"),
    days: int | None = typer.Option(None, "--days", show_default="per --size", help="synthetic trading days (>= 120)"),
    sft_steps: int | None = typer.Option(None, "--sft-steps", show_default="per --size", help="SFT optimizer steps"),
    grpo_steps: int | None = typer.Option(None, "--grpo-steps", show_default="per --size", help="GRPO optimizer steps"),
    threads: int | None = THREADS_OPTION,
) -> None:
    """Synthesize a market, build datasets, distil, SFT + GRPO a pretrained base, compare them, evaluate, report."""
    import os
    import sys

    from rich.console import Console
    from rich.text import Text

    from thesisgym.cli.evaluate import NAN, print_summary
    from thesisgym.evaluate.stats import fmt_interval
    from thesisgym.experiments.demo import DemoConfig, run_demo

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        cfg = DemoConfig.sized("quick" if quick else size.value, out=out and str(out), seed=seed, model=model, tickers=tickers,
                               days=days, sft_steps=sft_steps, grpo_steps=grpo_steps)
    except ValueError as exc:
        fail(exc)
    # this process only runs the demo: library bars and deprecation chatter would bury the stage lines
    quiet_libraries()
    used = set_threads(threads, model=cfg.model)
    # piped output (logs, CI) gets room for the verdict lines instead of rich's 80 columns
    console = Console(width=None if sys.stdout.isatty() else 160)

    def log(line: str) -> None:
        if line.startswith("==> "):
            console.print(Text(line, style="bold cyan"))
        else:
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    log(f"    torch threads: {used} (--threads to change)")
    summary = run_demo(cfg, log=log)
    # the same tables (with intervals) and verdict as `thesisgym evaluate`
    print_summary(summary["evaluation"], title="held-out test period: policy vs baselines vs oracle", console=console)
    r = summary["reasoning"]
    shown = ("hallucination_rate", "grounding", "decision_accuracy", "invalid_decision_rate", "loop_rate")
    console.print("reasoning: " + ", ".join(f"{k} {fmt_interval(v, NAN, NAN, digits=3)}" for k, v in r.items()
                                            if isinstance(v, float) and k in shown), markup=False, highlight=False)
    console.print(f"total {summary['seconds']['total']:.0f} s; report: {summary['report']}", markup=False, highlight=False,
                  soft_wrap=True)
