"""TemplateTeacher: canonical, grounded theses; decisions from evidence rules; knobs that break things."""

from __future__ import annotations

import random

import pytest

import thesisgym.rewards as rewards
from thesisgym.schema import LABELS
from thesisgym.teachers import Teacher, TemplateTeacher, decide, item_stance, make_teacher
from thesisgym.thesis import parse_thesis
from toydata import toy_row, toy_rows


def _score(text: str, row: dict) -> dict:
    return rewards.score_completion([{"role": "assistant", "content": text}], row)


def test_protocol_and_factory():
    t = make_teacher("template", seed=3)
    assert isinstance(t, Teacher)
    assert t.seed == 3
    with pytest.raises(ValueError, match="unknown teacher"):
        make_teacher("oracle")


def test_gold_thesis_parses_and_scores_high_on_reward_stack():
    for row in toy_rows(6, seed=1):
        text = TemplateTeacher().write(row, n=1)[0]
        thesis = parse_thesis(text)
        assert thesis.valid, thesis.errors
        assert list(thesis.section_names) == row["sections"]
        assert all(4 <= len(s.bullets) <= 7 for s in thesis.sections)
        assert all(15 <= b.word_count <= 90 for b in thesis.bullets)
        # every quote is verbatim text of the item it cites
        by_id = {it["id"]: it["text"] for it in row["evidence"]}
        for b in thesis.bullets:
            assert len(b.citations) == 1 and b.citations[0] in by_id
            assert all(q in by_id[b.citations[0]] for q in b.quotes)
        s = _score(text, row)
        assert s["structure"] >= 0.95 and s["evidence"] >= 0.95, s
        assert s["hallucination_rate"] == 0.0


def test_decision_comes_from_evidence_not_label():
    row = toy_row(stance=1.0)
    lied = dict(row, label="STRONG_SELL", label_id=0)
    a = TemplateTeacher().write(row)[0]
    b = TemplateTeacher().write(lied)[0]
    assert parse_thesis(a).decision == parse_thesis(b).decision == "STRONG_BUY"
    bear = toy_row(stance=-1.0)
    assert decide(bear["evidence"], bear["sections"])[0] == "STRONG_SELL"
    assert item_stance({"text": "Acme misses estimates and cuts guidance"}) < 0
    assert item_stance({"text": "Close 110.0, SMA20 100.0, RSI14 70"}) > 0
    assert item_stance({"text": "nothing to see"}) == 0.0
    # a lone moving average is read against the latest close, never the "of close" of a z-score line
    from thesisgym.teachers.template import reference_close

    tech = [{"section": "technical", "text": "z-score(20) of close 0.80"},
            {"section": "technical", "text": "open 49.80 high 50.38 low 49.70 close 50.31 volume 8 change +0.61%"}]
    assert reference_close(tech) == 50.31
    assert item_stance({"text": "EMA(12) 50.03"}, ref_close=reference_close(tech)) > 0


def test_reverse_mode_explains_the_label():
    row = dict(toy_row(stance=1.0), label="HOLD")
    text = TemplateTeacher(mode="reverse").write(row)[0]
    assert parse_thesis(text).decision == "HOLD"
    with pytest.raises(ValueError, match="label"):
        TemplateTeacher(mode="reverse").write(dict(row, label=None))


def test_deterministic_and_samples_differ():
    row = toy_row(stance=0.5, items_per_section=7)
    t = TemplateTeacher(seed=1)
    a = t.write(row, n=3, seed=5)
    assert a == TemplateTeacher(seed=1).write(row, n=3, seed=5)
    assert len(set(a)) == 3
    assert a != t.write(row, n=3, seed=6)


def test_fewer_items_give_fewer_bullets_and_empty_sections_are_skipped():
    row = toy_row(items_per_section=2)
    row["sections"] = row["sections"] + ["macro"]  # listed but without items
    thesis = parse_thesis(TemplateTeacher().write(row)[0])
    assert "macro" not in thesis.section_names
    assert all(len(s.bullets) == 2 for s in thesis.sections)


