"""What every `thesisgym` command shares: one way to fail, the CPU thread default, quiet libraries.

Why one module: a user reads errors from many commands, so they all start `error: `, say each
problem once (repeats become a count), name the CLI option (`--assume-timezone`, not the Python
argument a library message names) and exit 2 for a usage mistake, 1 for a run that failed on good
input (an endpoint down, a check that did not pass). `ThesisgymGroup` gives click's own usage errors
(a bad `--tickers 0`, an unknown option) the same one line instead of a framed panel, and lists the
commands in pipeline order.

Threads: torch uses one intra-op thread per core by default, which is right only when those cores are
free. Measured on 2 cores (bench/bench_threads.py, docs/report.md): for models of a few million
parameters a second thread never pays (an SFT step 2.3x slower, generation 4-18x slower with another
job on the machine), so they get 1 thread; for SmolLM2-135M on 2 idle cores 2 threads were 1.4x faster
for SFT and 1.5x for generation (bench/bench_train.py), but a second thread competing with another job
is what made the demo 12x slower on a busy box. So larger models get one thread per idle core at start
(cores minus those busy over a half-second sample of CPU use by psutil, at least 1). A GPU or OMP_NUM_THREADS leaves torch alone;
`--threads N` overrides (0 = torch's default).
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

# click's exception classes as typer raises them (typer >= 0.20 vendors its own copy of click)
UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

EXIT_USAGE = 2  # the input was wrong: fix the command line or the files it names
EXIT_FAILURE = 1  # the input was fine, the run failed (endpoint down, a check that did not pass)

# commands in the order a user runs them (data -> build -> score/audit -> distill -> train -> evaluate
# -> demo/experiment -> export/serve); anything not listed follows in registration order
PIPELINE_ORDER = ("data", "build", "show-prompt", "score", "audit", "distill", "train", "evaluate", "demo",
                  "experiment", "export", "serve", "version")

# models up to this many parameters count as small: on CPU they run on one thread by default
SMALL_MODEL_PARAMS = 50_000_000
THREADS_HELP = ("torch CPU threads. Default on CPU: 1 for models under 50M parameters (a second thread never paid "
                "for them), else one per idle core (cores minus those busy right now: on 2 idle cores 2 threads were "
                "1.4-1.5x faster for SmolLM2-135M, on a busy box far slower); torch's own default on a GPU or "
                "when OMP_NUM_THREADS is set. 0 = torch's default (one per core).")


def message_of(exc: BaseException) -> str:
    """The user-facing text of an exception: CLI option names for an ArgumentError, field names
    turned into options for a pydantic ValidationError, else `str(exc)`."""
    from pydantic import ValidationError

    from thesisgym.schema import ArgumentError

    if isinstance(exc, ArgumentError):
        return exc.for_cli()
    if isinstance(exc, ValidationError):
        return validation_message(exc)
    text = str(exc).strip()
    return text or type(exc).__name__


def validation_message(exc: Any, flags: dict[str, str] | None = None) -> str:
    """A pydantic ValidationError in the user's terms: `--tickers: must be >= 3 (got 0)`.

    `flags` maps a field to its option; without an entry, the field `sft_steps` is `--sft-steps`.
    """
    from thesisgym.schema import ArgumentError

    parts = []
    for err in exc.errors():
        ctx = err.get("ctx") or {}
        if isinstance(ctx.get("error"), ArgumentError):  # raised by a validator, already knows its option
            parts.append(ctx["error"].for_cli())
            continue
        field = ".".join(str(p) for p in err.get("loc", ()))
        kind = err.get("type", "")
        if not field:  # a rule over several fields: its message says which
            parts.append(str(err.get("msg", "invalid")).removeprefix("Value error, "))
            continue
        flag = (flags or {}).get(field) or "--" + field.replace("_", "-").replace(".", "-")
        bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
        if kind in bounds:
            bound = next(iter(ctx.values()), "?")
            what = f"must be {bounds[kind]} {bound:g}" if isinstance(bound, (int, float)) else f"must be {bounds[kind]} {bound}"
        elif kind == "extra_forbidden":
            what = "unknown setting"
        elif kind == "missing":
            what = "required"
        else:
            what = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        got = f" (got {err['input']!r})" if kind not in ("missing",) and "input" in err else ""
        parts.append(f"{flag}: {what}{got}")
    return "; ".join(counted(parts))


def counted(messages: Iterable[str]) -> list[str]:
    """Each distinct message once, in first-seen order, with `(xN)` when it came N > 1 times."""
    counts = Counter(messages)
    return [m if counts[m] == 1 else f"{m} (x{counts[m]})" for m in dict.fromkeys(counts)]


def print_error(message: str) -> None:
    """`error: <message>` on stderr, on one line (no wrapping, no markup: messages quote user text)."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, soft_wrap=True, highlight=False).print(Text("error: ", style="red") + Text(message))


