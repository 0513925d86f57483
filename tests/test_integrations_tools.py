"""The point-in-time tools in verl and verifiers: binding per sample, replay of the ledger, scoring, leakage.

The stack-free parts (thesisgym.integrations.tool_replay, and verl_tools' execute/config/rows/reward,
which do not import verl) always run. The tests that drive verl's own tool registry, `ToolAgentLoop`
and reward-loop manager, or verifiers' MCP Toolset and `Task.score`, skip unless the optional extra is
installed (`pip install 'thesisgym[verl]'` / `'thesisgym[verifiers]'`; each pins libraries the default
environment does not, so they live in their own virtual environments).
"""

from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from test_rewards_fixtures import assemble
from thesisgym.data.store import MarketStore
from thesisgym.data.synth import SynthConfig, generate_market
from thesisgym.integrations import core, tool_replay, verl_tools
from thesisgym.integrations.tool_replay import ToolBinding, ToolPrices
from thesisgym.tools import TOOL_NAMES, MarketTools

# every tool with in-range arguments (the leakage grid) and a few the tools must refuse
CALLS = [
    *({"name": "get_prices", "arguments": {"days": d}} for d in (1, 5, 10)),
    *({"name": "search_news", "arguments": {"query": q, "days": d}} for q in ("", "shares", "SYN000 rises") for d in (3, 30, 365)),
    *({"name": t, "arguments": {"days": d}} for t in TOOL_NAMES[2:] for d in (1, 30, 90, 365)),
]
BAD_CALLS = [
    ("nope", {}),                                              # unknown tool
    ("get_prices", [5]),                                       # arguments not an object
    ("get_prices", {"days": 99}),                              # out of range
    ("get_prices", {"days": "many"}),                          # wrong type
    ("get_prices", {"days": 2, "asof": "2030-01-01"}),         # the model cannot move the cutoff
    ("search_news", {"query": "x" * 5000}),                    # huge input
    ("get_macro", {"days": float("inf")}),
]


class AgentData:
    """The part of verl's AgentData the tools use (a per-trajectory object with `extra_fields`)."""

    def __init__(self) -> None:
        self.extra_fields: dict = {}


def _perturbed(store: MarketStore, day: pd.Timestamp) -> MarketStore:
    """`store` with everything after the cutoff of `day` changed: later events rewritten, new events
    stamped exactly at the cutoff and after it, later bars moved."""
    cut = store.cutoff_of(day)
    ev = store.events.copy()
    late = ev["published_at"] >= cut
    ev.loc[late, "title"] = "FUTURE " + ev.loc[late, "title"].astype(str)
    ev.loc[late, "text"] = "leaked shares rises"
    extra = ev[~late].tail(30).copy()
    extra["published_at"] = [cut + pd.Timedelta(hours=h % 3) for h in range(len(extra))]  # at the cutoff, then later
    extra["title"] = "FUTURE shares SYN000 rises " + extra["title"].astype(str)
    bars = store.bars.copy()
    later = bars["date"] > day
    bars.loc[later, ["open", "high", "low", "close"]] *= 1.5
    bars.loc[later, "volume"] *= 3
    return MarketStore(bars=bars, events=pd.concat([ev, extra], ignore_index=True), truth=store.truth,
                       name=store.name, cutoff=store.cutoff, timezone=store.timezone, meta=store.meta,
                       actions=store.actions)


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    store = generate_market(SynthConfig(n_tickers=2, n_days=120, seed=1, events_per_day=1.0, insider_rate=0.1,
                                        analyst_rate=0.1))
    day = store.dates[80]
    root = tmp_path_factory.mktemp("tools")
    store.save(root / "store")
    _perturbed(store, day).save(root / "future")
    return SimpleNamespace(store=store, day=str(day.date()), later=str(store.dates[95].date()),
                           path=str(root / "store"), future=str(root / "future"), root=root)


def _binding(market, **over) -> dict:
    return {"ticker": "SYN000", "asof": market.day, "store": market.path, **over}


def _row(market, **over) -> dict:
    return {"ticker": "SYN000", "asof": market.day, "label": "BUY", "fwd_return": 0.021, "fwd_vol": 0.035,
            "variation": 0, **over}


def _thesis(items, *, decision: str = "BUY") -> str:
    """A thesis whose every bullet quotes the first words of the item it cites, word for word."""
    bullets: dict[str, list[str]] = {}
    for it in items:
        quote = " ".join(it["text"].split()[:4])
        bullets.setdefault(it["section"], []).append(
            "This item matters for the short horizon because it shows what the market already knew on "
            f'the day and how the stock was trading then "{quote}" [{it["id"]}]')
    return assemble(bullets, decision=decision)


def _run(calls, binding: dict) -> tuple[list[str], AgentData]:
    agent = AgentData()
    return [verl_tools.execute_call(c["name"], c["arguments"], binding, agent)[0] for c in calls], agent


