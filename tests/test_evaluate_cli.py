"""`thesisgym evaluate` / `distill` as a user runs them: joins, endpoint failures, the response cache.

A small synthetic market is built with the real pipeline and saved like `thesisgym build` saves it;
the OpenAI-compatible endpoint is test_llm's loopback server (aiohttp on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import random
import socket

import pytest
from typer.testing import CliRunner

from test_llm import fake_openai  # noqa: F401  (the loopback server fixture is shared)
from thesisgym.cli import app

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _thesis(decision: str) -> str:
    return f"<technical>\n- A view [T1]\n</technical>\n<conclusion>ok</conclusion>\n<decision>{decision}</decision>"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from datasets import Dataset

    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.splits import SplitConfig, build_splits

    root = tmp_path_factory.mktemp("evalcli")
    store = generate_market(SynthConfig(n_tickers=4, n_days=220, seed=3))
    store.save(root / "store")
    build_splits(store, SplitConfig(stride=3, heldout_tickers=1), out=root / "ds",
                 store_path=(root / "store").resolve(), show_progress=False)
    test = Dataset.load_from_disk(str(root / "ds" / "test"))
    return root, test


def _run(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def _evaluate(root, out, *extra: object):
    return _run("evaluate", "--dataset", root / "ds", "--out", out, "--probes", "", "--no-heldout",
                "--bootstrap-reps", 200, "--judge", "none", *extra)


def _write(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.mark.parametrize("keyed_by", ["index", "keys"])
@pytest.mark.parametrize("max_rows", [None, 10])
def test_an_oracle_file_scores_100_percent_and_the_label_oracles_sharpe(built, tmp_path, keyed_by, max_rows):
    root, test = built
    recs = []
    for i, row in enumerate(test):
        where = {"index": i} if keyed_by == "index" else {
            "ticker": row["ticker"], "asof": row["asof"], "variation": row["variation"]}
        recs.append({**where, "completion": _thesis(row["label"])})
    random.Random(0).shuffle(recs)  # order in the file means nothing
    path = _write(tmp_path / "oracle.jsonl", recs)
    extra = ("--max-rows", max_rows) if max_rows else ()
    res = _evaluate(root, tmp_path / "ev", "--completions", path, "--teacher-completions", path, *extra)
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert m["accuracy"]["oracle"]["accuracy"] == 1.0 and m["accuracy"]["teacher"]["accuracy"] == 1.0
    assert m["metrics"]["oracle"]["sharpe"] == pytest.approx(m["metrics"]["label_oracle"]["sharpe"])
    if max_rows:
        assert m["config"]["rows"] <= max_rows


def test_a_completions_file_with_a_missing_row_is_an_error_with_count_and_example(built, tmp_path):
    root, test = built
    recs = [{"index": i, "completion": _thesis("HOLD")} for i in range(1, len(test))]
    res = _evaluate(root, tmp_path / "ev", "--completions", _write(tmp_path / "c.jsonl", recs))
    assert res.exit_code == 2
    assert f"no completion for 1 of {len(test)} rows (first: row 0" in " ".join(res.output.split())
    assert "Traceback" not in res.output


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/v1"


def test_an_unreachable_endpoint_fails_evaluate_and_names_it(built, tmp_path):
    root, _ = built
    url = _closed_port_url()
    res = _evaluate(root, tmp_path / "ev", "--openai-model", "m", "--base-url", url, "--retries", 0,
                    "--timeout", 5, "--cache", "")
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert url in out and "failed" in out and "APIConnectionError" in out and "Traceback" not in out


def test_a_half_failing_endpoint_fails_evaluate(built, tmp_path, fake_openai):  # noqa: F811
    root, _ = built
    fake_openai.reset()
    # deterministic by prompt: every other prompt gets a 500
    fake_openai.responder = lambda body: ("status", 500) if hash(body["messages"][-1]["content"]) % 2 else ("ok", _thesis("BUY"))
    res = _evaluate(root, tmp_path / "ev", "--openai-model", "m", "--base-url", fake_openai.base_url, "--retries", 0,
                    "--cache", "")
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert fake_openai.base_url in out and "InternalServerError" in out
    # below the threshold the run goes on and the summary counts the failures apart from format errors
    res = _evaluate(root, tmp_path / "ev2", "--openai-model", "m", "--base-url", fake_openai.base_url, "--retries", 0,
                    "--cache", "", "--max-error-rate", 1.0)
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "ev2" / "metrics.json").read_text())
    assert 0 < m["transport"]["errors"] < m["transport"]["requests"]
    assert "transport:" in res.output and "failed in transport" in " ".join(res.output.split())


def test_a_rerun_is_served_from_the_cache(built, tmp_path, fake_openai):  # noqa: F811
    root, test = built
    fake_openai.reset()
    fake_openai.default = ("ok", _thesis("SELL"))
    cache = tmp_path / "cache.sqlite"
    args = ("--openai-model", "m", "--base-url", fake_openai.base_url, "--cache", cache, "--concurrency", 2)
    assert _evaluate(root, tmp_path / "a", *args).exit_code == 0
    first = fake_openai.hits
    assert first == len(test)
    res = _evaluate(root, tmp_path / "b", *args)
    assert res.exit_code == 0 and fake_openai.hits == first  # 0 new requests


def _distill(root, out, *extra: object):
    return _run("distill", "--dataset", root / "ds", "--split", "train", "--out", out, "--teacher", "openai",
                "--model", "m", "--n", 2, "--max-rows", 6, "--retries", 0, "--cache", "", *extra)


def test_distill_fails_on_an_unreachable_or_half_failing_teacher(built, tmp_path, fake_openai):  # noqa: F811
    root, _ = built
    url = _closed_port_url()
    res = _distill(root, tmp_path / "d1", "--base-url", url, "--timeout", 5)
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert url in out and "teacher requests" in out and "APIConnectionError" in out
    fake_openai.reset()
    calls = iter(range(10_000))
    fake_openai.responder = lambda body: ("status", 500) if next(calls) % 2 else ("ok", _thesis("BUY"))
    res = _distill(root, tmp_path / "d2", "--base-url", fake_openai.base_url)
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert fake_openai.base_url in out and "6 of 12 teacher requests" in out


def test_user_errors_are_one_line(built, tmp_path):
    root, _ = built
    res = _evaluate(root, tmp_path / "ev", "--model", "./no/such/model")
    assert res.exit_code == 2 and "--model ./no/such/model: no such directory" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    bad = _write(tmp_path / "bad.jsonl", [{"index": 0, "completion": 42}])
    res = _evaluate(root, tmp_path / "ev", "--completions", bad)
    assert res.exit_code == 2 and "bad.jsonl:1: field 'completion' must be a string" in " ".join(res.output.split())
    res = _evaluate(root, tmp_path / "ev", "--completions", bad, "--baselines-only")
    assert res.exit_code != 0 and "exactly one of" in res.output


def test_a_failing_llm_judge_is_not_silently_replaced(built, tmp_path):
    root, test = built
    path = _write(tmp_path / "c.jsonl", [{"index": i, "completion": _thesis("HOLD")} for i in range(len(test))])
    url = _closed_port_url()
    res = _run("evaluate", "--dataset", root / "ds", "--out", tmp_path / "ev", "--probes", "", "--no-heldout",
               "--completions", path, "--judge", "llm", "--judge-model", "j", "--judge-base-url", url,
               "--retries", 0, "--timeout", 5, "--cache", "")
    out = " ".join(res.output.split())
    assert res.exit_code == 1, res.output
    assert f"the LLM judge at {url} (model j) failed on {len(test)} of {len(test)} theses" in out