def fail(problem: str | BaseException, *, code: int = EXIT_USAGE) -> NoReturn:
    """Print `error: ...` once and exit: `code` 2 (EXIT_USAGE) for bad input, 1 for a failed run."""
    print_error(problem if isinstance(problem, str) else message_of(problem))
    raise typer.Exit(code)


def warn(messages: Iterable[str], *, console: Any = None) -> None:
    """`warning: ...` lines, each distinct message once with its count."""
    from rich.console import Console
    from rich.text import Text

    out = console or Console(stderr=True, soft_wrap=True, highlight=False)
    for m in counted(messages):
        out.print(Text("warning: ", style="yellow") + Text(m), soft_wrap=True, highlight=False)


class ThesisgymGroup(TyperGroup):
    """The root command: pipeline order in `--help`, click's usage errors as one `error:` line."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = list(self.commands)
        return sorted(names, key=lambda n: PIPELINE_ORDER.index(n) if n in PIPELINE_ORDER else len(PIPELINE_ORDER))

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # help was asked for by giving nothing
                typer.echo(exc.format_message())
                sys.exit(0)
            where = exc.ctx.command_path if exc.ctx is not None else "thesisgym"
            print_error(f"{exc.format_message().replace('Value error, ', '')} (see '{where} --help')")
            sys.exit(EXIT_USAGE)
        except ClickException as exc:
            print_error(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            print_error("aborted")
            sys.exit(EXIT_FAILURE)
        sys.exit(code if isinstance(code, int) else 0)


# --- threads ---------------------------------------------------------------------------------------
THREADS_OPTION = typer.Option(None, "--threads", min=0, show_default="1 for small models, else the idle cores",
                              help=THREADS_HELP)


def model_params(model: str | Path) -> int | None:
    """Approximate parameter count of a saved causal LM from its config.json (None if unknown)."""
    path = Path(model).expanduser() / "config.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    h, layers = cfg.get("hidden_size"), cfg.get("num_hidden_layers")
    if not isinstance(h, int) or not isinstance(layers, int):
        return None
    inter = cfg.get("intermediate_size") or 4 * h
    vocab = cfg.get("vocab_size") or 0
    tied = cfg.get("tie_word_embeddings", True)
    return vocab * h * (1 if tied else 2) + layers * (4 * h * h + 3 * h * inter)


def busy_cores(interval: float = 0.5) -> float:
    """How many cores other processes keep busy now: psutil's CPU use over the last `interval` seconds.

    Not the 1-minute load average: it trails by a minute, so a job that just finished (an install, a
    test) reads as a busy core and would halve the threads of an idle machine.
    """
    import psutil

    return (os.cpu_count() or 1) * psutil.cpu_percent(interval=interval) / 100


def idle_cores() -> int:
    """Cores not busy right now (`busy_cores`), at least 1."""
    cores = os.cpu_count() or 1
    return max(1, min(cores, round(cores - busy_cores())))


def choose_threads(requested: int | None, *, model: str | Path | None = None) -> int | None:
    """The intra-op thread count to set, or None to leave torch's default (see the module docstring).

    `model`: the model that will run ("tiny" or None: the locally built tiny model).
    """
    if requested is not None:
        return requested or None
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    import torch

    if torch.cuda.is_available():
        return None
    if model is None or str(model) == "tiny":
        return 1
    n = model_params(model)
    return 1 if n is not None and n < SMALL_MODEL_PARAMS else idle_cores()


def set_threads(requested: int | None, *, model: str | Path | None = None) -> int:
    """Apply `choose_threads` to torch; returns the intra-op thread count now in use."""
    import torch

    n = choose_threads(requested, model=model)
    if n is not None:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def quiet_libraries() -> None:
    """No tqdm bars from datasets/transformers and no transformers deprecation chatter: the commands
    print their own progress (thesisgym.train.progress) in a terminal and in a log file alike."""
    import warnings

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", category=UserWarning, module="trl")
