"""CLI for the `distill` stage: teacher theses -> rejection-sampling filter -> an SFT-ready dataset.

    thesisgym distill --dataset DIR --split train --out DIR [--teacher template|openai --n 4
                      --min-grounding 0.8 --mode forward|reverse --base-url URL --model NAME]

The output directory is a `save_to_disk` DatasetDict holding the chosen split (conversational
prompt/completion pairs plus the context columns GRPO needs) and `distill_stats.json` with the
acceptance rate and the rejects by reason.
"""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from thesisgym.cli.common import EXIT_FAILURE, fail, validation_message
from thesisgym.cli.options import config_command, given
from thesisgym.llm import DEFAULT_CACHE_PATH

# option name -> DistillStageConfig field (the curriculum's filter settings): default from there (cli/options.py)
FILTER_OPTIONS = {"n": "n", "min_grounding": "min_grounding", "max_hallucination": "max_hallucination_rate",
                  "decision_tolerance": "decision_tolerance", "keep_per_prompt": "keep_per_prompt"}


class Teacher(StrEnum):
    template = "template"
    openai = "openai"


class Style(StrEnum):
    full = "full"
    compact = "compact"


class TallyFit(StrEnum):
    reward = "reward"
    mix = "mix"


class Mode(StrEnum):
    forward = "forward"
    reverse = "reverse"


def build_teacher(kind: str, *, mode: str, seed: int, noise: float, wrong_decision_rate: float,
                  drop_section_rate: float, base_url: str | None, model: str | None,
                  timeout: float | None = None, max_retries: int | None = None, concurrency: int | None = None,
                  cache_path: str | None = None, style: str = "full"):
    """The teacher named on the command line (openai is imported only when asked for)."""
    if kind == "template":
        from thesisgym.teachers.template import COMPACT_STYLE, TemplateTeacher

        return TemplateTeacher(noise=noise, wrong_decision_rate=wrong_decision_rate,
                               drop_section_rate=drop_section_rate, seed=seed, mode=mode,
                               **(COMPACT_STYLE if style == "compact" else {}))
    if kind == "openai":
        from thesisgym.teachers.openai import OpenAITeacher

        wanted = {"base_url": base_url, "model": model, "mode": mode, "seed": seed, "timeout": timeout,
                  "max_retries": max_retries, "concurrency": concurrency}
        params = inspect.signature(OpenAITeacher).parameters
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kwargs = {k: v for k, v in wanted.items() if v is not None and (accepts_any or k in params)}
        if cache_path is not None:
            kwargs["cache_path"] = cache_path or None  # "" turns the cache off
        return OpenAITeacher(**kwargs)
    raise ValueError(f"--teacher {kind!r}: expected template or openai")


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("distill", cls=config_command("thesisgym.train.config:DistillStageConfig", FILTER_OPTIONS))(distill_cmd)