def test_knobs_produce_rejectable_theses():
    rows = toy_rows(6, seed=2)
    noisy = [TemplateTeacher(noise=1.0, seed=i).write(r)[0] for i, r in enumerate(rows)]
    assert all(_score(t, r)["hallucination_rate"] > 0.5 for t, r in zip(noisy, rows, strict=True))
    wrong = [TemplateTeacher(wrong_decision_rate=1.0).write(r)[0] for r in rows]
    right = [TemplateTeacher().write(r)[0] for r in rows]
    assert all(parse_thesis(w).decision != parse_thesis(g).decision for w, g in zip(wrong, right, strict=True))
    dropped = parse_thesis(TemplateTeacher(drop_section_rate=1.0).write(rows[0])[0])
    assert dropped.sections == ()
    assert _score(TemplateTeacher(drop_section_rate=1.0).write(rows[0])[0], rows[0])["structure"] < 0.7


def test_quote_words_bound_the_quotes_and_stay_verbatim():
    row = toy_rows(1, seed=3)[0]
    by_id = {it["id"]: it["text"] for it in row["evidence"]}
    for text in TemplateTeacher(quote_words=(2, 3), bullets=(2, 3)).write(row, n=3):
        thesis = parse_thesis(text)
        quotes = [(q, b.citations[0]) for s in thesis.sections for b in s.bullets for q in b.quotes]
        assert quotes
        for q, cite in quotes:
            assert q in by_id[cite]
            # a short item is quoted whole; otherwise the span is 2-3 words
            assert len(q.split()) <= 3 or q == by_id[cite].strip().replace('"', "'")


@pytest.mark.parametrize("kwargs", [{"noise": 1.5}, {"bullets": (5, 2)}, {"mode": "sideways"},
                                    {"wrong_decision_rate": -0.1}, {"quote_words": (0, 3)},
                                    {"quote_words": (6, 2)}, {"layout": "sideways"}])
def test_bad_knobs_raise(kwargs):
    with pytest.raises(ValueError):
        TemplateTeacher(**kwargs)


def test_bad_rows_raise_naming_the_column():
    with pytest.raises(ValueError, match="evidence"):
        TemplateTeacher().write({"sections": ["news"]})
    with pytest.raises(ValueError, match="n must"):
        TemplateTeacher().write(toy_row(), n=0)


def test_every_label_reachable():
    seen = {parse_thesis(TemplateTeacher().write(toy_row(stance=s))[0]).decision for s in (-1, -0.3, 0.0, 0.3, 1)}
    assert seen <= set(LABELS) and {"STRONG_BUY", "STRONG_SELL"} <= seen


def test_calibration_matches_the_label_mix_without_reading_labels():
    from thesisgym.schema import LABEL_QUANTILES

    rows = toy_rows(60, seed=4)
    blind = [dict(r, label=None) for r in rows]  # calibration must not need labels
    t = TemplateTeacher().calibrate(blind)
    decisions = [parse_thesis(t.write(r)[0]).decision for r in rows]
    share_sb = decisions.count("STRONG_BUY") / len(rows)
    assert abs(share_sb - (1 - LABEL_QUANTILES[-1])) < 0.1
    assert TemplateTeacher().cuts != t.cuts and "cuts=" in repr(t)
    with pytest.raises(ValueError, match="at least 10"):
        TemplateTeacher().calibrate(rows[:3])


def test_on_real_synthetic_contexts_grounded_and_evidence_driven():
    import thesisgym.data.synth as synth
    import thesisgym.dataset.contexts as ctx
    store = synth.generate_market(synth.SynthConfig(n_tickers=3, n_days=90, seed=1))
    rows = list(ctx.build_contexts(store, tickers=store.tickers, dates=store.dates[40:70:3]))
    assert rows
    t = TemplateTeacher().calibrate(rows)
    for row in rows[:6]:
        text = t.write(row)[0]
        s = _score(text, row)
        assert s["hallucination_rate"] == 0.0 and s["citation_precision"] == 1.0, s
        assert s["evidence"] >= 0.7 and s["structure"] >= 0.7, s
        assert s["decision_valid"] == 1.0


