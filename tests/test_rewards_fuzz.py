"""Property tests: arbitrary text and mutated theses never raise and stay inside each reward's range."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_rewards_fixtures import gold_thesis, make_row
from thesisgym.rewards import (
    decision_reward,
    evidence_reward,
    loop_penalty,
    make_combined_reward,
    market_reward,
    score_completion,
    structure_reward,
)
from thesisgym.rewards.base import reset_reward_errors, reward_errors, strict_rewards
from thesisgym.thesis import extract_numbers, parse_thesis

ROW = make_row()
COLS = {k: [v] for k, v in ROW.items() if k != "prompt"}
RANGES = [
    (structure_reward, 0.0, 1.0),
    (evidence_reward, 0.0, 1.0),
    (decision_reward, -1.5, 1.0),
    (market_reward, -3.0, 3.0),
    (loop_penalty, -1.0, 0.0),
    (make_combined_reward("fsr", formula="paper"), -3.0, 5.0),
    (make_combined_reward("dsr", formula="paper"), -6.0, 4.5),
    (make_combined_reward("fsr"), -5.5, 5.0),  # guarded: E - 1, 0.5 (q - 1) and the loop reach 2.5 lower
    (make_combined_reward("dsr"), -8.5, 4.5),
    (make_combined_reward("market_only"), -3.0, 3.0),
    (make_combined_reward(), *make_combined_reward().range),
]
GOLD = gold_thesis()
TOKENS = [
    "<technical>",
    "</technical>",
    "<decision>",
    "</decision>",
    "<think>",
    "</think>",
    "<news>",
    "</news>",
    "- ",
    "\n",
    '"',
    "\u201c",
    "[T1]",
    "[N4, A9]",
    "STRONG_BUY",
    "12.5%",
    "-3",
    "$1,234",
    "...",
    "<conclusion>",
]
# local settings (not a global profile: other test files keep their own hypothesis settings)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(completion) -> None:
    # strict: a checker that raises fails the test instead of hiding behind the reward's floor
    with strict_rewards():
        for fn, lo, hi in RANGES:
            (value,) = fn(prompts=[ROW["prompt"]], completions=[completion], **COLS)
            assert value is not None and math.isfinite(value) and lo - 1e-9 <= value <= hi + 1e-9, (
                fn.__name__,
                value,
            )
        scores = score_completion(completion, ROW)
    assert all(isinstance(v, float) for v in scores.values()) and scores["reward_errors"] == 0.0


def test_a_raising_checker_fails_the_fuzz_check_and_is_counted(monkeypatch):
    import pytest

    from thesisgym.rewards import base, evidence

    def broken(*args, **kwargs):
        raise RuntimeError("checker bug")

    monkeypatch.setattr(evidence, "check_bullet", broken)
    with pytest.raises(RuntimeError, match="checker bug"):
        check(GOLD)
    reset_reward_errors()
    logged: list[str] = []
    monkeypatch.setattr(base.logger, "error", lambda msg, *args, **kw: logged.append(msg % args))
    metrics: dict[str, float] = {}
    out = evidence_reward(
        prompts=[None] * 3, completions=[GOLD] * 3, log_metric=metrics.__setitem__, **{k: v * 3 for k, v in COLS.items()}
    )
    scores = score_completion(GOLD, ROW)
    assert out == [0.0] * 3  # the documented floor ...
    assert reward_errors("evidence_reward") == 3 and metrics["evidence_reward/reward_errors"] == 3.0  # ... counted
    assert scores["reward_errors"] == 1.0 and reward_errors("score_completion") == 1
    # one traceback per distinct error (same exception type and raising line), not one per completion
    assert logged == ["reward evidence_reward raised RuntimeError (logged once per distinct error)"]
    reset_reward_errors()


@FUZZ
@given(st.text(max_size=3000))
def test_arbitrary_text(text):
    check(text)
    parse_thesis(text)
    assert all(math.isfinite(v) for v in extract_numbers(text))


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=30)), max_size=80))
def test_tag_soup(parts):
    check("".join(parts))


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(GOLD)), st.integers(0, 60), st.sampled_from(TOKENS + ["", "x", "9"])),
        max_size=8,
    )
)
def test_mutated_gold_thesis(edits):
    text = GOLD
    for pos, cut, insert in edits:
        pos = min(pos, len(text))
        text = text[:pos] + insert + text[pos + cut :]
    check(text)
    check([{"role": "assistant", "content": text}])


@FUZZ
@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.floats(),
        st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=5)), max_size=3),
    )
)
def test_non_text_completions(junk):
    check(junk)


@FUZZ
@given(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(allow_nan=True, allow_infinity=True),
    st.one_of(st.none(), st.sampled_from(["BUY", "hold", "junk"]), st.integers(-2, 6)),
)
def test_arbitrary_columns(ret, vol, label):
    cols = {**COLS, "fwd_return": [ret], "fwd_vol": [vol], "label": [label]}
    for fn, lo, hi in RANGES:
        (value,) = fn(prompts=[None], completions=[GOLD], **cols)
        assert value is None or (math.isfinite(value) and lo - 1e-9 <= value <= hi + 1e-9)


# --- the fast path of check_bullet equals the full path ------------------------------------------------
def _both_paths(bullet_text: str, row: dict, section: str | None) -> None:
    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import check_bullet
    from thesisgym.thesis import parse_bullet

    index = evidence_index(row["evidence"])
    bullet = parse_bullet(bullet_text)
    with strict_rewards():
        fast = check_bullet(bullet, index, section)
        full = check_bullet(bullet, index, section, fast=False)
    assert fast == full, (bullet_text, fast, full)


_WORDS = ["the", "stock", "looks", "strong", "and", "I", "weigh", "it", "as", "a", "real", "signal", "for", "holders"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    item=st.sampled_from(sorted(ROW_ITEMS := {it["id"]: it for it in ROW["evidence"]})),
    start=st.integers(0, 12),
    length=st.integers(1, 12),
    opinion=st.lists(st.sampled_from(_WORDS + ["3%", "2.3%", "up", "down", "$1.2", "million", "not"]), max_size=25),
    cite=st.one_of(st.none(), st.sampled_from(["T1", "F1", "N2", "I3", "A1", "M4", "T9"])),
    case=st.sampled_from(["same", "upper", "edge_punct"]),
    section=st.one_of(st.none(), st.sampled_from(["technical", "fundamentals", "news", "insider", "analyst", "macro"])),
)
def test_fast_path_equals_full_path_on_generated_bullets(item, start, length, opinion, cite, case, section):
    words = ROW_ITEMS[item]["text"].split()
    quote = " ".join(words[start : start + length]) or words[0]
    quote = {"same": quote, "upper": quote.upper(), "edge_punct": f"...{quote}."}[case]
    _both_paths(f'{" ".join(opinion)} "{quote}" [{cite or item}]', ROW, section)


def test_fast_path_equals_full_path_on_real_bullets():
    """Every bullet of template theses on pipeline-built synthetic rows and, when ../shared/data is
    there, on real AAPL/MSFT rows, plus the hand-written gold thesis, scores the same on both paths."""
    from pathlib import Path

    from thesisgym.data import SynthConfig, generate_market
    from thesisgym.dataset import build_contexts
    from thesisgym.teachers import TemplateTeacher

    rows = [dict(r) for r in build_contexts(generate_market(SynthConfig(n_tickers=2, n_days=90, seed=7)),
                                            show_progress=False)][:25]
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    if (shared / "prices" / "AAPL.csv").exists():
        from thesisgym.data.importers import import_store

        store = import_store(prices=[shared / "prices" / "AAPL.csv"],
                             events=[shared / "news" / "ticker_news_headlines_2019_2021.csv"], unknown_tickers="drop")
        rows += [dict(r) for r in build_contexts(store, show_progress=False)][-40:]
    n = 0
    for k, row in enumerate(rows):
        for teacher in (TemplateTeacher(seed=k), TemplateTeacher(seed=k, noise=0.5, bullets=(2, 6))):
            for sec in parse_thesis(teacher.write(row)[0]).sections:
                for b in sec.bullets:
                    _both_paths(b.text, row, sec.name)
                    n += 1
    for sec in parse_thesis(GOLD).sections:
        for b in sec.bullets:
            _both_paths(b.text, ROW, sec.name)
            n += 1
    assert n > 300


# --- fast paths of the readers: the same answer as the plain regex they replace ----------------------------
_TIME_TEXT = st.lists(
    st.sampled_from(["today", "today's", "TONIGHT", "this morning", "breaking", "yesterday", "hours ago", "MOMENTS ago", "in the last",
                     "few", "hours", "minutes", "just", "just-released", "reported", "hot off", "newly minted",
                     "fresh", "freshly", "brand-new", "brand new", "newest", "latest", "most recent", "this week's",
                     "renew", "recent", "news", "new", "past", "ago", "stock", "(latest)", "fresh.", "to\u200bday",
                     "\u0442oday", "\u0131n the last hours", "mo\u017ft recent", "_today", "today1"]),
    max_size=6,
).map(" ".join)


def _time_claims_by_regex(opinion: str) -> int | None:
    """time_claims as the claim patterns alone read it (every pattern on every text)."""
    from thesisgym.rewards.reading import _TIME_CLAIMS, fold

    text = fold(opinion).replace("-", " ")
    ages = [days for pattern, days, _ in _TIME_CLAIMS if pattern.search(text)]
    return min(ages) if ages else None


@given(st.one_of(_TIME_TEXT, st.text(max_size=40)))
@settings(max_examples=800, deadline=None)
def test_time_claims_word_prefilter_equals_the_patterns(text):
    from thesisgym.rewards.reading import time_claims

    assert time_claims(text) == _time_claims_by_regex(text)


@given(st.text(max_size=30))
@settings(max_examples=800, deadline=None)
def test_fact_words_equal_the_regex(text):
    import re

    from thesisgym.rewards.lexicon import fact_words

    assert fact_words(text) == re.findall(r"[a-z]+", text.lower())
