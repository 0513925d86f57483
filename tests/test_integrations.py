"""One completion, one score, whichever RL stack asks: TRL, verl, OpenRLHF and the HTTP service.

The TRL side runs TRL's own `GRPOTrainer._calculate_rewards` (trl 1.16, on a stand-in trainer object
holding only what that method reads) and TRL's `sum_then_normalize` total, so a drift between how
TRL and the adapters combine a recipe fails here. verl's and OpenRLHF's calls are built the way
their reward managers build them (see the source references in thesisgym.integrations.verl /
.openrlhf); tests against the installed libraries live in test_integrations_verl.py and
test_integrations_verifiers.py.
"""

from __future__ import annotations

import json
import math
import os
import time
import types

import pytest
from typer.testing import CliRunner

from test_rewards_fixtures import GOLD_BULLETS, assemble, gold_thesis, make_row
from thesisgym.integrations import core, openrlhf, verl
from thesisgym.integrations.core import (
    ground_truth_json,
    load_recipe,
    record_from_ground_truth,
    score_batch,
    verifier_record,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPT_TEXT = "<|im_start|>system\nWrite a thesis.<|im_end|>\n<|im_start|>user\nevidence ...<|im_end|>\n<|im_start|>assistant\n"


def _completions() -> dict[str, object]:
    fabricated = gold_thesis().replace("[T1]", "[T9]").replace("Gross margin 45.9%", "Gross margin 47.9%")
    return {
        "gold": gold_thesis(),
        "fabricated": fabricated,
        "sell": assemble(decision="SELL"),
        "no_decision": assemble(decision=None),
        "half": assemble({k: v for k, v in list(GOLD_BULLETS.items())[:2]}, decision="STRONG_BUY"),
        "garbage": "I think the stock goes up. BUY BUY BUY",
        "conversational": [{"role": "assistant", "content": assemble(decision="HOLD")}],
    }


def _text(completion) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def trl_totals(recipe: str, completions: list, row: dict) -> list[float]:
    """Totals as TRL's GRPOTrainer computes them from the recipe that `thesisgym train grpo` builds."""
    import torch
    from trl import GRPOTrainer

    from thesisgym.train.rewards import build_reward_funcs

    # the GRPO rewards block of the recipe (a curriculum's last stage), with training's diagnostics on
    funcs, weights = build_reward_funcs(core._rewards_config(recipe))
    trainer = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        reward_funcs=funcs, reward_processing_classes=[None] * len(funcs),
        reward_func_names=[f.__name__ for f in funcs], state=types.SimpleNamespace(global_step=0),
        _log_completion_extra=lambda *a: None, _log_metric=lambda *a: None, environments=None,
        args=types.SimpleNamespace(report_to=[]),
    )
    inputs = [{**row, "completion": c} for c in completions]
    per_func = GRPOTrainer._calculate_rewards(trainer, inputs, [row["prompt"]] * len(completions),
                                              completions, [[0]] * len(completions))
    # trl/trainer/grpo_trainer.py, multi_objective_aggregation == "sum_then_normalize"
    return (per_func * torch.tensor(weights).unsqueeze(0)).nansum(dim=1).tolist()


@pytest.fixture(scope="module")
def client():
    from fastapi.testclient import TestClient

    from thesisgym.integrations.serve import ServeConfig, create_app

    with TestClient(create_app(ServeConfig(recipe="dsr"))) as c:
        yield c


@pytest.mark.parametrize("recipe", ["dsr", "trading_r1", "market_only"])
def test_same_score_through_trl_verl_openrlhf_and_http(recipe, client):
    row = make_row()
    names = list(_completions())
    completions = list(_completions().values())
    trl = trl_totals(recipe, completions, row)
    gt = ground_truth_json(row)

    core_scores = [s["score"] for s in score_batch(completions, [row] * len(completions), recipe)]
    verl_one = [verl.compute_score("thesisgym", _text(c), gt, {"num_turns": None}, recipe=recipe)["score"]
                for c in completions]
    verl_batch = [s["score"] for s in verl.compute_score_batch(
        ["thesisgym"] * len(completions), [_text(c) for c in completions], [gt] * len(completions),
        [{"recipe": recipe}] * len(completions))]
    queries = [PROMPT_TEXT + _text(c) + "<|im_end|>" for c in completions]
    orlhf = openrlhf.reward_func(queries, [PROMPT_TEXT] * len(completions), [gt] * len(completions),
                                 recipe=recipe)["rewards"].tolist()
    record = json.loads(gt)
    http = client.post("/score", json={"recipe": recipe, "items": [
        {"completion": c, "row": record} for c in completions]}).json()["results"]
    http_orlhf = client.post(f"/openrlhf?recipe={recipe}", json={
        "query": queries, "prompts": [PROMPT_TEXT] * len(completions), "labels": [gt] * len(completions)}).json()

    for i, name in enumerate(names):
        expected = trl[i]
        for via, got in [("core", core_scores[i]), ("verl", verl_one[i]), ("verl batch", verl_batch[i]),
                         ("openrlhf", orlhf[i]), ("http", http[i]["score"]),
                         ("http openrlhf", http_orlhf["rewards"][i])]:
            assert got == pytest.approx(expected, abs=1e-5), f"{name} via {via}: {got} != TRL {expected}"
    # the scores differ between completions: the equality above is not trivially all-equal
    assert len({round(x, 4) for x in trl}) >= 4