def test_compact_theses_quote_a_run_of_words_before_the_id_and_digits_only_where_unavoidable():
    """The small-model demo's teacher: a credited run of words without digits, quote first, then the id."""
    from thesisgym.rewards.base import EvidenceIndex
    from thesisgym.rewards.evidence import quote_credited

    row = toy_rows(1, seed=3)[0]
    by_id = {it["id"]: it["text"] for it in row["evidence"]}
    index = EvidenceIndex(row["evidence"])
    text = TemplateTeacher(compact=True, bullets=(1, 1), quote_words=(3, 5)).write(row)[0]
    bullets = [b for s in parse_thesis(text).sections for b in s.bullets]
    assert bullets
    for b in bullets:
        (q,), (cite,) = b.quotes, b.citations
        assert f'"{q}" [{cite}]' in text  # the quote, then the id
        assert quote_credited(q, cite, index)
        words = by_id[cite].split()
        runs = (" ".join(words[i:i + 3]).strip(".,;:") for i in range(len(words) - 2))
        words_only = any(not any(ch.isdigit() for ch in r) and quote_credited(r, cite, index) for r in runs)
        # digits only where no three digit-free words in a row would be credited (a price line)
        assert not any(ch.isdigit() for ch in q) or not words_only, (q, by_id[cite])


def test_default_theses_cover_the_expected_items_once_without_repeated_phrases():
    """The default teacher writes the thesis the verifier scores highest for its evidence: one bullet on
    each expected item of each section (where the count and coverage saturate), no phrase repeated
    often enough to cost a loop penalty that an edit could remove."""
    from thesisgym.consistency.judges import canonical_items
    from thesisgym.rewards.loops import loop_stats

    for row in toy_rows(6, seed=3):
        text = TemplateTeacher(seed=5).write(row)[0]
        expected = canonical_items(row["evidence"])
        for sec in parse_thesis(text).sections:
            assert sorted(c for b in sec.bullets for c in b.citations) == sorted(expected[sec.name])
        assert loop_stats(text) == (0.0, 0.0)
        assert _score(text, row)["evidence"] == 1.0
    row = toy_row()
    item = row["evidence"][0]["id"]
    line = TemplateTeacher().bullet_for(row, item, random.Random(0))
    assert line.startswith("- ") and line.endswith(f"[{item}]")
    with pytest.raises(ValueError, match="no evidence item"):
        TemplateTeacher().bullet_for(row, "Z99", random.Random(0))


LABEL_COLUMNS = {"label": "STRONG_SELL", "label_id": 0, "composite": -9.0, "fwd_return": -0.5,
                 "true_expected_return": -0.5}


def test_output_is_identical_when_the_label_columns_change():
    """The teacher decides by reading: rewriting every label column of a row changes nothing it writes."""
    import thesisgym.data.synth as synth
    import thesisgym.dataset.contexts as ctx

    store = synth.generate_market(synth.SynthConfig(n_tickers=3, n_days=90, seed=1))
    rows = list(ctx.build_contexts(store, tickers=store.tickers, dates=store.dates[40:80:2]))
    lied = [dict(r, **LABEL_COLUMNS) for r in rows]
    assert {r["label"] for r in rows} != {"STRONG_SELL"}
    a, b = TemplateTeacher(seed=2).calibrate(rows), TemplateTeacher(seed=2).calibrate(lied)
    assert a.cuts == b.cuts
    for row, other in zip(rows, lied, strict=True):
        assert a.write(row, n=2) == b.write(other, n=2)
        assert a.decision(row) == b.decision(other)


def test_fresh_large_news_outweighs_stale_or_small_news():
    from thesisgym.teachers.template import evidence_score

    fresh = {"id": "N1", "section": "news", "date": "2024-03-01", "text": "Acme orders jump 12.0% on record demand"}
    stale = {"id": "N2", "section": "news", "date": "2024-02-01", "text": "Acme loses key customer; 12.0% of revenue at risk"}
    small = {"id": "N3", "section": "news", "date": "2024-03-01", "text": "Acme recalls units; profit could drop 1.0%"}
    assert evidence_score([fresh, stale], ["news"], asof="2024-03-01") > 0.3
    assert evidence_score([fresh, small], ["news"], asof="2024-03-01") > 0.3
    assert evidence_score([stale], ["news"], asof="2024-03-01") > -0.05  # a month old: mostly priced
    # without an as-of date the newest item's date is "today"
    assert evidence_score([fresh, stale], ["news"]) == evidence_score([fresh, stale], ["news"], asof="2024-03-01")


