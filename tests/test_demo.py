"""The demo runs every stage end to end (at toy sizes) and reports what it produced."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from thesisgym.experiments.demo import DemoConfig, decision_mix_text, rows_by_date, run_demo


def test_demo_config_rejects_unknown_and_bad_sizes():
    with pytest.raises(ValueError, match="sft_stepz"):
        DemoConfig(sft_stepz=3)
    with pytest.raises(ValueError, match="tickers"):
        DemoConfig(tickers=1)
    quick = DemoConfig.quick(sft_steps=7)
    assert quick.sft_steps == 7 and quick.tickers < DemoConfig().tickers
    assert quick.model == "tiny" and DemoConfig().model == "smollm2-135m"
    # the tiny model keeps its own rates whatever the size; a pretrained base at quick sizes keeps its own
    assert DemoConfig.sized("default", model="tiny").sft_learning_rate == quick.sft_learning_rate
    assert DemoConfig.sized("quick", model="smollm2-135m").sft_learning_rate == DemoConfig().sft_learning_rate
    large = DemoConfig.sized("large")
    assert large.sft_steps * large.sft_batch_size > DemoConfig().sft_steps * DemoConfig().sft_batch_size
    with pytest.raises(ValueError, match="demo size must be one of"):
        DemoConfig.sized("huge")


def _grid(dates: int, tickers: int) -> list[dict]:
    # stored ticker by ticker, as a split is
    return [{"asof": f"2021-01-{d + 1:02d}", "ticker": f"T{t}", "fwd_return": 0.01 * ((d * 7 + t * 3) % 5 - 2),
             "fwd_vol": 0.02} for t in range(tickers) for d in range(dates)]


def test_rows_by_date_takes_a_cross_section_of_tickers_on_each_date():
    rows = _grid(dates=10, tickers=5)
    picked = rows_by_date(rows, 8, per_date=2)
    assert len(picked) == 8
    dates = [r["asof"] for r in picked]
    assert dates == sorted(dates) and len(set(dates)) == 4
    assert all(dates.count(d) == 2 for d in set(dates))  # two tickers on every chosen date
    assert sorted(set(dates)) == ["2021-01-01", "2021-01-03", "2021-01-06", "2021-01-08"]  # spread over the split
    assert {r["ticker"] for r in picked} == {"T0", "T1", "T2", "T3", "T4"}  # the tickers rotate
    assert rows_by_date(rows, 8, per_date=2) == picked  # deterministic
    # more rows than the split holds: every date, per_date tickers each; a date with fewer tickers gives all
    assert len(rows_by_date(rows, 100, per_date=3)) == 30
    assert len(rows_by_date(_grid(dates=3, tickers=1), 6, per_date=2)) == 3
    with pytest.raises(ValueError, match="per_date"):
        rows_by_date(rows, 4, per_date=0)


def test_demo_rows_define_the_per_date_ic_and_the_neutral_book():
    import math

    from thesisgym.evaluate.skill import Sample, skill_measures

    picked = rows_by_date(_grid(dates=12, tickers=4), 24, per_date=2)
    sample = Sample([r["asof"] for r in picked], [r["fwd_return"] for r in picked], [r["fwd_vol"] for r in picked])
    reader = ["BUY" if r["fwd_return"] > 0 else "SELL" for r in picked]  # reads the future: skill > 0
    m = skill_measures(reader, sample, reps=50)
    assert m["dates"] == 12 and math.isfinite(m["ic_date"]) and m["ic_date"] > 0 and m["neutral"] > 0
    # one row per date (the old selection): nothing to rank on a date, the per-date IC is undefined
    lone = Sample([r["asof"] for r in picked[::2]], [r["fwd_return"] for r in picked[::2]],
                  [r["fwd_vol"] for r in picked[::2]])
    assert math.isnan(skill_measures(reader[::2], lone, reps=50)["ic_date"])


def test_decision_mix_text_lists_shares_largest_first():
    assert decision_mix_text(["HOLD", "HOLD", "BUY", "INVALID"]) == "HOLD 50%, BUY 25%, INVALID 25%"
    assert decision_mix_text([]) == "n/a"


def test_run_demo_end_to_end_tiny(tmp_path):
    cfg = DemoConfig.sized("quick", out=str(tmp_path / "demo"), tickers=4, days=160, stride=6, distill_n=2,
                           sft_steps=2, grpo_steps=1, num_generations=2, max_completion_length=24, eval_rows=4,
                           eval_per_date=2, curve_rows=3)
    out = tmp_path / "demo"
    stale = out / "tiny-base"
    stale.mkdir(parents=True)
    (stale / "thesisgym_tiny.json").write_text("{}")  # an old run's tiny model must not be reused
    lines: list[str] = []
    summary = run_demo(cfg, log=lines.append)
    # every stage ran and said so
    assert [ln for ln in lines if ln.startswith("==> ")][-1] == "==> evaluate (held-out test period)"
    assert not any("[/]" in ln or "[bold" in ln for ln in lines)  # log=print shows no rich markup
    assert set(summary["rows"]) >= {"train", "test"}
    assert summary["distill"]["kept_rows"] > 0
    assert (out / "sft" / "final" / "config.json").exists()
    assert (out / "grpo" / "final" / "config.json").exists()
    assert not list(out.glob("*/checkpoint-*"))  # optimizer-state checkpoints are dropped once final/ is saved
    report = (out / "report" / "report.html").read_text()
    assert "<img" in report or "data:image/png" in report
    # the table compares the policy with the baselines and the true-expected-return ceiling
    assert {"tiny-grpo", "buy_and_hold", "truth_oracle"} <= set(summary["metrics"])
    assert "SFT checkpoint" in summary["evaluation"].accuracy.index
    assert "digits" in json.dumps(summary["probes"])
    assert any("buy-and-hold" in v or "no Sharpe" in v for v in summary["verdict"])
    assert json.loads((out / "tiny-base" / "thesisgym_tiny.json").read_text())["preset"] == "tiny"
    # SFT and GRPO checkpoints compared on the same held-out rows, per component and in total
    change = {r["component"]: r for r in summary["change"]}
    assert {"structure", "evidence", "grounding", "total"} <= set(change) and change["total"]["n"] == 4
    assert any(ln.strip().startswith("total") for ln in lines)
    assert any(ln.strip().startswith("decision mix SFT") for ln in lines)
    assert not any("nan" in ln.lower().split() or "+nan" in ln.lower() for ln in lines)  # undefined prints n/a
    assert sum(ln.strip().startswith("stage time") for ln in lines) == 7  # every stage says how long it took
    assert 0 < summary["majority_class_accuracy"] <= 1
    assert (out / "curves" / "training.png").exists() and summary["sft_curve"][-1]["examples_seen"] == 2 * 4
    # the GRPO checkpoint wrote once per compared prompt: the backtest scored those same theses
    assert len(summary["evaluation"].completions) >= 4
    saved = json.loads((out / "summary.json").read_text())
    assert saved["seconds"]["total"] > 0 and saved["report"] == summary["report"]


def test_demo_cli_prints_table_and_report_path(tmp_path, monkeypatch):
    from thesisgym.cli import app

    captured: dict = {}

    def fake_run_demo(config, *, log):
        captured["config"] = config
        return {"metrics": {"tiny-grpo": {"cumulative_return": 0.01, "sharpe": None, "max_drawdown": -0.02,
                                          "hit_rate": 0.5},
                            "truth_oracle": {"cumulative_return": 0.2, "sharpe": 3.0, "max_drawdown": -0.01,
                                             "hit_rate": 0.6}},
                "reasoning": {"grounding": 0.25, "loop_rate": 0.0}, "seconds": {"total": 12.0},
                "verdict": ["Sharpe 0.10 vs 1.00 for buy-and-hold: tiny-grpo is not above it."],
                "report": str(tmp_path / "report.html"), "evaluation": "the EvalResult"}

    def fake_print_summary(result, *, title, console):
        # the demo hands its evaluation to evaluate's printer (covered in test_evaluate_cli)
        captured["printed"] = result
        console.print(title)
        for name in ("tiny-grpo", "truth_oracle"):
            console.print(name)
        console.print("- Sharpe 0.10 vs 1.00 for buy-and-hold: tiny-grpo is not above it.")

    monkeypatch.setattr("thesisgym.experiments.demo.run_demo", fake_run_demo)
    monkeypatch.setattr("thesisgym.cli.evaluate.print_summary", fake_print_summary)
    res = CliRunner().invoke(app, ["demo", "--size", "huge", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "'huge' is not one of 'quick', 'default', 'large'" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path), "--sft-steps", "3"])
    assert res.exit_code == 0, res.output
    assert captured["config"].sft_steps == 3 and captured["config"].tickers == DemoConfig.quick().tickers
    assert captured["printed"] == "the EvalResult"
    assert "truth_oracle" in res.output and "report.html" in res.output and "grounding 0.250" in res.output
    assert "not above it" in res.output


@pytest.mark.slow
def test_two_demo_runs_with_the_same_seed_print_the_same_change_table(tmp_path):
    cfg = dict(tickers=4, days=160, stride=6, heldout_tickers=1, distill_n=2, sft_steps=3, grpo_steps=1,
               num_generations=2, max_completion_length=32, eval_rows=6, eval_per_date=2, curve_rows=2, probes="digits")
    tables = []
    for run in ("a", "a"):  # the same folder twice: the second run must not reuse the first one's model
        lines: list[str] = []
        summary = run_demo(DemoConfig.sized("quick", out=str(tmp_path / run), **cfg), log=lines.append)
        tables.append(([ln for ln in lines if ln.startswith("    ") and "[" in ln and "," in ln], summary["change"]))
    assert tables[0] == tables[1]


@pytest.fixture(scope="module")
def default_demo(tmp_path_factory):
    """The default demo (pretrained base), run once for the target tests below."""
    out = tmp_path_factory.mktemp("demo") / "out"
    return run_demo(DemoConfig(out=str(out)), log=lambda _: None)


@pytest.mark.slow
def test_default_demo_meets_the_heldout_reasoning_targets(default_demo):
    r = default_demo["reasoning"]
    assert r["invalid_decision_rate"] <= 0.05
    assert r["grounding"] >= 0.8 and r["hallucination_rate"] <= 0.2


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason=(
    "issue 29's target, met at 95 % on seed 0 with little margin: on the 320 rows the evidence-only reader "
    "leads HOLD by 10.6 points [4.4, 16.6] and the policies decide about as well as their teacher (49 %); on "
    "seed 1 SFT cleared HOLD (+5.9 [0.3, 11.2]) and GRPO, 1.3 points below it, did not (docs/training.md, 5t)"))
def test_default_demo_decides_better_than_the_majority_class_and_always_buy(default_demo):
    """Paired by date, both the GRPO policy (first row minus each constant) and the SFT checkpoint
    (its own minus_* columns) beat the train majority and always-BUY with intervals above 0."""
    acc = default_demo["evaluation"].accuracy
    majority = next(k for k in acc.index if str(k).startswith("majority of train"))
    assert acc.loc[majority, "first_minus_this_lo"] > 0
    assert acc.loc["always BUY", "first_minus_this_lo"] > 0
    sft = acc.loc["SFT checkpoint"]
    assert sft["minus_majority_lo"] > 0 and sft["minus_always_buy_lo"] > 0
