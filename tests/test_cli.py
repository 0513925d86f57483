"""The command line as a user meets it: exact messages, one `error:` prefix, exit codes, help order,
version, thread defaults, per-bullet verdicts from `score --details`."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from thesisgym.cli import app
from thesisgym.cli.common import PIPELINE_ORDER, choose_threads, counted, message_of, validation_message

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _thesis(decision: str) -> str:
    return f"<technical>\n- A view [T1]\n</technical>\n<conclusion>ok</conclusion>\n<decision>{decision}</decision>"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.splits import SplitConfig, build_splits

    root = tmp_path_factory.mktemp("cli")
    store = generate_market(SynthConfig(n_tickers=4, n_days=220, seed=3))
    store.save(root / "store")
    build_splits(store, SplitConfig(stride=3, heldout_tickers=1), out=root / "ds",
                 store_path=(root / "store").resolve(), show_progress=False)
    return root


# --- the root command -------------------------------------------------------------------------------
def test_version_and_help_in_pipeline_order():
    from thesisgym import __version__

    res = run("--version")
    assert res.exit_code == 0 and res.output == f"thesisgym {__version__}\n"
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    shown = [line.split()[1] for line in res.output.splitlines()
             if line.startswith("│ ") and len(line.split()) > 1 and line.split()[1] in PIPELINE_ORDER]
    assert shown == [c for c in PIPELINE_ORDER if c in shown] and shown[:3] == ["data", "build", "show-prompt"]
    assert shown.index("train") < shown.index("evaluate") < shown.index("demo") < shown.index("serve")


def test_a_usage_error_is_one_error_line_naming_the_option():
    res = run("evaluate", "--dataset", "x", "--out", "y", "--baselines-only", "--judge", "bogus")
    assert res.exit_code == 2
    assert res.output == ("error: Invalid value for '--judge': 'bogus' is not one of 'local', 'llm', 'none'. "
                          "(see 'thesisgym evaluate --help')\n")
    res = run("demo", "--size", "huge")
    assert res.output == ("error: Invalid value for '--size': 'huge' is not one of 'quick', 'default', 'large'. "
                          "(see 'thesisgym demo --help')\n")


def test_validation_errors_are_in_user_terms():
    res = run("demo", "--tickers", "0")
    assert res.exit_code == 2 and res.output == "error: --tickers: must be >= 3 (got 0)\n"
    res = run("demo", "--days", "5", "--sft-steps", "0")
    assert res.output == "error: --days: must be >= 120 (got 5); --sft-steps: must be >= 1 (got 0)\n"


def test_each_problem_once_with_a_count():
    assert counted(["a", "b", "a", "a"]) == ["a (x3)", "b"]


def test_library_messages_name_arguments_and_the_cli_names_options():
    from pydantic import ValidationError

    from thesisgym.evaluate import EvalConfig
    from thesisgym.schema import ArgumentError

    err = ArgumentError("{arg} is needed with the llm judge", argument="judge_model")
    assert str(err) == "judge_model= is needed with the llm judge"
    assert message_of(err) == "--judge-model is needed with the llm judge"
    # raised inside a pydantic validator, it still knows its option
    with pytest.raises(ValidationError) as exc:
        EvalConfig(judge="llm")
    assert validation_message(exc.value) == "--judge-model is needed with the llm judge"
    with pytest.raises(ValidationError) as exc:
        EvalConfig(cost_bps=-1, probes=["anon"])
    assert validation_message(exc.value) == "--cost-bps: must be >= 0 (got -1)"


# --- evaluate --------------------------------------------------------------------------------------
def _evaluate(built, out, *extra):
    return run("evaluate", "--dataset", built / "ds", "--out", out, "--probes", "", "--no-heldout",
               "--bootstrap-reps", 50, *extra)


def test_evaluate_messages(built, tmp_path):
    res = _evaluate(built, tmp_path / "a", "--model", "./no/such/model")
    assert res.exit_code == 2 and res.output == "error: --model ./no/such/model: no such directory\n"
    res = _evaluate(built, tmp_path / "a", "--baselines-only", "--completions", tmp_path / "c.jsonl")
    assert res.output == ("error: give exactly one of --model, --completions, --openai-model, --baselines-only "
                          "(got --completions, --baselines-only)\n")
    res = _evaluate(built, tmp_path / "a")
    assert res.output == "error: give exactly one of --model, --completions, --openai-model, --baselines-only\n"
    res = _evaluate(built, tmp_path / "a", "--openai-model", "m")
    assert res.exit_code == 2 and res.output == "error: --openai-model needs --base-url\n"
    res = _evaluate(built, tmp_path / "a", "--baselines-only", "--judge", "llm")
    assert res.exit_code == 2 and res.output == "error: --judge-model is needed with the llm judge\n"
    res = run("evaluate", "--dataset", tmp_path / "nothing", "--out", tmp_path / "a", "--baselines-only")
    assert res.exit_code == 2 and res.output.startswith("error: --dataset ") and len(res.output.splitlines()) == 1


def test_evaluate_reads_a_yaml_config_and_options_override_it(built, tmp_path):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("cost_bps: 25\nseed: 3\nbootstrap_reps: 40\nsmoke: true\n")
    res = _evaluate(built, tmp_path / "ev", "--baselines-only", "--config", cfg, "--seed", 7)
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "ev" / "metrics.json").read_text())["config"]
    # from the file: cost_bps, smoke; given on the command line: seed and bootstrap_reps (50) win
    assert settings["cost_bps"] == 25 and settings["smoke"] is True
    assert settings["seed"] == 7 and settings["bootstrap_reps"] == 50
    assert "Smoke run." in (tmp_path / "ev" / "report.html").read_text()
    assert "bottom line: Baselines only: no policy was evaluated" in " ".join(res.output.split())
    cfg.write_text("cost_pbs: 25\n")
    res = _evaluate(built, tmp_path / "ev", "--baselines-only", "--config", cfg)
    assert res.exit_code == 2 and res.output == f"error: --config {cfg}: cost_pbs: Extra inputs are not permitted\n"


def test_evaluate_prints_progress_lines_when_piped(built, tmp_path):
    from datasets import load_from_disk

    test = load_from_disk(str(built / "ds" / "test"))
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"index": i, "completion": _thesis("BUY")}) + "\n" for i in range(len(test))))
    res = _evaluate(built, tmp_path / "ev", "--completions", path, "--judge", "none")
    assert res.exit_code == 0, res.output
    # CliRunner's stdout is not a terminal: the stage is announced and closed with plain lines
    assert f"    c: writing theses: started, {len(test)} rows to do" in res.output
    assert f"    c: writing theses: {len(test)}/{len(test)} rows done in" in res.output
    # an always-BUY file is called what it is before anything else is read
    assert f"bottom line: c is degenerate: it decided BUY on {len(test)} of {len(test)} rows, so it is the " \
           "always-BUY baseline, not an analyst." in " ".join(res.output.split())


# --- score --details ---------------------------------------------------------------------------------
def test_score_details_writes_the_verifiers_verdict_per_bullet(tmp_path):
    import datasets

    from test_rewards_fixtures import gold_thesis, make_row

    row = make_row()
    row["variation"] = 0
    ds = tmp_path / "ds"
    datasets.DatasetDict({"test": datasets.Dataset.from_list([row])}).save_to_disk(str(ds))
    fabricated = gold_thesis().replace("[T1]", "[T9]")
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"index": 0, "completion": gold_thesis()}) + "\n"
                    + json.dumps({"index": 0, "completion": fabricated}) + "\n")
    out = tmp_path / "details.jsonl"
    res = run("score", path, "--dataset", ds, "--details", out)
    assert res.exit_code == 0, res.output
    marks = [json.loads(line) for line in out.read_text().splitlines()]
    assert {"line", "index", "ticker", "asof", "bullet", "section", "text", "quote", "ids", "verdict", "why"} <= set(marks[0])
    gold = [m for m in marks if m["line"] == 1]
    bad = [m for m in marks if m["line"] == 2]
    assert gold and all(m["verdict"] == "verified" for m in gold)
    assert any(m["verdict"] == "hallucinated" and "unknown id T9" in m["why"] and m["ids"] == ["T9"] for m in bad)
    assert f"per-bullet verdicts of {len(marks)} bullets -> {out}" in res.output
    res = run("score", path, "--dataset", ds, "--judge", "llm")
    assert res.exit_code == 2 and res.output == "error: --judge-model is needed with the llm judge\n"


# --- threads ---------------------------------------------------------------------------------------
def test_threads_default_to_one_on_cpu_for_small_models_and_are_overridable(tmp_path, monkeypatch):
    import torch

    from thesisgym.cli import common

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(common.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(common, "busy_cores", lambda: 0.1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert choose_threads(None) == 1  # the tiny preset (demo, experiments)
    assert choose_threads(3) == 3 and choose_threads(0) is None  # --threads wins; 0 = torch's default
    small, big = tmp_path / "small", tmp_path / "big"
    for d, h, layers in ((small, 192, 4), (big, 2048, 24)):
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"hidden_size": h, "num_hidden_layers": layers,
                                                   "intermediate_size": 4 * h, "vocab_size": 32000}))
    assert choose_threads(None, model=small) == 1
    assert choose_threads(None, model=big) == 2  # a large model on 2 idle cores uses both
    assert choose_threads(None, model="smollm2-135m") == 2  # a preset (size not on disk): the idle cores
    monkeypatch.setattr(common, "busy_cores", lambda: 1.2)
    assert choose_threads(None, model=big) == 1  # another job holds a core: one thread, not two fighting
    monkeypatch.setattr(common, "busy_cores", lambda: 5.0)
    assert choose_threads(None, model=big) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert choose_threads(None) is None  # the user's environment is respected
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert choose_threads(None) is None


def test_train_prints_through_our_progress_not_trl(tmp_path, monkeypatch):
    from datasets import DatasetDict

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from toydata import toy_dataset

    ctx = toy_dataset(8, seed=0, items_per_section=2, sections=("technical", "news"))
    DatasetDict({"train": ctx}).save_to_disk(str(tmp_path / "contexts"))
    distill(ctx, TemplateTeacher(bullets=(1, 2)), n=2, decision_tolerance=1, min_grounding=0.0).save(
        tmp_path / "distilled", split="train")
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(
        "kind: sft\noutput_dir: " + str(tmp_path / "run") + "\n"
        "model: {name_or_path: tiny, tiny: {vocab_size: 600, hidden_size: 32, layers: 1, heads: 2, kv_heads: 1}}\n"
        "data: {dataset: " + str(tmp_path / "distilled") + "}\n"
        "max_steps: 4\nlogging_steps: 2\nper_device_train_batch_size: 2\nlearning_rate: 0.001\nsave_steps: 1000\n"
        "report_to: none\nmax_length: 1024\n")
    res = run("train", "sft", "--config", cfg, "--threads", 1)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "    SFT: started, 4 steps to do" and lines[1].startswith("    step 2/4  loss ")
    assert lines[-2].startswith("    SFT: 4/4 steps done in ")
    assert lines[-1] == f"done: final model in {tmp_path / 'run' / 'final'}"
    assert "{'loss'" not in res.output and "it/s" not in res.output  # no TRL dicts, no tqdm
    assert (tmp_path / "run" / "final" / "thesisgym_run.json").is_file()
    res = run("train", "sft", "--config", tmp_path / "missing.yaml")
    assert res.exit_code == 2 and len(res.output.splitlines()) == 1
    assert res.output.startswith(f"error: config {tmp_path / 'missing.yaml'} is neither a file nor a shipped recipe (")


def test_busy_cores_reads_the_machine_now_not_a_minute_ago(monkeypatch):
    import psutil

    from thesisgym.cli import common

    asked = []
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval: asked.append(interval) or 75.0)
    monkeypatch.setattr(common.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(common.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # stale: never read
    assert common.busy_cores() == 3.0 and asked == [0.5]  # a sample taken now, over half a second
