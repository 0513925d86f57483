"""Point in time through the store's one door (thesisgym.data.asof): dates read as datetimes, the strict
cutoff, prices and per-share numbers on the as-of day's split basis, the view a tool gets, and the
property that the fast builder shows exactly what the door does."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thesisgym.data import MarketStore, read_events_csv, validate_events
from thesisgym.dataset.contexts import build_contexts

NY = "America/New_York"


def _bars() -> pd.DataFrame:
    days = pd.bdate_range("2020-01-01", periods=40)
    return pd.DataFrame(
        {
            "ticker": "AAA",
            "date": days,
            "open": 10.0,
            "high": 11.0,
            "low": 9.0,
            "close": 10.0 + 0.01 * pd.RangeIndex(len(days)),
            "volume": 1000.0,
        }
    )


def _events(published) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticker": ["AAA", "AAA"],
            "published_at": published,
            "kind": ["news", "news"],
            "source": ["wire", "wire"],
            "title": ["Date-only story", "Timed story"],
        }
    )


DATETIMES = pd.to_datetime(
    ["2020-02-03 00:00", "2020-02-03 09:30"]
)  # naive midnight = a date read as datetime


def test_one_date_only_rule_for_every_importer():
    """A day without a time is 23:59 New York that day, however it arrives (a text date, a naive
    midnight, a SEC filing date, an importer's day), on a DST change day too: one function decides."""
    from thesisgym.data.sec import _stamp
    from thesisgym.data.validate import end_of_day, local_instants, parse_timestamps

    want = pd.Timestamp("2021-03-14 23:59", tz=NY)  # clocks went forward that morning
    assert end_of_day(["2021-03-14 00:00"])[0] == pd.Timestamp("2021-03-14 23:59")
    assert local_instants(["2021-03-14"]).iat[0] == want
    assert _stamp(None, "2021-03-14", {})[0] == want
    assert parse_timestamps(pd.Series(["2021-03-14"]), assume_timezone=NY).iat[0] == want
    assert parse_timestamps(pd.Series(pd.to_datetime(["2021-03-14"])), assume_timezone=NY).iat[0] == want


def test_the_timeline_is_rebuilt_when_anything_it_reads_changes():
    """The store's timeline cache is keyed on its frames (by identity, held) and on the settings and
    meta entries the timeline reads (by value); the same inputs give the same timeline."""
    store = MarketStore(bars=_bars(), events=validate_events(_events(DATETIMES), assume_timezone=NY))
    first = store.timeline()
    assert store.timeline() is first
    store.meta["note"] = "unrelated"
    assert store.timeline() is first
    store.meta["bars_adjusted_as_of"] = "2020-01-15"
    second = store.timeline()
    assert second is not first and second.bars_basis("AAA") == pd.Timestamp("2020-01-15")
    store.meta["bars_adjusted_for"] = "splits+dividends"
    assert store.timeline() is not second
    for change in ({"cutoff": "15:00"}, {"timezone": "Europe/London"}, {"bars": store.bars.copy()},
                   {"truth": store.bars[["ticker", "date"]].assign(expected_return=0.0)}):
        before = store.timeline()
        for k, v in change.items():
            setattr(store, k, v)
        assert store.timeline() is not before, change


def test_naive_midnight_in_a_frame_is_date_only_and_not_in_that_days_context():
    ev = validate_events(_events(DATETIMES), assume_timezone=NY)
    local = ev["published_at"].dt.tz_convert(NY)
    assert local.iat[0] == pd.Timestamp("2020-02-03 23:59", tz=NY)  # not 00:00
    assert local.iat[1] == pd.Timestamp("2020-02-03 09:30", tz=NY)  # a real time of day is kept
    store = MarketStore(bars=_bars(), events=ev)
    assert store.as_of("2020-02-03").events("AAA")["title"].tolist() == ["Timed story"]
    assert store.as_of("2020-02-04").events("AAA")["title"].tolist() == ["Timed story", "Date-only story"]
    ds = build_contexts(store, dates=["2020-02-03", "2020-02-04"], show_progress=False)
    assert "Date-only story" not in ds[0]["prompt_text"] and "Timed story" in ds[0]["prompt_text"]
    assert "Date-only story" in ds[1]["prompt_text"]


def test_explicit_flag_overrides_the_midnight_rule():
    exact = validate_events(_events(DATETIMES), assume_timezone=NY, date_only=False)
    assert exact["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp("2020-02-03 00:00", tz=NY)
    every = validate_events(_events(DATETIMES), assume_timezone=NY, date_only=True)
    assert (every["published_at"].dt.tz_convert(NY).dt.strftime("%H:%M") == "23:59").all()


def test_parquet_date_column_is_date_only(tmp_path):
    path = tmp_path / "events.parquet"
    _events(DATETIMES).to_parquet(path, index=False)
    assert pd.read_parquet(path)["published_at"].dtype.kind == "M"  # really a datetime column
    ev = read_events_csv(path, assume_timezone=NY)
    assert ev["published_at"].dt.tz_convert(NY).dt.strftime("%H:%M").tolist() == ["23:59", "09:30"]
    store = MarketStore(bars=_bars(), events=ev)
    assert "Date-only story" not in store.as_of("2020-02-03").events("AAA")["title"].tolist()
    # a parquet of pure dates (datetime64 from date objects) behaves the same
    _events(pd.to_datetime(["2020-02-03", "2020-02-04"]).date).astype(
        {"published_at": "datetime64[ns]"}
    ).to_parquet(path, index=False)
    ev = read_events_csv(path, assume_timezone=NY)
    assert ev["published_at"].dt.tz_convert(NY).dt.strftime("%Y-%m-%d %H:%M").tolist() == [
        "2020-02-03 23:59",
        "2020-02-04 23:59",
    ]


def test_naive_midnight_text_is_date_only_too(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("ticker,published_at,kind,source,title\nAAA,2020-02-03 00:00:00,news,w,t\n")
    assert read_events_csv(path, assume_timezone=NY)["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp(
        "2020-02-03 23:59", tz=NY
    )
    aware = validate_events(_events(DATETIMES.tz_localize(NY)))
    assert aware["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp("2020-02-03 00:00", tz=NY)


@pytest.mark.parametrize("date_only", [None, True, False])
def test_missing_naive_value_is_still_reported(date_only):
    with pytest.raises(
        ValueError, match="row 2 \\(1-based data row\\), field 'published_at': missing timestamp"
    ):
        validate_events(
            _events(pd.to_datetime(["2020-02-03", None])), assume_timezone=NY, date_only=date_only
        )


# --- the door: one rule, one basis ------------------------------------------------------------------
def _split_store(*, future_split: bool = False, with_actions: bool = True) -> MarketStore:
    """AAA trades at 100 then 25 after a 4:1 split on 2020-02-03; the vendor file is split-adjusted
    (so stored prices before the split are 25). With `future_split`, a 2:1 split on 2020-03-02 is also
    in the history and the vendor file is adjusted for it too: what a download a month later holds."""
    days = pd.bdate_range("2020-01-01", periods=60)
    pre = days < pd.Timestamp("2020-02-03")
    wiggle = np.arange(60) % 4  # binary fractions: /4 and x4 are exact, so bytes can be compared
    raw = np.where(pre, 100.0 + 0.5 * wiggle, 25.0 + 0.125 * wiggle)
    ratio = np.where(pre, 4.0, 1.0)
    splits = [("AAA", "2020-02-03", 4.0)]
    if future_split:
        ratio = ratio * np.where(days < pd.Timestamp("2020-03-02"), 2.0, 1.0)
        splits.append(("AAA", "2020-03-02", 2.0))
    adj = raw / ratio
    eps = 2.0 / (8.0 if future_split else 4.0)  # the vendor's EPS, adjusted for every split up to June
    bars = pd.DataFrame({"ticker": "AAA", "date": days, "open": adj, "high": adj * 1.25, "low": adj * 0.75,
                         "close": adj, "volume": 1000.0 * ratio})
    events = pd.DataFrame(
        {
            "ticker": ["AAA", "AAA"],
            "published_at": pd.to_datetime(["2020-01-10 21:00", "2020-01-15 21:00"], utc=True),
            "kind": ["insider", "fundamentals"],
            "source": ["Form 4", "earnings"],
            "title": ["DOE sold {{sh:1,000}} shares at {{ps:100.00}} on 2020-01-08",
                      "AAA quarter reported: EPS {{ps:" + f"{eps:.2f}" + "}}"],
            "basis_date": pd.to_datetime(["2020-01-08", "2020-06-30"]),  # as traded / adjusted as of June
            "timing": ["filed", "report time"],
        }
    )
    from thesisgym.data.actions import split_actions

    actions = split_actions(splits) if with_actions else None
    kw = {"actions": actions} if actions is not None else {}
    return MarketStore(bars=bars, events=validate_events(events), name="split", **kw)


def test_prices_volumes_and_per_share_numbers_are_shown_as_they_were_that_day():
    store = _split_store()
    before, after = store.as_of("2020-01-31"), store.as_of("2020-02-03")
    assert before.bars("AAA")["close"].iloc[-1] == 101.0 and after.bars("AAA")["close"].iloc[-1] == 25.375
    assert before.bars("AAA")["volume"].iloc[-1] == 1000.0  # not the vendor's 4,000
    assert after.bars("AAA")["close"].iloc[0] == 25.0  # history on the day's basis once the split is known
    # per-share numbers: as traded before the split, converted after it; EPS adjusted as of June -> x4 before
    assert before.events("AAA")["title"].tolist() == ["DOE sold 1,000 shares at 100.00 on 2020-01-08",
                                                     "AAA quarter reported: EPS 2.00"]
    assert after.events("AAA")["title"].tolist() == ["DOE sold 4,000 shares at 25.00 on 2020-01-08",
                                                    "AAA quarter reported: EPS 0.50"]
    text = build_contexts(store, dates=["2020-01-31", "2020-02-03"], show_progress=False)["prompt_text"]
    assert "close 101.00 volume 1000" in text[0] and "at 100.00" in text[0] and "EPS 2.00" in text[0]
    assert "close 25.38 volume 1000" in text[1] and "at 25.00" in text[1] and "EPS 0.50" in text[1]
    assert "close 101.00" not in text[1] and "2020-01-31 | prices | open 25.25" in text[1]


def test_a_split_after_the_cutoff_leaves_the_prompt_byte_identical():
    """The vendor adjusts history for a later split; the door undoes it, so nothing changes before it."""
    kw = {"dates": ["2020-01-20", "2020-02-14", "2020-02-28"], "variations": 2, "seed": 3, "show_progress": False}
    a = build_contexts(_split_store(), **kw)
    b = build_contexts(_split_store(future_split=True), **kw)
    assert a["prompt_text"] == b["prompt_text"] and a["evidence"] == b["evidence"]
    # without the split history the adjusted prices would leak the split: the prompts differ
    c = build_contexts(_split_store(future_split=True, with_actions=False), **kw)
    assert c["prompt_text"][0] != a["prompt_text"][0]


def test_an_item_stamped_exactly_at_the_cutoff_is_not_shown_that_day():
    ev = _events(pd.to_datetime(["2020-02-03 16:00:00", "2020-02-03 15:59:59"]).tz_localize(NY))
    store = MarketStore(bars=_bars(), events=validate_events(ev))
    assert store.as_of("2020-02-03").events("AAA")["title"].tolist() == ["Timed story"]
    assert len(store.as_of("2020-02-04").events("AAA")) == 2
    assert store.cutoff_of("2020-02-03") == pd.Timestamp("2020-02-03 16:00", tz=NY)


def test_the_as_of_view_holds_only_what_was_visible():
    store = _split_store(future_split=True)
    view = store.as_of("2020-01-13")
    values = [*vars(view).values(), *(x for v in vars(view).values() if isinstance(v, dict) for x in v.values())]
    held = [v for v in values if isinstance(v, pd.DataFrame)]
    assert not any(isinstance(v, (MarketStore, type(store.timeline()))) for v in values)
    assert max(f["published_at"].max() for f in held if "published_at" in f) < view.cutoff
    assert max(f["date"].max() for f in held if "date" in f) == pd.Timestamp("2020-01-13")
    assert view.search("doe shares")["title"].tolist() == ["DOE sold 1,000 shares at 100.00 on 2020-01-08"]
    assert len(view.search("EPS")) == 0  # published 2020-01-15: not yet


def _naive_prompt(store: MarketStore, ticker: str, day: pd.Timestamp, cfg) -> str:
    """A prompt built only from the door's one-day view, with pandas filters (the reference)."""
    from thesisgym.dataset.indicators import bar_texts, compute_indicators, indicator_texts, price_decimals
    from thesisgym.dataset.render import clean_text, event_text, extract_numbers, render_context
    from thesisgym.schema import SECTIONS

    view = store.as_of(day)
    b = view.bars(ticker)
    ind = compute_indicators(b)
    dec = price_decimals(b["close"].to_numpy())
    _, ind_txt, _, _ = indicator_texts(ind, decimals=dec, rows=np.array([len(b) - 1]))
    bar_txt, _, _ = bar_texts(b, ind["chg"].to_numpy(), decimals=dec)
    asof = str(day.date())
    dates = b["date"].dt.strftime("%Y-%m-%d").tolist()
    groups = {s: [] for s in SECTIONS}
    groups["technical"] = [(asof, "indicators", t) for t in ind_txt] + [
        (dates[i], "prices", bar_txt[i]) for i in range(len(b) - 1, max(len(b) - 1 - cfg.bars, -1), -1)]
    ev = view.events(ticker)
    age = (day - ev["published_at"].dt.tz_convert(NY).dt.tz_localize(None).dt.normalize()).dt.days
    section = np.where(ev["ticker"] == "", "macro", ev["kind"])
    specs = {s: [(0, getattr(cfg, f"{s}_days"), getattr(cfg, f"{s}_items"))]
             for s in ("fundamentals", "insider", "analyst", "macro")}
    specs["news"] = list(cfg.news_buckets)
    for s in ("fundamentals", "news", "insider", "analyst", "macro"):
        for lo, hi, cap in specs[s]:
            for _, e in ev[(section == s) & (age >= lo) & (age <= hi)].iloc[::-1].head(cap).iterrows():
                groups[s].append((e["published_at"].tz_convert(NY).strftime("%Y-%m-%d"),
                                  clean_text(e["source"]) or e["kind"], event_text(e["title"], e["text"])))
    evidence = [{"id": f"{SECTIONS[s]}{j}", "section": s, "date": d, "source": src, "text": t,
                 "numbers": extract_numbers(t)} for s, items in groups.items() for j, (d, src, t) in enumerate(items, 1)]
    return render_context(ticker, asof, [e for e in evidence if e["section"] in SECTIONS])[1]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), day=st.integers(20, 59), future=st.booleans())
def test_the_fast_builder_sees_exactly_what_the_door_shows(seed, day, future):
    """Property: for any day, the vectorised builder's prompt equals one built from `store.as_of(day)`."""
    from thesisgym.dataset.contexts import ContextConfig

    store = _split_store(future_split=future)
    rng = np.random.default_rng(seed)
    extra = pd.DataFrame({
        "ticker": rng.choice(["AAA", ""], 30),
        "published_at": pd.Timestamp("2020-01-01", tz=NY) + pd.to_timedelta(rng.integers(0, 90 * 96, 30) * 15, "min"),
        "kind": rng.choice(["news", "analyst", "macro", "insider"], 30),
        "source": "wire",
        "title": [f"story {k} up {rng.integers(1, 9)}%" for k in range(30)],
    })
    store = MarketStore(bars=store.bars, events=validate_events(pd.concat([store.events, extra], ignore_index=True)),
                        actions=store.actions)
    cfg = ContextConfig()
    d = store.dates[day]
    fast = build_contexts(store, dates=[d], config=cfg, show_progress=False)[0]["prompt_text"]
    assert fast == _naive_prompt(store, "AAA", d, cfg)


def _dividend_store(*, later_dividend: bool = False) -> MarketStore:
    """Raw closes around 40; cash dividends of 0.50 on day 20 (and 0.75 on day 45), and bars adjusted
    for them the vendor's way: every price before an ex-date x (1 - D / raw close the day before)."""
    from thesisgym.data.actions import validate_actions

    days = pd.bdate_range("2021-01-04", periods=60)
    raw = 40.0 + np.sin(np.arange(60) / 3.0)
    divs = [(20, 0.5)] + ([(45, 0.75)] if later_dividend else [])
    factor = np.ones(60)
    for i, cash in divs:
        factor[:i] *= 1.0 - cash / raw[i - 1]
    adj = raw * factor
    bars = pd.DataFrame({"ticker": "AAA", "date": days, "open": adj, "high": adj * 1.01, "low": adj * 0.99,
                         "close": adj, "volume": 5000.0})
    actions = validate_actions(pd.DataFrame({"ticker": "AAA", "date": [days[i] for i, _ in divs], "kind": "dividend",
                                             "value": [c for _, c in divs]}), source="<divs>")
    return MarketStore(bars=bars, events=validate_events(_events(pd.to_datetime(
        ["2021-01-20 10:00", "2021-01-21 10:00"]).tz_localize(NY))), actions=actions,
        meta={"bars_adjusted_for": "splits+dividends"})


def test_dividend_adjusted_prices_are_shown_as_traded_and_a_later_dividend_changes_nothing():
    raw = 40.0 + np.sin(np.arange(60) / 3.0)
    store = _dividend_store()
    # before the ex-date every close shown is the raw one; from it on, history before it is adjusted
    # for that (known) dividend, as a chart on that day would show it, and later ones are not applied
    assert store.as_of(store.dates[19]).bars("AAA")["close"].to_numpy() == pytest.approx(raw[:20], rel=1e-12)
    known = np.where(np.arange(41) < 20, 1.0 - 0.5 / raw[19], 1.0)
    assert store.as_of(store.dates[40]).bars("AAA")["close"].to_numpy() == pytest.approx(raw[:41] * known, rel=1e-12)
    assert store.as_of(store.dates[20]).bars("AAA")["volume"].iat[0] == 5000.0  # dividends leave volumes alone
    kw = {"dates": [store.dates[i] for i in (19, 25, 40)], "show_progress": False}
    a = build_contexts(store, **kw)["prompt_text"]
    b = build_contexts(_dividend_store(later_dividend=True), **kw)["prompt_text"]
    assert a == b
    stale = MarketStore(bars=store.bars, events=store.events, actions=store.actions)  # says: splits only
    assert build_contexts(stale, **kw)["prompt_text"][0] != a[0]


# The readers that hand out rows dated after an as-of day. Store frames (`store.bars`, ...) are
# attributes; `view.bars(...)` / `view.events(...)` are the as-of view's methods (calls), which cut at
# the cutoff, so only a frame read WITHOUT a call counts. The timeline's readers past a cutoff say so in
# their names (`*_future_included`, `label_*`); `_all_*` are its private frames.
_RAW_FRAMES = {"bars", "events", "truth", "actions", "quarantine", "filings"}
_RAW_READERS = {"events_future_included", "bars_future_included", "label_bars", "label_truth",
                "_all_events", "_all_bars", "_all_truth"}
# module (relative to src/thesisgym) -> the raw accessors it may use, and why. Anything else in src is a
# failure, and so is an entry nothing uses any more (the list cannot silently grow stale).
_ALLOWED = {
    # the door itself: the only holder of the frames
    "data/asof.py": {"_all_events", "_all_bars", "_all_truth"},
    # the container: builds, sorts, saves and loads its frames and hands them to the door
    "data/store.py": {"bars", "events", "truth", "actions", "quarantine", "filings"},
    # import and validation write the frames before any as-of day exists (`.events` there is also
    # the import report's frame, not the store's)
    "data/validate.py": {"bars", "events", "truth"},
    "data/files.py": {"events"},
    "data/importers.py": {"events"},
    "data/insider.py": {"events"},
    # (`.actions` in sources is ImportConfig.actions: the split-history files to read)
    "data/sources.py": {"events", "actions"},
    # the import quality report counts every event of the store; it builds no prompt
    "data/quality.py": {"events"},
    # the builder windows every row itself with the door's rule (Timeline.window / visible_count);
    # labels and synthetic truth are about what came after the day by definition. `.bars` / `.events`
    # there are ContextConfig.bars (a window length) and the build's EventPool, not store frames.
    "dataset/contexts.py": {"bars_future_included", "label_bars", "label_truth", "bars", "events"},
    "dataset/events.py": {"events_future_included"},
    "dataset/splits.py": {"label_bars"},
    # the leak audit re-derives each item's public time, cutoff and split basis from the raw frames with
    # its own code (independent of the door it checks)
    "dataset/leakage.py": {"events", "actions", "bars", "filings"},
    # backtests and baselines: realised returns after each day, the truth oracle
    "evaluate/runner.py": {"label_bars", "label_truth"},
    # `data info` and the demo summarise the whole store (counts and date ranges), no prompt
    "cli/data.py": {"bars", "events", "truth", "actions"},
    "experiments/demo.py": {"events"},
}


def _raw_accesses(path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {
        n.attr for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and (n.attr in _RAW_READERS or (n.attr in _RAW_FRAMES and id(n) not in called))
    }


def test_every_reader_in_src_goes_through_the_door():
    """Every module of the package reads market rows through `timeline()` / `as_of()`; the few that
    need every row (the store, import, the windowing builder, labels, backtests) are listed above
    with their reason, and nothing else can take the future by accident."""
    from pathlib import Path

    import thesisgym

    root = Path(thesisgym.__file__).parent
    found = {str(p.relative_to(root)): _raw_accesses(p) for p in sorted(root.rglob("*.py"))}
    assert len(found) > 80 and "evaluate/runner.py" in found  # the whole package was scanned
    extra = {m: sorted(a - _ALLOWED.get(m, set())) for m, a in found.items() if a - _ALLOWED.get(m, set())}
    assert not extra, f"raw readers outside the allow-list (use store.timeline() / store.as_of()): {extra}"
    stale = {m: sorted(a - found.get(m, set())) for m, a in _ALLOWED.items() if a - found.get(m, set())}
    assert not stale, f"allow-list entries no module uses any more: {stale}"


def test_the_guard_sees_a_new_raw_reader(tmp_path):
    """The scan flags a frame read and a future-included reader, and leaves the view's methods alone."""
    f = tmp_path / "m.py"
    f.write_text("x = store.bars\ny = tl.label_bars()\nz = view.bars('A')\nw = view.events(None)\n")
    assert _raw_accesses(f) == {"bars", "label_bars"}