def test_score_dict_carries_components_and_recipe_rewards():
    s = core.score_one(gold_thesis(), make_row(), "dsr")
    assert s["reward/dsr_reward"] == s["score"]
    for key in ("structure", "evidence", "decision", "market", "hallucination_rate", "grounding", "loop_penalty"):
        assert key in s
    assert not {"s", "fsr", "dsr", "weighted", "s_is_placeholder"} & set(s)
    bad = core.score_one(gold_thesis().replace("[T1]", "[T9]"), make_row(), "dsr")
    assert bad["n_hallucinated"] == 1.0 and bad["evidence"] < s["evidence"]


def test_not_applicable_rewards_drop_out_of_the_total_as_in_trl(tmp_path):
    row = make_row(label=None, fwd_return=math.nan)
    s = core.score_one(gold_thesis(), row, "dsr")
    # dsr's own reward needs a forward return; its zero-weight components still apply, so TRL's
    # nansum gives 0.0 (not "unscorable") - the adapters return the same
    assert s["score"] == 0.0 and math.isnan(s["reward/dsr_reward"])
    assert trl_totals("dsr", [gold_thesis()], row) == [0.0]
    assert core.score_one(gold_thesis(), row, "trading_r1")["score"] == pytest.approx(0.5 + 0.2)
    only = tmp_path / "only-dsr.yaml"
    only.write_text("kind: grpo\noutput_dir: x\ndata: {dataset: d}\nrewards: {funcs: [dsr]}\n")
    assert core.score_one(gold_thesis(), row, str(only))["score"] is None
    with pytest.raises(ValueError, match="no reward of the recipe applies"):
        verl.compute_score("thesisgym", gold_thesis(), ground_truth_json(row), recipe=str(only))


def test_recipes_by_name_stage_path_and_env(tmp_path, monkeypatch):
    assert load_recipe("trading_r1:evidence").weights == (1.0, 0.3, 0.5, 0.0)
    assert load_recipe("trading_r1").reward_names[0] == "decision_reward"  # last stage by default
    with pytest.raises(ValueError, match="no stage 'nope'"):
        load_recipe("trading_r1:nope")
    with pytest.raises(ValueError, match="kind: grpo"):
        load_recipe("sft")
    with pytest.raises(ValueError, match="neither a file nor a shipped recipe"):
        load_recipe("no-such-recipe")
    custom = tmp_path / "mine.yaml"
    custom.write_text("kind: grpo\noutput_dir: x\ndata: {dataset: d}\n"
                      "rewards: {funcs: [structure, evidence], weights: [2.0, 1.0]}\n")
    assert core.score_one(gold_thesis(), make_row(), str(custom))["score"] == pytest.approx(3.0)
    monkeypatch.setenv(core.RECIPE_ENV, "fsr")
    assert verl.pick_recipe(None, None) == "fsr"
    assert verl.pick_recipe(None, {"recipe": "market_only"}) == "market_only"
    assert verl.pick_recipe("dsr", {"recipe": "market_only"}) == "dsr"
    gt = ground_truth_json(make_row())
    assert verl.compute_score("s", gold_thesis(), gt)["score"] == pytest.approx(
        core.score_one(gold_thesis(), make_row(), "fsr")["score"])