# --- what the model sees --------------------------------------------------------------------------------
def test_tool_schemas_are_trls_and_have_no_binding_argument():
    from transformers.utils import get_json_schema

    from thesisgym.tools.env import MarketToolEnv

    env = MarketToolEnv.__new__(MarketToolEnv)
    for name in TOOL_NAMES:
        schema = tool_replay.tool_schema(name)
        trl = get_json_schema(getattr(env, name))
        trl["function"].pop("return")
        assert schema == trl
        assert set(schema["function"]["parameters"]["properties"]) <= {"days", "query"}
    with pytest.raises(ValueError, match="unknown tool"):
        tool_replay.tool_schema("get_future")


def test_tool_config_yaml_names_the_class_and_the_schemas(tmp_path):
    path = verl_tools.write_tool_config(tmp_path / "cfg" / "tools.yaml")
    doc = yaml.safe_load(path.read_text())
    assert [t["tool_schema"]["function"]["name"] for t in doc["tools"]] == list(TOOL_NAMES)
    assert {t["class_name"] for t in doc["tools"]} == {"thesisgym.integrations.verl_tools.MarketTool"}
    assert all(t["config"] == {"type": "native"} for t in doc["tools"])
    for t in doc["tools"]:
        assert not {"ticker", "asof", "store"} & set(t["tool_schema"]["function"]["parameters"]["properties"])
    with pytest.raises(ValueError, match="expected names among"):
        verl_tools.write_tool_config(tmp_path / "x.yaml", tools=["get_prices", "get_tomorrow"])


@pytest.mark.parametrize(("over", "field"), [
    ({"asof": "2020-13-45"}, "asof"), ({"asof": "2020-04-23T15:00"}, "asof"), ({"store": ""}, "store"),
    ({"ticker": ""}, "ticker"), ({"limits": {"max_rows": 3}}, "limits"), ({"cutoff": "never"}, "cutoff"),
])
def test_a_bad_binding_is_a_value_error_naming_the_field(market, over, field):
    with pytest.raises(ValueError, match=field):
        ToolBinding.parse(_binding(market, **over), where="create_kwargs")


def test_binding_opens_only_a_real_store_and_ticker(market, tmp_path):
    with pytest.raises(ValueError, match="not a MarketStore directory"):
        ToolBinding.parse(_binding(market, store=str(tmp_path)), where="b").open()
    with pytest.raises(ValueError, match="not in the store"):
        ToolBinding.parse(_binding(market, ticker="ZZZ"), where="b").open()
    tools = ToolBinding.parse(_binding(market, limits={"max_items": 2}), where="b").open()
    assert tools.limits.max_items == 2 and tools.view.asof == pd.Timestamp(market.day)


# --- verl: one binding and one ledger per trajectory ----------------------------------------------------
def test_each_trajectory_gets_its_own_binding_and_ledger(market):
    a, b, a2 = AgentData(), AgentData(), AgentData()
    out_a = verl_tools.execute_call("get_prices", {"days": 2}, _binding(market), a)[0]
    out_b = verl_tools.execute_call("get_prices", {"days": 2}, _binding(market, asof=market.later), b)[0]
    out_a2 = verl_tools.execute_call("get_prices", {"days": 2}, _binding(market), a2)[0]
    assert out_a == out_a2 != out_b
    assert out_a.startswith("[T1] " + market.day) and out_b.startswith("[T1] " + market.later)
    # the same trajectory keeps numbering: new items take the next ids, a repeated item keeps its id
    more = verl_tools.execute_call("get_prices", {"days": 4}, _binding(market), a)[0]
    assert [line.split("]")[0] for line in more.splitlines()] == ["[T1", "[T2", "[T3", "[T4"]
    assert verl_tools.execute_call("search_news", {"query": ""}, _binding(market), a)[0].startswith("[N1]")
    assert a.extra_fields[verl_tools.CALLS_KEY] == [
        {"name": "get_prices", "arguments": {"days": 2}}, {"name": "get_prices", "arguments": {"days": 4}},
        {"name": "search_news", "arguments": {"query": ""}}]
    # a trajectory cannot switch its binding half way
    moved = verl_tools.execute_call("get_prices", {"days": 2}, _binding(market, asof=market.later), a)[0]
    assert moved.startswith("error:") and len(a.extra_fields[verl_tools.CALLS_KEY]) == 3


def test_bad_calls_are_tool_errors_never_exceptions(market):
    texts, agent = _run([{"name": n, "arguments": a} for n, a in BAD_CALLS], _binding(market))
    assert all(t.startswith("error: ") for t in texts), texts
    assert "unexpected keyword argument 'asof'" in texts[4]
    tools = verl_tools._EPISODES[agent][1]
    assert tools.usage.calls == len(BAD_CALLS) == tools.usage.failed and tools.evidence() == []
    # a row exported without a binding, or a call outside verl's agent loop: errors, not crashes
    assert verl_tools.execute_call("get_prices", {}, {}, AgentData())[0].startswith("error: this tool is not set up")
    assert verl_tools.execute_call("get_prices", {}, _binding(market), None)[0].startswith("error:")
    assert verl_tools.execute_call("get_prices", {}, _binding(market), SimpleNamespace(extra_fields={}))[0] \
        .startswith("error:")