def distill_cmd(
    dataset: Path = typer.Option(..., "--dataset", help="Built contexts (save_to_disk directory)."),
    out: Path = typer.Option(..., "--out", help="Output directory for the distilled DatasetDict."),
    split: str = typer.Option("train", "--split", help="Split to distill."),
    teacher: Teacher = typer.Option(Teacher.template, "--teacher", help="Who writes the theses."),
    mode: Mode = typer.Option(Mode.forward, "--mode", help="forward (teacher decides) | reverse (teacher explains the label)"),
    n: int | None = typer.Option(None, "--n", help="Samples per prompt."),
    min_grounding: float | None = typer.Option(None, "--min-grounding", help="Minimum evidence score."),
    max_hallucination: float | None = typer.Option(None, "--max-hallucination",
                                                   help="Maximum hallucination rate of a kept thesis."),
    decision_tolerance: int | None = typer.Option(None, "--decision-tolerance",
                                                  help="0: decision must equal the label; 1: within one class."),
    keep_per_prompt: int | None = typer.Option(None, "--keep-per-prompt", help="Accepted samples kept per prompt."),
    seed: int = typer.Option(0, "--seed", help="Teacher and sampling seed."),
    max_rows: int | None = typer.Option(None, "--max-rows", min=1, show_default="every row",
                                        help="Distill only the first rows."),
    workers: int = typer.Option(1, "--workers", min=1, help="Rows sampled concurrently (LLM teachers)."),
    noise: float = typer.Option(0.0, "--noise", min=0.0, max=1.0, help="template teacher: bullet corruption rate."),
    wrong_decision_rate: float = typer.Option(0.0, "--wrong-decision-rate", min=0.0, max=1.0,
                                              help="template teacher: share of samples with a wrong decision."),
    drop_section_rate: float = typer.Option(0.0, "--drop-section-rate", min=0.0, max=1.0,
                                            help="template teacher: share of sections left out."),
    base_url: str | None = typer.Option(None, "--base-url", help="openai teacher: OpenAI-compatible endpoint."),
    model: str | None = typer.Option(None, "--model", help="openai teacher: model name."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="openai teacher: requests in flight per row."),
    timeout: float = typer.Option(120.0, "--timeout", min=0.001, help="openai teacher: seconds per request attempt."),
    retries: int = typer.Option(4, "--retries", min=0, help="openai teacher: retries on 429/5xx/timeouts/connection errors."),
    cache: str = typer.Option(DEFAULT_CACHE_PATH, "--cache", help="openai teacher: sqlite response cache ('' = off)."),
    max_error_rate: float = typer.Option(0.02, "--max-error-rate", min=0.0, max=1.0,
                                         help="fail (exit 1) when more than this share of teacher requests fail in transport."),
    style: Style = typer.Option(Style.full, "--style",
                                help="template teacher: full (every expected item, prose conclusion) | compact (the "
                                     "demo's: one bullet on each section's first item, the call counted from its verdicts)."),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate",
                                   help="template teacher: fit decision cut points to the label mix on these rows' evidence."),
    tally: TallyFit = typer.Option(TallyFit.reward, "--tally",
                                   help="compact style, with --calibrate: the call for each net count. reward (the demo's: "
                                        "the monotone map that earns the most decision reward on these rows' labels) | "
                                        "mix (match the label mix, evidence only)."),
) -> None:
    """Distill teacher theses into an SFT set with rejection sampling (decision + grounding filter)."""
    from thesisgym.teachers.distill import distill
    from thesisgym.train.common import load_split

    f = filter_settings(locals())
    try:
        rows = load_split(dataset, split, max_rows=max_rows, what="--dataset")
        t = build_teacher(teacher.value, mode=mode.value, seed=seed, noise=noise, wrong_decision_rate=wrong_decision_rate,
                          drop_section_rate=drop_section_rate, base_url=base_url, model=model, timeout=timeout,
                          max_retries=retries, concurrency=concurrency, cache_path=cache, style=style.value)
        if calibrate and hasattr(t, "calibrate") and len(rows) >= 10:
            t.calibrate(rows, tally=tally.value)
        result = distill(rows, t, n=f.n, min_grounding=f.min_grounding, max_hallucination_rate=f.max_hallucination_rate,
                         decision_tolerance=f.decision_tolerance, keep_per_prompt=f.keep_per_prompt, seed=seed,
                         workers=workers, progress=True)
    except (ValueError, TypeError) as exc:
        fail(exc)
    result.stats["teacher_transport_errors"] = check_transport(t, result.stats, max_error_rate)
    result.save(out, split=split)
    print_stats(result.stats, f"distill {dataset} [{split}] -> {out}", llm=getattr(t, "client", None) is not None)


def filter_settings(params: dict[str, Any]):
    """The rejection-sampling filter (DistillStageConfig) of the options given; a bad value exits 2 naming it."""
    from pydantic import ValidationError

    from thesisgym.train.config import DistillStageConfig

    try:
        return DistillStageConfig(**given(params, FILTER_OPTIONS))
    except ValidationError as exc:
        fail(validation_message(exc, {f: "--" + o.replace("_", "-") for o, f in FILTER_OPTIONS.items()}))


def check_transport(teacher: Any, stats: dict[str, Any], max_error_rate: float) -> int:
    """Teacher requests that failed in transport; exit 1 above `max_error_rate` (a dead endpoint is not a
    teacher that writes badly)."""
    usage = getattr(getattr(teacher, "client", None), "usage", None)
    failed = int(usage.failures) if usage is not None else 0
    samples = int(stats["samples"]) or 1
    if usage is not None and failed / samples > max_error_rate:
        endpoint = teacher.client.config.base_url or "https://api.openai.com/v1"
        fail(f"{failed} of {samples} teacher requests to {endpoint} failed in transport ({failed / samples:.0%} > "
             f"--max-error-rate {max_error_rate:.0%}); last error: {usage.last_error}", code=EXIT_FAILURE)
    return failed


def print_stats(s: dict[str, Any], title: str, *, llm: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from thesisgym.cli.common import warn

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("rows", "rows_without_label", "samples", "accepted_samples", "kept_rows"):
        table.add_row(key, str(s[key]))
    table.add_row("acceptance_rate", f"{s['acceptance_rate']:.1%}")
    table.add_row("row_coverage", f"{s['row_coverage']:.1%}")
    for key, what in (("teacher_label_agreement", "teacher decisions = label (all samples)"),
                      ("kept_label_agreement", "kept decisions = label")):
        if key in s and s[key] == s[key]:
            table.add_row(what, f"{s[key]:.1%}")
    for reason, count in s["rejects"].items():
        if count:
            table.add_row(f"rejected: {reason}", str(count))
    if llm:
        # a failed request is an empty sample, so it is also among the "empty" rejects above
        table.add_row("teacher transport errors", str(s["teacher_transport_errors"]))
    Console().print(table)
    if s["kept_rows"] == 0:
        warn(["no sample passed the filter; loosen --min-grounding or check the teacher"])
