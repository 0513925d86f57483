"""OpenAITeacher (forward and reverse distillation) against a real HTTP server (see test_llm.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any pytest import mode
from test_llm import fake_openai, make_client  # noqa: E402,F401  (the fake server fixture is shared)
from thesisgym.schema import SYSTEM_PROMPT  # noqa: E402
from thesisgym.teachers.base import Teacher  # noqa: E402
from thesisgym.teachers.openai import OpenAITeacher, ReverseAnswer, assemble_thesis  # noqa: E402
from thesisgym.thesis import parse_thesis  # noqa: E402


@pytest.fixture
def server(fake_openai):  # noqa: F811
    fake_openai.reset()
    return fake_openai


def row(label: str = "BUY") -> dict:
    evidence = [
        {"id": "T1", "section": "technical", "date": "2024-03-01", "source": "prices",
         "text": "close 101.2 above SMA(20) 98.4, return 5d +3.1%", "numbers": [101.2, 20.0, 98.4, 5.0, 3.1]},
        {"id": "N1", "section": "news", "date": "2024-02-28", "source": "wire",
         "text": "ACME raises full-year guidance after record orders", "numbers": []},
        {"id": "N2", "section": "news", "date": "2024-02-27", "source": "wire",
         "text": "ACME opens a plant in Ohio", "numbers": []},
    ]
    return {
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Ticker: ACME ..."}],
        "prompt_text": "...", "evidence": evidence, "sections": ["technical", "news"], "ticker": "ACME",
        "asof": "2024-03-01", "label": label,
    }


THESIS = ('<technical>\n- Trend is up "close 101.2 above SMA(20) 98.4" [T1]\n</technical>\n'
          "<conclusion>Bullish.</conclusion>\n<decision>BUY</decision>")


def teacher(server, tmp_path, **kw) -> OpenAITeacher:
    return OpenAITeacher(client=make_client(server, tmp_path, **kw.pop("client_kw", {})), **kw)


def test_is_a_teacher_and_validates_arguments(tmp_path):
    t = OpenAITeacher("http://127.0.0.1:9/v1", "m", cache_path=None)
    assert isinstance(t, Teacher)
    with pytest.raises(ValueError, match="mode"):
        OpenAITeacher("http://x", "m", mode="sideways")
    with pytest.raises(ValueError, match="model"):
        OpenAITeacher("http://x")
    with pytest.raises(ValueError, match="evidence"):
        t.write({"sections": []})


def test_forward_sends_the_prompt_and_returns_n_distinct_seeded_samples(server, tmp_path):
    server.default = ("ok", THESIS)
    t = teacher(server, tmp_path, mode="forward", temperature=0.9)
    out = t.write(row(), n=3, seed=5)
    assert out == [THESIS] * 3 and server.hits == 3
    assert sorted(r["seed"] for r in server.requests) == [5, 6, 7]
    assert server.requests[0]["messages"][0]["content"] == SYSTEM_PROMPT
    assert server.requests[0]["temperature"] == 0.9
    assert t.write(row(), n=3, seed=5) == out and server.hits == 3  # cached: a rerun pays nothing


def test_forward_failed_sample_is_an_empty_string_not_an_exception(server, tmp_path):
    server.script.extend([("ok", THESIS), ("status", 400)])
    t = teacher(server, tmp_path, mode="forward", client_kw={"cache_path": None, "concurrency": 1})
    out = t.write(row(), n=2, seed=0)
    assert sorted(out) == ["", THESIS] and t.errors == 1


REVERSE_JSON = {
    "technical": [{"opinion": "The close sits above its 20-day average, a constructive trend for holders",
                   "quote": "close 101.2 above SMA(20) 98.4", "source_id": "T1"}],
    "news": [{"opinion": "Management raising guidance on record orders signals strong demand ahead",
              "quote": "raises full-year guidance after record orders", "source_id": "[N1]"}],
    "macro": [{"opinion": "not a section of this prompt", "quote": "x", "source_id": "M1"}],
    "conclusion": "Technicals and news both point up.",
}


def test_reverse_assembles_the_canonical_format_with_the_label(server, tmp_path):
    server.default = ("ok", "```json\n" + json.dumps(REVERSE_JSON) + "\n```")
    t = teacher(server, tmp_path, mode="reverse")
    [text] = t.write(row("STRONG_BUY"), n=1)
    thesis = parse_thesis(text)
    assert thesis.valid and thesis.decision == "STRONG_BUY"
    assert thesis.section_names == ("technical", "news")  # macro is not a prompt section
    assert thesis.bullets[1].citations == ("N1",) and thesis.bullets[0].quotes == ("close 101.2 above SMA(20) 98.4",)
    user = server.requests[0]["messages"][-1]["content"]
    assert "Decision to explain: STRONG_BUY" in user and "[N2]" in user


def test_reverse_accepts_nested_sections_and_retries_malformed_json(server, tmp_path):
    nested = {"sections": {k: v for k, v in REVERSE_JSON.items() if k != "conclusion"}, "Conclusion": "Up."}
    server.script.extend([("ok", "I think the answer is {oops"), ("ok", json.dumps(nested))])
    t = teacher(server, tmp_path, mode="reverse")
    [text] = t.write(row(), n=1)
    assert parse_thesis(text).decision == "BUY" and "<conclusion>Up.</conclusion>" in text
    assert server.hits == 2


def test_reverse_gives_up_with_empty_strings(server, tmp_path):
    server.default = ("ok", '{"conclusion": ""}')  # fails validation every time
    t = teacher(server, tmp_path, mode="reverse")
    assert t.write(row(), n=2) == ["", ""]
    assert t.errors == 2 and t.client.usage.json_fallbacks == 2
    with pytest.raises(ValueError, match="label"):
        t.write(row(label=None), n=1)


def test_assemble_thesis_rejects_bad_label():
    with pytest.raises(ValueError, match="label"):
        assemble_thesis(ReverseAnswer.model_validate(REVERSE_JSON), sections=["news"], label="MOON")


def test_distill_cli_builds_the_openai_teacher():
    import thesisgym.cli.distill as cli

    t = cli.build_teacher("openai", mode="reverse", seed=3, noise=0.0, wrong_decision_rate=0.0,
                          drop_section_rate=0.0, base_url="http://127.0.0.1:9/v1", model="m")
    assert isinstance(t, OpenAITeacher) and t.mode == "reverse" and t.seed == 3


def test_many_sync_calls_do_not_leak_sockets(server, tmp_path):
    """distill calls write() once per row from worker threads: connections must be closed each time."""
    server.default = ("ok", THESIS)
    t = teacher(server, tmp_path, mode="forward", client_kw={"cache_path": None})
    t.write(row(), n=1, seed=0)
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    if fds is None:
        pytest.skip("no /proc on this platform")
    for i in range(15):  # without closing, each call left 2 sockets open
        assert t.write(row(), n=2, seed=i) == [THESIS, THESIS]
    assert len(os.listdir("/proc/self/fd")) <= fds + 3


def test_reverse_teacher_feeds_distill(server, tmp_path):
    """`distill` accepts the reverse teacher's assembled theses (grounded by construction)."""
    import thesisgym.teachers.distill as distill_mod
    server.default = ("ok", json.dumps(REVERSE_JSON))
    res = distill_mod.distill([row("BUY")], teacher(server, tmp_path, mode="reverse"), n=2, min_grounding=0.0)
    assert res.stats["accepted_samples"] == 1 and res.stats["rejects"]["teacher_error"] == 0
    assert res.stats["rejects"]["duplicate"] == 1  # the scripted server answers both samples alike