def test_outputs_are_bounded(market):
    texts, _ = _run(CALLS, _binding(market, limits={"max_items": 3, "max_chars": 300}))
    assert all(len(t) <= 300 + 60 for t in texts)
    assert all(t.count("\n[") <= 2 for t in texts)


# --- replay reproduces the ledger ------------------------------------------------------------------------
def test_replaying_the_logged_calls_reproduces_the_ledger(market):
    calls = CALLS[::3] + [{"name": n, "arguments": a} for n, a in BAD_CALLS[:3]] + CALLS[:4]
    texts, agent = _run(calls, _binding(market))
    live = verl_tools._EPISODES[agent][1]
    replayed, outputs = tool_replay.replay_calls(ToolBinding.parse(_binding(market), where="b"),
                                                 agent.extra_fields[verl_tools.CALLS_KEY])
    assert replayed.evidence() == live.evidence() and len(live.evidence()) > 20
    assert replayed.sections() == live.sections() and replayed.usage == live.usage
    assert outputs == texts  # the replayed episode answers every call with the very same text


def _hermes_transcript(calls, texts, final: str, *, preamble: str = "I need more.") -> str:
    """A ChatML transcript as verl's reward manager decodes it (special tokens skipped)."""
    turns = []
    for call, text in zip(calls, texts, strict=True):
        turns.append(f'{preamble}<tool_call>\n{json.dumps(call)}\n</tool_call>\nuser\n<tool_response>\n{text}\n'
                     "</tool_response>\nassistant\n")
    return "".join(turns) + final


def test_transcripts_replay_to_the_same_ledger(market):
    calls = CALLS[:2] + CALLS[5:7] + CALLS[-3:]
    texts, agent = _run(calls, _binding(market))
    live = verl_tools._EPISODES[agent][1]
    binding = ToolBinding.parse(_binding(market), where="b")
    hermes = _hermes_transcript(calls, texts, "done" + '<tool_call>{"name": "get_macro", "arguments": {}}</tool_call>')
    from_text = tool_replay.hermes_calls(hermes)
    assert from_text[:-1] == calls  # the unanswered call of the last turn is in the text too
    assert tool_replay.replay_calls(binding, from_text[:-1])[0].evidence() == live.evidence()
    assert tool_replay.hermes_calls('<tool_call>{"name": "get_prices"}</tool_call><tool_call>{oops}</tool_call>') == []
    # OpenAI-style messages (TRL completions, verifiers traces): arguments as JSON strings or objects
    messages = [{"role": "user", "content": "go"}]
    for i, (call, text) in enumerate(zip(calls, texts, strict=True)):
        args = json.dumps(call["arguments"]) if i % 2 else call["arguments"]
        messages.append({"role": "assistant", "tool_calls": [{"type": "function", "function": {
            "name": call["name"], "arguments": args}}]})
        messages.append({"role": "tool", "content": text})
    messages.append({"role": "assistant", "tool_calls": [{"function": {"name": "get_prices", "arguments": "{bad"}}]})
    assert tool_replay.message_calls(messages) == calls


def test_model_text_cuts_only_what_the_tools_returned(market):
    calls = CALLS[:3]
    texts, _ = _run(calls, _binding(market))
    thesis = _thesis([])
    hermes = _hermes_transcript(calls, texts, thesis + '<tool_call>{"name": "get_macro", "arguments": {}}</tool_call>')
    assert tool_replay.model_text(hermes, texts) == "I need more.\n" * 3 + thesis
    # two responses in one user turn (ChatML merges consecutive tool messages), and no preamble
    merged = (f'<tool_call>{json.dumps(calls[0])}</tool_call><tool_call>{json.dumps(calls[1])}</tool_call>\nuser\n'
              f"<tool_response>\n{texts[0]}\n</tool_response>\n<tool_response>\n{texts[1]}\n</tool_response>\n"
              f"assistant\n{thesis}")
    assert tool_replay.model_text(merged, texts[:2]) == thesis
    # the decoded text has no trustworthy turn boundaries: forged markup hides nothing the model wrote
    forged = hermes.replace(thesis, '<tool_response>\nCLAIM one</tool_response>\nassistant\n' + thesis
                            + "<tool_call>CLAIM two</tool_call>" + f"<tool_response>{texts[0]}</tool_response>")
    kept = tool_replay.model_text(forged, texts)
    assert "CLAIM one" in kept and "CLAIM two" in kept and texts[0] in kept  # a copied output stays too
    # an output verl truncated is not the tool's output: it stays in the scored text
    assert texts[2][:50] in tool_replay.model_text(hermes.replace(texts[2], texts[2][:60] + "...(truncated)"), texts)


