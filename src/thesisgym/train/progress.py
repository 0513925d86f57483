"""Progress everyone can see: a rich bar in a terminal, plain lines at a steady cadence in a log.

Why: a rich bar draws nothing when the output is piped (a log file, CI, `| tee`), so a long stage
looked dead (evaluate printed nothing for 9.5 minutes), and TRL's default prints every logged dict:
a GRPO log holds ~60 metrics, which buries the handful a person watches.

- `Ticker(total, label)`: the progress of a known amount of work. In a terminal, a transient rich
  bar; otherwise a plain line when it starts, every `every_s` seconds (default 30) and when it ends,
  each saying done/total, elapsed time and an estimate of what is left. The clock is injectable.
- `CompactProgress()`: a TRL callback that shows one Ticker per run plus `compact_line` at each
  logging step (rank 0 only). `use_compact_progress(trainer)` attaches one to any trainer that has
  none and removes TRL's own bar and log printer, so every trainer prints the same way (the
  metrics still go to `log_history.json` and `report_to`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

# (log key, short name) in display order; absent keys are skipped, so one list serves SFT and GRPO
SHOWN: tuple[tuple[str, str], ...] = (
    ("loss", "loss"),
    ("mean_token_accuracy", "token_acc"),
    ("reward", "reward"),
    ("rewards/structure_reward/mean", "structure"),
    ("rewards/evidence_reward/mean", "evidence"),
    ("rewards/decision_reward/mean", "decision_reward"),
    ("decision/valid", "valid"),
    ("diag/hallucination_rate", "halluc"),
    ("frac_reward_zero_std", "zero_std"),
)
EVERY_S = 30.0  # seconds between plain progress lines when the output is not a terminal


def compact_line(step: int, max_steps: int, logs: dict[str, Any]) -> str | None:
    """`step 40/200  loss 4.847  token_acc 0.181` or None for a log without a shown metric."""
    parts = []
    for key, short in SHOWN:
        v = logs.get(key)
        try:
            parts.append(f"{short} {float(v):.3g}")
        except (TypeError, ValueError):
            continue
    return f"step {step}/{max_steps}  " + "  ".join(parts) if parts else None


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def is_terminal() -> bool:
    """Whether stdout is a terminal a live bar can redraw (rich's answer, FORCE_TERMINAL included)."""
    from rich.console import Console

    return Console().is_terminal


class Ticker:
    """Progress of `total` units of work (see the module docstring); use as a context manager."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, unit: str = "", every_s: float = EVERY_S,
                 terminal: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 print_fn: Callable[[str], None] | None = None) -> None:
        self.total, self.label, self.unit, self.every_s = max(int(total), 0), label, unit, every_s
        self.enabled = enabled
        self.terminal = is_terminal() if terminal is None and enabled else bool(terminal)
        self.clock = clock
        self.print_fn = print_fn or (lambda line: print(line, flush=True))
        self.done = 0
        self._start = self._last = 0.0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Ticker:
        self._start = self._last = self.clock()
        if not self.enabled:
            return self
        if self.terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn(f"    {self.label}"), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        else:
            self.print_fn(f"    {self.label}: started, {self.total}{' ' + self.unit if self.unit else ''} to do")
        return self

    def update(self, done: int) -> None:
        """Set the units done so far."""
        self.done = min(int(done), self.total) if self.total else int(done)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
        elif not self.terminal and self.clock() - self._last >= self.every_s and self.done < self.total:
            self._last = self.clock()
            self.print_fn("    " + self.status())

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def status(self) -> str:
        """`SFT: 40/200 steps (20%) after 1 min 02 s, about 4 min 08 s left`."""
        elapsed = self.clock() - self._start
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        left = (f", about {duration(elapsed * (self.total - self.done) / self.done)} left"
                if 0 < self.done < self.total else "")
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.label}: {self.done}/{self.total}{unit}{pct} after {duration(elapsed)}{left}"

    def print(self, line: str) -> None:
        """A line above a live bar, or a plain line."""
        if self._bar is not None:
            self._bar.console.print(line, highlight=False, markup=False, soft_wrap=True)
        else:
            self.print_fn(line)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.enabled and not self.terminal and exc[0] is None:
            unit = f" {self.unit}" if self.unit else ""
            self.print_fn(f"    {self.label}: {self.done}/{self.total}{unit} done in "
                          f"{duration(self.clock() - self._start)}")


class CompactProgress(TrainerCallback):
    """One Ticker per run plus `compact_line` at each logging step (rank 0 only)."""

    def __init__(self, *, label: str = "training", print_fn: Callable[[str], None] | None = None,
                 show_bar: bool = True, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic,
                 terminal: bool | None = None) -> None:
        self.label = label
        self.print_fn = print_fn
        # False under an outer rich display (an experiment's own bar): rich allows one live display
        self.show_bar = show_bar
        self.every_s, self.clock, self.terminal = every_s, clock, terminal
        self._ticker: Ticker | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self.show_bar:
            return
        self._ticker = Ticker(state.max_steps, self.label, unit="steps", every_s=self.every_s, clock=self.clock,
                              terminal=self.terminal, print_fn=self.print_fn)
        self._ticker.__enter__()
        self._ticker.update(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self._ticker is not None:
            self._ticker.update(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        line = compact_line(state.global_step, state.max_steps, logs)
        if line is None:
            return
        if self.label and not self.show_bar:
            line = f"{self.label}: {line}"
        if self._ticker is not None:
            self._ticker.print("    " + line)
        elif self.print_fn is not None:
            self.print_fn("    " + line)
        else:
            print("    " + line, flush=True)

    def on_train_end(self, args, state, control, **kwargs):
        if self._ticker is not None:
            self._ticker.__exit__(None, None, None)
            self._ticker = None


def use_compact_progress(trainer: Any) -> None:
    """Make a trainer print through CompactProgress: attach one when none is attached (labelled
    after the trainer: SFT, GRPO), and drop TRL's own bar and log printer (they would print twice)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    if not any(isinstance(cb, CompactProgress) for cb in trainer.callback_handler.callbacks):
        name = type(trainer).__name__.removesuffix("Trainer") or "training"
        trainer.add_callback(CompactProgress(label=name))
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)