def _net_of(text: str, words: tuple[str, ...]) -> int:
    """'two up' -> 2, 'one down' -> -1, 'even' -> 0."""
    if text == "even":
        return 0
    count, way = text.split()
    return words.index(count) * (1 if way == "up" else -1)


def test_tally_thesis_decides_from_the_verdicts_it_writes_and_costs_no_evidence():
    """conclusion "tally": each section's listed verdict is the reading of the item its bullet cites, the
    running net after each verdict is their sum so far, and the decision is the final net through
    `tally_cuts` (calibrated on evidence)."""
    import re

    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import item_readings
    from thesisgym.teachers.template import TALLY_CUTS, score_to_label

    words = ("none", "one", "two", "three", "four", "five", "six")
    rows = toy_rows(12, seed=2)
    kw = dict(bullets=(1, 1), quote_words=(3, 5), think=False, compact=True, layout="id")
    first = TemplateTeacher(conclusion="tally", pick="first", **kw)
    assert first.tally_cuts == TALLY_CUTS
    for row in rows:
        prose, tally = TemplateTeacher(pick="first", **kw).write(row)[0], first.write(row)[0]
        thesis = parse_thesis(tally)
        readings = item_readings(evidence_index(row["evidence"]))
        firsts = {s: next(it["id"] for it in row["evidence"] if it["section"] == s) for s in row["sections"]}
        cited = {sec.name: sec.bullets[0].citations[0] for sec in thesis.sections}
        assert cited == {s: firsts[s] for s in cited}  # pick="first": the first item of every section
        verdict = {s: readings.get(i.upper(), 0) for s, i in cited.items()}
        steps = re.findall(r"(\w+) (bullish|bearish|neutral) \((even|\w+ up|\w+ down)\)", thesis.conclusion.split(":")[0])
        assert {sec: v for sec, v, _ in steps} == {s: {1: "bullish", 0: "neutral", -1: "bearish"}[v]
                                                    for s, v in verdict.items()}
        running = [sum(list(verdict.values())[:k + 1]) for k in range(len(verdict))]
        assert [_net_of(net, words) for _, _, net in steps] == running  # the count runs along the list
        m = re.search(r": net (even|\w+ up|\w+ down), so ([a-z ]+)\.$", thesis.conclusion)
        assert m and _net_of(m.group(1), words) == sum(verdict.values())
        assert thesis.decision == score_to_label(sum(verdict.values()), TALLY_CUTS)
        assert m.group(2) == thesis.decision.replace("_", " ").lower()
        assert not re.search(r"\d", thesis.conclusion)  # a digit there would be a number claim the verifier checks
        assert len(tally) < len(prose)
        assert _score(tally, row)["evidence"] >= _score(prose, row)["evidence"] - 1e-9
    # calibrate fits the net-count cuts on the rows' evidence (a label flip changes nothing)
    cal = TemplateTeacher(conclusion="tally", pick="first", **kw).calibrate(rows)
    lied = [dict(r, label="STRONG_SELL") for r in rows]
    assert cal.tally_cuts == TemplateTeacher(conclusion="tally", pick="first", **kw).calibrate(lied).tally_cuts
    nets = [cal.planned_net(r) for r in rows]
    assert [parse_thesis(cal.write(r)[0]).decision for r in rows] == [score_to_label(n, cal.tally_cuts) for n in nets]
    assert [cal.decision(r) for r in rows] == [score_to_label(n, cal.tally_cuts) for n in nets]
    with pytest.raises(ValueError, match="conclusion"):
        TemplateTeacher(conclusion="essay")
    with pytest.raises(ValueError, match="pick"):
        TemplateTeacher(pick="best")