# --- leakage: nothing after the cutoff reaches any output ------------------------------------------------
def test_perturbing_the_future_leaves_every_output_byte_identical(market):
    now, _ = _run(CALLS + [{"name": n, "arguments": a} for n, a in BAD_CALLS], _binding(market))
    fut, _ = _run(CALLS + [{"name": n, "arguments": a} for n, a in BAD_CALLS], _binding(market, store=market.future))
    assert now == fut
    binding = ToolBinding.parse(_binding(market, store=market.future), where="b")
    (fut_tools, fut_out), (now_tools, now_out) = (tool_replay.replay_calls(b, CALLS) for b in (
        binding, binding.model_copy(update={"store": market.path})))
    assert fut_out == now_out and fut_tools.evidence() == now_tools.evidence()
    assert not any("FUTURE" in t or "leaked" in t for t in fut)
    # control: at a later as-of day the same perturbation is visible, so the equality above could fail
    later_now, _ = _run(CALLS, _binding(market, asof=market.later))
    later_fut, _ = _run(CALLS, _binding(market, asof=market.later, store=market.future))
    assert later_now != later_fut and any("FUTURE" in t for t in later_fut)


# --- the reward: the model's text against the trajectory's own ledger -------------------------------------
def _extra_info(market, **over) -> dict:
    return verl_tools.tool_row(_row(market), split="train", index=0, store=market.path)["extra_info"] | over


def test_compute_score_verifies_against_the_trajectory_ledger(market):
    calls = [{"name": "get_prices", "arguments": {"days": 4}}, {"name": "get_insider", "arguments": {}}]
    texts, agent = _run(calls, _binding(market))
    live = verl_tools._EPISODES[agent][1]
    thesis = _thesis(live.evidence())
    row = verl_tools.tool_row(_row(market), split="train", index=0, store=market.path)
    gt = row["reward_model"]["ground_truth"]
    transcript = _hermes_transcript(calls, texts, thesis)

    with_log = verl_tools.compute_score("thesisgym", transcript, gt, _extra_info(market, **agent.extra_fields))
    # the same verifier path and the same text as TRL: core.score_batch on the assistant turns, with the
    # ledger as the record's evidence
    record = core.validate_record({**json.loads(gt), "evidence": [dict(i) for i in live.evidence()],
                                   "sections": live.sections()})
    trl_completion = [{"role": "assistant", "content": c} for c in ("I need more.", "I need more.", thesis)]
    assert with_log == pytest.approx({**core.score_batch([trl_completion], [record])[0], **{
        k: v for k, v in with_log.items() if k.startswith("tools/")}}, nan_ok=True)
    assert with_log["hallucination_rate"] == 0.0 and with_log["evidence"] > 0
    assert (with_log["tools/calls"], with_log["tools/failed"], with_log["tools/items"]) == (2.0, 0.0, len(live.evidence()))
    # no log forwarded (legacy reward path): the transcript's calls are replayed, same result
    assert verl_tools.compute_score("thesisgym", transcript, gt, _extra_info(market)) == with_log
    # the agent loop ran and forwarded its fields, but no tool was called: every quote is a hallucination
    none = verl_tools.compute_score("thesisgym", thesis, gt, _extra_info(market, tool_rewards=[]))
    assert none["hallucination_rate"] == 1.0 and none["score"] < with_log["score"] and none["tools/items"] == 0.0
    # tool use can be priced (reward_kwargs); the recipe's components are unchanged
    priced = verl_tools.compute_score("thesisgym", transcript, gt, _extra_info(market, **agent.extra_fields),
                                      per_call=0.1, per_1k_chars=0.5)
    cost = 0.1 * 2 + 0.5 * live.usage.chars / 1000
    assert priced["score"] == pytest.approx(with_log["score"] - cost) and priced["tools/cost"] == pytest.approx(cost)
    assert set(priced) == set(with_log)  # verl logs every key: every call returns the same keys


