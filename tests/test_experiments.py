"""Paired SFT-vs-GRPO change tables with bootstrap intervals, the experiments' decision-skill tables, and the
Trade-R1 experiment's config/resume."""

from __future__ import annotations

import json
import math

import pytest

from thesisgym.experiments import change_table, format_change_table, paired_change
from thesisgym.experiments.compare import SKILL_HEAD, decision_skill, skill_cells, with_row_fields
from thesisgym.experiments.tool_agent import format_tool_table
from thesisgym.experiments.tool_agent import summarize as summarize_tools
from thesisgym.experiments.trade_r1 import ARMS, TradeR1Config, arm_rewards, format_table, summarize
from thesisgym.schema import LABEL_TO_ID

# two dates x three tickers, fwd_vol 0.01 (z = 100 x return); the hand-computed case of tests/test_skill.py
DATES = ["2024-01-05"] * 3 + ["2024-01-12"] * 3
RETURNS = [0.02, 0.01, -0.03, -0.01, 0.02, 0.00]
LABELS_ = ["BUY", "SELL", "SELL", "HOLD", "BUY", "BUY"]
DECISIONS = ["BUY", "HOLD", "SELL", "STRONG_BUY", "BUY", "BUY"]
REVERSED_DAY_1 = ["SELL", "HOLD", "BUY", "STRONG_BUY", "BUY", "BUY"]


def scored_rows(decisions: list[str]) -> list[dict]:
    """score_completion-like dicts with the row fields the skill measures read."""
    rows = [{"asof": d, "fwd_return": r, "fwd_vol": 0.01, "label": lab} for d, r, lab in zip(DATES, RETURNS, LABELS_, strict=True)]
    scored = [{"decision_id": float(LABEL_TO_ID[d]), "decision_correct": float(d == lab), "grounding": 1.0}
              for d, lab in zip(decisions, LABELS_, strict=True)]
    return with_row_fields(scored, rows)


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


def test_decision_skill_by_hand():
    sk = decision_skill(scored_rows(DECISIONS), majority="HOLD", reps=50)
    # date 1: positions rank as the returns -> IC 1, book .025; date 2: IC -1.5 / sqrt(3), book -.01
    assert sk["ic_date"] == pytest.approx((1.0 - 1.5 / math.sqrt(3.0)) / 2)
    assert sk["neutral"] == pytest.approx((0.025 - 0.01) / 2)
    assert sk["ic"] == pytest.approx(3.5 / math.sqrt(15.5 * 17))
    # 4 of 6 right; always-BUY 3 of 6, the train majority (HOLD) 1 of 6: paired differences 1/6 and 3/6
    assert sk["accuracy"] == pytest.approx(4 / 6) and sk["labelled"] == 6
    assert sk["acc_vs_buy"] == pytest.approx(1 / 6) and sk["acc_vs_majority"] == pytest.approx(3 / 6)
    assert sk["mix_BUY"] == pytest.approx(0.5) and sk["mix_STRONG_BUY"] == pytest.approx(1 / 6)
    assert (sk["rows"], sk["dates"], sk["majority"]) == (6, 2, "HOLD")
    cells = dict(zip(SKILL_HEAD, skill_cells(sk), strict=True))
    # two dates are too few for an interval: the value alone, never a false interval
    assert cells["IC pooled"] == f"{3.5 / math.sqrt(15.5 * 17):.2f}"
    assert cells["acc - train majority"] == "50.0% (HOLD)" and cells["acc - always BUY"] == "16.7%"
    assert cells["decision mix"].startswith("BUY 50%")


