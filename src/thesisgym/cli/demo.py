"""`thesisgym demo`: the whole pipeline offline on CPU, on the synthetic market (see thesisgym.experiments.demo)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Attach `demo` to the root app."""

    @app.command("demo")
    def demo(
        out: Path = typer.Option(Path("demo_out"), "--out", help="directory for every artefact and the report"),
        quick: bool = typer.Option(False, "--quick", help="the smoke version: the same as --size quick"),
        size: str = typer.Option("default", "--size",
                                 help="quick (the tiny model, a smoke run) | default | large (more SFT, GRPO and rows)"),
        model: str = typer.Option(None, "--model",
                                  help="base model: a preset (smollm2-135m, the default), a hub id or path, or tiny"),
        seed: int = typer.Option(0, "--seed"),
        tickers: int = typer.Option(None, "--tickers", help="override the number of synthetic tickers"),
        days: int = typer.Option(None, "--days", help="override the number of synthetic trading days"),
        sft_steps: int = typer.Option(None, "--sft-steps"),
        grpo_steps: int = typer.Option(None, "--grpo-steps"),
    ) -> None:
        """Synthesize a market, build datasets, distil, SFT + GRPO a pretrained base, compare them, evaluate, report."""
        import os
        import sys
        import warnings

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import transformers
        from rich.console import Console

        from thesisgym.cli.evaluate import print_summary
        from thesisgym.experiments.demo import DemoConfig, run_demo

        # this process only runs the demo: weight loading/saving bars and transformers' deprecation
        # chatter would bury the stage lines
        transformers.utils.logging.disable_progress_bar()
        warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
        # piped output (logs, CI) gets room for the verdict lines instead of rich's 80 columns
        console = Console(width=None if sys.stdout.isatty() else 160)
        overrides = dict(out=str(out), seed=seed, model=model, tickers=tickers, days=days, sft_steps=sft_steps,
                         grpo_steps=grpo_steps)
        try:
            cfg = DemoConfig.sized("quick" if quick else size, **overrides)
        except ValueError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
        summary = run_demo(cfg, log=console.print)

        # the same tables (with intervals) and verdict as `thesisgym evaluate`
        print_summary(summary["evaluation"], title="held-out test period: policy vs baselines vs oracle",
                      console=console)
        r = summary["reasoning"]
        console.print(
            "reasoning: "
            + ", ".join(f"{k} {v:.3f}" for k, v in r.items() if isinstance(v, float) and k in
                        ("hallucination_rate", "grounding", "decision_accuracy", "invalid_decision_rate", "loop_rate"))
        )
        console.print(f"total {summary['seconds']['total']:.0f} s; report: [bold]{summary['report']}[/]")