def test_async_recipe_scores_like_the_sync_one(tmp_path):
    import asyncio

    path = tmp_path / "async.yaml"
    path.write_text("kind: grpo\noutput_dir: x\ndata: {dataset: d}\n"
                    "rewards: {funcs: [dsr], consistency: local, consistency_options: {asynchronous: true}}\n")
    assert load_recipe(str(path)).is_async
    completions = [gold_thesis(), assemble(decision="SELL")]
    sync = [s["score"] for s in score_batch(completions, [make_row()] * 2, "dsr")]
    via_sync = [s["score"] for s in score_batch(completions, [make_row()] * 2, str(path))]
    via_async = [s["score"] for s in asyncio.run(core.ascore_batch(completions, [make_row()] * 2, str(path)))]
    assert via_sync == pytest.approx(sync) and via_async == pytest.approx(sync)


@pytest.mark.parametrize(
    ("ground_truth", "message"),
    [
        ("not json", "not the JSON verifier record"),
        ('{"evidence": [], "label": "MAYBE"}', "field 'label'"),
        ('{"evidence": [], "extra": 1}', "field 'extra': unknown field"),
        ('{"evidence": [{"id": "T1"}]}', "field 'evidence.0.text'"),
        ('{"evidence": "T1"}', "field 'evidence'"),
        ("[1, 2]", "expected an object"),
    ],
)
def test_malformed_ground_truth_names_the_field(ground_truth, message):
    with pytest.raises(ValueError, match=message):
        verl.compute_score("thesisgym", gold_thesis(), ground_truth)


def test_ground_truth_round_trip_keeps_exactly_the_verifier_fields():
    row = make_row()
    record = record_from_ground_truth(ground_truth_json(row))
    assert record == verifier_record(row)
    assert set(json.loads(ground_truth_json(row))) == set(core.VERIFIER_FIELDS)
    with pytest.raises(ValueError, match="no 'evidence' column"):
        verifier_record({"label": "BUY"})


@pytest.mark.parametrize(
    ("query", "prompt", "expected"),
    [
        (PROMPT_TEXT + "<decision>BUY</decision><|im_end|>", PROMPT_TEXT, "<decision>BUY</decision>"),
        ("<s>" + PROMPT_TEXT + "answer</s>", PROMPT_TEXT, "answer"),  # BOS added when decoding
        ("answer<|endoftext|><|endoftext|>", None, "answer"),
    ],
)
def test_openrlhf_scores_only_the_response(query, prompt, expected):
    assert openrlhf.response_text(query, prompt) == expected


def test_openrlhf_extra_logs_and_length_checks():
    gt = ground_truth_json(make_row())
    out = openrlhf.openrlhf_rewards([PROMPT_TEXT + gold_thesis()], [PROMPT_TEXT], [gt], "dsr")
    assert out["rewards"] == out["scores"] and out["extra_logs"]["evidence"] == [1.0]
    # garbage has no bullets: hallucination_rate is undefined, so it is not logged for the batch
    out = openrlhf.openrlhf_rewards(["x", PROMPT_TEXT + gold_thesis()], None, [gt, gt], "dsr")
    assert "hallucination_rate" not in out["extra_logs"] and "structure" in out["extra_logs"]
    with pytest.raises(ValueError, match="2 queries but 2 prompts and 1 labels"):
        openrlhf.openrlhf_rewards(["a", "b"], ["p", "p"], [gt], "dsr")


# --- thesisgym export ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    import datasets

    rows = [make_row(), make_row(label="SELL", asof="2024-03-11", fwd_return=-0.03),
            make_row(label=None, asof="2024-03-12", fwd_return=math.nan)]
    for r in rows:
        r["variation"] = 0
    path = tmp_path_factory.mktemp("export") / "ctx"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
    return path


def _export(*args):
    from thesisgym.cli import app

    return CliRunner().invoke(app, ["export", *map(str, args)])


