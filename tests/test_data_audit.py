"""`thesisgym data audit`: every prompt item re-dated from the store; each kind of leak is found, a clean
build passes, and the CLI exits 1 on a leak (synthetic stores here; the shared data in the slow test)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thesisgym.data.actions import split_actions
from thesisgym.data.store import MarketStore
from thesisgym.data.validate import validate_events
from thesisgym.dataset.leakage import audit_prompts
from thesisgym.dataset.splits import SplitConfig, build_splits

NY = "America/New_York"
CFG = SplitConfig(train_end=0.6, val_end=0.8, embargo_days=15)
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _store(*, actions: bool = True) -> MarketStore:
    """AAA over 220 business days with a 2:1 split on day 150 (the prices are split-adjusted), news,
    an insider trade dated by the availability rule, and an EPS adjusted as of the last day."""
    days = pd.bdate_range("2020-01-01", periods=220)
    rng = np.random.default_rng(0)
    raw = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, len(days))))
    raw[150:] /= 2  # traded at half the price from the split on
    adj = raw / np.where(np.arange(len(days)) < 150, 2.0, 1.0)
    bars = pd.DataFrame({"ticker": "AAA", "date": days, "open": adj, "high": adj * 1.01, "low": adj * 0.99,
                         "close": adj, "volume": 1e6})
    news = [("AAA", d + pd.Timedelta(hours=14), "news", "wire", f"AAA story {i}", "", "")
            for i, d in enumerate(days[::3].tz_localize(NY))]
    other = [
        ("AAA", pd.Timestamp("2020-03-20 23:59", tz=NY), "insider", "insider trade (filing date unknown)",
         "DOE, JANE (CEO) sold {{sh:1,000}} Common Stock at {{ps:40.00}} on 2020-03-06", "2020-03-06",
         "availability rule"),
        ("AAA", pd.Timestamp("2020-04-28 16:30", tz=NY), "fundamentals", "earnings",
         "AAA quarter reported: EPS {{ps:0.50}}", str(days[-1].date()), "report time"),
    ]
    rows = [(*r[:5], "", "") for r in news] + [(*r[:5], r[5], r[6]) for r in other]
    ev = pd.DataFrame(rows, columns=["ticker", "published_at", "kind", "source", "title", "basis_date", "timing"])
    ev["published_at"] = pd.to_datetime(ev["published_at"], utc=True)
    kw = {"actions": split_actions([("AAA", str(days[150].date()), 2.0)])} if actions else {}
    return MarketStore(bars=bars, events=validate_events(ev), name="aaa", **kw)


def _built(tmp_path: Path, store: MarketStore, name: str = "s") -> tuple[Path, Path]:
    sp, dp = tmp_path / name, tmp_path / f"{name}-ds"
    store.save(sp)
    build_splits(store, CFG, out=dp, store_path=sp, show_progress=False)
    return sp, dp


def _family(report, name: str) -> dict:
    return next(f for f in report.families if f["family"] == name)


def test_a_clean_build_passes_and_counts_every_item(tmp_path):
    sp, dp = _built(tmp_path, _store())
    report = audit_prompts(dp)
    assert report.ok, report.to_json()
    assert report.prompts["prompts"] > 50 and report.prompts["prices_off_basis"] == 0
    assert _family(report, "insider")["insider_unverifiable"] > 0  # no filing record: counted, not a leak
    assert sum(f["items"] for f in report.families) > 1000
    # a store audits too: its canonical prompts are built first
    assert audit_prompts(sp, config=CFG).prompts == report.prompts


def test_items_a_store_says_were_published_after_the_cutoff_are_leaks(tmp_path):
    sp, dp = _built(tmp_path, _store())
    store = MarketStore.load(sp)
    shown = store.events["title"] == "AAA story 20"
    # the record now says: published after that day's close (16:30, the same date as shown)
    store.events.loc[shown, "published_at"] += pd.Timedelta(hours=2, minutes=30)
    store.events.loc[store.events["title"] == "AAA story 21", "title"] = "AAA story 11, retitled"
    store.save(sp)
    report = audit_prompts(dp)
    news = _family(report, "news")
    assert news["after_cutoff"] > 0 and news["unmatched"] > 0 and not report.ok
    assert {e["text"] for e in report.examples["after_cutoff"]} == {"AAA story 20"}


def test_insider_trades_shown_before_their_form4_are_found_with_a_reference(tmp_path):
    sp, dp = _built(tmp_path, _store())
    ref = _store()
    ref.filings = pd.DataFrame({"ticker": ["AAA"], "accn": ["x-1"], "report_date": pd.to_datetime(["2020-03-06"]),
                                "filing_date": pd.to_datetime(["2020-04-01"]),
                                "accepted": [pd.Timestamp("2020-04-01 18:00", tz=NY).tz_convert("UTC")]})
    report = audit_prompts(dp, reference=ref)
    ins = _family(report, "insider")
    assert ins["insider_certain"] > 0 and ins["insider_unverifiable"] == 0 and not report.ok
    assert all(e["asof"] <= "2020-04-01" for e in report.examples["insider_certain"])


def test_prices_and_eps_adjusted_for_a_later_split_are_found(tmp_path):
    # a store without the split history shows the adjusted prices: a leak of the split
    sp, dp = _built(tmp_path, _store(actions=False))
    blind = audit_prompts(dp)
    assert blind.ok  # nothing in that store says a split happened
    report = audit_prompts(dp, reference=_store())
    assert 0 < report.prompts["prices_off_basis"] < report.prompts["prompts"]  # after the split they are fine
    assert _family(report, "fundamentals")["off_basis"] > 0  # EPS adjusted as of the end, shown unconverted
    assert not report.ok


def test_content_date_suspects_kept_by_choice_are_reported(tmp_path):
    store = _store()
    extra = pd.DataFrame({"ticker": ["AAA"], "published_at": [pd.Timestamp("2020-02-03 10:00", tz=NY)],
                          "kind": ["news"], "source": ["wire"], "title": ["AAA Q4 2021 results preview"]})
    store = MarketStore(bars=store.bars, events=validate_events(pd.concat([store.events, extra], ignore_index=True)),
                        actions=store.actions, name="aaa")
    sp, dp = _built(tmp_path, store)
    report = audit_prompts(dp)
    assert _family(report, "news")["content_suspects"] > 0 and not report.ok


def test_cli_audit_exits_1_on_a_leak_and_writes_json(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    sp, dp = _built(tmp_path, _store())
    runner = CliRunner()
    ok = runner.invoke(app, ["data", "audit", str(dp), "--json", str(tmp_path / "a.json")])
    assert ok.exit_code == 0, ok.output
    assert "No leak found" in ok.output and json.loads((tmp_path / "a.json").read_text())["ok"] is True
    store = MarketStore.load(sp)
    store.events.loc[store.events["title"] == "AAA story 20", "published_at"] += pd.Timedelta(hours=2, minutes=30)
    store.save(sp)
    bad = runner.invoke(app, ["data", "audit", str(dp)])
    assert bad.exit_code == 1 and "after_cutoff" in bad.output
    missing = runner.invoke(app, ["data", "audit", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "neither a MarketStore directory" in missing.output


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "prices").is_dir(), reason="../shared/data not present")
def test_shared_data_a_store_without_split_history_or_filing_dates_is_caught(tmp_path):
    """The shared data imported the old way (no split history, insider trades at trade + 2 business
    days, content suspects kept) leaks; audited against the full import it is caught, and the full
    import itself passes. Two tickers, every 10th day, so it stays quick."""
    from thesisgym.data.asof import strip_per_share
    from thesisgym.data.insider import business_days_after
    from thesisgym.data.sources import import_shared
    from thesisgym.data.validate import local_instants

    new = import_shared(SHARED)
    cfg = SplitConfig.from_yaml("mag7", tickers=["AAPL", "TSLA"], heldout_tickers=[], stride=10)
    assert audit_prompts(_save(new, tmp_path / "new"), config=cfg).ok
    old = import_shared(SHARED, content_dates="keep")
    ev = old.events.copy()
    undated = ev["timing"].isin(["form4 index", "form5 deadline"]).to_numpy()
    trade = pd.to_datetime(ev.loc[undated, "title"].map(strip_per_share).str.extract(r"on (\d{4}-\d{2}-\d{2})$")[0])
    ev.loc[undated, "published_at"] = local_instants(business_days_after(pd.DatetimeIndex(trade), 2)).to_numpy()
    legacy = MarketStore(bars=old.bars, events=ev, name="legacy", meta=old.meta)  # no split history
    report = audit_prompts(_save(legacy, tmp_path / "old"), config=cfg, reference=new)
    assert report.prompts["prices_off_basis"] > 0
    assert _family(report, "insider")["insider_certain"] + _family(report, "insider")["insider_probable"] > 0
    assert sum(f["content_suspects"] for f in report.families) > 0 and not report.ok


def _save(store: MarketStore, path: Path) -> Path:
    store.save(path)
    return path


def test_the_audit_reports_what_each_choice_for_undated_insider_trades_does(tmp_path):
    """Trades no filing record dates: "form5_deadline" (default) shows them at their Form 5 deadline,
    "drop" leaves them out; the store records both choices' effect and the audit report says it."""
    from rich.console import Console

    from thesisgym.data.sources import ImportConfig, import_sources
    from thesisgym.dataset.leakage import AuditReport, render_audit, undated_insider

    days = pd.bdate_range("2020-01-01", periods=300)
    pd.DataFrame({"Date": days.strftime("%Y-%m-%d"), "Open": 10.0, "High": 11.0, "Low": 9.0, "Close": 10.0,
                  "Volume": 1000}).to_csv(tmp_path / "AAA.csv", index=False)
    (tmp_path / "ins.csv").write_text(
        "transaction_date,ticker,executive,executive_title,security_type,acquisition_or_disposal,shares,share_price\n"
        '2020-02-07,AAA,"DOE, JANE",CEO,Common Stock,D,100,10.0\n2020-03-09,AAA,"ROE, RICH",CFO,Common Stock,A,10,10.0\n')
    kw = {"prices": [tmp_path / "AAA.csv"], "insider": [tmp_path / "ins.csv"]}
    shown, left_out = import_sources(ImportConfig(**kw)), import_sources(ImportConfig(**kw, insider_undated="drop"))
    a, b = undated_insider(shown), undated_insider(left_out)
    assert a["choice"] == "form5_deadline" and a["events_at_form5_deadline"] == 2 and a["dropped_here"] == 0
    assert b["choice"] == "drop" and b["events_at_form5_deadline"] == 0 and b["dropped_here"] == 2
    for u in (a, b):
        assert u["trades"] == u["form5_deadline_moves"] == u["drop_drops"] == 2
    # AAA's fiscal year is unknown: each trade waits 371 + 45 = 416 days instead of 10 business days
    # (17 days over Presidents' Day, 14 for the March trade): 399 and 402 days later, median 400
    assert a["form5_median_days_after_old_rule"] == 400
    assert len(left_out.events[left_out.events["kind"] == "insider"]) == 0
    report = AuditReport(target="t", store="s", reference="s", families=[], insider_undated=a,
                         prompts={"prompts": 0, "prices_off_basis": 0, "with_any_number_off_basis": 0,
                                  "with_mixed_bases": 0})
    console = Console(record=True, width=400)
    console.print(render_audit(report))
    text = " ".join(console.export_text().split())
    assert "Insider trades no filing record dates: 2 at import, choice form5_deadline" in text
    assert "drop drops all 2" in text