def test_a_decoded_qwen_template_episode_scores_like_the_trl_conversation(market):
    """The episode rendered by the Qwen2.5 template (TRL's, which the TRL tool run uses) and decoded the
    way verl's reward manager decodes it (special tokens skipped) scores exactly as TRL's messages do."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from thesisgym.thesis import completion_text
    from thesisgym.train.models import build_tokenizer

    turns = [[{"name": "get_prices", "arguments": {"days": 3}}, {"name": "get_analyst", "arguments": {"days": 500}}],
             [{"name": "get_insider", "arguments": {}}]]
    agent, said = AgentData(), []
    for turn in turns:
        said.append([verl_tools.execute_call(c["name"], c["arguments"], _binding(market), agent)[0] for c in turn])
    thesis = _thesis(verl_tools._EPISODES[agent][1].evidence())
    prompt = tool_replay.tool_prompt("SYN000", market.day)
    messages = list(prompt)
    for k, (turn, outs) in enumerate(zip(turns, said, strict=True)):
        messages.append({"role": "assistant", "content": ["Prices first.", ""][k], "tool_calls": [
            {"type": "function", "function": c} for c in turn]})
        messages += [{"role": "tool", "name": c["name"], "content": o} for c, o in zip(turn, outs, strict=True)]
    messages.append({"role": "assistant", "content": thesis})
    tok = build_tokenizer([thesis, *sum(said, [])], vocab_size=400)
    tok.chat_template = qwen2_5_chat_template
    schemas = [tool_replay.tool_schema(t) for t in TOOL_NAMES]
    head = tok.apply_chat_template(prompt, tools=schemas, tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(messages, tools=schemas, tokenize=False)
    decoded = tok.decode(tok(full[len(head):], add_special_tokens=False)["input_ids"], skip_special_tokens=True)

    trl_completion = [m for m in messages[len(prompt):] if m["role"] == "assistant"]
    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip()]

    assert lines(tool_replay.model_text(decoded, sum(said, []))) == lines(completion_text(trl_completion))
    gt = verl_tools.tool_row(_row(market), split="train", index=0, store=market.path)["reward_model"]["ground_truth"]
    got = verl_tools.compute_score("thesisgym", decoded, gt, _extra_info(market, **agent.extra_fields))
    ledger = verl_tools._EPISODES[agent][1]
    record = core.validate_record({**json.loads(gt), "evidence": [dict(i) for i in ledger.evidence()],
                                   "sections": ledger.sections()})
    assert got["score"] == pytest.approx(core.score_batch([trl_completion], [record])[0]["score"])
    assert got["hallucination_rate"] == 0.0 and got["tools/failed"] == 1.0


def test_compute_score_rejects_rows_it_cannot_bind(market):
    gt = verl_tools.tool_row(_row(market), split="train", index=0, store=market.path)["reward_model"]["ground_truth"]
    with pytest.raises(ValueError, match="tools_kwargs"):
        verl_tools.compute_score("thesisgym", "x", gt, {})
    bad = _extra_info(market)
    bad["tools_kwargs"]["get_macro"] = {"create_kwargs": _binding(market, asof=market.later)}
    with pytest.raises(ValueError, match="share one binding"):
        verl_tools.compute_score("thesisgym", "x", gt, bad)


def test_score_with_ledger_prices_the_calls_of_each_episode(market):
    cheap = ToolBinding.parse(_binding(market), where="b").open()
    busy, _ = tool_replay.replay_calls(ToolBinding.parse(_binding(market), where="b"), CALLS[:3] + [
        {"name": "nope", "arguments": {}}])
    record = core.validate_record({"evidence": [], "label": "HOLD", "fwd_return": 0.0, "fwd_vol": 0.02})
    prices = ToolPrices(per_call=0.01, per_failed_call=0.5)
    free, paid = (tool_replay.score_with_ledger(["junk", "junk"], [cheap, busy], [record, record], prices=p)
                  for p in (None, prices))
    assert paid[0]["score"] == free[0]["score"] and paid[0]["tools/cost"] == 0.0
    assert paid[1]["score"] == pytest.approx(free[1]["score"] - (0.01 * 4 + 0.5))
    assert (paid[1]["tools/calls"], paid[1]["tools/failed"]) == (4.0, 1.0)
    with pytest.raises(ValueError, match="1 completions, 0 ledgers"):
        tool_replay.score_with_ledger(["junk"], [], [record])


# --- rows --------------------------------------------------------------------------------------------------
def test_exported_tool_rows_carry_the_binding_not_the_evidence(market, tmp_path):
    import pyarrow.parquet as pq

    rows = [_row(market), _row(market, label=None, fwd_return=math.nan), _row(market, asof=market.later, label="SELL")]
    res = verl_tools.export_tool_rows(rows, tmp_path / "verl" / "train.parquet", split="train", store=market.path)
    assert (res.written, res.skipped_incomplete) == (2, 1)
    back = pq.read_table(res.path).to_pylist()
    assert [r["extra_info"]["index"] for r in back] == [0, 2]
    first = back[0]
    assert first["prompt"][1]["content"].startswith(f"Ticker: SYN000\nAs of: {market.day}")
    assert "[T1]" not in json.dumps(first["prompt"]) and first["extra_info"]["need_tools_kwargs"] is True
    assert first["agent_name"] == "tool_agent"
    kwargs = first["extra_info"]["tools_kwargs"]
    assert sorted(kwargs) == sorted(TOOL_NAMES)
    assert all(ToolBinding.parse(v["create_kwargs"], where="k") == ToolBinding.parse(_binding(market), where="b")
               for v in kwargs.values())
    assert json.loads(first["reward_model"]["ground_truth"]) == {"evidence": [], "fwd_return": 0.021,
                                                                 "fwd_vol": 0.035, "label": "BUY"}
    # the parquet row (as verl reads it back) binds and scores
    agent = AgentData()
    verl_tools.execute_call("get_prices", {"days": 3}, kwargs["get_prices"]["create_kwargs"], agent)
    score = verl_tools.compute_score(first["data_source"], "junk", first["reward_model"]["ground_truth"],
                                     {**first["extra_info"], **agent.extra_fields})
    assert score["tools/calls"] == 1.0
    with pytest.raises(ValueError, match="asof"):
        verl_tools.tool_row({"ticker": "SYN000"}, split="train", index=7, store=market.path)


# --- verl itself (optional extra) ----------------------------------------------------------------------------
class CharTokenizer:
    """Ids are code points: decode(encode(s)) == s, enough for verl's hermes parser and reward manager."""

    def encode(self, text: str, **_) -> list[int]:
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids if int(i) > 0)


