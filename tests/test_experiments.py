"""Paired SFT-vs-GRPO change tables with bootstrap intervals, and the Trade-R1 experiment's config/resume."""

from __future__ import annotations

import json
import math

import pytest

from thesisgym.experiments import change_table, format_change_table, paired_change
from thesisgym.experiments.trade_r1 import ARMS, TradeR1Config, arm_rewards, format_table, summarize


def test_paired_change_is_seeded_and_brackets_the_mean_change():
    before = [0.0, 0.1, 0.5, 0.2, 0.0, 0.3, 0.1, 0.4]
    after = [0.5, 0.4, 0.6, 0.9, 0.1, 0.8, 0.2, 0.9]
    a = paired_change(before, after, seed=3)
    assert a == paired_change(before, after, seed=3)  # same seed, same interval
    assert a["n"] == 8 and a["change"] == pytest.approx(sum(after) / 8 - sum(before) / 8)
    assert a["lo"] < a["change"] < a["hi"] and a["lo"] > 0  # every pair improved


def test_paired_change_drops_nan_pairs_and_rejects_misaligned_lists():
    res = paired_change([1.0, math.nan, 0.0], [1.0, 1.0, math.nan])
    assert res["n"] == 1 and res["change"] == 0.0
    assert paired_change([math.nan], [1.0])["n"] == 0
    with pytest.raises(ValueError, match="pairs must align"):
        paired_change([1.0], [1.0, 2.0])


def test_change_table_adds_the_weighted_total_with_nan_as_zero():
    before = [{"evidence": 0.0, "market": math.nan}, {"evidence": 0.5, "market": 1.0}]
    after = [{"evidence": 1.0, "market": 1.0}, {"evidence": 0.5, "market": 1.0}]
    rows = change_table(before, after, keys=("evidence", "market"), total={"evidence": 2.0, "market": 1.0})
    by = {r["component"]: r for r in rows}
    assert by["market"]["n"] == 1  # the nan pair is left out of the component...
    assert by["total"]["n"] == 2 and by["total"]["change"] == pytest.approx((3.0 + 0.0) / 2)  # ...but counts 0 in total
    # reward names (as in a RewardConfig) map onto score_completion keys: loop -> loop_penalty
    (loop_total,) = change_table([{"loop_penalty": -1.0}], [{"loop_penalty": 0.0}], keys=(), total={"loop": 1.0})
    assert loop_total["component"] == "total" and loop_total["change"] == 1.0
    lines = format_change_table(rows)
    assert lines[0].split()[:4] == ["component", "SFT", "GRPO", "change"] and "total" in lines[-1]


def test_format_change_table_prints_n_a_for_an_undefined_figure():
    nan = math.nan
    lines = format_change_table([
        {"component": "IC (mean per date)", "n": 40, "before": nan, "after": 0.25, "change": nan, "lo": nan, "hi": nan},
        {"component": "market-neutral book / date", "n": 40, "before": 0.0, "after": 0.01, "change": 0.01,
         "lo": -0.002, "hi": 0.02}])
    assert "nan" not in " ".join(lines).lower()
    assert lines[1].split()[-5:] == ["n/a", "0.250", "n/a", "n/a", "40"]
    assert "[-0.002, +0.020]" in lines[2] and lines[2].startswith("market-neutral book / date ")


def test_trade_r1_config_names_bad_arms_and_seeds():
    with pytest.raises(ValueError, match="unknown arm"):
        TradeR1Config(arms=["market_only", "magic"])
    with pytest.raises(ValueError, match="distinct"):
        TradeR1Config(seeds=[1, 1])


def test_each_arm_trains_on_its_own_reward_and_logs_the_rest():
    for arm in ARMS:
        rewards = arm_rewards(arm)
        assert rewards.weights[0] == 1.0 and not any(rewards.weights[1:])
        assert rewards.funcs[0] == arm


def test_summarize_pools_seeds_and_reports_the_cross_market_drop(tmp_path):
    cfg = TradeR1Config(out=str(tmp_path), arms=["dsr"], seeds=[0, 1])
    for seed, acc_a in ((0, 1.0), (1, 0.0)):
        run = tmp_path / "arms" / f"dsr-s{seed}"
        run.mkdir(parents=True)
        row = {"hallucination_rate": 0.0, "grounding": 1.0, "s": 0.5, "decision_valid": 1.0}
        (run / "metrics.json").write_text(json.dumps({
            "arm": "dsr", "seed": seed, "in_sample_reward": 0.2 * (seed + 1), "sharpe_A": 1.0 + seed, "sharpe_B": 0.5,
            "A": [{**row, "decision_correct": acc_a}] * 2, "B": [{**row, "decision_correct": 0.0}] * 2}))
    (table,) = summarize(tmp_path, cfg)
    assert table["seeds"] == 2 and table["in_sample_reward"] == pytest.approx(0.3)
    assert table["A.decision_correct"]["mean"] == 0.5 and table["A.decision_correct"]["n"] == 4
    drop = table["drop_accuracy"]  # A's 4 rows against B's 4 rows, each market resampled on its own
    assert drop["mean"] == pytest.approx(0.5) and drop["lo"] < 0.5 < drop["hi"] and drop["n"] == 8
    assert table["drop_sharpe"] == {"mean": pytest.approx(1.0), "min": 0.5, "max": 1.5}  # per seed: 0.5, 1.5
    assert table["A.buy_share"] == 0.0  # no decision ids in these rows
    assert table["sharpe_A"]["min"] == 1.0 and table["sharpe_A"]["max"] == 2.0
    line = format_table([table])[2]
    assert line.startswith("| dsr | 2 | 0.300 |") and "+1.00 (+0.50..+1.50)" in line


@pytest.mark.slow
def test_trade_r1_runs_end_to_end_at_a_reduced_size_and_resumes(tmp_path):
    from thesisgym.experiments.trade_r1 import run_trade_r1

    cfg = TradeR1Config(out=str(tmp_path / "x"), arms=["market_only", "dsr"], seeds=[0], grpo_steps=1, eval_rows=4,
                        demo=dict(tickers=4, days=200, stride=6, heldout_tickers=1, distill_n=2, sft_steps=2,
                                  num_generations=2, max_completion_length=24))
    summary = run_trade_r1(cfg, progress=False)
    assert [r["arm"] for r in summary["table"]] == ["market_only", "dsr"]
    assert (tmp_path / "x" / "table.md").exists() and (tmp_path / "x" / "trade_r1.png").exists()
    lines: list[str] = []
    run_trade_r1(cfg, log=lines.append, progress=False)  # resumed: nothing retrained
    assert sum("done earlier, skipped" in ln for ln in lines) == 2
    with pytest.raises(ValueError, match="other settings"):
        run_trade_r1(cfg.model_copy(update={"grpo_steps": 2}), progress=False)
