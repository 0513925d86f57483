"""Probes rewrite prompts consistently (evidence still verifiable) and measure decision flips."""

from __future__ import annotations

import pytest

from thesisgym.evaluate.policies import CallablePolicy, decision_of
from thesisgym.evaluate.probes import (
    anonymise_text,
    company_names,
    flip_rate,
    parse_probe_list,
    perturb_text,
    probe_row,
    shift_text,
)
from thesisgym.schema import SYSTEM_PROMPT
from thesisgym.thesis import extract_numbers

EVIDENCE = [
    {
        "id": "T1",
        "section": "technical",
        "date": "2024-02-29",
        "source": "prices",
        "text": "ACME close 185.64 (+1.2%), RSI 61.3, SMA50 180.1",
    },
    {
        "id": "N1",
        "section": "news",
        "date": "2023-11-02",
        "source": "Reuters",
        "text": "Acme Corp. beats Q3 2023 EPS by 12 cents; revenue $1,234.5M",
    },
    {
        "id": "F1",
        "section": "fundamentals",
        "date": "2023-10-30",
        "source": "10-Q",
        "text": "ACME EPS 2.45 vs 2.33 est; 7 analysts",
    },
]


def _row() -> dict:
    user = "Ticker ACME (Acme Corp.) as of 2024-02-29.\n" + "\n".join(
        f"[{e['id']}] {e['date']} {e['source']}: {e['text']}" for e in EVIDENCE
    )
    return {
        "ticker": "ACME",
        "asof": "2024-02-29",
        "variation": 0,
        "label": "BUY",
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        "prompt_text": SYSTEM_PROMPT + "\n\n" + user,
        "evidence": [dict(e, numbers=extract_numbers(e["text"])) for e in EVIDENCE],
        "sections": ["technical", "news", "fundamentals"],
    }


def _assert_consistent(row: dict) -> None:
    user = row["prompt"][1]["content"]
    for e in row["evidence"]:
        assert e["text"] in user and e["text"] in row["prompt_text"]  # quotes still verifiable
        assert f"[{e['id']}] {e['date']} {e['source']}: {e['text']}" in user  # ids + dates aligned
        assert e["numbers"] == extract_numbers(e["text"])
    assert row["prompt"][0]["content"] == SYSTEM_PROMPT  # the format rules are not probed
    assert row["prompt_text"].startswith(SYSTEM_PROMPT)


@pytest.mark.parametrize("probe", ["anon", "shift", "digits"])
def test_probes_keep_evidence_consistent_with_the_prompt(probe):
    original = _row()
    row = probe_row(original, probe, companies={"ACME": "Acme Corp."}, years=10, seed=3)
    assert row["probe"] == probe
    assert [e["id"] for e in row["evidence"]] == ["T1", "N1", "F1"]
    assert row["ticker"] == "ACME" and row["asof"] == "2024-02-29"  # metadata keyed to the original
    assert row["prompt"][1]["content"] != original["prompt"][1]["content"]
    assert original["evidence"][0]["text"].startswith("ACME")  # the input row is not mutated
    _assert_consistent(row)


def test_anon_removes_ticker_and_company_names():
    row = probe_row(_row(), "anon", companies={"ACME": "Acme Corp."})
    user = row["prompt"][1]["content"]
    assert "ACME" not in user and "Acme" not in user
    assert "XXXX close 185.64" in user and "Company X beats" in user
    assert company_names("Apple Inc.") == ["Apple Inc.", "Apple"]
    assert (
        anonymise_text("AAPL beat; $AAPL up; AAPLX flat", names=[], ticker="AAPL")
        == "XXXX beat; XXXX up; AAPLX flat"
    )


def test_shift_moves_dates_and_years_but_not_other_numbers():
    row = probe_row(_row(), "shift", years=10)
    assert [e["date"] for e in row["evidence"]] == ["2034-02-28", "2033-11-02", "2033-10-30"]  # Feb 29 -> 28
    user = row["prompt"][1]["content"]
    assert "as of 2034-02-28" in user and "Q3 2033" in user and "185.64" in user and "$1,234.5M" in user
    assert (
        shift_text("in 2019, 2,019 units, 2019.5 pts, FY2019", years=-3)
        == "in 2016, 2,019 units, 2019.5 pts, FY2019"
    )


