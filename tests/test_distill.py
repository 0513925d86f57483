"""Forward/reverse distillation with rejection sampling: filter, acceptance rate, output format."""

from __future__ import annotations

import json
import re

import pytest
from datasets import load_from_disk

from thesisgym.teachers import TemplateTeacher
from thesisgym.teachers.distill import distill, judge_sample
from toydata import toy_dataset, toy_rows


def test_clean_teacher_is_mostly_accepted_and_output_is_sft_ready(tmp_path):
    ds = toy_dataset(6, seed=0)
    res = distill(ds, TemplateTeacher(), n=2, decision_tolerance=1)
    s = res.stats
    assert s["samples"] == 12
    assert s["acceptance_rate"] == pytest.approx(s["accepted_samples"] / 12)
    assert s["acceptance_rate"] >= 0.8
    assert s["kept_rows"] == s["rows_covered"] <= 6
    row = res.dataset[0]
    assert row["completion"][0]["role"] == "assistant"
    assert row["prompt"][0]["role"] == "system"
    for col in ("evidence", "sections", "label", "fwd_return", "fwd_vol", "grounding", "teacher_decision"):
        assert col in res.dataset.column_names
    out = res.save(tmp_path / "d", split="train")
    again = load_from_disk(str(out))["train"]
    assert len(again) == len(res.dataset)
    assert json.loads((out / "distill_stats.json").read_text())["kept_rows"] == len(again)


def test_knobs_produce_rejects_by_reason():
    ds = toy_dataset(6, seed=1)
    clean = distill(ds, TemplateTeacher(), n=2, decision_tolerance=1)
    noisy = distill(ds, TemplateTeacher(noise=0.6, wrong_decision_rate=0.5), n=2, decision_tolerance=1)
    assert noisy.acceptance_rate < clean.acceptance_rate
    rej = noisy.stats["rejects"]
    assert rej["decision"] > 0
    assert rej["grounding"] + rej["hallucination"] > 0
    assert noisy.stats["accepted_samples"] + sum(rej.values()) == noisy.stats["samples"]


def test_exact_decision_is_stricter_than_tolerance():
    ds = toy_dataset(8, seed=0)
    exact = distill(ds, TemplateTeacher(), n=1, decision_tolerance=0)
    loose = distill(ds, TemplateTeacher(), n=1, decision_tolerance=1)
    assert exact.stats["accepted_samples"] <= loose.stats["accepted_samples"]
    assert all(r["teacher_decision"] == r["label"] for r in exact.dataset)


def test_reverse_mode_always_matches_label_and_keep_per_prompt():
    ds = toy_dataset(4, seed=0)
    res = distill(ds, TemplateTeacher(mode="reverse"), n=3, keep_per_prompt=2)
    assert res.stats["rejects"]["decision"] == 0
    assert res.stats["kept_rows"] == 8
    assert all(r["teacher_decision"] == r["label"] for r in res.dataset)


def test_rows_without_label_are_counted_not_dropped_silently():
    rows = toy_rows(3)
    rows[1]["label"] = None
    res = distill(rows, TemplateTeacher(), n=1, decision_tolerance=4)
    assert res.stats["rows_without_label"] == 1
    assert res.stats["samples"] == 2


def test_failing_teacher_is_counted():
    class Broken:
        def write(self, row, *, n=1, seed=0):
            raise RuntimeError("endpoint down")

    res = distill(toy_rows(2), Broken(), n=3)
    assert res.stats["rejects"]["teacher_error"] == 6
    assert res.stats["acceptance_rate"] == 0.0
    assert len(res.dataset) == 0 and "completion" in res.dataset.column_names
    assert "endpoint down" in res.stats["teacher_errors"][0]


def test_judge_sample_reasons():
    row = toy_rows(1)[0]
    from thesisgym.rewards import score_completion

    kw = dict(scorer=score_completion, min_grounding=0.8, max_hallucination_rate=0.0, decision_tolerance=0)
    assert judge_sample("", row, **kw)[0] == "empty"
    assert judge_sample("<technical>\n- x\n</technical>", row, **kw)[0] == "no_decision"


