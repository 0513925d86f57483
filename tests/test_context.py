"""Contexts: point-in-time evidence, ids, rendering, variations, token budget, leakage (docs/spec.md, sections 2, 3)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from thesisgym.data.store import MarketStore
from thesisgym.dataset import ContextConfig, build_contexts, compute_indicators, count_tokens, render_context
from thesisgym.dataset.labels import LabelThresholds, apply_thresholds, compute_labels
from thesisgym.schema import CONTEXT_COLUMNS, LABELS, SECTIONS, SYSTEM_PROMPT
from thesisgym.thesis import extract_numbers

NY = "America/New_York"
N_DAYS = 90


def _at(day: pd.Timestamp, hhmm: str) -> pd.Timestamp:
    h, m = (int(x) for x in hhmm.split(":"))
    return (pd.Timestamp(day).tz_localize(NY) + pd.Timedelta(hours=h, minutes=m)).tz_convert("UTC")


def make_store(seed: int = 0, n_days: int = N_DAYS) -> MarketStore:
    """Two tickers of random-walk bars plus every kind of event at pre-market/intraday/after-close times."""
    rng = np.random.default_rng(seed)
    days = pd.bdate_range("2022-01-03", periods=n_days)
    bars, events = [], []
    for t, p0 in (("AAA", 40.0), ("BBB", 0.6)):
        close = p0 * np.exp(np.cumsum(rng.normal(0, 0.02, n_days)))
        open_ = close * np.exp(rng.normal(0, 0.005, n_days))
        bars.append(
            pd.DataFrame(
                {
                    "ticker": t,
                    "date": days,
                    "open": open_,
                    "high": np.maximum(open_, close) * 1.01,
                    "low": np.minimum(open_, close) * 0.99,
                    "close": close,
                    "volume": rng.integers(1e5, 1e7, n_days).astype(float),
                }
            )
        )
        for i, d in enumerate(days):
            for j in range(int(rng.integers(0, 3))):
                hhmm = ["08:15", "12:30", "16:30", "21:00"][int(rng.integers(0, 4))]
                pct = round(float(rng.normal(0, 5)), 1)
                events.append(
                    (
                        t,
                        _at(d, hhmm),
                        "news",
                        "Wire",
                        f"{t} headline {i}-{j}",
                        f"Shares moved {pct}% on volume of $1,234.5 million",
                    )
                )
            if i % 20 == 5:
                events.append(
                    (
                        t,
                        _at(d, "07:00"),
                        "fundamentals",
                        "10-Q",
                        f"{t} quarterly report",
                        f"EPS surprise {i / 10:.1f}%, revenue growth 12.4%",
                    )
                )
            if i % 9 == 2:
                events.append(
                    (t, _at(d, "17:45"), "insider", "Form 4", f"Director buys {1000 + i} shares", "")
                )
            if i % 11 == 3:
                events.append(
                    (t, _at(d, "06:30"), "analyst", "Broker", f"Upgrade to BUY, target ${50 + i}", "")
                )
    for i, d in enumerate(days):
        if i % 7 == 0:
            events.append(
                ("", _at(d, "08:30"), "macro", "BLS", f"CPI rose {0.1 * (i % 5):.1f}% month over month", "")
            )
    ev = pd.DataFrame(events, columns=["ticker", "published_at", "kind", "source", "title", "text"])
    ev["value"] = np.nan
    ev["sentiment"] = np.nan
    ev["published_at"] = pd.to_datetime(ev["published_at"], utc=True)
    return MarketStore(bars=pd.concat(bars, ignore_index=True), events=ev, name="toy")


@pytest.fixture(scope="module")
def store() -> MarketStore:
    return make_store()


@pytest.fixture(scope="module")
def built(store):
    return build_contexts(store, show_progress=False)


def _user(row) -> str:
    return row["prompt"][1]["content"]


def test_columns_and_prompt_shape(built, store):
    assert list(built.column_names) == list(CONTEXT_COLUMNS)
    assert len(built) == 2 * (N_DAYS - 14)  # every day with a full 15-bar window, both tickers
    row = built[40]
    assert row["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert row["prompt"][1]["role"] == "user"
    assert row["prompt_text"] == SYSTEM_PROMPT + "\n\n" + _user(row)
    assert _user(row).startswith(f"Ticker: {row['ticker']}\nAs of: {row['asof']}")
    assert row["label"] is None and row["label_id"] == -1  # no thresholds given
    assert np.isnan(row["true_expected_return"])
    assert row["market"] == "toy"


def test_ids_dense_sections_and_every_item_rendered_verbatim(built):
    for row in built.select(range(0, len(built), 7)):
        ev = row["evidence"]
        sections = [s for s in row["sections"]]
        assert sections[0] == "technical" and set(sections) <= set(SECTIONS)
        seen: dict[str, int] = {}
        for it in ev:
            prefix = SECTIONS[it["section"]]
            seen[it["section"]] = seen.get(it["section"], 0) + 1
            assert it["id"] == f"{prefix}{seen[it['section']]}"
            line = f"[{it['id']}] {it['date']} | {it['source']} | {it['text']}"
            assert line in _user(row).split("\n")
            assert it["date"] <= row["asof"]
        assert list(seen) == sections
        # the reference renderer reproduces the builder's prompt byte for byte
        msgs, text = render_context(row["ticker"], row["asof"], ev)
        assert msgs == row["prompt"] and text == row["prompt_text"]


def test_numbers_agree_with_the_shared_extractor(built):
    items = [it for row in built.select(range(0, len(built), 5)) for it in row["evidence"]]
    assert {it["source"] for it in items} >= {"prices", "indicators", "Wire", "10-Q", "BLS"}
    for it in items:
        assert it["numbers"] == extract_numbers(it["text"]), it


def test_event_visibility_cutoff_and_sections(store):
    days = store.dates
    d, nxt = days[50], days[51]
    late = pd.DataFrame(
        [
            ("AAA", _at(d, "16:01"), "news", "Late", "AFTER CLOSE item", ""),
            ("AAA", _at(d, "16:00"), "news", "Edge", "AT CLOSE item", ""),
            ("", _at(d, "16:01"), "news", "Late", "MARKET WIDE after close", ""),
        ],
        columns=["ticker", "published_at", "kind", "source", "title", "text"],
    )
    late["published_at"] = pd.to_datetime(late["published_at"], utc=True)
    late["value"] = np.nan
    late["sentiment"] = np.nan
    s2 = MarketStore(bars=store.bars, events=pd.concat([store.events, late], ignore_index=True), name="toy")
    ds = build_contexts(s2, tickers=["AAA"], dates=[d, nxt], show_progress=False)
    at_d, at_next = ds[0], ds[1]
    texts_d = {it["text"] for it in at_d["evidence"]}
    texts_n = {(it["section"], it["text"]) for it in at_next["evidence"]}
    # stamped exactly 16:00:00 it came out with the close, not before it: strictly before the cutoff only
    assert "AT CLOSE item" not in texts_d and ("news", "AT CLOSE item") in texts_n
    assert "AFTER CLOSE item" not in texts_d and "MARKET WIDE after close" not in texts_d
    assert ("news", "AFTER CLOSE item") in texts_n
    assert ("macro", "MARKET WIDE after close") in texts_n  # market-wide events land in macro
    # the rendered date of an after-close item is its New York publication date
    item = next(it for it in at_next["evidence"] if it["text"] == "AFTER CLOSE item")
    assert item["date"] == str(d.date())
    # nothing published at or after the cutoff reaches the door's view either
    cut = s2.cutoff_of(d)
    visible = s2.as_of(d).events("AAA")
    assert visible["published_at"].max() < cut and "AT CLOSE item" not in set(visible["title"])


def test_news_buckets_limits_and_order(store):
    cfg = ContextConfig(news_buckets=((0, 3, 2), (4, 10, 3), (11, 30, 4)))
    d = store.dates[70]
    row = build_contexts(store, tickers=["AAA"], dates=[d], config=cfg, show_progress=False)[0]
    news = [it for it in row["evidence"] if it["section"] == "news"]
    ages = [(d - pd.Timestamp(it["date"])).days for it in news]
    assert ages == sorted(ages), "news must be most recent first"
    assert (
        sum(a <= 3 for a in ages) <= 2
        and sum(4 <= a <= 10 for a in ages) <= 3
        and sum(11 <= a <= 30 for a in ages) <= 4
    )
    assert all(a <= 30 for a in ages) and len(news) >= 5
    # reference: a per-row pandas filter over the events the door shows for d
    ev = store.as_of(d).events("AAA")
    ev = ev[(ev["ticker"] == "AAA") & (ev["kind"] == "news")]
    pub_day = ev["published_at"].dt.tz_convert(NY).dt.tz_localize(None).dt.normalize()
    age = (d - pub_day).dt.days
    want = []
    for lo, hi, cap in cfg.news_buckets:
        want += ev[(age >= lo) & (age <= hi)]["title"].iloc[::-1].head(cap).tolist()
    assert [it["text"].split(":")[0] for it in news] == want


def test_technical_section_bars_and_indicators(store):
    d = store.dates[60]
    row = build_contexts(store, tickers=["BBB"], dates=[d], show_progress=False)[0]
    tech = [it for it in row["evidence"] if it["section"] == "technical"]
    bars = [it for it in tech if it["source"] == "prices"]
    inds = [it for it in tech if it["source"] == "indicators"]
    assert len(bars) == 15 and bars[0]["date"] == str(d.date())
    assert [b["date"] for b in bars] == sorted((b["date"] for b in bars), reverse=True)
    names = " ".join(i["text"] for i in inds)
    for key in (
        "SMA(20)",
        "EMA(12)",
        "MACD(12,26,9)",
        "RSI(14)",
        "ATR(14)",
        "Bollinger(20,2)",
        "z-score(20)",
    ):
        assert key in names
    # sub-dollar ticker: 4 decimals, the close is quoted verbatim
    close = float(store.as_of(d).bars("BBB")["close"].iloc[-1])
    assert f"close {close:.4f}" in bars[0]["text"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ticker=st.sampled_from(["AAA", "BBB"]),
    day=st.integers(min_value=16, max_value=N_DAYS - 2),
    scale=st.floats(min_value=0.2, max_value=5.0),
    drop=st.booleans(),
    seed=st.integers(0, 10),
)
def test_future_data_cannot_reach_a_context(store, ticker, day, scale, drop, seed):
    d = store.dates[day]
    cut = store.cutoff_of(d)
    rng = np.random.default_rng(seed)
    bars = store.bars.copy()
    after = bars["date"] > d
    for col in ("open", "high", "low", "close"):
        bars.loc[after, col] *= scale * np.exp(rng.normal(0, 0.1, int(after.sum())))
    bars.loc[after, "volume"] *= 3
    ev = store.events.copy()
    late = ev["published_at"] >= cut
    ev = ev[~late] if drop else ev.assign(title=np.where(late, "REWRITTEN 99.9%", ev["title"]))
    new = pd.DataFrame(
        {
            "ticker": [ticker, "", ticker, ticker],
            "published_at": [
                cut,
                cut + pd.Timedelta(minutes=1),
                cut + pd.Timedelta(hours=20),
                cut + pd.Timedelta(days=3),
            ],
            "kind": ["insider", "news", "macro", "fundamentals"],
            "source": "Future",
            "title": "FUTURE EVENT 42%",
            "text": "",
            "value": np.nan,
            "sentiment": np.nan,
        }
    )
    ev = pd.concat([ev, new], ignore_index=True)
    perturbed = MarketStore(bars=bars, events=ev, name="toy")
    kw = {"tickers": [ticker], "dates": [d], "variations": 3, "seed": 5, "show_progress": False}
    a, b = build_contexts(store, **kw), build_contexts(perturbed, **kw)
    assert a["prompt_text"] == b["prompt_text"]
    assert a["evidence"] == b["evidence"]
    assert "FUTURE" not in "".join(b["prompt_text"])
    # indicator inputs: every indicator value up to d is identical
    i0 = compute_indicators(store.as_of(d).bars(ticker))
    i1 = compute_indicators(perturbed.bars[perturbed.bars["ticker"] == ticker].reset_index(drop=True)).iloc[
        : len(i0)
    ]
    pd.testing.assert_frame_equal(i0, i1)


def test_variations_deterministic_per_seed_and_independent_of_other_rows(store):
    days = list(store.dates[20:40])
    kw = {"tickers": ["AAA"], "dates": days, "variations": 6, "show_progress": False}
    a1, a2, b = (
        build_contexts(store, seed=1, **kw),
        build_contexts(store, seed=1, **kw),
        build_contexts(store, seed=2, **kw),
    )
    assert a1["prompt_text"] == a2["prompt_text"]
    assert a1["prompt_text"] != b["prompt_text"]
    assert a1["variation"] == list(range(6)) * len(days)
    orders = {tuple(s) for s in a1["sections"]}
    assert len(orders) > 3  # random subsets and orders
    assert all("technical" in s for s in a1["sections"])
    # variation 0 is the canonical context, the same as a single-variation build
    canon = build_contexts(store, tickers=["AAA"], dates=days, show_progress=False)
    assert a1.filter(lambda r: r["variation"] == 0)["prompt_text"] == canon["prompt_text"]
    # a row does not depend on which other rows are built
    one = build_contexts(store, seed=1, tickers=["AAA"], dates=[days[7]], variations=6, show_progress=False)
    assert one["prompt_text"] == a1["prompt_text"][7 * 6 : 8 * 6]


def test_token_budget_respected_lowest_priority_dropped_first(store):
    d = store.dates[70]
    kw = {"tickers": ["AAA"], "dates": [d], "show_progress": False}
    full = build_contexts(store, **kw)[0]
    n_full = count_tokens(full["prompt_text"])
    oldest_news = [
        it for it in full["evidence"] if it["section"] == "news" and (d - pd.Timestamp(it["date"])).days >= 11
    ]
    assert oldest_news
    budget = n_full - 5  # forces a drop of one or two items
    cut = build_contexts(store, token_budget=budget, **kw)[0]
    assert count_tokens(cut["prompt_text"]) <= budget
    kept = {(it["section"], it["date"], it["text"]) for it in cut["evidence"]}
    lost = [it for it in full["evidence"] if (it["section"], it["date"], it["text"]) not in kept]
    assert lost and all(it in oldest_news for it in lost)
    assert lost[-1] == oldest_news[-1] or lost[0] == oldest_news[-1]  # the oldest goes first
    # a tight budget keeps the newest bar and the latest filing, drops news entirely
    tight = build_contexts(store, token_budget=count_tokens(SYSTEM_PROMPT) + 120, **kw)[0]
    assert count_tokens(tight["prompt_text"]) <= count_tokens(SYSTEM_PROMPT) + 120
    assert "news" not in tight["sections"]
    assert tight["evidence"][-1]["source"] in ("prices", "10-Q", "indicators")
    msgs, text = render_context(tight["ticker"], tight["asof"], tight["evidence"])
    assert text == tight["prompt_text"]
    with pytest.raises(ValueError, match="token_budget"):
        build_contexts(store, token_budget=10, **kw)


def test_labels_and_truth_columns_join_by_ticker_and_date(store):
    raw = compute_labels(store.bars)
    th = LabelThresholds.fit(raw["composite"])
    labels = apply_thresholds(raw, th)
    truth = store.bars[["ticker", "date"]].assign(
        expected_return=np.arange(len(store.bars)) / 1e4, quality=0.0, regime="bull"
    )
    s2 = MarketStore(bars=store.bars, events=store.events, truth=truth, name="toy", meta={"market": "A"})
    ds = build_contexts(s2, labels=labels, show_progress=False)
    lab = labels.set_index(["ticker", "date"])
    tru = truth.set_index(["ticker", "date"])
    for row in ds.select(range(0, len(ds), 13)):
        key = (row["ticker"], pd.Timestamp(row["asof"]))
        want = lab.loc[key]
        assert row["label"] == want["label"] and row["label_id"] == (
            LABELS.index(want["label"]) if want["label"] else -1
        )
        np.testing.assert_equal(row["composite"], want["composite"])
        np.testing.assert_equal(row["fwd_return"], want["fwd_return"])
        assert row["true_expected_return"] == pytest.approx(tru.loc[key, "expected_return"])
        assert row["market"] == "A"


def test_bad_input_is_reported(store):
    with pytest.raises(ValueError, match="unknown ticker"):
        build_contexts(store, tickers=["ZZZ"], show_progress=False)
    with pytest.raises(ValueError, match="no bar on requested date 2022-01-08"):
        build_contexts(store, tickers=["AAA"], dates=["2022-01-08"], show_progress=False)  # a Saturday
    naive = store.events.assign(published_at=store.events["published_at"].dt.tz_localize(None))
    with pytest.raises(ValueError, match="timezone-aware"):
        build_contexts(MarketStore(bars=store.bars, events=naive), show_progress=False)
    bad_kind = store.events.copy()
    bad_kind.loc[3, "kind"] = "rumour"
    with pytest.raises(ValueError, match="row 3 field 'kind'"):
        build_contexts(MarketStore(bars=store.bars, events=bad_kind), show_progress=False)
    with pytest.raises(ValueError, match="variations"):
        build_contexts(store, variations=0, show_progress=False)
    with pytest.raises(ValueError, match="news_buckets"):
        ContextConfig(news_buckets=((5, 3, 10),))
    empty = build_contexts(store, dates={"AAA": []}, show_progress=False)
    assert len(empty) == 0 and list(empty.column_names) == list(CONTEXT_COLUMNS)


def test_cache_file_streams_the_same_rows(tmp_path, store, built):
    ds = build_contexts(store, cache_file=tmp_path / "c" / "rows.arrow", show_progress=False)
    assert (tmp_path / "c" / "rows.arrow").exists()
    assert len(ds) == len(built) and ds.features == built.features
    assert ds["prompt_text"] == built["prompt_text"] and ds[17]["evidence"] == built[17]["evidence"]


def test_a_custom_system_prompt_opens_every_prompt_and_counts_against_the_budget(store):
    from thesisgym.schema import COMPACT_SYSTEM_PROMPT

    d = store.dates[70]
    kw = {"tickers": ["AAA"], "dates": [d], "show_progress": False}
    full = build_contexts(store, **kw)[0]
    short = build_contexts(store, config=ContextConfig(system_prompt=COMPACT_SYSTEM_PROMPT), **kw)[0]
    assert short["prompt"][0] == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}
    assert short["prompt"][1] == full["prompt"][1] and short["evidence"] == full["evidence"]
    _, text = render_context(short["ticker"], short["asof"], short["evidence"], system_prompt=COMPACT_SYSTEM_PROMPT)
    assert short["prompt_text"] == text
    # the same budget holds more evidence behind the shorter instructions
    budget = count_tokens(SYSTEM_PROMPT) + 120
    tight = build_contexts(store, token_budget=budget, **kw)[0]
    roomy = build_contexts(store, token_budget=budget, config=ContextConfig(system_prompt=COMPACT_SYSTEM_PROMPT), **kw)[0]
    assert count_tokens(roomy["prompt_text"]) <= budget
    assert len(roomy["evidence"]) > len(tight["evidence"])
    with pytest.raises(ValueError, match="system_prompt"):
        ContextConfig(system_prompt="")
