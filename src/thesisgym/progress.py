"""Progress everyone can see: a rich bar in a terminal, plain lines at a steady cadence in a log.

Why: a rich bar draws nothing when the output is piped (a log file, CI, `| tee`), so a long stage
looked dead (evaluate printed nothing for 9.5 minutes). This is the one progress display of the
package, at the bottom layer so every stage can use it: building contexts, distillation, training
(through `thesisgym.train.progress.CompactProgress`), evaluation and experiments.

`Ticker(total, label)`: the progress of a known amount of work, used as a context manager so the
bar is stopped however the block ends. In a terminal, a transient rich bar; otherwise a plain line
when it starts, every `every_s` seconds (default 30) and when it ends (or stops on an exception),
each saying done/total, elapsed time and an estimate of what is left. The clock is injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["EVERY_S", "Ticker", "duration", "is_terminal"]

EVERY_S = 30.0  # seconds between plain progress lines when the output is not a terminal


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

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """Stops the bar whatever happened inside (a live bar left running garbles the terminal and
        the traceback); a log gets a last line saying whether the work finished or stopped."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.enabled and not self.terminal:
            unit = f" {self.unit}" if self.unit else ""
            elapsed = duration(self.clock() - self._start)
            if exc_type is None:
                self.print_fn(f"    {self.label}: {self.done}/{self.total}{unit} done in {elapsed}")
            else:
                self.print_fn(f"    {self.label}: stopped at {self.done}/{self.total}{unit} after {elapsed} "
                              f"({exc_type.__name__})")