@pytest.mark.parametrize("kwargs, match", [({"n": 0}, "n must"), ({"min_grounding": 2.0}, "min_grounding"),
                                            ({"decision_tolerance": 7}, "decision_tolerance")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        distill(toy_rows(1), TemplateTeacher(), **kwargs)


def test_bad_rows_named():
    rows = toy_rows(2)
    del rows[1]["evidence"]
    with pytest.raises(ValueError, match="row 1.*evidence"):
        distill(rows, TemplateTeacher())
    rows = toy_rows(2)
    rows[0]["label"] = "MOON"
    with pytest.raises(ValueError, match="row 0.*MOON"):
        distill(rows, TemplateTeacher())


def test_cli_distill(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    toy_dataset(4).save_to_disk(str(tmp_path / "ctx"))
    r = CliRunner().invoke(app, ["distill", "--dataset", str(tmp_path / "ctx"), "--out", str(tmp_path / "out"),
                                 "--n", "2", "--decision-tolerance", "1", "--noise", "0.3"])
    assert r.exit_code == 0, r.output
    assert "acceptance_rate" in r.output
    stats = json.loads((tmp_path / "out" / "distill_stats.json").read_text())
    assert stats["samples"] == 8
    compact = CliRunner().invoke(app, ["distill", "--dataset", str(tmp_path / "ctx"), "--out", str(tmp_path / "c"),
                                       "--n", "2", "--decision-tolerance", "4", "--min-grounding", "0", "--style",
                                       "compact"])
    assert compact.exit_code == 0, compact.output
    theses = [c[-1]["content"] for c in load_from_disk(str(tmp_path / "c"))["train"]["completion"]]
    assert theses and all(re.search(r"<conclusion>.*: net (even|\w+ up|\w+ down), so [a-z ]+\.</conclusion>", t)
                          for t in theses)
    bad = CliRunner().invoke(app, ["distill", "--dataset", str(tmp_path / "nope"), "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "nope: no such dataset directory" in " ".join(bad.output.split())


def test_cli_distill_compact_calls_each_count_as_the_reward_fitted_teacher(tmp_path):
    """`--style compact` calibrates the tally like the demo (`--tally reward`, the default) or to the label
    mix (`--tally mix`); the kept theses' decisions are that teacher's."""
    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.teachers.template import COMPACT_STYLE

    toy_dataset(40, seed=3).save_to_disk(str(tmp_path / "ctx"))
    rows = list(load_from_disk(str(tmp_path / "ctx")))
    for fit in ("reward", "mix"):
        args = ["distill", "--dataset", str(tmp_path / "ctx"), "--out", str(tmp_path / fit), "--n", "1",
                "--decision-tolerance", "4", "--min-grounding", "0", "--style", "compact"]
        r = CliRunner().invoke(app, args + (["--tally", fit] if fit == "mix" else []))
        assert r.exit_code == 0, r.output
        want = TemplateTeacher(seed=0, **COMPACT_STYLE).calibrate(rows, tally=fit)
        kept = load_from_disk(str(tmp_path / fit))["train"]
        by_key = {(str(r["ticker"]), str(r["asof"])): want.decision(r) for r in rows}
        assert kept["teacher_decision"] == [by_key[(str(t), str(a))] for t, a in zip(kept["ticker"], kept["asof"], strict=True)]
    bad = CliRunner().invoke(app, ["distill", "--dataset", str(tmp_path / "ctx"), "--out", str(tmp_path / "x"),
                                   "--style", "compact", "--tally", "oracle"])
    assert bad.exit_code == 2 and "oracle" in bad.output


def test_stats_say_how_often_the_teacher_and_the_kept_set_agree_with_the_label():
    rows = toy_rows(12, seed=5)
    teacher = TemplateTeacher()
    res = distill(rows, teacher, n=1, decision_tolerance=1)
    by_hand = sum(teacher.decision(r) == r["label"] for r in rows) / len(rows)
    assert res.stats["teacher_label_agreement"] == pytest.approx(by_hand)
    kept = res.dataset
    assert res.stats["kept_label_agreement"] == pytest.approx(
        sum(d == lab for d, lab in zip(kept["teacher_decision"], kept["label"], strict=True)) / len(kept))
    exact = distill(rows, teacher, n=1, decision_tolerance=0)
    assert exact.stats["kept_label_agreement"] == 1.0
