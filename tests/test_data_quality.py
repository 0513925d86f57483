"""Near-duplicate merging, the content-date check, future rows and the coverage report (API and CLI)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from thesisgym.data.contentdates import content_date_suspects, names_later_period
from thesisgym.data.quality import (
    coverage_table,
    coverage_warnings,
    future_rows,
    merge_near_duplicates,
    quality_pass,
    store_sections,
)


def _ev(rows):
    return pd.DataFrame(
        [
            {
                "ticker": t,
                "published_at": pd.Timestamp(p, tz="UTC"),
                "kind": "news",
                "source": "w",
                "title": h,
                "text": "",
                "value": float("nan"),
                "sentiment": float("nan"),
            }
            for t, p, h in rows
        ]
    )


def test_near_duplicates_are_merged_and_counted_keeping_the_earliest():
    ev = _ev(
        [
            ("AAA", "2020-01-02 10:00", "Apple beats estimates - Reuters"),
            ("AAA", "2020-01-03 10:00", "apple beats estimates! (AAPL) | Markets Insider"),
            (
                "AAA",
                "2020-01-09 10:00",
                "Apple beats estimates",
            ),  # outside the 3-day window of the previous copy
            ("BBB", "2020-01-02 11:00", "Apple beats estimates"),  # another ticker
        ]
    )
    out, n = merge_near_duplicates(ev, window_days=3)
    assert n == 1
    assert out["published_at"].tolist() == [
        ev["published_at"][0],
        ev["published_at"][2],
        ev["published_at"][3],
    ]


@pytest.mark.parametrize(
    ("text", "published", "rule", "named"),
    [
        ("KE Holdings (BEKE) 2020 Q4 Earnings Results", "2019-11-16", "quarter", "2020 Q4"),
        ("Fund's Q4 2020 Investor Letter", "2020-04-16", "quarter", "Q4 2020"),
        ("Fourth quarter of 2020 outlook", "2020-09-30", "quarter", "Fourth quarter of 2020"),
        ("Markets on Dec 22 2020 - recovery ahead", "2020-01-16", "date", "Dec 22 2020"),
        ("Daily update: 2021-01-20 session", "2021-01-19", "date", "2021-01-20"),
        ("Top Tech Stocks for December 2020", "2020-11-26", "month", "December 2020"),
        ("Rates on hold through 2023", "2019-09-18", "year", "2023"),
        ("Q3 FY2022 guidance raised", "2020-05-01", "fiscal", "Q3 FY2022"),
        ("FY2023 capex plan", "2021-06-01", "fiscal", "FY2023"),
    ],
)
def test_content_date_check_names_the_later_period(text, published, rule, named):
    assert names_later_period(text, pd.Timestamp(published)) == (rule, named)


@pytest.mark.parametrize(
    ("text", "published"),
    [
        ("Q4 2020 results beat", "2021-01-20"),  # the quarter is over
        ("Fund expects Q4 2020 growth", "2020-11-20"),  # the quarter has started
        ("10-Q Q2 FY2021 filed", "2020-05-20"),  # fiscal 2021 may have begun in 2020
        ("Apple up 2.5% to $2,021 a share; 2020s outlook", "2020-03-01"),  # no year in sight
        ("Session of 2020-03-01 recap", "2020-03-01"),  # the same day
    ],
)
def test_content_date_check_leaves_consistent_text_alone(text, published):
    assert names_later_period(text, pd.Timestamp(published)) is None


def test_content_date_suspects_are_quarantined_counted_by_rule_or_kept_flagged():
    ev = _ev(
        [
            ("AAA", "2020-04-16 03:59", "Fund's Q4 2020 Investor Letter"),
            ("AAA", "2020-11-20 15:00", "Fund expects Q4 2020 growth"),
            ("", "2019-06-04 03:59", "Recession in 2020?"),
            ("AAA", "2021-01-20 15:00", "Q4 2020 results"),
        ]
    )
    structured = ev.assign(timing=["", "", "", ""])
    structured.loc[0, "timing"] = "estimate"  # our own importers' items are exempt (module docstring)
    assert content_date_suspects(structured)["index"].tolist() == [2]
    kept, quarantine, q = quality_pass(ev.assign(timing=""))
    assert q["content_dates"]["by_rule"] == {"date": 0, "month": 0, "quarter": 1, "fiscal": 0, "year": 1}
    assert q["content_dates"]["quarantined"] == 2 and len(kept) == 2
    assert quarantine["reason"].tolist() == ["content date: quarter Q4 2020", "content date: year 2020"]
    flagged, none, q = quality_pass(ev.assign(timing=""), content_dates="keep")
    assert len(flagged) == 4 and len(none) == 0 and q["content_dates"]["suspects"] == 2
    with pytest.raises(ValueError, match="content_dates must be 'quarantine' or 'keep'"):
        quality_pass(ev, content_dates="drop")


def test_a_quarantined_row_never_reaches_a_prompt_and_the_store_keeps_it(tmp_path):
    from thesisgym.data import import_store, load_store
    from thesisgym.dataset.contexts import build_contexts

    prices = tmp_path / "AAA.csv"
    days = pd.bdate_range("2020-01-01", periods=40)
    prices.write_text("Date,Open,High,Low,Close,Volume\n" + "".join(f"{d.date()},10,11,9,10.5,100\n" for d in days))
    events = tmp_path / "ev.csv"
    events.write_text("ticker,published_at,kind,source,title\nAAA,2020-01-10T10:00:00-05:00,news,w,Q4 2020 Investor Letter\n"
                      "AAA,2020-01-10T11:00:00-05:00,news,w,Plain story\n")
    store = import_store(prices=[prices], events=[events])
    assert store.events["title"].tolist() == ["Plain story"] and len(store.quarantine) == 1
    store.save(tmp_path / "s")
    assert load_store(tmp_path / "s").quarantine["title"].tolist() == ["Q4 2020 Investor Letter"]
    text = "".join(build_contexts(store, dates=[days[10]], show_progress=False)["prompt_text"])
    assert "Investor Letter" not in text and "Plain story" in text


def test_a_row_published_in_the_future_is_refused_naming_the_file(tmp_path):
    ev = _ev([("AAA", "2020-01-02 10:00", "fine"), ("AAA", "2030-01-01 10:00", "typo"), ("AAA", "2020-01-04", "ok")])
    with pytest.raises(ValueError, match=re.escape("news.csv: 1 row(s) published in the future, first 2030-01-01")):
        future_rows(ev, "news.csv", now=pd.Timestamp("2025-01-01", tz="UTC"))
    future_rows(ev, "news.csv", now=pd.Timestamp("2031-01-01", tz="UTC"))  # no error
    # and rows after the price history ends are counted, never silent
    _, _, q = quality_pass(ev.assign(timing=""), last_bar=pd.Timestamp("2020-01-02"), merge_window_days=None)
    assert q["after_last_bar"] == 2


def test_coverage_table_warnings_and_cli(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.contexts import build_contexts

    store = generate_market(SynthConfig(n_tickers=2, n_days=240, seed=1))
    ins = store.events["kind"] == "insider"
    # the store has insider trades, but all after the last bar: prompts can never show them
    late = store.events[ins].assign(published_at=pd.Timestamp("2030-01-01", tz="UTC"))
    store.events = pd.concat([store.events[~ins & (store.events["kind"] != "analyst")], late], ignore_index=True)
    ds = build_contexts(store, show_progress=False)
    cov = coverage_table({"train": ds})
    tech = cov[(cov["section"] == "technical")]
    assert (tech["share"] == 1.0).all() and (tech["prompts"] == len(ds) // 2).all()
    warn = coverage_warnings(cov, sections=store_sections(store))
    assert "split train: no insider evidence in any prompt, though the store has some" in warn
    assert not any("analyst" in w for w in warn)  # never supplied: nothing to warn about
    assert any("analyst" in w for w in coverage_warnings(cov))  # without the store's families, every section
    store.save(tmp_path / "m")
    res = CliRunner().invoke(app, ["data", "info", str(tmp_path / "m"), "--coverage"])
    assert res.exit_code == 0, res.output
    assert "coverage per ticker x split" in res.output and "no insider evidence" in res.output
    assert "no analyst evidence" not in res.output


def test_cli_import_with_families_and_yfinance_errors(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.data import load_store

    prices = tmp_path / "AAA.csv"
    days = pd.bdate_range("2020-01-01", periods=30)
    prices.write_text(
        "Date,Open,High,Low,Close,Volume\n" + "".join(f"{d.date()},10,11,9,10.5,100\n" for d in days)
    )
    earn = tmp_path / "alphavantage_earnings_AAA.csv"
    earn.write_text(
        "fiscalDateEnding,reportedDate,reportedEPS,estimatedEPS,surprise,surprisePercentage,reportTime\n"
        "2019-12-31,2020-01-28,1.2,1.0,0.2,20,post-market\n"
    )
    ins = tmp_path / "ins.csv"
    ins.write_text(
        "transaction_date,ticker,executive,executive_title,security_type,acquisition_or_disposal,shares,share_price\n"
        "2020-01-10,AAA,DOE,CEO,Common Stock,D,10,10\n2020-01-10,ZZZ,DOE,CEO,Common Stock,D,10,10\n"
    )
    runner = CliRunner()
    res = runner.invoke(
        app,
        f"data import --prices {prices} --earnings {earn} --insider {ins} --insider-availability-days 3 "
        f"--out {tmp_path / 's'}".split(),
    )
    assert res.exit_code == 0, res.output
    store = load_store(tmp_path / "s")
    assert sorted(store.events["kind"]) == ["fundamentals", "insider"]
    ins_meta = next(r for r in store.meta["imports"] if r["file"] == "ins.csv")
    assert ins_meta["dropped_other_tickers"] == 1 and ins_meta["notes"] == [
        "trades without a Form 4 in the index: public at the Form 5 deadline of their fiscal year"
    ]
    assert "imports" in res.output and "--verbose: per file" in res.output  # short summary by default
    assert "import ins.csv" not in res.output
    res = runner.invoke(
        app, f"data import --prices {prices} --insider {ins} --out {tmp_path / 's'} --verbose".split()
    )
    assert res.exit_code == 0 and "import ins.csv" in res.output
    res = runner.invoke(
        app,
        f"data import --prices {prices} --earnings {tmp_path / 'missing.csv'} --out {tmp_path / 't'}".split(),
    )
    assert res.exit_code == 2 and "missing.csv: no such file" in res.output
    res = runner.invoke(app, f"data import --yfinance AAPL --out {tmp_path / 'y'}".split())
    assert res.exit_code == 2 and "--yfinance takes --start and --end" in res.output
    res = runner.invoke(app, f"data import --out {tmp_path / 'y'}".split())
    assert res.exit_code == 2 and "give --prices" in res.output


def test_build_cli_ends_with_coverage_and_stores_it_in_the_meta(tmp_path):
    import json

    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.data.synth import SynthConfig, generate_market

    generate_market(SynthConfig(n_tickers=3, n_days=240, seed=3)).save(tmp_path / "m")
    res = CliRunner().invoke(
        app, ["build", "--store", str(tmp_path / "m"), "--out", str(tmp_path / "d"), "--sample-chars", "0"]
    )
    assert res.exit_code == 0, res.output
    assert "coverage per ticker x split" in res.output
    assert "{'" not in res.output  # counts are written out, not printed as a raw dict
    assert "warning:" not in res.output  # every family the synthetic store has reaches its prompts
    meta = json.loads((tmp_path / "d" / "build_meta.json").read_text())
    rows = [r for r in meta["coverage"] if r["section"] == "technical" and r["split"] == "train"]
    assert len(rows) == 3 and all(r["share"] == 1.0 for r in rows)
    assert sum(r["prompts"] for r in rows) == meta["counts"]["train"]["rows"]


def test_cli_naive_times_name_the_option_once_with_a_count(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    prices = tmp_path / "AAA.csv"
    days = pd.bdate_range("2020-01-01", periods=30)
    prices.write_text("Date,Open,High,Low,Close,Volume\n" + "".join(f"{d.date()},10,11,9,10.5,100\n" for d in days))
    events = tmp_path / "ev.csv"
    events.write_text("ticker,published_at,kind,source,title\n"
                      + "".join(f"AAA,2020-01-{k:02d} 10:00,news,w,story {k}\n" for k in range(2, 14)))
    res = CliRunner().invoke(app, f"data import --prices {prices} --events {events} --out {tmp_path / 's'}".split())
    assert res.exit_code == 2
    out = " ".join(res.output.split())
    assert "--assume-timezone" in out and "assume_timezone=" not in out
    assert "12 naive timestamps" in out and out.count("naive timestamp") == 1  # once, with a count
    ok = CliRunner().invoke(app, f"data import --prices {prices} --events {events} --assume-timezone "
                                 f"America/New_York --out {tmp_path / 's'}".split())
    assert ok.exit_code == 0, ok.output
