"""The learnability check (evaluate/learnability.py) tells a market that pays reading from a constant-optimal one."""

from __future__ import annotations

import numpy as np
import pytest

from thesisgym.evaluate.learnability import check_learnability, markdown, row_features

TICKERS = ("AAA", "BBB", "CCC", "DDD", "EEE", "FFF")
GOOD = "{t} wins $400 million contract; backlog up 6.0%"
BAD = "{t} loses key customer; 12.0% of revenue at risk"


def _rows(n_dates: int, start: int, *, pays: bool, seed: int) -> list[dict]:
    """One row per ticker and date: a news item that is good or bad news, a price item of noise.
    pays: the news decides the label and the forward return; else the return is noise and the label its class."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(start, start + n_dates):
        asof = str(np.datetime64("2023-01-06") + np.timedelta64(7 * d, "D"))  # weekly: 2-date blocks
        for t in TICKERS:
            good = bool(rng.random() < 0.5)
            noise = rng.normal(0, 0.01)
            ret = (0.03 if good else -0.03) + noise if pays else noise
            label = ("BUY" if good else "SELL") if pays else ("BUY" if noise > 0.01 else "SELL" if noise < -0.01 else "HOLD")
            evidence = [
                {"id": "T1", "section": "technical", "date": asof, "source": "prices",
                 "text": f"open 10.00 high 10.50 low 9.50 close 10.00 volume 1000 change {100 * rng.normal(0, 0.01):+.2f}%"},
                {"id": "N1", "section": "news", "date": asof, "source": "wire",
                 "text": (GOOD if good else BAD).format(t=t)},
            ]
            out.append({"ticker": t, "asof": asof, "variation": 0, "label": label, "fwd_return": ret, "fwd_vol": 0.02,
                        "evidence": evidence, "sections": ["technical", "news"]})
    return out


def _splits(pays: bool) -> dict[str, list[dict]]:
    return {"train": _rows(20, 0, pays=pays, seed=1), "val": _rows(6, 24, pays=pays, seed=2),
            "test": _rows(12, 40, pays=pays, seed=3)}


def test_a_market_that_pays_reading():
    res = check_learnability(_splits(True), evaluate_on=("test",), reward_rows=None, reps=200)
    chk = res.splits["test"]
    assert chk.accuracy.loc["reader", "accuracy"] > 0.9
    assert chk.skill.loc["reader", "ic_lo"] > 0.5 and chk.skill.loc["reader", "neutral_lo"] > 0
    assert chk.accuracy.loc["always BUY", "reader_minus_this_lo"] > 0
    # every recipe that pays for the decision ranks reading above every constant
    for recipe in ("weighted", "trading_r1", "market_only"):
        assert chk.rewards.loc[recipe, "reader_minus_best_lo"] > 0, recipe
    assert any(v.startswith("recipe weighted: reading pays") for v in chk.verdicts)
    assert "| decider |" in markdown(res)


def test_a_constant_optimal_market():
    res = check_learnability(_splits(False), evaluate_on=("test",), reward_rows=None, reps=200)
    chk = res.splits["test"]
    assert not any("reading pays" in v for v in chk.verdicts)
    assert chk.skill.loc["reader", "ic_lo"] <= 0 <= chk.skill.loc["reader", "ic_hi"]  # no signal, or none read
    assert chk.accuracy.loc["majority of train (HOLD)", "reader_minus_this"] <= 0.05


def test_one_class_train_makes_the_reader_that_constant():
    splits = {k: [dict(r, label="HOLD") for r in v] for k, v in _splits(False).items()}
    res = check_learnability(splits, evaluate_on=("test",), reward_rows=24, reps=50)
    chk = res.splits["test"]
    assert set(res.reader.decide(splits["test"])) == {"HOLD"}
    assert (chk.skill.loc["reader", "ic"], chk.skill.loc["reader", "ic_lo"], chk.skill.loc["reader", "ic_hi"]) == (0, 0, 0)
    assert any("a constant (HOLD)" in v for v in chk.verdicts)


def test_features_never_read_labels_returns_or_later_items():
    row = _rows(1, 0, pays=True, seed=5)[0]
    base = row_features(row)
    later = {"id": "N9", "section": "news", "date": "2099-01-01", "source": "wire", "text": GOOD.format(t="AAA")}
    changed = dict(row, label="STRONG_SELL", fwd_return=-9.0, fwd_vol=1.0, true_expected_return=-1.0,
                   evidence=[*row["evidence"], later])
    assert row_features(changed) == base


def test_a_dataset_without_train_or_evidence_is_a_value_error():
    with pytest.raises(ValueError, match="train"):
        check_learnability({"test": []})
    with pytest.raises(ValueError, match="evidence"):
        row_features({"ticker": "AAA", "asof": "2023-01-01"})