def test_a_sized_tally_counts_a_large_stated_move_twice_and_quotes_its_size():
    """size_cut: a section whose cited item states a size of at least the cut reads "strongly" and
    counts two; the quote then holds that size; the running count and the call follow; the evidence
    score is the unsized thesis's; a cut without a tally conclusion is refused."""
    import re

    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import item_readings
    from thesisgym.teachers.template import _COUNT_WORDS as words
    from thesisgym.teachers.template import (
        COMPACT_STYLE,
        TALLY_CUTS,
        _section_verdict,
        score_to_label,
        stated_size,
    )

    assert stated_size({"text": "change -7.5% on 2% volume"}) == 7.5 and stated_size({"text": "no figure"}) is None
    # several items: the sign of their readings, doubled only by a large item that reads that way
    small, big = {"id": "N1", "text": "sales up 1.0%"}, {"id": "N2", "text": "orders jump 8.0%"}
    assert _section_verdict([small, dict(small, id="N3")], {"N1": 1, "N3": 1}, 3.0) == 1
    assert _section_verdict([small, big], {"N1": 1, "N2": 1}, 3.0) == 2
    assert _section_verdict([small, dict(small, id="N3"), big], {"N1": 1, "N3": 1, "N2": -1}, 3.0) == 1
    rows = toy_rows(40, seed=5)
    sized, plain = TemplateTeacher(**dict(COMPACT_STYLE, size_cut=3.0)), TemplateTeacher(**COMPACT_STYLE)
    pull = {2: "strongly bullish", 1: "bullish", 0: "neutral", -1: "bearish", -2: "strongly bearish"}
    strong = shown = 0
    for row in rows:
        thesis = parse_thesis(sized.write(row)[0])
        readings = item_readings(evidence_index(row["evidence"]))
        items = {it["id"]: it for it in row["evidence"]}
        want = {}
        for sec in thesis.sections:
            bullet = sec.bullets[0]
            item = items[bullet.citations[0]]
            big = (stated_size(item) or 0.0) >= 3.0 and readings.get(item["id"].upper(), 0) != 0
            want[sec.name] = readings.get(item["id"].upper(), 0) * (2 if big else 1)
            strong += big
            # the size the verdict doubles on is among the words copied, where a credited run that
            # reads in the item's direction holds it ("surprise 4.1%" alone has no direction)
            shown += big and any(stated_size({"text": q}) == stated_size(item) for q in bullet.quotes)
        steps = re.findall(r"(\w+) ((?:strongly )?(?:bullish|bearish)|neutral) \((even|\w+ up|\w+ down)\)",
                           thesis.conclusion.split(":")[0])
        assert {s: v for s, v, _ in steps} == {s: pull[v] for s, v in want.items()}
        running = [sum(list(want.values())[:k + 1]) for k in range(len(want))]
        assert [_net_of(net, words) for _, _, net in steps] == running
        assert thesis.decision == score_to_label(sum(want.values()), TALLY_CUTS) == sized.decision(row)
        assert sized.planned_net(row) == sum(want.values())
        # a quote that holds the size is as grounded as one without (within a hundredth: a longer
        # run of figures is credited a little less)
        assert _score(sized.write(row)[0], row)["evidence"] >= _score(plain.write(row)[0], row)["evidence"] - 0.01
    assert strong >= 5 and shown >= 0.75 * strong, (strong, shown)  # the doubling was exercised
    with pytest.raises(ValueError, match="size_cut"):
        TemplateTeacher(size_cut=3.0)  # a prose conclusion has no verdicts to size
    for bad in (0, float("inf"), float("nan"), True, "3"):
        with pytest.raises(ValueError, match="size_cut"):
            TemplateTeacher(**dict(COMPACT_STYLE, size_cut=bad))
    assert "size_cut=3.0" in repr(sized) and "size_cut" not in repr(plain)