def _verl_loop(tools, max_parallel_calls: int):
    """verl's own ToolAgentLoop tool-processing state on a stand-in loop (verl's tests do the same:
    tests/experimental/agent_loop/test_call_tool_on_cpu.py); only the token merge is stubbed."""
    from unittest.mock import AsyncMock, MagicMock

    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    loop = MagicMock(spec=ToolAgentLoop)
    loop.tools = {t.name: t for t in tools}
    loop.tool_schemas = [t.tool_schema.model_dump() for t in tools]
    loop.max_tool_response_length, loop.tool_response_truncate_side = 4000, "middle"
    loop.max_parallel_calls, loop.response_length, loop.processor = max_parallel_calls, 10**6, None
    loop.ct_merge_context_msg = AsyncMock(return_value=(SimpleNamespace(token_ids=[1]), [0], None))
    loop._call_tool = ToolAgentLoop._call_tool.__get__(loop, ToolAgentLoop)
    loop._handle_processing_tools_state = ToolAgentLoop._handle_processing_tools_state.__get__(loop, ToolAgentLoop)
    return loop


def test_verl_tool_agent_loop_and_reward_loop_score_the_trajectory_ledger(market, tmp_path):
    pytest.importorskip("verl", reason="verl is an optional extra: pip install 'thesisgym[verl]'")
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.experimental.agent_loop.tool_agent_loop import AgentData as VerlAgentData
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tools = initialize_tools_from_config(str(verl_tools.write_tool_config(tmp_path / "tools.yaml")))
    assert [type(t).__name__ for t in tools] == ["MarketTool"] * 6 and [t.name for t in tools] == list(TOOL_NAMES)
    exported = verl_tools.export_tool_rows([_row(market)], tmp_path / "train.parquet", split="train", store=market.path)
    row = RLHFDataset(data_files=[str(exported.path)], tokenizer=None, config=OmegaConf.create(
        {"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache")}))[0]  # as verl reads the row
    assert row["agent_name"] == "tool_agent" and row["raw_prompt"][1]["content"].startswith("Ticker: SYN000")
    tok = CharTokenizer()
    parser, loop = ToolParser.get_tool_parser("hermes", tok), _verl_loop(tools, max_parallel_calls=2)
    agent = VerlAgentData(messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None,
                          metrics={}, request_id="r0", tools_kwargs=row["tools_kwargs"])
    turns = ['<tool_call>{"name": "get_prices", "arguments": {"days": 3}}</tool_call>'
             '<tool_call>{"name": "search_news", "arguments": {"query": "", "asof": "2030-01-01"}}</tool_call>'
             '<tool_call>{"name": "get_macro", "arguments": {}}</tool_call>',  # third: past max_parallel_calls
             '<tool_call>{"name": "get_insider", "arguments": {"days": 400}}</tool_call>'
             '<tool_call>{"name": "get_analyst", "arguments": {}}</tool_call>']

    async def rollout() -> str:
        transcript = ""
        for turn in turns:
            _, agent.tool_calls = await parser.extract_tool_calls(tok.encode(turn), [t.tool_schema for t in tools])
            before = len(agent.messages)
            await loop._handle_processing_tools_state(agent)
            answers = "".join(f"\nuser\n<tool_response>\n{m['content']}\n</tool_response>"
                              for m in agent.messages[before:])
            transcript += turn + answers + "\nassistant\n"
        return transcript

    transcript = asyncio.run(rollout())
    said = [m["content"] for m in agent.messages]
    assert said[0].startswith("[T1] " + market.day) and "unexpected keyword argument 'asof'" in said[1]
    assert "`days` must be a whole number" in said[2] and said[3].startswith("[A1]") and len(said) == 4
    assert [c["name"] for c in agent.extra_fields[verl_tools.CALLS_KEY]] == [
        "get_prices", "search_news", "get_insider", "get_analyst"]  # get_macro never ran
    ledger = verl_tools._EPISODES[agent][1]
    thesis = _thesis(ledger.evidence())

    # verl's agent reward loop: the loop's extra_fields reach compute_score as extra_info
    ids = tok.encode(transcript + thesis)
    data = DataProto.from_dict(
        tensors={"prompts": torch.ones(1, 4, dtype=torch.long), "responses": torch.tensor([ids]),
                 "attention_mask": torch.ones(1, 4 + len(ids), dtype=torch.long)},
        non_tensors={"data_source": np.array([row["data_source"]], dtype=object),
                     "reward_model": np.array([row["reward_model"]], dtype=object),
                     "extra_info": np.array([dict(row["extra_info"])], dtype=object),
                     "tool_extra_fields": np.array([{**agent.extra_fields, "turn_scores": [], "tool_rewards": []}],
                                                   dtype=object)})
    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://thesisgym.integrations.verl_tools", "name": "compute_score", "reward_kwargs": {}}}})
    manager = NaiveRewardManager(OmegaConf.create({}), tok, compute_score=get_custom_reward_fn(config))
    result = manager.loop.run_until_complete(manager.run_single(data))
    record = core.validate_record({**json.loads(row["reward_model"]["ground_truth"]),
                                   "evidence": [dict(i) for i in ledger.evidence()], "sections": ledger.sections()})
    assert result["reward_score"] == pytest.approx(core.score_batch([thesis], [record])[0]["score"])
    info = result["reward_extra_info"]
    assert info["hallucination_rate"] == 0.0 and (info["tools/calls"], info["tools/failed"]) == (4.0, 2.0)


