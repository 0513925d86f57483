"""Parser tests: the canonical format, its tolerated spellings, and what strictly does not count."""

from __future__ import annotations

import time

import pytest

from thesisgym.thesis import (
    MAX_PARSE_CHARS,
    completion_text,
    extract_numbers,
    normalize_label,
    parse_thesis,
    scan_numbers,
    scan_quantities,
)

BULLET = 'Momentum looks strong with buyers in control of the tape on heavy volume "up 2.3% on the day" [T1]'


def thesis(body: str, decision: str = "<decision>BUY</decision>") -> str:
    return f"<technical>\n- {BULLET}\n</technical>\n<conclusion>ok</conclusion>\n{decision}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.4%", [12.4]),
        ("$1,234.5", [1234.5]),
        ("-3.2", [-3.2]),
        ("1.2B", [1.2]),
        ("1.2 billion", [1.2]),
        ("fell \u22123.2% to $4.5bn", [-3.2, 4.5]),
        ("RSI(14) 68.2, +5 bps", [14.0, 68.2, 5.0]),
        ("Q3 results, SMA50 and EPS", []),
        ("up 12%, then 7.", [12.0, 7.0]),
        ("", []),
    ],
)
def test_extract_numbers_convention(text, expected):
    assert extract_numbers(text) == expected


def test_scan_numbers_reports_shown_decimals():
    assert scan_numbers("12% and 12.40 and 3") == [(12.0, 0), (12.4, 2), (3.0, 0)]


def test_extract_numbers_on_real_headlines_is_finite():
    import csv
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[2]
        / "shared"
        / "data"
        / "news"
        / "market_news_headlines_2019_2021.csv"
    )
    if not path.exists():
        pytest.skip("shared/data not present")
    with path.open(encoding="utf-8", errors="replace") as fh:
        rows = [" ".join(r) for r in csv.reader(fh)][:5000]
    values = [v for r in rows for v in extract_numbers(r)]
    assert values and all(v == v and abs(v) != float("inf") for v in values)


def test_parses_canonical_format():
    t = parse_thesis(thesis(""))
    assert t.valid and t.decision == "BUY" and t.decisions == ("BUY",)
    assert t.section_names == ("technical",) and t.conclusion == "ok"
    (b,) = t.bullets
    assert b.quotes == ("up 2.3% on the day",) and b.citations == ("T1",)
    assert "2.3" not in b.opinion and "[T1]" not in b.opinion
    assert b.numbers == () and b.word_count == 13


@pytest.mark.parametrize(
    "raw", ["Strong Buy", "strong_buy", " STRONG-BUY ", "**Strong buy**", "strong  buy."]
)
def test_label_casing_is_tolerated(raw):
    assert normalize_label(raw) == "STRONG_BUY"
    assert parse_thesis(thesis("", f"<Decision> {raw} </ DECISION>")).decision == "STRONG_BUY"


def test_tags_tolerate_whitespace_and_casing_and_curly_quotes():
    text = "< Technical >\n* Buyers keep pushing the shares higher on heavy volume, a constructive sign \u201cup 2.3% on the day\u201d [t1]\n</technical >\n<DECISION>hold</DECISION>"
    t = parse_thesis(text)
    assert t.decision == "HOLD" and t.section_names == ("technical",)
    assert t.bullets[0].quotes == ("up 2.3% on the day",) and t.bullets[0].citations == ("T1",)


@pytest.mark.parametrize(
    ("cite", "ids"),
    [
        ("[T2]", ("T2",)),
        ("[T2][N1]", ("T2", "N1")),
        ("[T2, N1]", ("T2", "N1")),
        ("[t2; n1] [T2]", ("T2", "N1")),
    ],
)
def test_citation_forms(cite, ids):
    t = parse_thesis(thesis("").replace("[T1]", cite))
    assert t.bullets[0].citations == ids


def test_numbers_outside_quotes_and_citations_only():
    t = parse_thesis(
        '<news>\n- Orders rose 15% says a supplier "rise of 7% in orders" [N3]\n</news><decision>BUY</decision>'
    )
    assert t.bullets[0].numbers == ((15.0, 0),)


def test_two_decisions_are_an_error_and_recorded():
    t = parse_thesis(thesis("", "<decision>BUY</decision>\n<decision>SELL</decision>"))
    assert t.decision is None and t.decisions == ("BUY", "SELL") and not t.valid


def test_unknown_label_is_invalid():
    t = parse_thesis(thesis("", "<decision>MODERATE_BUY</decision>"))
    assert t.decision is None and t.decisions == ("MODERATE_BUY",)
    assert any("invalid decision" in e for e in t.errors)


def test_decision_must_be_last_tag():
    text = "<decision>BUY</decision>\n<technical>\n- " + BULLET + "\n</technical>"
    t = parse_thesis(text)
    assert t.decision is None and any("not the last" in e for e in t.errors)


