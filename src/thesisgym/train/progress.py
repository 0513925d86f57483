"""A compact, rich progress display for TRL runs: one bar and one short line per logging step.

Why: TRL's default prints every logged dict, and a GRPO log holds ~60 metrics (every reward's
mean/std, diagnostics, clip ratios); in a terminal that buries the handful a person watches. Pass
`CompactProgress()` in `callbacks=` to `run_sft`/`run_grpo`: it replaces the trainer's own progress
bar and log printer (the metrics still go to `log_history.json` and `report_to`).
"""

from __future__ import annotations

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
    ("rewards/decision_reward/mean", "decision"),
    ("decision/valid", "valid"),
    ("diag/hallucination_rate", "halluc"),
    ("frac_reward_zero_std", "zero_std"),
)


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


class CompactProgress(TrainerCallback):
    """One rich progress bar per run plus `compact_line` at each logging step (rank 0 only)."""

    def __init__(self, *, label: str = "training", print_fn: Callable[[str], None] | None = None,
                 show_bar: bool = True) -> None:
        self.label = label
        self.print_fn = print_fn
        # False under an outer rich display (an experiment's own bar): rich allows one live display
        self.show_bar = show_bar
        self._progress: Any = None
        self._task: Any = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or not self.show_bar:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(TextColumn(f"    {self.label}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn(), transient=True)
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=state.max_steps, completed=state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        if self._progress is not None:
            self._progress.update(self._task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        line = compact_line(state.global_step, state.max_steps, logs)
        if line is None:
            return
        if self.label and not self.show_bar:
            line = f"{self.label}: {line}"
        if self.print_fn is not None:
            self.print_fn("    " + line)
        elif self._progress is not None:
            self._progress.console.print("    " + line, highlight=False)
        else:
            print("    " + line)

    def on_train_end(self, args, state, control, **kwargs):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def use_compact_progress(trainer: Any) -> None:
    """Drop TRL's own bar and log printer when a CompactProgress is attached (they would print twice)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    if any(isinstance(cb, CompactProgress) for cb in trainer.callback_handler.callbacks):
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)
