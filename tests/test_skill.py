"""Skill measures (evaluate/skill.py): hand-computed IC and market-neutral return, and a constant's zero."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thesisgym.evaluate.skill import (
    Sample,
    mix_text,
    neutral_return,
    paired_accuracy,
    positions,
    skill_measures,
    spearman,
)
from thesisgym.schema import LABELS

# two dates x three tickers; fwd_vol 0.01 everywhere, so z = 100 * fwd_return
DATES = ["2024-01-05"] * 3 + ["2024-01-12"] * 3
DECISIONS = ["BUY", "HOLD", "SELL", "STRONG_BUY", "BUY", "BUY"]
RETURNS = [0.02, 0.01, -0.03, -0.01, 0.02, 0.00]


def test_positions_follow_the_schema_table():
    assert positions(["STRONG_SELL", "SELL", "HOLD", "BUY", "STRONG_BUY", "INVALID", None]).tolist() == \
        [-1.0, -0.5, 0.0, 0.5, 1.0, 0.0, 0.0]


def test_ic_and_neutral_book_by_hand():
    sample = Sample(DATES, RETURNS, [0.01] * 6)
    out = skill_measures(DECISIONS, sample, reps=50)
    # date 1: positions (.5, 0, -.5) and z (2, 1, -3) rank identically -> 1; book w = (.5, 0, -.5): .025
    # date 2: position ranks (3, 1.5, 1.5) vs z ranks (1, 3, 2) -> -1.5 / sqrt(1.5 * 2) = -0.8660;
    #         w = (1, .5, .5) - 2/3 scaled to gross 1 = (.5, -.25, -.25): -.005 - .005 = -.01
    assert out["ic_date"] == pytest.approx((1.0 - 1.5 / math.sqrt(3.0)) / 2)
    assert out["neutral"] == pytest.approx((0.025 - 0.01) / 2)
    # pooled: ranks (4, 2, 1, 6, 4, 4) vs (5.5, 4, 1, 2, 5.5, 3) -> 3.5 / sqrt(15.5 * 17)
    assert out["ic"] == pytest.approx(3.5 / math.sqrt(15.5 * 17))
    assert (out["rows"], out["dates"]) == (6, 2)
    assert out["mix_BUY"] == pytest.approx(0.5) and out["mix_STRONG_SELL"] == 0
    assert mix_text(out).startswith("BUY 50%")
    # two dates are too few for an interval: none rather than a false one
    assert math.isnan(out["ic_lo"])


def test_neutral_book_and_spearman_edge_cases():
    assert neutral_return(np.array([0.5, 0.5]), np.array([0.1, -0.1])) == 0.0
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0 and spearman([1, 2, 3], [5, 5, 5]) == 0.0
    assert math.isnan(spearman([1], [2]))
    from scipy.stats import spearmanr

    a, b = [3, 1, 2, 2, 5], [0.1, -0.4, 0.3, 0.2, 0.0]
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)


def test_one_name_cannot_be_hedged():
    assert math.isnan(neutral_return(np.array([0.5]), np.array([0.1])))
    # one row per date: no per-date figure, but the pooled IC still ranks across dates
    out = skill_measures(["BUY", "SELL", "HOLD"], Sample(["d1", "d2", "d3"], [0.02, -0.01, 0.0], [0.01] * 3), reps=20)
    assert math.isnan(out["ic_date"]) and math.isnan(out["neutral"]) and out["ic"] == pytest.approx(1.0)


def test_sections_are_ranked_apart_but_resampled_by_date():
    # the same six rows twice (two seeds); seed b reverses day 1's positions
    flipped = ["SELL", "HOLD", "BUY", *DECISIONS[3:]]
    sample = Sample(DATES * 2, RETURNS * 2, [0.01] * 12, sections=["a"] * 6 + ["b"] * 6)
    out = skill_measures(DECISIONS + flipped, sample, reps=20)
    assert (out["rows"], out["dates"]) == (12, 2)
    # day 1: IC +1 and -1, books +.025 and -.025 -> 0; day 2 as in the hand-computed case for both
    assert out["ic_date"] == pytest.approx(-1.5 / math.sqrt(3.0) / 2)
    assert out["neutral"] == pytest.approx(-0.01 / 2)
    with pytest.raises(ValueError, match="sections"):
        Sample(DATES, RETURNS, [0.01] * 6, sections=["a"])


def test_paired_accuracy_by_hand():
    labels = ["BUY", "SELL", "SELL", "HOLD", None, "BUY"]
    out = paired_accuracy(DECISIONS, labels, DATES, {"buy": ["BUY"] * 6, "hold": ["HOLD"] * 6}, reps=20)
    # labelled rows 0-3, 5: decisions right on 0, 2, 5 (3 of 5); BUY right on 0, 5; HOLD on 3
    assert out["labelled"] == 5 and out["accuracy"] == pytest.approx(3 / 5)
    assert out["acc_vs_buy"] == pytest.approx(1 / 5) and out["acc_vs_hold"] == pytest.approx(2 / 5)
    assert math.isnan(out["acc_vs_buy_lo"])  # two dates: too few for an interval
    with pytest.raises(ValueError, match="decisions for 6 labels"):
        paired_accuracy(DECISIONS, labels, DATES, {"short": ["BUY"]})


def test_rows_without_a_return_are_left_out_and_counted():
    sample = Sample(DATES, [*RETURNS[:5], None], [0.01] * 5 + [0.01])
    assert sample.n_rows == 5 and sample.dropped == 1
    assert skill_measures(DECISIONS, sample, reps=20)["left_out"] == 1
    with pytest.raises(ValueError, match="decisions"):
        skill_measures(DECISIONS[:3], sample)


def test_a_reader_gets_an_interval_above_zero():
    rng = np.random.default_rng(3)
    n_dates, k = 40, 6
    dates = [f"d{i:03d}" for i in range(n_dates) for _ in range(k)]
    ret = rng.normal(0, 0.03, n_dates * k)
    dec = np.where(ret + rng.normal(0, 0.02, len(ret)) > 0, "BUY", "SELL")
    out = skill_measures(dec, Sample(dates, ret, [0.03] * len(ret)), block=2, reps=200)
    assert out["ic_lo"] > 0 and out["ic_date_lo"] > 0 and out["neutral_lo"] > 0


@settings(max_examples=30, deadline=None)
@given(
    decision=st.sampled_from([*LABELS, "INVALID"]),
    n_dates=st.integers(1, 30),
    k=st.integers(1, 5),
    seed=st.integers(0, 10_000),
)
def test_a_constant_policy_has_zero_skill_with_interval_exactly_zero(decision, n_dates, k, seed):
    rng = np.random.default_rng(seed)
    dates = [f"2024-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(n_dates) for _ in range(k)]
    ret = rng.normal(0, 0.05, len(dates))
    vol = rng.uniform(0.01, 0.1, len(dates))
    out = skill_measures([decision] * len(dates), Sample(dates, ret, vol), block=2, reps=50, seed=seed)
    for col in ("ic", "ic_date", "neutral"):
        assert (out[col], out[f"{col}_lo"], out[f"{col}_hi"]) == (0.0, 0.0, 0.0)
