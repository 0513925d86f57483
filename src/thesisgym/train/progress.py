"""Training progress through the package's one progress display (`thesisgym.progress.Ticker`).

Why: TRL's default prints every logged dict: a GRPO log holds ~60 metrics, which buries the handful a
person watches, and its tqdm bar draws nothing useful in a piped log.

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

from thesisgym.progress import EVERY_S, Ticker

__all__ = ["SHOWN", "CompactProgress", "compact_line", "use_compact_progress"]

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