def test_export_verl_parquet_scores_like_the_dataset_row(dataset_dir, tmp_path):
    import datasets

    out = tmp_path / "train.parquet"
    result = _export("--dataset", dataset_dir, "--format", "verl", "--out", out, "--recipe", "fsr")
    assert result.exit_code == 0, result.output
    assert "wrote 2 verl rows" in result.output and "skipped 1 without a complete forward window" in result.output
    # verl reads its parquet files with datasets (verl/utils/dataset/rl_dataset.py)
    rows = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert set(rows.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    first = rows[0]
    assert first["prompt"][0]["role"] == "system" and first["reward_model"]["style"] == "rule"
    assert first["extra_info"]["recipe"] == "fsr" and first["extra_info"]["index"] == 0
    source = datasets.load_from_disk(str(dataset_dir))["train"]
    for i, row in enumerate(rows):
        got = verl.compute_score(row["data_source"], gold_thesis(), row["reward_model"]["ground_truth"],
                                 row["extra_info"])
        assert got["score"] == pytest.approx(core.score_one(gold_thesis(), source[i], "fsr")["score"])


def test_export_openrlhf_jsonl_and_errors(dataset_dir, tmp_path):
    out = tmp_path / "train.jsonl"
    result = _export("--dataset", dataset_dir, "--format", "openrlhf", "--out", out, "--keep-incomplete")
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 and set(lines[0]) == {"prompt", "label"}
    assert record_from_ground_truth(lines[1]["label"]).label == "SELL"
    bad = _export("--dataset", dataset_dir, "--format", "openrlhf", "--out", tmp_path / "r.jsonl", "--recipe", "fsr")
    assert bad.exit_code == 2 and "only verl rows carry a recipe" in bad.output
    bad = _export("--dataset", dataset_dir, "--format", "trl", "--out", tmp_path / "x")
    assert bad.exit_code == 2 and "format: expected one of" in bad.output
    bad = _export("--dataset", dataset_dir, "--out", tmp_path / "y.parquet", "--recipe", "nope")
    assert bad.exit_code == 2 and "neither a file nor a shipped recipe" in bad.output
    assert not (tmp_path / "y.parquet").exists()
    bad = _export("--dataset", tmp_path / "missing", "--out", tmp_path / "z.parquet")
    assert bad.exit_code == 2 and "no such dataset directory" in bad.output
    assert not list(tmp_path.glob(".*partial*"))


# --- the TRL docs example: GRPO rewards with an LLM judge behind a vLLM-style endpoint ------------
@pytest.fixture
def fake_vllm(monkeypatch, tmp_path):
    """An OpenAI-compatible /v1/chat/completions on loopback answering every judge prompt with s = 1."""
    import socket
    import threading

    import uvicorn
    from fastapi import FastAPI

    monkeypatch.setenv("HOME", str(tmp_path))  # the judge's answer cache lands in ~/.cache
    calls = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        calls.append(body)
        content = '{"factuality": 1.0, "deduction": 1.0, "consistency": 1.0, "rationale": "ok"}'
        return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1", calls
    server.should_exit = True
    thread.join(10)


def test_docs_example_async_llm_judge_reward(fake_vllm):
    import asyncio
    import importlib.util
    import inspect
    from pathlib import Path

    from thesisgym.rewards import dsr

    url, calls = fake_vllm
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "trl_grpo_llm_judge.py"
    spec = importlib.util.spec_from_file_location("trl_grpo_llm_judge", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    funcs, weights = example.build_rewards(url, "fake-judge")
    assert inspect.iscoroutinefunction(funcs[0]) and weights[0] == 1.0
    row = make_row()
    columns = {k: [row[k]] * 2 for k in ("evidence", "sections", "label", "fwd_return", "fwd_vol")}
    completions = [gold_thesis(), assemble(decision="SELL")]
    got = asyncio.run(funcs[0](prompts=[row["prompt"]] * 2, completions=completions, **columns))
    markets = [core.score_one(c, row, "market_only")["score"] for c in completions]
    assert got == pytest.approx([dsr(r, 1.0) for r in markets])  # s came from the served judge
    assert len(calls) == 2 and calls[0]["model"] == "fake-judge"


# --- errors: counted per call, and a failed weighted part makes the total unknown -------------------
def _fixed(value: float, name: str):
    def fn(prompts, completions, **kw):
        return [value] * len(completions)

    fn.__name__ = name
    return fn


def _raising_on(marker: str, name: str = "fragile"):
    def fn(prompts, completions, **kw):
        if any(marker in c for c in completions):
            raise RuntimeError(f"cannot score {marker}")
        return [0.5] * len(completions)

    fn.__name__ = name
    return fn


def test_a_reward_that_raises_on_one_row_makes_that_total_none_and_counts_one_error():
    from thesisgym.rewards.base import counting_errors

    recipe = core.Recipe(name="t", funcs=(_fixed(1.0, "base"), _raising_on("BOOM")), weights=(1.0, 2.0))
    texts = [gold_thesis(), gold_thesis() + "\nBOOM", gold_thesis()]
    with counting_errors() as tally:
        out = score_batch(texts, [make_row()] * 3, recipe)
    assert dict(tally) == {"fragile": 1}  # the row that raises, not the batch and the row twice
    assert [r["score"] for r in out] == [2.0, None, 2.0]  # the other rows keep their value
    assert math.isnan(out[1]["reward/fragile"]) and out[1]["reward/base"] == 1.0
    assert [r["reward_errors"] for r in out] == [0.0, 1.0, 0.0]
    # a zero-weight part that fails is counted but does not touch the total
    light = core.Recipe(name="t0", funcs=(_fixed(1.0, "base"), _raising_on("BOOM")), weights=(1.0, 0.0))
    with counting_errors() as tally:
        assert score_batch(texts[1:2], [make_row()], light)[0]["score"] == 1.0
    assert sum(tally.values()) == 1


def test_a_row_without_a_total_says_whether_a_reward_failed_or_none_applies():
    recipe = core.Recipe(name="t", funcs=(_fixed(1.0, "base"), _raising_on("BOOM")), weights=(1.0, 2.0))
    failed = score_batch([gold_thesis() + "\nBOOM"], [make_row()], recipe)[0]
    assert "1 reward(s) of the recipe failed" in core.no_score_reason(failed, "row 3")
    assert "no reward of the recipe applies" in core.no_score_reason({"score": None, "reward_errors": 0.0}, "row 3")


def test_async_scoring_counts_and_voids_the_same_rows():
    import asyncio

    from thesisgym.rewards.base import counting_errors

    async def afragile(prompts, completions, **kw):
        if any("BOOM" in c for c in completions):
            raise RuntimeError("boom")
        return [0.25] * len(completions)

    recipe = core.Recipe(name="a", funcs=(_fixed(1.0, "base"), afragile), weights=(1.0, 1.0))
    texts = [gold_thesis(), "BOOM " + gold_thesis()]

    async def run():
        with counting_errors() as tally:
            out = await core.ascore_batch(texts, [make_row()] * 2, recipe)
        return out, tally

    out, tally = asyncio.run(run())
    assert [r["score"] for r in out] == [1.25, None] and dict(tally) == {"afragile": 1}


@pytest.mark.parametrize(("column", "failed"), [
    ([0.5, "high"], [False, True]),   # a non-number: that row
    ([0.5], [True, True]),            # the wrong length: every row
    (None, [True, True]),             # no column at all
])
def test_a_malformed_reward_column_is_counted_not_dropped(column, failed):
    from thesisgym.rewards.base import counting_errors

    def odd(prompts, completions, **kw):
        return column

    recipe = core.Recipe(name="o", funcs=(_fixed(1.0, "base"), odd), weights=(1.0, 1.0))
    with counting_errors() as tally:
        out = score_batch([gold_thesis()] * 2, [make_row()] * 2, recipe)
    assert [r["score"] is None for r in out] == failed
    assert dict(tally) == {"odd": 1}  # one bad value, or one bad column


def test_concurrent_calls_count_only_their_own_errors():
    """Call A records its error while call B (another thread) is still scoring: B reports 0, A 1.
    With a difference of the process-wide counter B would have reported A's error."""
    import threading

    from thesisgym.rewards.base import counting_errors

    a_failed = threading.Event()

    def signal(prompts, completions, **kw):  # runs after A's fragile reward recorded its error
        a_failed.set()
        return [0.0] * len(completions)

    def waits(prompts, completions, **kw):  # B is mid-call until A's error is in
        assert a_failed.wait(30), "call A never ran"
        return [1.0] * len(completions)

    recipe_a = core.Recipe(name="A", funcs=(_raising_on("BOOM"), signal), weights=(1.0, 1.0))
    recipe_b = core.Recipe(name="B", funcs=(waits,), weights=(1.0,))
    counts: dict[str, int] = {}

    def call(name, recipe, text):
        with counting_errors() as tally:
            score_batch([text], [make_row()], recipe)
        counts[name] = sum(tally.values())

    b = threading.Thread(target=call, args=("B", recipe_b, gold_thesis()))
    b.start()
    call("A", recipe_a, "BOOM " + gold_thesis())
    b.join(60)
    assert counts == {"A": 1, "B": 0}


def test_strict_mode_lets_a_failing_reward_raise_once():
    from thesisgym.rewards.base import counting_errors, strict_rewards

    recipe = core.Recipe(name="s", funcs=(_raising_on("BOOM"),), weights=(1.0,))
    with counting_errors() as tally, strict_rewards(), pytest.raises(RuntimeError, match="cannot score BOOM"):
        score_batch([gold_thesis(), "BOOM"], [make_row()] * 2, recipe)
    assert dict(tally) == {"fragile": 1}
