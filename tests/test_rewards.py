"""Reward components: formulas, verification rules, the decision matrix data, combiners, TRL calling convention."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_rewards_fixtures import GOLD_BULLETS, assemble, gold_thesis, make_row
from thesisgym.rewards import (
    STAGE_WEIGHTS,
    decision_reward,
    dsr,
    evidence_report,
    evidence_reward,
    fsr,
    load_decision_matrix,
    loop_penalty,
    make_combined_reward,
    make_decision_reward,
    make_market_reward,
    make_structure_reward,
    market_reward,
    quote_in_text,
    score_completion,
    structure_reward,
)
from thesisgym.rewards.base import evidence_index
from thesisgym.rewards.loops import loop_params, loop_stats
from thesisgym.schema import LABELS
from thesisgym.thesis import parse_thesis


def batch(rows: list[dict]) -> dict:
    """Columns as TRL passes them: one list per column."""
    return {key: [r.get(key) for r in rows] for key in rows[0]}


def call(fn, completions: list, rows: list[dict], **extra):
    cols = batch(rows)
    prompts = cols.pop("prompt")
    return fn(
        prompts=prompts,
        completions=completions,
        completion_ids=[[1, 2]] * len(completions),
        trainer_state=None,
        **cols,
        **extra,
    )


# --- structure ---------------------------------------------------------------------------------
def test_structure_formula_for_missing_sections():
    three = {k: GOLD_BULLETS[k] for k in ("technical", "news", "macro")}
    (value,) = call(structure_reward, [assemble(three)], [make_row()])
    # S = 3 of lo = hi = 6 prompt sections: R_count = max(0.3, 0.7 * 3/6) = 0.35; sections perfect
    assert value == pytest.approx(0.6 * 0.35 + 0.4 * 1.0)


def test_structure_bounds_default_and_override():
    three = {k: GOLD_BULLETS[k] for k in ("technical", "news", "macro")}
    row = make_row(sections=None)
    (default,) = call(structure_reward, [assemble(three)], [row])
    assert default == pytest.approx(0.6 * max(0.3, 0.7 * 3 / 5) + 0.4)  # 5-7 when the row does not say
    (custom,) = call(make_structure_reward(lo=2, hi=2), [assemble(three)], [row])
    assert custom == pytest.approx(0.6 * (1 - 0.15) + 0.4)
    assert make_structure_reward(name="s2").__name__ == "s2"


def test_structure_section_with_few_short_bullets():
    text = assemble({"technical": ["Too short to say much"]})
    (value,) = call(make_structure_reward(lo=1, hi=1), [text], [make_row()])
    # one bullet of 5 words: count 1/4, length 5/15
    assert value == pytest.approx(0.6 + 0.4 * (0.5 * 0.25 + 0.5 * 5 / 15))


def test_structure_empty_is_zero():
    assert call(structure_reward, ["", "no tags at all"], [make_row(), make_row()]) == [0.0, 0.0]


# --- evidence ---------------------------------------------------------------------------------
def technical_row() -> dict:
    """A row whose prompt has technical evidence only, so a technical-only thesis covers it."""
    row = make_row()
    return dict(row, evidence=[e for e in row["evidence"] if e["section"] == "technical"], sections=["technical"])


def test_evidence_formula_single_section_three_bullets():
    bullets = {"technical": GOLD_BULLETS["technical"][:3]}
    (value,) = call(evidence_reward, [assemble(bullets)], [technical_row()])
    assert value == pytest.approx(0.3 * 3 / 4 + 0.7 * 1.0)
    # coverage: the same thesis against the six-section prompt covers 1 of its 6 sections
    (value6,) = call(evidence_reward, [assemble(bullets)], [make_row()])
    assert value6 == pytest.approx(value / 6)


def test_evidence_short_opinion_and_no_quote():
    short = 'Strong day "up 2.3% on the day" [T1]'  # 2 opinion words, quote + source: R_op = 2/15
    noquote = "Buyers seem in control and the trend looks healthy to me, with broad participation across sessions [T2]"
    bullets = {"technical": [short] + GOLD_BULLETS["technical"][1:]}
    (value,) = call(evidence_reward, [assemble(bullets)], [technical_row()])
    b = 0.4 * 2 / 15 + 0.35 + 0.25
    assert value == pytest.approx(0.3 + 0.7 * 4 / (1 / b + 3))
    bullets = {"technical": [noquote] + GOLD_BULLETS["technical"][1:]}
    (value,) = call(evidence_reward, [assemble(bullets)], [technical_row()])
    # no quote: R_op = min(0.3, ..) = 0.3; nothing to verify -> credit for one citation (precision 1);
    # it grounds no item, so the count term sees 3 bullets that do (3/4) and one that adds nothing (0.9)
    b = 0.4 * 0.3 + 0.25
    assert value == pytest.approx(0.3 * 3 / 4 * 0.9 + 0.7 * 4 / (1 / b + 3))


def test_quote_matching_rules():
    text = "Regulators open probe into app store fees; potential fine of up to 10% of global revenue."
    assert quote_in_text("REGULATORS  open probe", text)
    assert quote_in_text("\u201cpotential fine of up to 10%\u201d", text)
    assert quote_in_text("Regulators open probe ... global revenue", text)
    assert quote_in_text("Regulators open\u200b probe into app\u00a0store fees", text)  # zero-width, NBSP
    assert not quote_in_text("Regulators opan probe into app store fees", text)  # no similarity: spans only
    assert not quote_in_text("global revenue ... Regulators open probe", text)  # segments in order
    assert not quote_in_text("Regulators close the probe into fees", text)
    assert not quote_in_text(text + " and the company will pay it all", text)
    assert not quote_in_text("potential fine of up to 19% of global", text)
    assert not quote_in_text("ulators open probe", text)  # spans start and end on word boundaries


def test_numbers_from_the_item_header_are_not_citable():
    # T2 is dated 2024-03-08: "8" and "2024" are in its header, not its body
    bullet = 'The filing shows the trend intact after 8 sessions, a point the tape confirms once more today "price is 3.4% above" [T2]'
    (value,) = call(
        evidence_reward, [assemble({"technical": [bullet] + GOLD_BULLETS["technical"][1:]})], [make_row()]
    )
    report = evidence_report(parse_thesis(assemble({"technical": [bullet]})), evidence_index(make_row()["evidence"]))
    assert report.bullets[0].hallucinated and "number 8" in report.bullets[0].reasons[0]
    assert value < 0.5


def test_number_tolerance_rounding_and_sign():
    ok = 'The stock trades about 3% above its 20-day average, a healthy but not stretched trend "price is 3.4% above" [T2]'
    ok_sign = 'After the run higher the pullback risk is real though the last session was up 2.3% on heavy volume "volume 61.2M" [T1]'
    bad = 'The stock trades about 4% above its 20-day average, a healthy but not stretched trend "price is 3.4% above" [T2]'
    gold = GOLD_BULLETS["technical"]
    theses = [assemble({"technical": [gold[0], ok, *gold[2:]]}), assemble({"technical": [ok_sign, *gold[1:]]}),
              assemble({"technical": [gold[0], bad, *gold[2:]]})]
    values = call(evidence_reward, theses, [technical_row()] * 3)
    assert values[0] > 0.95 and values[1] > 0.95 and values[2] < 0.5


def test_evidence_logs_diagnostics_through_trl_log_metric():
    logged: dict[str, float] = {}
    call(
        evidence_reward,
        [gold_thesis(), ""],
        [make_row(), make_row()],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    assert logged["evidence/hallucination_rate"] == 0.0 and logged["evidence/citation_precision"] == 1.0


def test_evidence_without_evidence_column_makes_every_bullet_a_hallucination():
    # no ids exist -> every bullet scores 0; what remains is the formula's bullet-count term
    # per section: 0.3 * 1 + 0.7 * floor 0.01
    assert evidence_reward(prompts=["p"], completions=[gold_thesis()]) == [pytest.approx(0.307)]
    assert score_completion(gold_thesis(), {})["hallucination_rate"] == 1.0


# --- decision matrix --------------------------------------------------------------------------
def test_matrix_file_variants_and_documented_asymmetry():
    printed = load_decision_matrix("paper_printed").matrix
    text = load_decision_matrix("text").matrix
    assert printed[0] == (1.00, 0.75, -1.25, -2.00, -2.25)  # as printed (docs/spec.md, section 6.3)
    assert text == tuple(zip(*printed, strict=True))  # "text" = transpose
    cross = [(p, t) for p in (3, 4) for t in (0, 1)]  # bullish call, bearish truth
    for p in range(5):
        for t in range(p):
            mirror = (4 - p, 4 - t)
            if (p, t) in cross:
                assert text[p][t] < text[mirror[0]][mirror[1]]  # text: false bullish punished harder
                assert printed[p][t] > printed[mirror[0]][mirror[1]]  # printed: the reverse
            else:
                assert text[p][t] == text[mirror[0]][mirror[1]]


def test_default_matrix_pays_skill_over_every_constant_on_any_label_mix():
    import numpy as np

    from thesisgym.rewards.skill import constant_rewards, reader_reward

    default = load_decision_matrix()
    # a missing decision costs more than any wrong one: hiding the decision never pays
    assert default.variant == "calibrated" and default.missing == default.lo == -1.5
    assert default.missing < min(v for row in default.matrix for v in row)
    text = load_decision_matrix("text")
    rng = np.random.default_rng(0)
    for mix in [(0.03, 0.12, 0.38, 0.32, 0.15), *rng.dirichlet(np.ones(5), size=200)]:
        top = max(mix)
        for matrix in (default, text):
            constants = constant_rewards(matrix, mix)
            # a reader right with accuracy a, else a random wrong class
            above = reader_reward(matrix, mix, accuracy=min(1.0, top + 0.01))
            if matrix is default:
                assert above > max(constants.values()), mix
                at = reader_reward(matrix, mix, accuracy=top)
                assert at == pytest.approx(max(constants.values()))
    # the paper's graded matrix fails it on the paper's own label mix: always-HOLD wins at the threshold
    paper_mix = (0.03, 0.12, 0.38, 0.32, 0.15)
    assert reader_reward(text, paper_mix, accuracy=0.38) < constant_rewards(text, paper_mix)["HOLD"]


def test_decision_reward_values():
    texts = [assemble(decision=d) for d in ("BUY", "STRONG_BUY", "SELL", None)]
    assert call(decision_reward, texts, [make_row()] * 4) == [1.0, -1.0, -1.0, -1.5]
    graded = make_decision_reward(variant="text", name="decision_text")
    assert call(graded, texts, [make_row()] * 4) == [1.0, 0.75, -1.25, -1.5]
    printed = make_decision_reward(variant="paper_printed", name="decision_printed")
    assert call(printed, texts, [make_row()] * 4) == [1.0, 0.75, -1.5, -1.5]
    assert call(decision_reward, [gold_thesis()], [make_row(label=None)]) == [None]
    assert call(decision_reward, [gold_thesis()], [make_row(label=3)]) == [1.0]


def test_bad_matrix_file_names_the_file(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text(
        "order: [STRONG_SELL, SELL, HOLD, BUY, STRONG_BUY]\ndefault: x\nvariants:\n  x: {matrix: [[1, 2]]}\n"
    )
    with pytest.raises(ValueError, match="m.yaml"):
        load_decision_matrix(path=bad)


# --- market -----------------------------------------------------------------------------------
def test_market_reward_values_clip_and_na():
    rows = [
        make_row(fwd_return=0.035, fwd_vol=0.035),
        make_row(fwd_return=0.5, fwd_vol=0.01),
        make_row(fwd_return=float("nan")),
        make_row(fwd_vol=0.0),
    ]
    texts = [assemble(decision="STRONG_SELL"), assemble(decision="STRONG_BUY"), gold_thesis(), gold_thesis()]
    assert call(market_reward, texts, rows) == [pytest.approx(-1.0), 3.0, None, None]
    assert call(market_reward, [assemble(decision=None)], [make_row()]) == [-1.0]
    long_only = make_market_reward(
        positions={**dict.fromkeys(LABELS, 0.0), "BUY": 0.5, "STRONG_BUY": 1.0}, name="m_long"
    )
    assert call(long_only, [assemble(decision="STRONG_SELL")], [make_row()]) == [0.0]
    with pytest.raises(ValueError, match="positions"):
        make_market_reward(positions={"BUY": 1.0})


# --- loops ------------------------------------------------------------------------------------
def test_loop_params_scale_with_length():
    assert loop_params(400) == (10, 4) and loop_params(10_000) == (30, 20) and loop_params(10) == (6, 4)


def test_loop_penalty_honest_vs_looping():
    looping = gold_thesis() + (" I will now repeat the analysis of the momentum factor again and again" * 60)
    values = call(loop_penalty, [gold_thesis(), looping, ""], [make_row()] * 3)
    assert values[0] == 0.0 and values[2] == 0.0 and -1.0 <= values[1] <= -0.5
    rate, _ = loop_stats(looping)
    assert 0.3 < rate <= 1.0


# --- combiners --------------------------------------------------------------------------------
COMBINER_TABLE = [  # (r, s, G_fsr, G_dsr); G_market_only = r throughout
    (1.0, 1.0, 3.0, 1.5),
    (1.0, 0.0, 1.0, 0.5),
    (2.0, 0.5, 3.0, 2.0),
    (-1.0, 1.0, 1.0, -1.0),
    (-1.0, 0.0, -1.0, -2.0),
    (-2.0, 0.25, -1.5, -3.5),
    (0.0, 0.7, 1.4, 0.0),
    (3.0, 0.1, 3.2, 1.8),
]


@pytest.mark.parametrize(("r", "s", "g_fsr", "g_dsr"), COMBINER_TABLE)
def test_fsr_dsr_table(r, s, g_fsr, g_dsr):
    assert fsr(r, s) == pytest.approx(g_fsr) and dsr(r, s) == pytest.approx(g_dsr)


@pytest.mark.parametrize(("r", "s", "g_fsr", "g_dsr"), COMBINER_TABLE)
def test_combiners_over_the_table_market_only_is_r(r, s, g_fsr, g_dsr):
    # STRONG_BUY holds a full position, so r = fwd_return / fwd_vol; every r of the table is within the clip
    row = make_row(fwd_return=r * 0.035, fwd_vol=0.035)
    text = assemble(decision="STRONG_BUY")
    fixed = lambda prompts, completions, **kw: [s] * len(completions)  # noqa: E731
    (market_only,) = call(make_combined_reward("market_only", consistency=fixed), [text], [row])
    assert market_only == pytest.approx(r)  # G = r: s is not read
    assert call(make_combined_reward("market_only"), [text], [row]) == [pytest.approx(r)]
    assert call(make_combined_reward("fsr", consistency=fixed, formula="paper"), [text], [row]) == [pytest.approx(g_fsr)]
    assert call(make_combined_reward("dsr", consistency=fixed, formula="paper"), [text], [row]) == [pytest.approx(g_dsr)]


def test_combined_rewards_match_formulas_and_have_unique_names():
    row = make_row(fwd_return=0.07, fwd_vol=0.035)  # BUY -> r = 0.5 * 2 = 1.0
    fixed = lambda prompts, completions, **kw: [0.25] * len(completions)  # noqa: E731
    fns = [make_combined_reward(k, consistency=fixed, formula="paper") for k in ("fsr", "dsr", "market_only")] + [
        make_combined_reward()
    ]
    assert len({f.__name__ for f in fns}) == 4 and fns[0].__name__ == "fsr_reward"
    values = [call(f, [gold_thesis()], [row])[0] for f in fns]
    w = STAGE_WEIGHTS["decision"]
    assert values == [
        pytest.approx(1.5),
        pytest.approx(0.75),
        pytest.approx(1.0),
        pytest.approx(w["structure"] + w["evidence"] + w["decision"]),
    ]


def test_placeholder_s_and_consistency_fallback():
    row = make_row(fwd_return=-0.07, fwd_vol=0.035)  # BUY -> r = -1
    logged: dict[str, float] = {}
    broken = lambda prompts, completions, **kw: 1 / 0  # noqa: E731
    fn = make_combined_reward("dsr", consistency=broken)
    hallucinated = gold_thesis().replace("[T1]", "[T9]")
    values = call(
        fn, [gold_thesis(), hallucinated], [row, row], log_metric=lambda k, v: logged.__setitem__(k, v)
    )
    # placeholder s = grounding: 1.0 for gold; below 1 when one bullet is hallucinated
    assert values[0] == pytest.approx(-1.0) and values[1] < values[0]
    assert logged["dsr_reward/s_is_placeholder"] == 1.0
    assert make_combined_reward("fsr")(
        prompts=["p"], completions=[gold_thesis()], fwd_return=[float("nan")], fwd_vol=[0.1]
    ) == [None]


def test_async_consistency_gives_async_reward():
    async def judge(prompts, completions, **kw):
        return [0.5] * len(completions)

    fn = make_combined_reward("fsr", consistency=judge, formula="paper")
    row = make_row(fwd_return=0.07, fwd_vol=0.035)
    cols = batch([row])
    values = asyncio.run(fn(prompts=cols.pop("prompt"), completions=[gold_thesis()], **cols))
    assert values == [pytest.approx(2.0)]


def test_combiner_rejects_bad_options():
    with pytest.raises(ValueError, match="kind"):
        make_combined_reward("sum")
    with pytest.raises(ValueError, match="weights"):
        make_combined_reward(weights={"style": 1.0})
    with pytest.raises(TypeError, match="consistency"):
        make_combined_reward("fsr", consistency=0.5)
    with pytest.raises(ValueError, match="clip"):
        make_combined_reward("dsr", clip=0)


def test_score_completion_keys_and_na():
    scores = score_completion(gold_thesis(), make_row(label=None, fwd_return=float("nan")))
    assert math.isnan(scores["decision"]) and math.isnan(scores["market"]) and math.isnan(scores["fsr"])
    assert scores["structure"] == 1.0 and scores["s_is_placeholder"] == 1.0
    assert score_completion(gold_thesis(), make_row(), consistency_s=0.2)["s"] == 0.2


def test_trl_calling_convention_end_to_end():
    """Mirror GRPOTrainer._calculate_rewards: repeated rows, conversational completions, logging kwargs."""
    from collections import defaultdict

    rows = [make_row(), make_row(label=None, fwd_return=float("nan"))]
    inputs = [r for r in rows for _ in range(3)]  # num_generations = 3, adjacent
    completions = [
        [{"role": "assistant", "content": t}] for t in [gold_thesis(), "", "<decision>SELL</decision>"] * 2
    ]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    metrics: dict[str, list[float]] = defaultdict(list)
    extra: dict[str, list] = defaultdict(list)
    kwargs = {k: [x[k] for x in inputs] for k in keys}
    kwargs.update(
        trainer_state=None,
        log_metric=lambda n, v: metrics[n].append(v),
        log_extra=lambda c, v: extra[c].extend(v),
    )
    funcs = [
        structure_reward,
        evidence_reward,
        decision_reward,
        market_reward,
        loop_penalty,
        make_combined_reward(),
        make_combined_reward("dsr"),
    ]
    assert len({f.__name__ for f in funcs}) == len(funcs)
    for fn in funcs:
        out = fn(
            prompts=[x["prompt"] for x in inputs], completions=completions, completion_ids=[[0]] * 6, **kwargs
        )
        assert len(out) == 6
        assert all(v is None or math.isfinite(v) for v in out)
    assert extra["decision"] == ["BUY", "INVALID", "SELL"] * 2 and len(extra["hallucination_rate"]) == 6
    assert "evidence/hallucination_rate" in metrics and "decision/valid" in metrics


def test_templated_repetition_is_a_mild_penalty_not_a_loop_verdict():
    phrase = (
        "I read this item as a clear negative that could push the price lower in the days ahead "
        "and I would not hold the shares into that risk"
    )  # 27 words
    bullets = {
        k: [f"{phrase}, {b}" if i == 0 else b for i, b in enumerate(v)] for k, v in GOLD_BULLETS.items()
    }
    # the phrase opens 6 bullets of a ~900-word thesis: 120 of its 10-gram positions repeat 4+ times,
    # 0.15 per 800 tokens: a style defect (-0.3), far from a loop verdict (-1)
    rate, penalty = loop_stats(assemble(bullets))
    assert 0 < rate <= 0.15 and -0.3 <= penalty < 0


def test_rewards_are_pure_and_grounding_never_reads_the_future():
    from thesisgym.rewards.base import clear_caches

    texts = [gold_thesis(), gold_thesis().replace("[T1]", "[T9]"), assemble(decision="SELL")]
    now = [make_row()] * 3
    future = [make_row(label="STRONG_SELL", fwd_return=-0.2, fwd_vol=0.01)] * 3
    for fn in (structure_reward, evidence_reward, loop_penalty):
        first = call(fn, texts, now)
        clear_caches()
        assert call(fn, texts, now) == first  # deterministic, cache-independent
        assert call(fn, texts, future) == first  # label / forward return cannot move grounding scores


def test_guarded_recipes_are_the_paper_formula_at_full_evidence_and_fall_with_it():
    row = make_row()
    cols = {k: [v] for k, v in row.items() if k != "prompt"}

    def fixed(prompts=None, completions=None, **kw):
        return [0.8] * len(completions)

    honest = gold_thesis()
    weak = assemble({k: v[:2] for k, v in GOLD_BULLETS.items()})  # 2 bullets per section: E < 1
    for kind, paper in (("fsr", fsr), ("dsr", dsr)):
        fn = make_combined_reward(kind, consistency=fixed)
        paper_fn = make_combined_reward(kind, consistency=fixed, formula="paper")
        r = score_completion(honest, row)["market"]
        (g_honest,) = fn(prompts=[None], completions=[honest], **cols)
        assert g_honest == pytest.approx(paper(r, 0.8) + 0.5 * (0.8 - 1))  # E = 1, no loop
        (g_weak,) = fn(prompts=[None], completions=[weak], **cols)
        (p_weak,) = paper_fn(prompts=[None], completions=[weak], **cols)
        e_weak = score_completion(weak, row)["evidence"]
        q = 0.8 * e_weak
        assert e_weak < 1 and g_weak == pytest.approx(paper(r, q) + e_weak - 1 + 0.5 * (q - 1))
        assert g_weak < g_honest and p_weak == pytest.approx(paper(r, 0.8))  # the paper formula cannot tell
        # no decision: the worst call (-clip), never the paper's milder missing penalty
        hidden = assemble(decision=None)
        (g_hidden,) = fn(prompts=[None], completions=[hidden], **cols)
        assert g_hidden == pytest.approx(paper(-3.0, 0.8) + 0.5 * (0.8 - 1)) and g_hidden < g_honest
    with pytest.raises(ValueError, match="formula"):
        make_combined_reward("fsr", formula="nope")


# --- errors: one counted path, consistency failures included ------------------------------------------
def test_consistency_failures_in_a_combined_reward_are_counted_and_raise_in_strict_mode():
    from thesisgym.rewards.base import reset_reward_errors, reward_errors, strict_rewards

    row = make_row(fwd_return=0.07, fwd_vol=0.035)
    reset_reward_errors()
    junk = {
        "raises": lambda prompts, completions, **kw: 1 / 0,
        "short": lambda prompts, completions, **kw: [0.5],  # one value for two completions
        "nan": lambda prompts, completions, **kw: [float("nan"), "high"],
    }
    for name, fn in junk.items():
        logged: dict[str, float] = {}
        values = call(make_combined_reward("fsr", consistency=fn), [gold_thesis()] * 2, [row] * 2,
                      log_metric=lambda k, v, d=logged: d.__setitem__(k, v))
        assert all(v is not None for v in values), name
        assert logged["fsr_reward/s_is_placeholder"] == 1.0, name  # the grounding placeholder stood in
    assert reward_errors("fsr_reward/consistency") == 1 + 1 + 2
    none_is_not_an_error = lambda prompts, completions, **kw: [None, 0.5]  # noqa: E731
    call(make_combined_reward("fsr", consistency=none_is_not_an_error), [gold_thesis()] * 2, [row] * 2)
    assert reward_errors("fsr_reward/consistency") == 4
    with strict_rewards(), pytest.raises(ZeroDivisionError):
        call(make_combined_reward("fsr", consistency=junk["raises"]), [gold_thesis()], [row])
    reset_reward_errors()


# --- the loop term cannot be diluted ----------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    copies=st.integers(4, 12),
    filler=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta",
                                     "lambda", "zeta", "eta", "iota", "rho", "tau", "phi", "chi"]),
                    min_size=0, max_size=3000),
    where=st.sampled_from(["tail", "think", "head"]),
)
def test_adding_text_never_lowers_the_loop_penalty(copies, filler, where):
    from thesisgym.rewards.loops import loop_stats

    phrase = "tilts the balance toward upside for the shares over the coming week as the source says"
    base = gold_thesis().replace("<conclusion>", "<conclusion>" + " ".join([phrase] * copies) + " ", 1)
    extra = " ".join(filler)
    padded = {"tail": base + "\n" + extra, "think": base.replace("<think>", "<think>" + extra + " ", 1),
              "head": extra + "\n" + base}[where]
    assert loop_stats(padded)[1] <= loop_stats(base)[1] + 1e-12


def test_skill_curve_arithmetic():
    from thesisgym.rewards.skill import skill_curve

    # two rows; the oracle is right on both; a constant BUY is right on one
    table = [{"STRONG_SELL": -1, "SELL": -1, "HOLD": -1, "BUY": 1, "STRONG_BUY": -1},
             {"STRONG_SELL": -1, "SELL": 1, "HOLD": -1, "BUY": -1, "STRONG_BUY": -1}]
    curve = skill_curve("weighted", "label oracle", table, ["BUY", "SELL"], ["BUY", "SELL"])
    assert curve.reward_at[0.0] == pytest.approx(-0.6) and curve.reward_at[1.0] == pytest.approx(1.0)
    assert curve.constants["BUY"] == 0.0 and curve.majority == ("SELL", 0.5) or curve.majority[1] == 0.5
    # R(p) = -0.6 + 1.6 p reaches the best constant (0) at p* = 0.375; accuracy p + (1 - p)/5 = 0.5 there too
    assert curve.p_star == pytest.approx(0.375) and curve.p_majority == pytest.approx(0.375) and curve.passes


def test_evidence_index_memo_is_keyed_on_everything_the_index_reads():
    from thesisgym.rewards.base import clear_caches

    a = [{"id": "N1", "text": "Revenue rose 12 %", "section": "news"}]
    same = [dict(a[0])]
    other_section = [{**a[0], "section": "fundamentals"}]
    other_text = [{**a[0], "text": "Revenue fell 12 %"}]
    assert evidence_index(a) is evidence_index(same)  # content key, not object identity
    assert evidence_index(other_section).items["N1"].section == "fundamentals"
    assert evidence_index(a).items["N1"].section == "news"
    assert evidence_index(other_text).items["N1"].norm_text != evidence_index(a).items["N1"].norm_text
    first = evidence_index(a)
    clear_caches()
    assert evidence_index(a) is not first


def test_the_cached_evidence_index_keeps_every_field_it_reads():
    """The content-keyed index cache rebuilds items from its key: the date (time claims) must be in it."""
    from thesisgym.rewards.base import evidence_index

    ev = [{"id": "N1", "text": "Acme beats estimates by 5%", "section": "news", "date": "2024-03-01"},
          {"id": "N2", "text": "Acme beats estimates by 5%", "section": "news"}]
    index = evidence_index(ev)
    assert index.items["N1"].date == "2024-03-01" and index.items["N2"].date == ""
    moved = evidence_index([{**ev[0], "date": "2024-02-01"}, ev[1]])
    assert moved.items["N1"].date == "2024-02-01"  # another date is another key, not a cache hit


class _GcPasses(list):
    """The generation of every collection while registered in gc.callbacks (remove it after)."""

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "stop":
            self.append(info["generation"])


def _gc_passes() -> _GcPasses:
    import gc

    passes = _GcPasses()
    gc.callbacks.append(passes)
    return passes


def test_the_cycle_collector_is_paused_while_a_batch_is_scored_and_restored_after():
    import gc
    import threading

    from thesisgym.rewards import base
    from thesisgym.rewards.base import collector_paused, per_completion, strict_rewards

    seen: list[bool] = []

    def score(i: int, completion: str) -> float:
        seen.append(gc.isenabled())
        if i == 1:
            raise RuntimeError("a checker bug")  # counted, scored the minimum; the pause still ends
        return 0.5

    assert gc.isenabled()
    assert per_completion(["a", "b"], score, minimum=0.0, lo=0.0, hi=1.0) == [0.5, 0.0]
    assert seen == [False, False] and gc.isenabled()
    with strict_rewards(), pytest.raises(RuntimeError):  # the error passes through the pause here
        per_completion(["a", "b"], score, minimum=0.0, lo=0.0, hi=1.0)
    assert gc.isenabled()

    # nested and concurrent pauses: the last one out resumes it, whichever entered first
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    def other_batch() -> None:
        with collector_paused():
            entered.set()
            release.wait(timeout=30)
        done.set()

    worker = threading.Thread(target=other_batch)
    passes = _gc_passes()
    try:
        worker.start()
        entered.wait(timeout=30)
        with collector_paused(), collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the other thread's batch is still running
        # a load that always has a batch in flight still collects, every OVERLAP_COLLECT batches
        passes.clear()
        for _ in range(base.OVERLAP_COLLECT):
            per_completion(["a"], lambda i, c: 0.5, minimum=0.0, lo=0.0, hi=1.0)
        assert len(passes) == 1 and not gc.isenabled()
        # the first batch in leaves first: the collector stays paused until this thread's batch ends
        with collector_paused():
            release.set()
            done.wait(timeout=30)
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        release.set()
        worker.join()
        gc.callbacks.remove(passes)
    assert gc.isenabled()


def test_a_collector_the_caller_switched_off_stays_off_and_is_never_run():
    import gc

    from thesisgym.rewards import base
    from thesisgym.rewards.base import collector_paused, per_completion

    passes = _gc_passes()
    gc.disable()
    try:
        with collector_paused():  # batches that end inside another pause: none collects
            for _ in range(2 * base.OVERLAP_COLLECT):
                per_completion(["a"], lambda i, c: 0.5, minimum=0.0, lo=0.0, hi=1.0)
        assert not gc.isenabled() and passes == []
    finally:
        gc.enable()
        gc.callbacks.remove(passes)
