"""Near-duplicate merging, suspicious timestamps and the coverage report (API and CLI)."""

from __future__ import annotations

import pandas as pd

from thesisgym.data.quality import (
    coverage_table,
    coverage_warnings,
    flag_suspicious_timestamps,
    merge_near_duplicates,
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


def test_headline_naming_a_future_quarter_is_flagged_and_unstarted_ones_can_be_dropped():
    from thesisgym.data.quality import quality_pass

    ev = _ev(
        [
            ("AAA", "2020-04-16 03:59", "Fund's Q4 2020 Investor Letter"),  # the quarter has not started
            ("AAA", "2020-11-20", "Fund expects Q4 2020 growth"),  # not ended: flagged only
            ("AAA", "2021-01-20", "Q4 2020 results"),  # after the quarter: fine
            ("AAA", "2020-05-20", "10-Q Q2 FY2021 filed"),  # a fiscal label is not a calendar quarter
        ]
    )
    flags = flag_suspicious_timestamps(ev)
    assert (flags["count"], flags["not_started"]) == (2, 1)
    assert [e["names"] for e in flags["examples"]] == ["Q4 2020", "Q4 2020"]
    kept, q = quality_pass(ev, suspicious="drop")
    assert q["dropped_not_started_quarter"] == 1 and "Investor Letter" not in " ".join(kept["title"])
    assert len(quality_pass(ev)[0]) == 4  # default: flag only


def test_coverage_table_warnings_and_cli(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.build.contexts import build_contexts
    from thesisgym.cli import app
    from thesisgym.data.synth import SynthConfig, generate_market

    store = generate_market(SynthConfig(n_tickers=2, n_days=240, seed=1))
    store.events = store.events[store.events["kind"] != "insider"].reset_index(drop=True)
    ds = build_contexts(store, show_progress=False)
    cov = coverage_table({"train": ds})
    tech = cov[(cov["section"] == "technical")]
    assert (tech["share"] == 1.0).all() and (tech["prompts"] == len(ds) // 2).all()
    assert "split train: no insider evidence in any prompt" in coverage_warnings(cov)
    store.save(tmp_path / "m")
    res = CliRunner().invoke(app, ["data", "info", str(tmp_path / "m"), "--coverage"])
    assert res.exit_code == 0, res.output
    assert "coverage per ticker x split" in res.output and "no insider evidence" in res.output


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
        f"data import --prices {prices} --earnings {earn} --insider {ins} --insider-delay 3 --out {tmp_path / 's'}".split(),
    )
    assert res.exit_code == 0, res.output
    store = load_store(tmp_path / "s")
    assert sorted(store.events["kind"]) == ["fundamentals", "insider"]
    ins_meta = next(r for r in store.meta["imports"] if r["file"] == "ins.csv")
    assert ins_meta["dropped_other_tickers"] == 1 and ins_meta["notes"] == [
        "public time: trade date + 3 business days (no filing date in the file)"
    ]
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
    meta = json.loads((tmp_path / "d" / "build_meta.json").read_text())
    rows = [r for r in meta["coverage"] if r["section"] == "technical" and r["split"] == "train"]
    assert len(rows) == 3 and all(r["share"] == 1.0 for r in rows)
    assert sum(r["prompts"] for r in rows) == meta["counts"]["train"]["rows"]
