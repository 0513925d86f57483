"""thesisgym as a verifiers (v1) taskset, scored by verifiers' own `Task.score` (needs the verifiers extra).

verifiers 0.4 pins openai < 3, which the default test environment does not, so this module skips
there; with `pip install 'thesisgym[verifiers]'` it runs against the installed library. Traces are
built the way verifiers' own scoring tests build them (tests/v1/test_scoring.py @ a60a606e).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from test_integrations import trl_totals
from test_rewards_fixtures import assemble, gold_thesis, make_row
from thesisgym.integrations import core

vf = pytest.importorskip("verifiers.v1", reason="verifiers is an optional extra: pip install 'thesisgym[verifiers]'")

from thesisgym.integrations import verifiers_env as env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    import datasets

    rows = [make_row(), make_row(label=None, asof="2024-03-12", fwd_return=math.nan),
            make_row(label="SELL", asof="2024-03-11", fwd_return=-0.03)]
    for r in rows:
        r["variation"] = 0
    path = tmp_path_factory.mktemp("vf") / "ctx"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
    return path


def _trace(task, reply: str):
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.types import AssistantMessage, UserMessage

    return vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(type="ThesisTask", data=task.data),
        nodes=[MessageNode(parent=None, message=UserMessage(content=task.data.prompt_text), sampled=False),
               MessageNode(parent=0, message=AssistantMessage(content=reply), sampled=True)],
    )


def test_the_package_is_found_the_way_verifiers_finds_tasksets(dataset_dir, monkeypatch):
    from verifiers.v1.utils.loaders import taskset_class

    monkeypatch.syspath_prepend(str(ROOT / "environments" / "thesisgym_env"))
    assert taskset_class("thesisgym-env") is env.ThesisTaskset
    taskset = env.ThesisTaskset(env.ThesisTasksetConfig(dataset=str(dataset_dir)))
    tasks = list(taskset)
    assert [t.data.id for t in tasks] == ["train/0", "train/2"]  # row 1 has no forward window
    assert tasks[1].data.record.label == "SELL" and tasks[0].data.system_prompt == "..."
    assert [t.data.idx for t in tasks] == [0, 1]


@pytest.mark.parametrize("recipe", ["dsr", "trading_r1"])
def test_trace_reward_equals_the_trl_total(dataset_dir, recipe):
    taskset = env.ThesisTaskset(env.ThesisTasksetConfig(dataset=str(dataset_dir),
                                                        task=env.ThesisTaskConfig(recipe=recipe)))
    task = list(taskset)[0]
    replies = [gold_thesis(), assemble(decision="SELL"), gold_thesis().replace("[T1]", "[T9]"), "junk"]
    expected = trl_totals(recipe, replies, make_row())
    for reply, want in zip(replies, expected, strict=True):
        trace = _trace(task, reply)
        asyncio.run(task.score(trace))
        assert trace.reward == pytest.approx(want, abs=1e-5)
        assert trace.rewards["thesisgym"].weight == 1.0
        assert "evidence" in trace.metrics and "structure" in trace.metrics


def test_consistency_judge_runs_through_verifiers_judge_client(dataset_dir, monkeypatch):
    calls = []

    async def fake_complete(self, messages, *, trace=None, schema=None, parse=None, **sampling):
        calls.append(messages)
        return vf.JudgeResponse(text='{"factuality": 1, "deduction": 1, "consistency": 1, "rationale": "ok"}')

    monkeypatch.setattr(vf.Judge, "complete", fake_complete)
    config = env.ThesisTaskConfig(recipe="dsr", consistency_judge=vf.JudgeConfig(model="judge-model"))
    task = list(env.ThesisTaskset(env.ThesisTasksetConfig(dataset=str(dataset_dir), task=config)))[0]
    trace = _trace(task, gold_thesis())
    asyncio.run(task.score(trace))
    r = core.score_one(gold_thesis(), make_row(), "market_only")["score"]  # the market reward alone
    from thesisgym.rewards import dsr

    assert trace.reward == pytest.approx(dsr(r, 1.0))  # s = 1 from the judge, not the local judge
    assert len(calls) == 1  # the metric and the reward share one scoring
    local = core.score_one(gold_thesis(), make_row(), "dsr")["score"]
    assert local != pytest.approx(trace.reward)


def test_rows_without_forward_window_fail_loudly_when_kept(dataset_dir):
    config = env.ThesisTasksetConfig(dataset=str(dataset_dir), keep_incomplete=True,
                                     task=env.ThesisTaskConfig(recipe=str(_only_dsr(dataset_dir))))
    task = list(env.ThesisTaskset(config))[1]
    trace = _trace(task, gold_thesis())
    with pytest.raises(Exception, match="no reward of recipe"):
        asyncio.run(task.score(trace))


def _only_dsr(dataset_dir) -> Path:
    path = Path(dataset_dir).parent / "only-dsr.yaml"
    path.write_text("kind: grpo\noutput_dir: x\ndata: {dataset: d}\nrewards: {funcs: [dsr]}\n")
    return path