def test_reward_cuts_pick_the_most_paid_monotone_call_per_count():
    """`reward_cuts`: each net count gets the decision that earns the most decision reward on its rows
    (under "calibrated", the most frequent label), never more bearish for a higher count; a rare count
    borrows rows from its neighbours toward 0; bad input is named."""
    from thesisgym.rewards.decision import load_decision_matrix
    from thesisgym.teachers.template import reward_cuts, score_to_label

    # the label-mix cuts would call -3 STRONG_SELL; its rows are mostly HOLD, so the reward map holds
    nets = [-3] * 10 + [-1] * 10 + [0] * 10 + [1] * 10 + [2] * 10
    labels = (["HOLD"] * 6 + ["SELL"] * 4 + ["HOLD"] * 7 + ["SELL"] * 3 + ["BUY"] * 6 + ["HOLD"] * 4
              + ["BUY"] * 8 + ["HOLD"] * 2 + ["STRONG_BUY"] * 6 + ["BUY"] * 4)
    cuts = reward_cuts(nets, labels, min_rows=1)
    assert [score_to_label(n, cuts) for n in (-3, -1, 0, 1, 2)] == ["HOLD", "HOLD", "BUY", "BUY", "STRONG_BUY"]
    assert [score_to_label(n, cuts) for n in (-9, 9)] == ["HOLD", "STRONG_BUY"]  # beyond the rows: the ends
    # the map is the best monotone one: brute force over every monotone assignment of the five counts
    import itertools

    m = load_decision_matrix()
    best = max(sum(m(LABELS[c], y) for c, y in zip((a[(-3, -1, 0, 1, 2).index(n)] for n in nets), labels, strict=True))
               for a in itertools.combinations_with_replacement(range(5), 5))
    got = sum(m(score_to_label(n, cuts), y) for n, y in zip(nets, labels, strict=True))
    assert got == best
    # a matrix whose sums are inexact in floating point (a user's variant, not a shipped one) still
    # gets the best monotone map
    from thesisgym.rewards.decision import DecisionMatrix

    odd = DecisionMatrix("odd", tuple(tuple(round(0.1 * ((3 * r + 7 * c) % 11) - 0.5, 1) for c in range(5))
                                      for r in range(5)), -1.5)
    cuts = reward_cuts(nets, labels, matrix=odd, min_rows=1)
    best = max(sum(odd(LABELS[a[(-3, -1, 0, 1, 2).index(n)]], y) for n, y in zip(nets, labels, strict=True))
               for a in itertools.combinations_with_replacement(range(5), 5))
    got = sum(odd(score_to_label(n, cuts), y) for n, y in zip(nets, labels, strict=True))
    assert got == pytest.approx(best)
    # an anti-monotone market cannot buy its way out: a higher count never gets a more bearish call
    flip = reward_cuts([-1] * 10 + [1] * 10, ["STRONG_BUY"] * 10 + ["STRONG_SELL"] * 10, min_rows=1)
    assert LABELS.index(score_to_label(1, flip)) >= LABELS.index(score_to_label(-1, flip))
    # a count seen on 2 rows takes its inward neighbour's rows too (min_rows)
    sparse = reward_cuts([0] * 30 + [4] * 2, ["HOLD"] * 30 + ["STRONG_BUY"] * 2, min_rows=20)
    assert score_to_label(4, sparse) == "HOLD"
    assert score_to_label(4, reward_cuts([0] * 30 + [4] * 2, ["HOLD"] * 30 + ["STRONG_BUY"] * 2, min_rows=1)) == "STRONG_BUY"
    with pytest.raises(ValueError, match="labels must be"):
        reward_cuts([0] * 10, ["UP"] * 10)
    with pytest.raises(ValueError, match="2 net counts but 1 labels"):
        reward_cuts([0, 1], ["HOLD"])
    with pytest.raises(ValueError, match="at least 10"):
        reward_cuts([0] * 3, ["HOLD"] * 3)