def test_decision_inside_think_does_not_count():
    t = parse_thesis(
        "<think>maybe <decision>STRONG_BUY</decision></think>\n<technical>\n- " + BULLET + "\n</technical>"
    )
    assert t.decision is None and t.decisions == () and t.decision_in_think == ("STRONG_BUY",)
    t2 = parse_thesis("<think>first <decision>SELL</decision></think>" + thesis(""))
    assert t2.decision == "BUY" and t2.decisions == ("BUY",)


def test_r1_style_leading_think_close_and_unclosed_think():
    t = parse_thesis("planning... <decision>SELL</decision></think>" + thesis(""))
    assert t.decision == "BUY" and t.think.startswith("planning")
    t2 = parse_thesis(thesis("").replace("<conclusion>", "<think>unfinished <conclusion>"))
    assert t2.decision is None and any("unclosed <think>" in w for w in t2.warnings)


def test_unknown_section_tags_are_reported():
    t = parse_thesis("<sentiment>\n- x\n</sentiment>" + thesis(""))
    assert t.unknown_tags == ("sentiment",) and any("unknown tags" in w for w in t.warnings)
    assert t.section_names == ("technical",) and t.decision == "BUY"


def test_unclosed_section_is_an_error_but_parsed():
    t = parse_thesis("<technical>\n- " + BULLET + "\n<decision>BUY</decision>")
    assert any("unclosed <technical>" in e for e in t.errors)
    # tolerated: the decision is still the one last tag, so it counts (the error is reported)
    assert t.decision == "BUY" and not t.valid


def test_completion_text_forms():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "assistant", "content": "abc"}]) == "abc"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "abc"}]}]) == "abc"
    assert completion_text([{"role": "user", "content": "no"}]) == ""
    for junk in (None, 3, b"abc", [None], {"x": 1}, object()):
        assert completion_text(junk) == ""


def test_parse_never_raises_on_junk():
    for junk in (
        None,
        3.5,
        [],
        "<",
        "<<<>>>",
        "</decision>",
        "<decision>",
        "<technical><technical></technical>",
        "\x00" * 100,
    ):
        t = parse_thesis(junk)
        assert t.decision is None


def test_one_megabyte_input_is_flagged():
    text = thesis("") + ('<technical>- loop "quote" [T1] 12.5% ' * 40_000)
    assert len(text) > 1_000_000
    t = parse_thesis(text)
    assert t.truncated and t.raw_length == len(text) and len(text) > MAX_PARSE_CHARS
    assert isinstance(extract_numbers("9" * 1_000_000 + " 1.5 " * 200_000), list)  # returns, does not raise


def test_think_tags_with_odd_spacing_and_casing_still_hide_decisions():
    t = parse_thesis("< THINK >maybe <decision>STRONG_SELL</decision></ Think >" + thesis(""))
    assert t.decision == "BUY" and t.decisions == ("BUY",) and t.decision_in_think == ("STRONG_SELL",)


def test_parser_handles_many_unknown_and_unclosed_tags():
    from thesisgym.thesis import parse_thesis as parse

    junk = "".join(f"<tag{i}>" for i in range(20_000)) + "<news>" * 20_000
    thesis = parse(junk + "<decision>BUY</decision>")
    assert len(thesis.unknown_tags) == 20_000 and thesis.errors