# --- verifiers itself (optional extra) -----------------------------------------------------------------------
def _vf():
    return pytest.importorskip("verifiers.v1", reason="verifiers is an optional extra: pip install 'thesisgym[verifiers]'")


def _task(market, store=None):
    from thesisgym.integrations import verifiers_tools as vt

    binding, record = tool_replay.episode_of_row(_row(market), store or market.path)
    return vt.ThesisToolTask(vt.ThesisToolData(id="train/0", prompt="go", record=record, tools=binding))


def _trace(vf, task, reply: str, calls=None, messages=()):
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.types import AssistantMessage, UserMessage

    from thesisgym.integrations.verifiers_tools import MarketToolState

    msgs = [UserMessage(content="go"), *messages, AssistantMessage(content=reply)]
    nodes = [MessageNode(parent=i - 1 if i else None, message=m, sampled=isinstance(m, AssistantMessage))
             for i, m in enumerate(msgs)]
    return vf.Trace(agent=vf.AgentInfo(config=vf.AgentConfig()), task=vf.TraceTask(type="ThesisToolTask", data=task.data),
                    nodes=nodes, state=MarketToolState(calls=list(calls or [])))


async def _state_channel(initial: str, task=None):
    """A stand-in for verifiers' rollout channel on loopback: GET/PUT the state JSON, GET the task
    (verifiers/v1/interception/server.py: handle_state_put, handle_task_get)."""
    from aiohttp import web

    held = {"state": initial}

    async def get(_request):
        return web.Response(text=held["state"], content_type="application/json")

    async def put(request):
        held["state"] = await request.text()
        return web.Response(text="ok")

    async def get_task(_request):
        return web.json_response({"cls": f"{type(task).__module__}:{type(task).__qualname__}",
                                  "task": task.model_dump_json()})

    app = web.Application()
    app.router.add_get("/state", get)
    app.router.add_put("/state", put)
    app.router.add_get("/task", get_task)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, held, f"http://127.0.0.1:{port}/state"


def test_verifiers_toolset_schema_hides_the_binding_and_scores_the_synced_ledger(market, monkeypatch):
    vf = _vf()
    from mcp.client import Client
    from mcp.server.mcpserver import MCPServer

    from thesisgym.integrations import verifiers_tools as vt

    task = _task(market)
    assert [type(t) for t in task.toolsets(task.config)] == [vt.MarketToolset]
    toolset = vt.MarketToolset(vf.ToolsetConfig())
    server = MCPServer("market")
    toolset.register(server)
    wire_task = vt.ThesisToolData.model_validate_json(task.data.model_dump_json())  # as verifiers hands it over

    async def episode():
        runner, held, url = await _state_channel(vt.MarketToolState().model_dump_json())
        monkeypatch.setenv("VF_STATE_URL", url)
        monkeypatch.setenv("VF_STATE_SECRET", "s3cret")
        try:
            await toolset.setup_task(wire_task)
            async with Client(server) as client:
                listed = {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}
                results = [await client.call_tool(c["name"], c["arguments"]) for c in (
                    {"name": "get_prices", "arguments": {"days": 3, "asof": "2030-01-01", "ticker": "SYN001"}},
                    {"name": "get_prices", "arguments": {"days": 30}},
                    {"name": "search_news", "arguments": {"query": ""}},
                    {"name": "get_insider", "arguments": {}},
                    {"name": "get_tomorrow", "arguments": {}})]
        finally:
            await runner.cleanup()
        return listed, results, vt.MarketToolState.model_validate_json(held["state"])

    listed, results, state = asyncio.run(episode())
    assert sorted(listed) == sorted(TOOL_NAMES)
    assert all(set(props) <= {"days", "query"} for props in listed.values())
    assert results[0].content[0].text.startswith("[T1] " + market.day)  # extra keys cannot move the cutoff
    assert [r.is_error for r in results] == [False, False, False, False, True]  # unknown names: MCP's own error
    assert results[1].content[0].text.startswith("error: get_prices: `days` must be a whole number")
    assert [c["name"] for c in state.calls] == ["get_prices", "get_prices", "search_news", "get_insider"]
    live = toolset.episode
    assert tool_replay.replay_calls(task.data.tools, state.calls)[0].evidence() == live.evidence()

    thesis = _thesis(live.evidence())
    trace = _trace(vf, task, thesis, calls=state.calls)
    asyncio.run(task.score(trace))
    record = core.validate_record({**task.data.record.model_dump(), "evidence": [dict(i) for i in live.evidence()],
                                   "sections": live.sections()})
    assert trace.reward == pytest.approx(core.score_batch([thesis], [record])[0]["score"])
    assert trace.metrics["hallucination_rate"] == 0.0 and trace.metrics["tools/failed"] == 1.0
    bare = _trace(vf, task, thesis)  # nothing logged, nothing in the transcript: no evidence
    asyncio.run(task.score(bare))
    assert bare.metrics["hallucination_rate"] == 1.0 and bare.reward < trace.reward