def test_decision_skill_keeps_seeds_apart_within_a_date_and_says_na_where_undefined():
    pooled = scored_rows(DECISIONS) + scored_rows(REVERSED_DAY_1)
    sk = decision_skill(pooled, majority="HOLD", sections=[0] * 6 + [1] * 6, reps=50)
    # day 1: seed 0 IC +1 (book +.025), seed 1 IC -1 (book -.025) -> 0; day 2 as before for both seeds
    assert sk["ic_date"] == pytest.approx((0.0 - 1.5 / math.sqrt(3.0)) / 2)
    assert sk["neutral"] == pytest.approx((0.0 - 0.01) / 2)
    assert (sk["rows"], sk["dates"]) == (12, 2)
    # one row per date: no cross-section to rank or hedge -> n/a; no majority given -> n/a
    single = decision_skill([scored_rows(DECISIONS)[i] for i in (0, 3)], reps=50)
    cells = dict(zip(SKILL_HEAD, skill_cells(single), strict=True))
    assert cells["IC mean per date"] == cells["market-neutral book / date"] == cells["acc - train majority"] == "n/a"
    # results saved before the row fields were recorded: every cell n/a
    assert decision_skill([{"decision_id": 3.0}]) == {} and set(skill_cells({})) == {"n/a"}


def test_decision_skill_interval_brackets_a_reader():
    import numpy as np

    rng = np.random.default_rng(0)
    rows, scored = [], []
    for i in range(30):
        for _ in range(4):
            ret = float(rng.normal(0, 0.02))
            dec = "BUY" if ret + rng.normal(0, 0.01) > 0 else "SELL"
            rows.append({"asof": f"2024-{1 + i // 28:02d}-{1 + i % 28:02d}", "fwd_return": ret, "fwd_vol": 0.02,
                         "label": "BUY" if ret > 0 else "SELL"})
            scored.append({"decision_id": float(LABEL_TO_ID[dec])})
    sk = decision_skill(with_row_fields(scored, rows), majority="HOLD", reps=200)
    for key in ("ic", "ic_date", "neutral", "acc_vs_buy", "acc_vs_majority"):
        assert 0 < sk[f"{key}_lo"] <= sk[key] <= sk[f"{key}_hi"], key


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
    with pytest.raises(ValueError, match="preset: unknown 'magic'"):
        TradeR1Config(preset="magic")


def test_the_markets_take_the_chosen_preset(tmp_path):
    from thesisgym.experiments.demo import DemoConfig, build_market_data

    assert TradeR1Config().preset == "reading"  # the market where reading pays, by default
    store, _, _ = build_market_data(DemoConfig.quick(tickers=3, days=120, heldout_tickers=0), tmp_path, market="B",
                                    preset="noisy", log=lambda _: None)
    assert (store.meta["market"], store.meta["preset"]) == ("B", "noisy")


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


def test_trade_r1_table_carries_the_pooled_decision_skill(tmp_path):
    cfg = TradeR1Config(out=str(tmp_path), arms=["dsr", "fsr"], seeds=[0, 1])
    for seed, decisions in ((0, DECISIONS), (1, REVERSED_DAY_1)):
        for arm in ("dsr", "fsr"):
            run = tmp_path / "arms" / f"{arm}-s{seed}"
            run.mkdir(parents=True)
            rows = scored_rows(decisions)
            metrics = {"arm": arm, "seed": seed, "in_sample_reward": 0.1, "sharpe_A": 1.0, "sharpe_B": 0.5, "A": rows,
                       "B": rows, "train_majority": "HOLD"}
            if arm == "fsr":  # saved before the row fields were recorded
                metrics.update(A=[{k: v for k, v in r.items() if k != "fwd_return"} for r in rows], B=[])
                metrics.pop("train_majority")
            (run / "metrics.json").write_text(json.dumps(metrics))
    dsr, fsr = summarize(tmp_path, cfg)
    assert dsr["A.skill"]["ic_date"] == pytest.approx((0.0 - 1.5 / math.sqrt(3.0)) / 2)
    # seed 0: 4 right against HOLD's 1; seed 1: 2 right against 1 -> (3 + 1) / 12
    assert dsr["A.skill"]["acc_vs_majority"] == pytest.approx(4 / 12)
    assert dsr["B.skill"]["rows"] == 12 and "lucky.skill" in dsr and dsr["lucky.skill"] == {}
    assert fsr["A.skill"] == {}
    lines = format_table([dsr, fsr])
    head = next(ln for ln in lines if ln.startswith("| arm | set |"))
    assert all(h in head for h in SKILL_HEAD)
    by = {tuple(c.strip() for c in ln.split("|")[1:3]): ln for ln in lines if ln.startswith(("| dsr | ", "| fsr | "))}
    assert "33.3% (HOLD)" in by[("dsr", "A")] and by[("dsr", "A")].endswith("| 0.0% | BUY 50%, SELL 17%, HOLD 17%, STRONG_BUY 17% |")
    assert by[("fsr", "A")].count("n/a") == len(SKILL_HEAD)