def test_a_reward_calibrated_tally_teacher_fits_train_labels_and_never_reads_its_own():
    """calibrate(tally="reward"): the net-count cuts come from the rows' labels (a flip of every label
    moves them), the decision of a row never from that row's label; "mix" ignores labels."""
    from thesisgym.teachers.template import COMPACT_STYLE, reward_cuts

    rows = toy_rows(60, seed=4)
    t = TemplateTeacher(**COMPACT_STYLE).calibrate(rows, tally="reward")
    nets = [t.planned_net(r) for r in rows]
    assert t.tally_cuts == reward_cuts(nets, [r["label"] for r in rows])
    lied = [dict(r, label="STRONG_SELL") for r in rows]
    assert TemplateTeacher(**COMPACT_STYLE).calibrate(lied, tally="reward").tally_cuts != t.tally_cuts
    # a row's own label never reaches its decision: change it alone and the call stays
    row = rows[0]
    assert t.decision(dict(row, label="STRONG_SELL")) == t.decision(dict(row, label="STRONG_BUY")) == t.decision(row)
    # the map pays at least what the label-mix cuts pay on the rows it was fitted on
    mix = TemplateTeacher(**COMPACT_STYLE).calibrate(rows)
    assert (sum(t.decision(r) == r["label"] for r in rows) >= sum(mix.decision(r) == r["label"] for r in rows))
    with pytest.raises(ValueError, match="`tally` must be"):
        TemplateTeacher(**COMPACT_STYLE).calibrate(rows, tally="oracle")


@pytest.mark.parametrize("layout", ["quote", "id"])
def test_verdict_last_layouts_quote_what_carries_the_direction_and_stay_grounded(layout):
    """layout "quote" / "id": the verdict follows the quote, so the quote alone must read in the item's
    direction (where the item has one) and the verdict must say that direction; same evidence score."""
    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import item_readings
    from thesisgym.rewards.reading import opinion_direction

    kw = dict(bullets=(1, 1), quote_words=(3, 5), think=False, compact=True)
    checked = 0
    for row in toy_rows(8, seed=4):
        text = TemplateTeacher(layout=layout, **kw).write(row)[0]
        readings = item_readings(evidence_index(row["evidence"]))
        for b in parse_thesis(text).bullets:
            (q,), (cite,) = b.quotes, b.citations
            shape = f'- "{q}" [{cite}]: ' if layout == "quote" else f'- [{cite}] "{q}": '
            assert shape in text
            lean = readings[cite]
            if lean:
                assert opinion_direction(b.opinion, "") == lean, b.text
                checked += 1
        plain = TemplateTeacher(**kw).write(row)[0]
        assert _score(text, row)["evidence"] == pytest.approx(_score(plain, row)["evidence"], abs=0.1)
        assert _score(text, row)["hallucination_rate"] == 0.0
    assert checked >= 4


def _with_price_bar(row: dict, rng: random.Random) -> dict:
    """`row` with its technical section replaced by one bar in the synthetic market's format."""
    o, c = round(rng.uniform(20, 30), 2), round(rng.uniform(20, 30), 2)
    chg, vol = round(rng.uniform(-4, 4), 2), rng.randint(500_000, 2_000_000)
    text = f"open {o} high {max(o, c) + 0.1:.2f} low {min(o, c) - 0.1:.2f} close {c} volume {vol} change {chg:+.2f}%"
    bar = {"id": "T1", "section": "technical", "date": row["asof"], "source": "prices", "text": text,
           "numbers": [o, max(o, c) + 0.1, min(o, c) - 0.1, c, float(vol), chg]}
    return dict(row, evidence=[bar] + [it for it in row["evidence"] if it["section"] != "technical"])


def test_a_price_bar_bullet_quotes_the_change_that_carries_its_direction():
    """A price bar reads by its day's change; a random 3-5 word run of the bar ("open 20.94 high 21.35")
    says nothing a student could read the verdict from, so the teacher searches every run for one that
    reads in the bar's direction ("volume 982757 change -2.69%")."""
    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import item_readings, prompt_close
    from thesisgym.rewards.reading import item_reading
    from thesisgym.teachers.template import COMPACT_STYLE

    rng, checked = random.Random(0), 0
    for seed in range(4):
        for row in map(lambda r: _with_price_bar(r, rng), toy_rows(8, seed=seed)):
            index = evidence_index(row["evidence"])
            lean = item_readings(index).get("T1")
            text = TemplateTeacher(seed=seed, noise=0.0, **COMPACT_STYLE).write(row)[0]
            (bullet,) = next(sec.bullets for sec in parse_thesis(text).sections if sec.name == "technical")
            if lean:
                assert "change" in bullet.quotes[0], bullet.text
                assert item_reading(bullet.quotes[0], prompt_close(index), "technical") == lean, bullet.text
                checked += 1
    assert checked >= 20