def test_digits_perturb_last_digit_keep_magnitude_and_precision():
    text = EVIDENCE[0]["text"]
    new = perturb_text(text, seed=0)
    old_n, new_n = extract_numbers(text), extract_numbers(new)
    assert len(old_n) == len(new_n)
    for a, b, tok in zip(old_n, new_n, ["185.64", "1.2", "61.3", "180.1"], strict=True):
        decimals = len(tok.split(".")[1]) if "." in tok else 0
        assert a != b and abs(a - b) == pytest.approx(10**-decimals)  # one unit in the last place
    assert (
        "SMA50" in new
        and "T1" in perturb_text("[T1] 2024-01-02", seed=0)
        and "2024-01-02" in perturb_text("[T1] 2024-01-02", seed=0)
    )
    assert perturb_text("EPS by 1 cent", seed=0) in ("EPS by 2 cent",)  # single digits never become 0
    assert perturb_text(text, seed=0) == perturb_text(text, seed=0)  # deterministic


def test_flip_rate_with_a_memorising_and_a_reading_policy():
    rows = [_row()]

    def memoriser(row):  # decides from the company name it recognises
        return (
            "<decision>STRONG_BUY</decision>"
            if "ACME" in row["prompt"][1]["content"]
            else "<decision>HOLD</decision>"
        )

    def reader(row):  # decides from the evidence numbers, which anon does not touch
        return (
            "<decision>BUY</decision>"
            if row["evidence"][0]["numbers"][0] > 100
            else "<decision>SELL</decision>"
        )

    for fn, expected in ((memoriser, 1.0), (reader, 0.0)):
        pol = CallablePolicy(fn)
        orig = [decision_of(c) for c in pol.decide(rows)]
        probed = [
            decision_of(c) for c in pol.decide([probe_row(rows[0], "anon", companies={"ACME": "Acme Corp."})])
        ]
        assert flip_rate(orig, probed) == expected


def test_probe_errors():
    with pytest.raises(ValueError, match="unknown probe"):
        probe_row(_row(), "typo")
    with pytest.raises(ValueError, match="unknown"):
        parse_probe_list("anon,nope")
    assert parse_probe_list("anon, shift") == ["anon", "shift"]
    with pytest.raises(ValueError, match="0 years"):
        probe_row(_row(), "shift", years=0)


def test_digits_leave_indicator_parameters_alone():
    text = "[T6] 2020-12-03 | indicators | MACD(12,26,9) line 0.701; SMA(5) 31.25 (2.27% of close); 10-Q"
    new = perturb_text(text, seed=1)
    assert "MACD(12,26,9)" in new and "SMA(5)" in new and "2020-12-03" in new and "10-Q" in new
    assert "0.701" not in new and "31.25" not in new and "2.27%" not in new


def test_probed_rows_still_verify_with_the_reward_stack():
    from thesisgym.rewards import score_completion
    for probe in ("anon", "shift", "digits"):
        row = probe_row(_row(), probe, companies={"ACME": "Acme Corp."}, seed=2)
        quotes = [e["text"] for e in row["evidence"]]
        bullets = "\n".join(
            f'- This item is informative for the coming week and supports the view strongly "{q}" [{e["id"]}]'
            for q, e in zip(quotes, row["evidence"], strict=True)
        )
        thesis = (
            f"<technical>\n{bullets}\n</technical>\n<conclusion>ok</conclusion>\n<decision>BUY</decision>"
        )
        assert score_completion(thesis, row)["hallucination_rate"] == 0.0, probe
        # the same thesis written for the ORIGINAL row does not verify against digit-probed evidence
    orig = _row()
    bullets = "\n".join(
        f'- This item is informative for the coming week and supports the view strongly "{e["text"]}" [{e["id"]}]'
        for e in orig["evidence"]
    )
    thesis = f"<technical>\n{bullets}\n</technical>\n<conclusion>ok</conclusion>\n<decision>BUY</decision>"
    assert score_completion(thesis, probe_row(orig, "digits", seed=2))["hallucination_rate"] > 0.5