def test_one_quote_one_group_bullets_parse_as_the_regex_split_does(monkeypatch):
    """The str.find path for `op "quote" [ID]` / `op [ID] "quote"` bullets gives exactly the
    _PIECE_RE.split path's Bullet, on the usual shapes and on near-misses of them."""
    import random

    import thesisgym.thesis as thesis

    rng = random.Random(0)
    alphabet = ['"', '[', ']', " ", "a", "T", "1", ",", "\u201c", "  ", "\t", "x"]
    texts = ['Up 2% "rises 3.1% to $2 billion" [F1]', 'Calm [N2] "no change" tail', '""[T1]', '"q" []',
             '" " [T1]', '"a" [T1] "b"', '[T1] "a" [T2]', '"a [T1]" b', '"' + "q" * 2001 + '" [T1]',
             '"q" [' + "x" * 301 + "]", 'x "q"] [T1', "a ]b[ c"]
    for _ in range(4000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        texts.append(f'{body} "{body[:4]}" [{rng.choice(["T1", "", "N2, T3", "a b"])}]{body[:2]}')
        texts.append(body)
    fast = [thesis.parse_bullet(t) for t in texts]
    monkeypatch.setattr(thesis, "_one_quote_one_group", lambda text: None)
    assert [thesis.parse_bullet(t) for t in texts] == fast


@pytest.mark.perf
def test_parser_speed_targets():
    """Wall-clock limits (deselected by default, run with -m perf on a quiet machine): a megabyte of
    thesis, a million digits and 40k unknown tags each parse in about a second, not minutes."""
    text = thesis("") + ('<technical>- loop "quote" [T1] 12.5% ' * 40_000)
    for work, limit in (
        (lambda: parse_thesis(text), 1.0),
        (lambda: extract_numbers("9" * 1_000_000 + " 1.5 " * 200_000), 1.0),
        (lambda: parse_thesis("".join(f"<tag{i}>" for i in range(20_000)) + "<news>" * 20_000), 2.0),
    ):
        start = time.perf_counter()
        work()
        assert time.perf_counter() - start < limit
# --- verifier v3: brackets, text outside the blocks, setters by name, counted parser failures -------
def test_a_bracket_that_cites_nothing_is_the_analysts_text():
    t = parse_thesis(
        '<news>\n- Orders look fine [revenue up 45.2% on a new deal] "rise of 7% in orders" [N3]\n'
        '- Same [N3: the CEO resigned] "rise of 7% in orders" [N3]\n</news><decision>BUY</decision>'
    )
    first, second = t.bullets
    assert first.citations == ("N3",) and first.numbers == ((45.2, 1),)
    assert "revenue up 45.2% on a new deal" in first.opinion  # checked as a claim, like parentheses
    assert second.citations == ("N3",) and "the CEO resigned" in second.opinion
    # a citation group stays a citation, in any of its forms
    assert parse_thesis(thesis("").replace("[T1]", "[T1, T2]")).bullets[0].opinion.count("T1") == 0


def test_text_outside_every_block_is_kept_as_outside():
    t = parse_thesis("Intro words <technical>\n- a b c [T1]\n</technical> between "
                     "<conclusion>ok</conclusion><decision>BUY</decision>\nSources: [T1] 50 KB tail")
    assert t.outside == "Intro words between Sources: [T1] 50 KB tail"
    assert parse_thesis(thesis("")).outside == ""
    # <think> is thinking, not outside text
    assert parse_thesis("<think>plan</think>" + thesis("")).outside == ""


def test_slot_setters_bind_by_field_name():
    from dataclasses import dataclass

    from thesisgym.thesis import slot_setters

    @dataclass(frozen=True, slots=True)
    class Pair:
        score: float
        precision: float

    set_precision, set_score = slot_setters(Pair, ("precision", "score"))  # any order: bound by name
    pair = object.__new__(Pair)
    set_score(pair, 1.0)
    set_precision(pair, 0.25)
    assert pair == Pair(score=1.0, precision=0.25)
    with pytest.raises(TypeError, match="fields are"):
        slot_setters(Pair, ("score",))  # a field without a setter fails at import, not silently


def test_a_parser_failure_is_counted_and_raises_in_strict_mode(monkeypatch):
    import thesisgym.thesis as th
    from thesisgym.rewards.base import reset_reward_errors, reward_errors, strict_rewards

    def broken(text):
        raise RuntimeError("parser bug")

    monkeypatch.setattr(th, "_parse", broken)
    reset_reward_errors()
    t = th.parse_thesis("anything")
    assert not t.valid and t.errors == ("parser failure: RuntimeError",)
    assert reward_errors("parse_thesis") == 1  # counted through the rewards' one error path
    with strict_rewards(), pytest.raises(RuntimeError, match="parser bug"):
        th.parse_thesis("anything")
    reset_reward_errors()


@pytest.mark.parametrize(("text", "direction"), [
    ("shares fell 3% on the day", -1), ("a 15% rise in orders", 1), ("closed 3% lower", -1), ("up 2.1% on the week", 1),
    ("Reported EPS of $1.26 fell short of expectations", 0),  # the EPS fell short; $1.26 is its level
    ("a 40% margin rose to 42%", 0),  # 40% is the level that rose
])
def test_a_number_takes_its_direction_from_a_move_word_but_not_from_the_verb_it_is_the_subject_of(text, direction):
    """A move word before a number, or a noun or adjective right after it ("15% rise", "3% lower"), is the
    number's direction; a past-tense verb right after it has the number for its subject, so it is a level."""
    assert scan_quantities(text)[0].direction == direction


def test_a_hint_may_not_contradict_a_direction_and_an_evidence_numbers_hint_is_its_direction():
    """"The shares 1.60% advanced" is no reading of "change -1.60%"; "EPS fell to $1.26" reads "Reported EPS
    of $1.26 fell short" (the evidence's verb says which way its level moved), "EPS rose to $1.26" does not."""
    moved = scan_quantities("close 30.70 change -1.60%")[1]
    assert not scan_quantities("the shares 1.60% advanced")[0].matches(moved)
    assert scan_quantities("the shares 1.60% slipped")[0].matches(moved)
    level = scan_quantities("Reported EPS of $1.26 fell short")[0]
    assert scan_quantities("EPS fell to $1.26")[0].matches(level)
    assert not scan_quantities("EPS rose to $1.26")[0].matches(level)
    assert scan_quantities("EPS of $1.26")[0].matches(level)