def test_trade_r1_table_opens_with_the_sft_start_every_arm_is_read_against(tmp_path):
    """The checkpoint every arm starts from, scored on the same sets, is the table's first row: an arm's
    change is read against it, not against the other arms alone. It has no in-sample reward."""
    cfg = TradeR1Config(out=str(tmp_path), arms=["dsr"], seeds=[0])
    for arm, name, reward in (("sft_start", "sft_start", float("nan")), ("dsr", "dsr-s0", 0.2)):
        (tmp_path / "arms" / name).mkdir(parents=True)
        rows = scored_rows(DECISIONS if arm == "dsr" else REVERSED_DAY_1)
        (tmp_path / "arms" / name / "metrics.json").write_text(json.dumps(
            {"arm": arm, "seed": 0, "in_sample_reward": reward, "sharpe_A": 1.0, "sharpe_B": 0.5, "A": rows, "B": rows,
             "train_majority": "HOLD"}))
    start, dsr = summarize(tmp_path, cfg)
    assert (start["arm"], dsr["arm"]) == ("sft_start", "dsr") and start["A.skill"]["ic"] != dsr["A.skill"]["ic"]
    lines = format_table([start, dsr])
    assert lines[2].startswith("| sft_start | 1 | n/a |") and lines[3].startswith("| dsr | 1 | 0.200 |")


def test_tool_table_carries_the_decision_skill():
    table = summarize_tools({"single-prompt": scored_rows(DECISIONS), "tool SFT": scored_rows(REVERSED_DAY_1)},
                            majority="HOLD")
    assert table[0]["skill"]["ic"] == pytest.approx(3.5 / math.sqrt(15.5 * 17))
    assert table[1]["skill"]["neutral"] == pytest.approx((-0.025 - 0.01) / 2)
    lines = format_tool_table(table)
    head = lines.index("| policy | " + " | ".join(SKILL_HEAD) + " |")
    assert lines[head + 2].startswith("| single-prompt | 6 | 2 | ")
    assert lines[head + 3].split(" | ")[-1] == "BUY 50%, SELL 17%, HOLD 17%, STRONG_BUY 17% |"


@pytest.mark.slow
def test_trade_r1_runs_end_to_end_at_a_reduced_size_and_resumes(tmp_path):
    from thesisgym.experiments.trade_r1 import run_trade_r1

    cfg = TradeR1Config(out=str(tmp_path / "x"), arms=["market_only", "dsr"], seeds=[0], grpo_steps=1, eval_rows=4,
                        demo=dict(tickers=4, days=200, stride=6, heldout_tickers=1, distill_n=2, sft_steps=2,
                                  num_generations=2, max_completion_length=24))
    summary = run_trade_r1(cfg, progress=False)
    assert [r["arm"] for r in summary["table"]] == ["sft_start", "market_only", "dsr"]
    assert (tmp_path / "x" / "table.md").exists() and (tmp_path / "x" / "trade_r1.png").exists()
    lines: list[str] = []
    run_trade_r1(cfg, log=lines.append, progress=False)  # resumed: nothing retrained
    assert sum("done earlier, skipped" in ln for ln in lines) == 2
    with pytest.raises(ValueError, match="other settings"):
        run_trade_r1(cfg.model_copy(update={"grpo_steps": 2}), progress=False)
