"""Progress: one short line per logging step instead of TRL's dicts, and plain lines when piped."""

from __future__ import annotations

from types import SimpleNamespace

from transformers.trainer_callback import PrinterCallback, ProgressCallback

from thesisgym.progress import Ticker, duration
from thesisgym.train import CompactProgress
from thesisgym.train.progress import compact_line, use_compact_progress


class Clock:
    """An injected clock: tests move time by hand, nothing sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_compact_line_keeps_the_watched_metrics_in_order():
    sft = {"loss": 4.8471, "grad_norm": 1.09, "mean_token_accuracy": 0.1807, "epoch": 0.16}
    assert compact_line(40, 200, sft) == "step 40/200  loss 4.85  token_acc 0.181"
    grpo = {"loss": "0.0047", "reward": "0.5753", "rewards/structure_reward/mean": "0.6371",
            "rewards/evidence_reward/mean": "0.1069", "decision/valid": "1", "clip_ratio/low_mean": "0"}
    assert compact_line(2, 8, grpo) == "step 2/8  loss 0.0047  reward 0.575  structure 0.637  evidence 0.107  valid 1"
    # the end-of-training summary has none of them: nothing to print
    assert compact_line(8, 8, {"train_runtime": 39.8, "train_loss": -0.02}) is None
    assert compact_line(1, 2, {"loss": None, "reward": "n/a"}) is None


def test_piped_progress_prints_plain_lines_at_a_steady_cadence():
    clock, lines = Clock(), []
    with Ticker(100, "tiny-grpo: writing theses", unit="rows", terminal=False, every_s=30, clock=clock,
                print_fn=lines.append) as t:
        for _ in range(10):
            clock.now += 12  # 10 rows every 12 s
            t.advance(10)
    assert lines == [
        "    tiny-grpo: writing theses: started, 100 rows to do",
        "    tiny-grpo: writing theses: 30/100 rows (30%) after 36 s, about 1 min 24 s left",
        "    tiny-grpo: writing theses: 60/100 rows (60%) after 1 min 12 s, about 48 s left",
        "    tiny-grpo: writing theses: 90/100 rows (90%) after 1 min 48 s, about 12 s left",
        "    tiny-grpo: writing theses: 100/100 rows done in 2 min 00 s",
    ]
    quiet: list[str] = []
    with Ticker(5, "x", enabled=False, print_fn=quiet.append) as t:
        t.advance(5)
    assert quiet == [] and duration(3725) == "1 h 02 min"


def test_callback_prints_on_rank_zero_and_replaces_the_default_printers():
    lines: list[str] = []
    cb = CompactProgress(label="SFT", print_fn=lines.append)
    rank0 = SimpleNamespace(is_world_process_zero=True, global_step=3, max_steps=6)
    rank1 = SimpleNamespace(is_world_process_zero=False, global_step=3, max_steps=6)
    cb.on_log(None, rank1, None, logs={"loss": 1.0})
    cb.on_log(None, rank0, None, logs={"loss": 1.0})
    assert lines == ["    step 3/6  loss 1"]

    class FakeTrainer:
        def __init__(self, callbacks):
            self.callback_handler = SimpleNamespace(callbacks=list(callbacks))

        def add_callback(self, cb):
            self.callback_handler.callbacks.append(cb)

        def remove_callback(self, kind):
            self.callback_handler.callbacks = [c for c in self.callback_handler.callbacks if not isinstance(c, kind)]

    with_compact = FakeTrainer([ProgressCallback(), PrinterCallback(), cb])
    use_compact_progress(with_compact)
    assert with_compact.callback_handler.callbacks == [cb]

    class SFTTrainer(FakeTrainer):
        pass

    # a trainer without one (e.g. `thesisgym train sft`, the curriculum) gets ours, named after it
    plain = SFTTrainer([ProgressCallback(), PrinterCallback()])
    use_compact_progress(plain)
    [attached] = plain.callback_handler.callbacks
    assert isinstance(attached, CompactProgress) and attached.label == "SFT"


def test_a_piped_training_run_prints_steps_and_logs_without_a_bar():
    clock, lines = Clock(), []
    cb = CompactProgress(label="GRPO", print_fn=lines.append, terminal=False, every_s=60, clock=clock)
    state = SimpleNamespace(is_world_process_zero=True, global_step=0, max_steps=4)
    cb.on_train_begin(None, state, None)
    for step in range(1, 5):
        clock.now += 40
        state.global_step = step
        cb.on_step_end(None, state, None)
        if step % 2 == 0:
            cb.on_log(None, state, None, logs={"reward": 0.5 * step})
    cb.on_train_end(None, state, None)
    assert lines == [
        "    GRPO: started, 4 steps to do",
        "    GRPO: 2/4 steps (50%) after 1 min 20 s, about 1 min 20 s left",
        "    step 2/4  reward 1",
        "    step 4/4  reward 2",
        "    GRPO: 4/4 steps done in 2 min 40 s",
    ]


def test_an_exception_inside_stops_the_bar_and_says_so_in_a_log():
    import pytest
    from rich.progress import Progress

    with pytest.raises(KeyError), Ticker(3, "live", terminal=True) as t:
        t.advance()
        raise KeyError("boom")
    # a live display left running would refuse the next one (rich allows one at a time)
    nxt = Progress()
    nxt.start()
    nxt.stop()
    clock, lines = Clock(), []
    with pytest.raises(KeyError), Ticker(4, "piped", unit="rows", terminal=False, clock=clock,
                                         print_fn=lines.append) as t:
        t.advance(1)
        clock.now += 5
        raise KeyError("boom")
    assert lines == ["    piped: started, 4 rows to do", "    piped: stopped at 1/4 rows after 5 s (KeyError)"]


def test_contexts_and_distillation_print_progress_lines_when_piped(capsys):
    """Both used plain rich bars, which print nothing into a piped log; they go through Ticker now."""
    from test_context import make_store
    from thesisgym.dataset.contexts import build_contexts
    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from toydata import toy_rows

    store = make_store()
    build_contexts(store, tickers=store.tickers[:2], split="train")
    distill(toy_rows(3), TemplateTeacher(), n=1, progress=True)
    out = capsys.readouterr().out.splitlines()
    assert "    contexts train: started, 2 tickers to do" in out
    assert any(line.startswith("    contexts train: 2/2 tickers done in ") for line in out)
    assert "    distilling: started, 3 rows to do" in out
    assert any(line.startswith("    distilling: 3/3 rows done in ") for line in out)


def test_distillation_stops_its_bar_when_scoring_raises(monkeypatch):
    import pytest
    from rich.progress import Progress

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from toydata import toy_rows

    monkeypatch.setenv("FORCE_TERMINAL", "1")  # the bar path, as in a terminal

    def broken_scorer(completion, row):
        raise RuntimeError("scorer bug")

    with pytest.raises(RuntimeError, match="scorer bug"):
        distill(toy_rows(3), TemplateTeacher(), n=1, progress=True, scorer=broken_scorer)
    nxt = Progress()  # raises LiveError if distill's bar were still live
    nxt.start()
    nxt.stop()
