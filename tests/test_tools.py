"""The point-in-time tools: the future cannot reach any tool output, bad calls are tool errors, the verifier
checks a thesis against what its own tools returned, and the audit flags a tool that looks ahead."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.data import MarketStore  # noqa: E402
from thesisgym.data.synth import SynthConfig, generate_market  # noqa: E402
from thesisgym.rewards import score_completion  # noqa: E402
from thesisgym.tools import (  # noqa: E402
    TOOL_NAMES,
    MarketTools,
    ToolError,
    ToolLimits,
    audit_tool,
    tool_env_factory,
    tool_usage_reward,
    with_tool_evidence,
)

# every tool with the argument sets the leakage property is checked on
CALLS = {
    "get_prices": [{"days": 1}, {"days": 10}],
    "search_news": [{"query": "", "days": 30}, {"query": "guidance", "days": 365}, {"query": "SYN001", "days": 7}],
    "get_fundamentals": [{"days": 120}, {"days": 365}],
    "get_insider": [{"days": 90}, {"days": 365}],
    "get_analyst": [{"days": 90}, {"days": 365}],
    "get_macro": [{"days": 30}, {"days": 365}],
}


@pytest.fixture(scope="module")
def store() -> MarketStore:
    return generate_market(SynthConfig(n_tickers=4, n_days=260, seed=3))


def _future_changed(store: MarketStore, day: pd.Timestamp) -> MarketStore:
    """The same store with every bar after `day` and every event from its cutoff on rewritten."""
    bars = store.bars.copy()
    later = bars["date"] > day
    for col in ("open", "high", "low", "close"):
        bars.loc[later, col] = bars.loc[later, col] * 3.0
    bars.loc[later, "volume"] = bars.loc[later, "volume"] + 1
    cut = store.timeline().cutoffs([day])[0]
    events = store.events.copy()
    late = pd.DatetimeIndex(events["published_at"]).as_unit("ns").asi8 >= cut
    events.loc[late, "title"] = "FUTURE " + events.loc[late, "title"].astype(str) + " guidance 99.9%"
    events.loc[late, "text"] = "leaked"
    extra = events[late].head(3).copy()
    extra["published_at"] = pd.Timestamp(cut, tz="UTC")  # exactly at the cutoff: still not visible
    return MarketStore(bars=bars, events=pd.concat([events, extra], ignore_index=True), actions=store.actions,
                       truth=store.truth, meta=dict(store.meta))


def test_no_tool_output_changes_when_everything_after_the_cutoff_changes(store):
    for day in (store.dates[120], store.dates[200]):
        other = _future_changed(store, day)
        for ticker in store.tickers[:2]:
            a, b = MarketTools(store.as_of(day), ticker), MarketTools(other.as_of(day), ticker)
            for name, arg_sets in CALLS.items():
                for args in arg_sets:
                    assert a.call(name, **args) == b.call(name, **args), (day, ticker, name, args)
            assert a.evidence() == b.evidence()
            assert "FUTURE" not in json.dumps(a.evidence()) and "leaked" not in json.dumps(a.evidence())


def test_the_environment_cache_serves_each_store_its_own_views_and_stays_small(store):
    """One process-wide cache of as-of views (tools.env._view): keyed on the timeline and the day, so a
    second store (its whole past changed) is never served the first one's view, a store whose future
    changed gives byte-identical output through the cache too, and the cache never outgrows its size."""
    from thesisgym.tools.env import VIEW_CACHE_SIZE, _view

    day, ticker = store.dates[150], store.tickers[0]
    doubled = store.bars.assign(close=store.bars["close"] * 2.0)
    other = MarketStore(bars=doubled, events=store.events, actions=store.actions, meta=dict(store.meta))

    def prices(s: MarketStore) -> str:
        env = tool_env_factory(s)()
        env.reset(ticker=ticker, asof=str(day.date()))
        return env.get_prices(5) + env.search_news("", 60) + env.get_macro(60)

    assert prices(store) != prices(other)
    assert prices(store) == prices(_future_changed(store, day))
    for d in store.dates[: VIEW_CACHE_SIZE + 10]:
        tool_env_factory(store)().reset(ticker=ticker, asof=d)
    info = _view.cache_info()
    assert info.maxsize == VIEW_CACHE_SIZE and info.currsize <= VIEW_CACHE_SIZE


def test_the_as_of_day_is_bound_by_the_row_never_an_argument(store):
    env = tool_env_factory(store)()
    for name in TOOL_NAMES:
        import inspect

        params = set(inspect.signature(getattr(env, name)).parameters)
        assert not params & {"asof", "as_of", "date", "ticker", "cutoff"}, name
    with pytest.raises(RuntimeError, match="reset"):
        env.get_prices(3)
    env.reset(ticker=store.tickers[0], asof=str(store.dates[100].date()))
    assert env.tools.view.asof == store.dates[100]


def test_ids_are_stable_outputs_bounded_and_ordered_newest_first(store):
    tools = MarketTools(store.as_of(store.dates[200]), store.tickers[0], limits=ToolLimits(max_items=3, max_chars=400))
    first = tools.call("search_news", query="", days=60)
    again = tools.call("search_news", query="", days=60)
    assert first == again and first.startswith("[N1] ")
    assert len(first) <= 400 + 60 and first.count("\n[N") <= 2
    dates = [line.split(" | ")[0].split("] ")[1] for line in first.splitlines() if line.startswith("[")]
    assert dates == sorted(dates, reverse=True)
    tools.call("get_prices", days=2)
    assert [it["id"] for it in tools.evidence()][-2:] == ["T1", "T2"]
    assert tools.sections()[:2] == ["news", "technical"]


def test_bad_calls_are_tool_errors_naming_the_fix(store):
    tools = MarketTools(store.as_of(store.dates[150]), store.tickers[1])
    for name, args, pattern in (
        ("get_prices", {"days": 0}, r"get_prices: `days` must be a whole number from 1 to 10, got 0"),
        ("get_prices", {"days": "many"}, "whole number"),
        ("get_macro", {"days": 10**9}, "from 1 to 365"),
        ("search_news", {"query": "x" * 5000}, "at most 200 characters"),
        ("search_news", {"days": 3}, "query"),
        ("get_insider", {"weeks": 3}, "unexpected keyword"),
        ("get_filings", {}, "unknown tool 'get_filings'; the tools are get_prices"),
    ):
        with pytest.raises(ToolError, match=pattern):
            tools.call(name, **args)
    assert tools.usage.calls == 7 and tools.usage.failed == 7 and not tools.evidence()


def test_the_tool_descriptions_the_model_sees_follow_the_limits(store):
    from transformers.utils import get_json_schema

    from thesisgym.integrations.tool_replay import tool_schema
    from thesisgym.teachers.tool_traces import tool_schemas
    from thesisgym.tools.prompts import TOOL_DOCS

    assert set(TOOL_DOCS) == set(TOOL_NAMES)

    def days_text(env, name):
        return get_json_schema(getattr(env, name))["function"]["parameters"]["properties"]["days"]["description"]

    default, tight = tool_env_factory(store)(), tool_env_factory(store, limits=ToolLimits(max_bars=3, max_days=30))()
    assert days_text(default, "get_prices").endswith("from 1 to 10.")
    assert days_text(tight, "get_prices").endswith("from 1 to 3.")
    for name in TOOL_NAMES[1:]:
        assert days_text(default, name).endswith("from 1 to 365.") and days_text(tight, name).endswith("from 1 to 30.")
    # the ranges it reads are the ones its calls get
    tight.reset(ticker=store.tickers[1], asof=str(store.dates[150].date()))
    with pytest.raises(ToolError, match="from 1 to 3, got 4"):
        tight.get_prices(days=4)
    assert tight.get_prices(days=3).count("\n") == 2
    # every other place that shows the schemas follows them too
    limits = ToolLimits(max_days=45)
    assert "from 1 to 45." in json.dumps(tool_schemas(limits)) and "365" not in json.dumps(tool_schemas(limits))
    assert "from 1 to 45." in json.dumps(tool_schema("get_macro", limits))
    assert "from 1 to 365." in json.dumps(tool_schema("get_macro"))


def test_a_quote_no_tool_returned_is_a_hallucination(store):
    tools = MarketTools(store.as_of(store.dates[180]), store.tickers[0])
    lines = tools.call("get_prices", days=2).splitlines()
    bar = lines[0].split(" | ")[2]
    quote = " ".join(bar.split()[:4])
    honest = (f'<technical>\n- The bars show a firm tape for the shares, the latest one reads "{quote}" with a '
              f"steady volume that supports the trend [T1]\n</technical>\n<conclusion>Firm.</conclusion>\n"
              "<decision>BUY</decision>")
    unseen = honest.replace("[T1]", "[N1]")  # an id no tool returned in this episode
    row = {"evidence": tools.evidence(), "sections": tools.sections(), "label": "BUY"}
    assert score_completion(honest, row)["hallucination_rate"] == 0.0
    assert score_completion(unseen, row)["hallucination_rate"] == 1.0

    class Env:  # what TRL hands the rewards: one environment per completion
        _tools = tools

    def evidence_seen(prompts, completions, evidence, sections, **_):
        return [float(len(e)) for e in evidence]

    (wrapped,) = with_tool_evidence([evidence_seen])
    assert wrapped(["p"], [honest], environments=[Env()], evidence=[["the prompt's own evidence"]]) == [2.0]
    cost = tool_usage_reward(per_call=0.1, per_failed_call=1.0)
    with pytest.raises(ToolError):
        tools.call("get_prices", days=99)
    logged = {}
    assert cost(["p"], [honest], environments=[Env()], log_metric=logged.__setitem__) == [pytest.approx(-1.2)]
    assert logged == {"tools/calls": 2, "tools/failed": 1, "tools/chars": len("\n".join(lines))}


def test_audit_flags_a_tool_that_returns_later_items_and_passes_ours(store):
    def leaky_news(cutoff, days=30):
        # the peers' bug: an empty date field skips the date filter
        return [{"title": "old", "published_at": cutoff - pd.Timedelta(days=2)},
                {"title": "from later", "published_at": cutoff + pd.Timedelta(days=30)},
                {"title": "no date", "published_at": ""}]

    report = audit_tool(leaky_news, ["2021-03-01 16:00", "2021-06-01 16:00"], calls=[{"days": 7}])
    assert not report.ok and report.leaks == 2 and report.undated == 2 and report.items == 4
    assert "2 item(s) from after their cutoff" in report.summary()
    # a date-only item on the cutoff day cannot be placed before or after it: counted, not passed
    same_day = audit_tool(lambda cut: "[N1] " + str(cut.tz_convert("America/New_York").date()) + " | x | y",
                          ["2021-03-01 16:00"])
    assert same_day.ok and same_day.same_day == 1
    assert not audit_tool(lambda cut: "[N1] 2021-03-02 | x | y", ["2021-03-01 16:00"]).ok

    def ours(cutoff, name, **args):
        day = cutoff.tz_convert("America/New_York").normalize().tz_localize(None)
        return MarketTools(store.as_of(day), store.tickers[0]).call(name, **args)

    calls = [{"name": name, **args} for name, arg_sets in CALLS.items() for args in arg_sets]
    cutoffs = [pd.Timestamp(d.date()).tz_localize("America/New_York") + pd.Timedelta(hours=16)
               for d in store.dates[60::50]]
    report = audit_tool(ours, cutoffs, calls=calls)
    assert report.ok and report.items > 100, report.summary()


def test_tool_traces_verify_against_their_ledger_and_mask_the_tool_outputs(store, tmp_path):
    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.dataset.splits import SplitConfig, build_splits
    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.tool_traces import distill_tool_traces, tokenize_traces
    from thesisgym.train.models import build_tiny

    splits = build_splits(store, SplitConfig(stride=10, heldout_tickers=0, context=ContextConfig(bars=3)),
                          show_progress=False)
    rows = list(splits["train"].select(range(12)))
    result = distill_tool_traces(rows, store, TemplateTeacher(seed=0, bullets=(1, 1)), n=2, decision_tolerance=4,
                                 limits=ToolLimits(max_items=3))
    assert len(result.dataset) >= 6 and "acceptance_rate" in result.stats
    row = result.dataset[0]
    trace = json.loads(row["trace"])
    assert trace[0]["tool_calls"] and trace[-1]["role"] == "assistant" and "<decision>" in trace[-1]["content"]
    assert "evidence" not in result.dataset.column_names and "Ticker:" in row["prompt"][-1]["content"]
    # replaying the calls on a fresh episode reproduces the ledger the thesis is verified against
    replay = MarketTools(store.as_of(row["asof"]), row["ticker"], limits=ToolLimits(max_items=3))
    for call, message in zip(trace[0]["tool_calls"], trace[1:-1], strict=True):
        assert replay.call(call["function"]["name"], **call["function"]["arguments"]) == message["content"]
    scored = score_completion(trace[-1]["content"], {"evidence": replay.evidence(), "sections": replay.sections(),
                                                     "label": row["label"]})
    assert scored["hallucination_rate"] == 0.0 and scored["grounding"] == 1.0

    tiny = build_tiny([m["content"] for m in trace if m.get("content")] * 3, tmp_path / "tiny", vocab_size=400,
                      hidden_size=32, layers=1, heads=2, kv_heads=1)
    from thesisgym.train.models import load_tokenizer

    tok = load_tokenizer(tiny)
    feats = tokenize_traces(result.dataset.select(range(1)), tok)[0]
    kept = tok.decode([i for i, m in zip(feats["input_ids"], feats["completion_mask"], strict=True) if m])
    assert "<tool_call>" in kept and "<decision>" in kept
    assert trace[1]["content"][:40] not in kept  # a tool's output is context, never a training target
    assert np.sum(feats["completion_mask"]) < len(feats["input_ids"]) / 2


def test_a_grpo_step_through_trls_trainer_runs_the_tool_environment(store, tmp_path):
    """The real GRPOTrainer with `environment_factory`: one environment per rollout, reset with its row, the
    rewards scored against that rollout's own ledger (the split's evidence column never reaches them)."""
    import torch

    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.dataset.splits import SplitConfig, build_splits
    from thesisgym.tools import env as tool_env
    from thesisgym.train.config import build_config
    from thesisgym.train.grpo import build_grpo_trainer
    from thesisgym.train.models import build_tiny

    torch.set_num_threads(1)
    store.save(tmp_path / "store")
    splits = build_splits(store, SplitConfig(stride=20, heldout_tickers=0, context=ContextConfig(bars=2)),
                          out=tmp_path / "ds", store_path=(tmp_path / "store").resolve(), show_progress=False)
    tiny = build_tiny(["<tool_call> get_prices days Ticker SYN000 <technical> <decision>BUY</decision>"] * 20,
                      tmp_path / "tiny", vocab_size=300, hidden_size=32, layers=1, heads=2, kv_heads=1)
    cfg = build_config({"output_dir": str(tmp_path / "grpo"), "model": {"name_or_path": str(tiny)},
                        "data": {"dataset": str(tmp_path / "ds")}, "max_steps": 1, "per_device_train_batch_size": 2,
                        "num_generations": 2, "max_completion_length": 16, "report_to": "none", "save_steps": 1000,
                        "rewards": {"funcs": ["evidence", "decision"]}, "tools": {"max_calls": 1}}, kind="grpo")
    seen: list[dict] = []
    real_reset = tool_env.MarketToolEnv.reset

    def spy(self, **row):
        seen.append(row)
        return real_reset(self, **row)

    tool_env.MarketToolEnv.reset = spy
    try:
        trainer, tok, _ = build_grpo_trainer(cfg)
        assert "evidence" not in trainer.train_dataset.column_names
        assert "<tools>" in tok.apply_chat_template(trainer.train_dataset[0]["prompt"], tools=trainer.tools,
                                                    tokenize=False)
        trainer.train()
    finally:
        tool_env.MarketToolEnv.reset = real_reset
    assert len(seen) >= 2 and all({"ticker", "asof"} <= set(r) for r in seen)
    assert {r["ticker"] for r in seen} <= set(splits["train"]["ticker"])
    logged = [h for h in trainer.state.log_history if "rewards/evidence_reward/mean" in h]
    assert logged and "rewards/tool_cost/mean" in logged[0]
