"""CompactProgress: one short line per logging step instead of TRL's full metric dicts."""

from __future__ import annotations

from types import SimpleNamespace

from transformers.trainer_callback import PrinterCallback, ProgressCallback

from thesisgym.train import CompactProgress
from thesisgym.train.progress import compact_line, use_compact_progress


def test_compact_line_keeps_the_watched_metrics_in_order():
    sft = {"loss": 4.8471, "grad_norm": 1.09, "mean_token_accuracy": 0.1807, "epoch": 0.16}
    assert compact_line(40, 200, sft) == "step 40/200  loss 4.85  token_acc 0.181"
    grpo = {"loss": "0.0047", "reward": "0.5753", "rewards/structure_reward/mean": "0.6371",
            "rewards/evidence_reward/mean": "0.1069", "decision/valid": "1", "clip_ratio/low_mean": "0"}
    assert compact_line(2, 8, grpo) == "step 2/8  loss 0.0047  reward 0.575  structure 0.637  evidence 0.107  valid 1"
    # the end-of-training summary has none of them: nothing to print
    assert compact_line(8, 8, {"train_runtime": 39.8, "train_loss": -0.02}) is None
    assert compact_line(1, 2, {"loss": None, "reward": "n/a"}) is None


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

        def remove_callback(self, kind):
            self.callback_handler.callbacks = [c for c in self.callback_handler.callbacks if not isinstance(c, kind)]

    with_compact = FakeTrainer([ProgressCallback(), PrinterCallback(), cb])
    use_compact_progress(with_compact)
    assert with_compact.callback_handler.callbacks == [cb]
    plain = FakeTrainer([ProgressCallback()])
    use_compact_progress(plain)  # without a CompactProgress TRL's own bar stays
    assert len(plain.callback_handler.callbacks) == 1
