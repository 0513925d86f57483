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
        [{"ticker": t, "published_at": pd.Timestamp(p, tz="UTC"), "kind": "news", "source": "w", "title": h, "text": "",
          "value": float("nan"), "sentiment": float("nan")} for t, p, h in rows]
    )


def test_near_duplicates_are_merged_and_counted_keeping_the_earliest():
    ev = _ev([
        ("AAA", "2020-01-02 10:00", "Apple beats estimates - Reuters"),
        ("AAA", "2020-01-03 10:00", "apple beats estimates!"),
        ("AAA", "2020-01-09 10:00", "Apple beats estimates"),  # outside the 3-day window of the previous copy
        ("BBB", "2020-01-02 11:00", "Apple beats estimates"),  # another ticker
    ])
    out, n = merge_near_duplicates(ev, window_days=3)
    assert n == 1
    assert out["published_at"].tolist() == [ev["published_at"][0], ev["published_at"][2], ev["published_at"][3]]


def test_headline_naming_a_future_quarter_is_flagged():
    ev = _ev([("AAA", "2020-04-16 03:59", "Fund's Q4 2020 Investor Letter"), ("AAA", "2021-01-20", "Q4 2020 results")])
    flags = flag_suspicious_timestamps(ev)
    assert flags["count"] == 1 and flags["examples"][0]["names"] == "Q4 2020"


def test_coverage_table_warnings_and_cli(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.context.build import build_contexts
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