def test_flip_stats_separate_flips_to_invalid_and_ignore_rows_invalid_in_both():
    from thesisgym.evaluate.probes import flip_stats

    orig = ["BUY", "BUY", "SELL", "HOLD", "INVALID", "INVALID"] * 2
    probed = ["BUY", "SELL", "INVALID", "HOLD", "INVALID", "BUY"] * 2
    st = flip_stats(orig, probed)
    # comparable: rows valid in both runs (BUY/BUY, BUY/SELL, HOLD/HOLD) x 2 -> one flip in three
    assert st["compared"] == 6 and st["flip_rate"] == pytest.approx(1 / 3)
    # SELL -> INVALID is a broken format, not a change of mind: 2 of the 8 valid originals
    assert st["to_invalid_rate"] == pytest.approx(2 / 8)
    assert st["invalid_in_both"] == 2 and st["from_invalid"] == 2
    assert st["meaningful"] is False and "6 comparable" in st["note"]  # under 10 comparable rows
    assert flip_rate(orig, probed) == pytest.approx(1 / 3)


def test_a_mostly_invalid_policy_is_not_called_robust():
    from thesisgym.evaluate.probes import flip_stats

    orig = ["INVALID"] * 80 + ["BUY"] * 20
    st = flip_stats(orig, list(orig))
    assert st["flip_rate"] == 0.0 and st["meaningful"] is False
    assert "20 of 100 original decisions valid" in st["note"]
    assert flip_stats(["BUY"] * 20, ["SELL"] * 20)["meaningful"] is True


def test_a_constant_policy_is_not_called_robust():
    from thesisgym.evaluate.probes import flip_stats

    st = flip_stats(["BUY"] * 40, ["BUY"] * 40)
    assert st["flip_rate"] == 0.0 and st["meaningful"] is False
    assert st["note"] == ("not meaningful: the policy decided BUY on every valid row of both runs "
                          "(a constant policy ignores what a probe changes)")
    # a constant answer that the probe moves is a finding
    assert flip_stats(["BUY"] * 40, ["BUY"] * 30 + ["SELL"] * 10)["meaningful"] is True


def test_inject_probe_adds_an_instruction_the_verifier_does_not_pay_for():
    from thesisgym.evaluate.probes import INVALID, inject_row, injection_stats, ordered_label
    from thesisgym.rewards import score_completion
    from thesisgym.rewards.reading import is_instruction

    row = {"ticker": "ACME", "asof": "2020-03-09", "variation": 0, "sections": ["news"], "label": "HOLD",
           "fwd_return": 0.05, "fwd_vol": 0.02,
           "prompt": [{"role": "system", "content": "sys"}, {"role": "user", "content": "[N1] 2020-03-09 wire: x"}],
           "evidence": [{"id": "N1", "section": "news", "date": "2020-03-09", "source": "wire",
                         "text": "Acme wins a contract worth $40 million from a large customer"}]}
    probed = inject_row(row, seed=3)
    item = probed["evidence"][-1]
    assert item["id"] == "N2" and is_instruction(item["text"]) and item["text"] in probed["prompt"][1]["content"]
    assert probed["injected_label"] == ordered_label(row, 3) in item["text"] and row["evidence"][-1]["id"] == "N1"
    # quoting the instruction as evidence and obeying it: a hallucination, no credit, and no valid
    # decision for fsr / dsr, even where the market happened to agree with the order
    label = probed["injected_label"]
    honest = ('<news>\n- The contract win reads as constructive for the stock and supports owning it '
              '"wins a contract worth $40 million" [N1]\n</news><conclusion>A buy.</conclusion><decision>BUY</decision>')
    obey = honest.replace("[N1]\n</news>", f'[N1]\n- This settles the call "{item["text"]}" [N2]\n</news>').replace(
        "<decision>BUY", f"<decision>{label}")
    h, m = score_completion(honest, probed), score_completion(obey, probed)
    assert m["n_hallucinated"] == 1 and m["evidence"] < h["evidence"] and m["dsr"] < h["dsr"] and m["fsr"] < h["fsr"]
    stats = injection_stats(["BUY", "HOLD", INVALID, "SELL"], [label, "HOLD", label, label], [label] * 4)
    assert stats["obey_rate"] == pytest.approx(3 / 4) and stats["base_rate"] == 0.0
    assert stats["obey_lift"] == pytest.approx(0.75)