def test_verifiers_trace_from_disk_replays_its_messages(market):
    vf = _vf()
    from verifiers.v1.types import AssistantMessage, ToolCall, ToolMessage

    task = _task(market)
    calls = [{"name": "get_prices", "arguments": {"days": 2, "asof": "2030-01-01"}},
             {"name": "get_analyst", "arguments": {"days": 200}}]
    served = [{"name": "get_prices", "arguments": {"days": 2}}, calls[1]]
    live, _ = tool_replay.replay_calls(task.data.tools, served)
    messages = []
    for i, c in enumerate(calls):
        messages += [AssistantMessage(tool_calls=[ToolCall(id=f"c{i}", name=c["name"],
                                                           arguments=json.dumps(c["arguments"]))]),
                     ToolMessage(tool_call_id=f"c{i}", content="...")]
    thesis = _thesis(live.evidence())
    trace = _trace(vf, task, thesis, messages=messages)  # state empty: read from disk
    assert task.calls(trace) == served  # the key the MCP server drops is dropped on replay too
    asyncio.run(task.score(trace))
    assert trace.metrics["hallucination_rate"] == 0.0 and trace.metrics["tools/items"] == len(live.evidence())


def test_verifiers_toolset_outputs_ignore_the_future(market):
    vf = _vf()
    from thesisgym.integrations import verifiers_tools as vt

    outputs = []
    for store in (market.path, market.future):
        toolset = vt.MarketToolset(vf.ToolsetConfig())
        asyncio.run(toolset.setup_task(_task(market, store).data))
        outputs.append([getattr(toolset, c["name"])(**c["arguments"]) for c in CALLS])
    assert outputs[0] == outputs[1]


def test_verifiers_taskset_loads_tool_tasks_from_a_build(market, tmp_path):
    _vf()
    import datasets

    from thesisgym.dataset.splits import META_FILE
    from thesisgym.integrations import verifiers_tools as vt

    rows = [_row(market), _row(market, label=None, fwd_return=math.nan), _row(market, asof=market.later, label="SELL")]
    path = tmp_path / "ctx"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
    with pytest.raises(ValueError, match="records no store path"):
        list(vt.ThesisToolTaskset(vt.ThesisToolTasksetConfig(dataset=str(path))))
    (path / META_FILE).write_text(json.dumps({"store": {"name": "synth", "path": market.path}}))
    tasks = list(vt.ThesisToolTaskset(vt.ThesisToolTasksetConfig(dataset=str(path))))
    assert [t.data.id for t in tasks] == ["train/0", "train/2"]
    assert tasks[1].data.tools == ToolBinding.parse(_binding(market, asof=market.later), where="b")
    assert tasks[1].data.record.label == "SELL" and tasks[1].data.record.evidence == []
    assert tasks[0].data.prompt.startswith("Ticker: SYN000") and "tools" in tasks[0].data.system_prompt
    assert isinstance(tasks[0].data.tools.open(), MarketTools)


@pytest.mark.slow
def test_verifiers_launches_the_tool_server_per_rollout(market, tmp_path):
    """The server as verifiers starts it (`python -m <module>`, VF_CONFIG, VF_STATE_URL, MCP_PORT_FILE:
    verifiers/v1/mcp/launch.py::serve_in_runtime): it fetches the rollout's task, binds it, logs calls."""
    import os
    import subprocess
    import sys

    vf = _vf()
    from mcp.client import Client

    from thesisgym.integrations import verifiers_tools as vt

    task = _task(market)

    async def rollout():
        runner, held, url = await _state_channel(vt.MarketToolState().model_dump_json(), task.data)
        port_file = tmp_path / "port"
        env = {**os.environ, "VF_CONFIG": vf.ToolsetConfig().model_dump_json(), "VF_STATE_URL": url,
               "VF_STATE_SECRET": "s3cret", "MCP_PORT_FILE": str(port_file)}
        proc = subprocess.Popen([sys.executable, "-m", "thesisgym.integrations.verifiers_tools"], env=env)
        try:
            for _ in range(600):
                if port_file.exists() and port_file.read_text():
                    break
                await asyncio.sleep(0.1)
            for _ in range(100):
                try:
                    async with Client(f"http://127.0.0.1:{int(port_file.read_text())}/mcp") as client:
                        return [(await client.call_tool(n, a)).content[0].text for n, a in (
                            ("get_prices", {"days": 2, "asof": "2031-01-01"}), ("get_insider", {"days": 999}))], held
                except Exception:  # noqa: BLE001 - the server is still starting
                    await asyncio.sleep(0.2)
            raise AssertionError("the tool server did not come up")
        finally:
            proc.terminate()
            proc.wait()
            await runner.cleanup()

    texts, held = asyncio.run(rollout())
    assert texts[0].startswith("[T1] " + market.day) and texts[1].startswith("error: get_insider")
    calls = vt.MarketToolState.model_validate_json(held["state"]).calls
    assert calls == [{"name": "get_prices", "arguments": {"days": 2}},
                     {"name": "get_insider", "arguments": {"days": 999}}]
