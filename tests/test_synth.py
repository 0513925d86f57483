"""Tests of the synthetic market: determinism, shapes, event realism, the signal, the traps, leakage."""

from __future__ import annotations

import os
import re
import time

import numpy as np
import pandas as pd
import pytest

from thesisgym.data import SynthConfig, generate_market, validate_store
from thesisgym.data import synth as synth_mod
from thesisgym.schema import EVENT_KINDS, REWARD_HORIZON

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMALL = {"n_tickers": 20, "n_days": 500}


@pytest.fixture(scope="module")
def market_a():
    return generate_market(SynthConfig(market="A", seed=1, **SMALL))


@pytest.fixture(scope="module")
def market_b():
    return generate_market(SynthConfig(market="B", seed=1, **SMALL))


def panel(store, column="close", frame=None):
    frame = store.bars if frame is None else frame
    return frame.pivot(index="date", columns="ticker", values=column)


def spearman(a: pd.DataFrame, b: pd.DataFrame) -> float:
    x = pd.DataFrame({"a": a.stack(), "b": b.stack()}).dropna()
    return float(x.rank().corr().iloc[0, 1])


def forward_return(store) -> pd.DataFrame:
    close = panel(store)
    return close.shift(-REWARD_HORIZON) / close - 1


# --- config -----------------------------------------------------------------------------------------
def test_config_defaults_and_rejections(tmp_path):
    cfg = SynthConfig()
    assert (cfg.n_tickers, cfg.n_days, cfg.start, cfg.seed, cfg.market) == (20, 750, "2020-01-02", 0, "A")
    assert cfg.injection_rate > 0
    with pytest.raises(ValueError, match="market"):
        SynthConfig(market="C")
    with pytest.raises(ValueError, match="typo"):
        SynthConfig(typo=1)
    with pytest.raises(ValueError, match="start"):
        SynthConfig(start="not a date")
    path = tmp_path / "m.yaml"
    path.write_text("n_tickers: 3\nmarket: B\nseed: 4\n")
    loaded = SynthConfig.from_yaml(path, seed=9, n_days=None)
    assert (loaded.n_tickers, loaded.market, loaded.seed, loaded.n_days) == (3, "B", 9, 750)
    path.write_text("- 1\n")
    with pytest.raises(ValueError, match=re.escape(str(path))):
        SynthConfig.from_yaml(path)
    with pytest.raises(TypeError):
        generate_market({"n_tickers": 3})


def test_presets_fill_the_knobs_not_given_and_noisy_is_the_old_market():
    default = SynthConfig()
    assert default.preset == "reading"
    assert {k: getattr(default, k) for k in synth_mod.PRESETS["reading"]} == synth_mod.PRESETS["reading"]
    noisy = SynthConfig(market="noisy")  # the CLI's `--market noisy`
    assert (noisy.market, noisy.preset, noisy.event_impact, noisy.idio_vol) == ("A", "noisy", 0.0, 0.015)
    assert SynthConfig(preset="noisy", market="B").market == "B"
    assert SynthConfig(preset="noisy", event_impact=0.3).event_impact == 0.3  # an explicit knob wins
    with pytest.raises(ValueError, match="preset"):
        SynthConfig(market="noisy", preset="reading")
    with pytest.raises(ValueError):
        SynthConfig(preset="loud")
    store = generate_market(SynthConfig(n_tickers=3, n_days=60, market="noisy"))
    assert store.name == "synth-A-noisy-seed0" and store.meta["preset"] == "noisy"


def _news_reading_ic(store) -> float:
    """Spearman of the signed size of the last 5 days' informative headlines and the forward return."""
    ev = store.events[(store.events["kind"] == "news") & store.events["value"].notna()].copy()
    local = ev["published_at"].dt.tz_convert("America/New_York")
    # after the 16:00 close: seen at the next day's cutoff
    ev["date"] = (local.dt.normalize() + pd.to_timedelta((local.dt.hour >= 16).astype(int), unit="D")).dt.tz_localize(None)
    ev["signed"] = np.sign(ev["sentiment"]) * ev["value"]
    daily = ev.groupby(["date", "ticker"])["signed"].sum().unstack()
    daily = daily.reindex(index=store.dates, columns=store.tickers).fillna(0.0)
    return spearman(daily.rolling(5, min_periods=1).sum(), forward_return(store))


def test_reading_pays_in_the_default_market_and_barely_in_the_noisy_one():
    reading = generate_market(SynthConfig(n_tickers=12, n_days=300, seed=2))
    noisy = generate_market(SynthConfig(n_tickers=12, n_days=300, seed=2, market="noisy"))
    assert _news_reading_ic(reading) > 0.3
    assert abs(_news_reading_ic(noisy)) < 0.15


def test_an_event_moves_returns_only_after_its_day(monkeypatch):
    """Zero every event impact after day k: bars up to day k+1 and truth up to day k are unchanged."""
    cfg = SynthConfig(n_tickers=6, n_days=160, seed=4, lucky=False)
    base = generate_market(cfg)
    k = 100
    real = synth_mod.event_impacts

    def cut(cfg_, rs, q):
        out = real(cfg_, rs, q)
        out[k + 1 :] = 0.0
        return out

    monkeypatch.setattr(synth_mod, "event_impacts", cut)
    cut_store = generate_market(cfg)
    day = base.dates[k]
    b, c = base.bars, cut_store.bars
    # an event of day k + 1 first moves the return from close k + 1 to close k + 2
    nxt = base.dates[k + 1]
    pd.testing.assert_frame_equal(b[b["date"] <= nxt], c[c["date"] <= nxt])
    later = base.dates[k + 2]
    assert not np.allclose(b.loc[b["date"] == later, "close"], c.loc[c["date"] == later, "close"])
    tb, tc = base.truth, cut_store.truth
    # the truth at d counts impacts published by d, and expects (not reads) the later ones
    np.testing.assert_array_equal(tb.loc[tb["date"] <= day, "expected_return"], tc.loc[tc["date"] <= day, "expected_return"])


# --- determinism and shape --------------------------------------------------------------------------
def test_deterministic_given_seed_and_different_across_seeds():
    cfg = SynthConfig(n_tickers=5, n_days=120, seed=7)
    a, b = generate_market(cfg), generate_market(cfg)
    pd.testing.assert_frame_equal(a.bars, b.bars)
    pd.testing.assert_frame_equal(a.events, b.events)
    pd.testing.assert_frame_equal(a.truth, b.truth)
    assert a.meta == b.meta
    c = generate_market(cfg.model_copy(update={"seed": 8}))
    assert not np.allclose(a.bars["close"], c.bars["close"])


def test_shapes_calendar_and_meta(market_a):
    s = market_a
    assert s.tickers == [f"SYN{i:03d}" for i in range(20)]
    assert len(s.bars) == 20 * 500 and len(s.truth) == 20 * 500
    dates = s.dates
    assert len(dates) == 500 and dates[0] == pd.Timestamp("2020-01-02") and (dates.day_of_week < 5).all()
    assert s.truth[["ticker", "date"]].equals(s.bars[["ticker", "date"]])
    assert set(s.truth["regime"]) <= {"bull", "sideways", "bear"} and s.truth["regime"].nunique() >= 2
    assert s.meta["market"] == "A" and s.meta["config"]["seed"] == 1
    assert set(s.meta["companies"]) == set(s.tickers) and len(set(s.meta["companies"].values())) == 20
    assert s.meta["lucky_ticker"] in s.tickers
    validate_store(s)  # OHLC ordering, positive prices, unique sorted dates, known tickers, tz-aware events


def test_events_are_timestamped_realistically_and_carry_numbers(market_a):
    ev = market_a.events
    assert str(ev["published_at"].dtype) == "datetime64[ns, UTC]"
    assert set(ev["kind"]) == set(EVENT_KINDS)
    local = ev["published_at"].dt.tz_convert("America/New_York")
    minutes = local.dt.hour * 60 + local.dt.minute
    assert (minutes > 16 * 60).mean() > 0.1  # after the close: the cutoff rule matters
    assert (minutes < 9 * 60 + 30).mean() > 0.1  # pre-market
    assert (local.dt.day_of_week < 5).all()
    assert (ev.loc[ev["kind"] == "macro", "ticker"] == "").all()
    assert (ev.loc[ev["kind"] != "macro", "ticker"] != "").all()
    assert ev["title"].str.contains(r"\d").all()
    fund = ev[ev["kind"] == "fundamentals"]["title"]
    assert fund.str.contains(r"EPS \$\d+\.\d\d vs \$\d+\.\d\d expected \([+-]\d+\.\d% surprise\)").all()
    names = market_a.meta["companies"]
    assert any(name in t for t in ev["title"] for name in list(names.values())[:3])
    informative = ev[(ev["kind"] == "news") & ev["value"].notna()]
    # the headline number is stored in `value` exactly as printed
    assert all(
        f"{v:.1f}" in t for v, t in zip(informative["value"][:200], informative["title"][:200], strict=False)
    )


def test_prompt_injection_headlines_exist_and_are_controlled():
    on = generate_market(SynthConfig(n_tickers=10, n_days=300, injection_rate=0.01))
    off = generate_market(SynthConfig(n_tickers=10, n_days=300, injection_rate=0.0))
    inj = on.events[on.events["source"] == "message-board"]
    assert len(inj) > 5 and on.meta["injections"] == len(inj)
    assert inj["title"].str.contains("STRONG_BUY|STRONG_SELL").all()
    assert off.meta["injections"] == 0


# --- the signal and the traps -----------------------------------------------------------------------
def test_truth_predicts_realised_forward_returns(market_a, market_b):
    for store in (market_a, market_b):
        truth = panel(store, "expected_return", store.truth)
        rho = spearman(truth, forward_return(store))
        assert rho > 0.05, (store.name, rho)


def test_truth_is_calibrated_cross_sectionally(market_a, market_b):
    # demeaned per day, so the one realised market path does not dominate: slope of realised on expected
    for store in (market_a, market_b):
        truth = panel(store, "expected_return", store.truth)
        fwd = forward_return(store)
        x = pd.DataFrame(
            {
                "t": truth.sub(truth.mean(axis=1), axis=0).stack(),
                "f": fwd.sub(fwd.mean(axis=1), axis=0).stack(),
            }
        ).dropna()
        slope = np.polyfit(x["t"], x["f"], 1)[0]
        assert 0.6 < slope < 1.4, (store.name, slope)


def test_events_carry_signal_about_future_returns(market_a):
    ev = market_a.events
    news = ev[(ev["kind"] == "news") & ev["sentiment"].notna()].copy()
    news["date"] = news["published_at"].dt.tz_convert("America/New_York").dt.normalize().dt.tz_localize(None)
    sent = news.groupby(["date", "ticker"])["sentiment"].mean().unstack()
    fwd = forward_return(market_a).shift(-1)  # entered at the next close: the news may be after the close
    assert spearman(sent, fwd.reindex_like(sent)) > 0.03


def test_momentum_pays_in_market_a_and_not_in_b(market_a, market_b):
    def momentum_ic(store):
        close = panel(store)
        mom = close / close.shift(20) - 1
        return spearman(mom, forward_return(store))

    ic_a, ic_b = momentum_ic(market_a), momentum_ic(market_b)
    assert ic_a > 0.05, ic_a
    assert ic_b < 0.0, ic_b


def test_lucky_ticker_drift_flips_after_train_end(market_a):
    s = market_a
    lucky = s.meta["lucky_ticker"]
    switch = pd.Timestamp(s.meta["lucky_switch_date"])
    assert switch == s.dates[int(round(0.6 * 500))]
    truth = panel(s, "expected_return", s.truth)
    excess = truth[lucky] - truth.drop(columns=lucky).mean(axis=1)
    before, after = excess[excess.index < switch - pd.Timedelta(days=15)], excess[excess.index >= switch]
    assert before.mean() > 0.005 and after.mean() < -0.005
    logret = np.log(panel(s)).diff()
    ex = logret[lucky] - logret.drop(columns=lucky).mean(axis=1)
    assert ex[ex.index < switch].mean() > 0 > ex[ex.index >= switch].mean()


# --- leakage ----------------------------------------------------------------------------------------
def test_truncating_the_market_changes_nothing_before_the_cut():
    long = generate_market(SynthConfig(n_tickers=6, n_days=260, lucky=False, seed=3))
    short = generate_market(SynthConfig(n_tickers=6, n_days=180, lucky=False, seed=3))
    last = short.dates[-1]
    pd.testing.assert_frame_equal(long.truth[long.truth["date"] <= last].reset_index(drop=True), short.truth)
    pd.testing.assert_frame_equal(long.bars[long.bars["date"] <= last].reset_index(drop=True), short.bars)
    local_day = (
        long.events["published_at"].dt.tz_convert("America/New_York").dt.tz_localize(None).dt.normalize()
    )
    pd.testing.assert_frame_equal(long.events[local_day <= last].reset_index(drop=True), short.events)


_REAL_STREAMS = synth_mod._Streams


class _FutureSwap:
    """Stream factory whose named streams draw different numbers from row `k` on (new future shocks)."""

    def __init__(self, seed: int, names: set[str], k: int):
        self.inner, self.names, self.k = _REAL_STREAMS(seed), names, k

    def __call__(self, name: str):
        rng = self.inner(name)
        if name not in self.names:
            return rng
        k, other = self.k, np.random.default_rng(12345)

        class Swapped:
            def standard_normal(self, shape):
                a = rng.standard_normal(shape)
                a[k:] = other.standard_normal(a[k:].shape)
                return a

            def random(self, shape):
                a = rng.random(shape)
                a[k:] = other.random(a[k:].shape)
                return a

        return Swapped()


@pytest.mark.parametrize(
    ("streams", "offset"),
    [({"returns", "market", "regime"}, 0), ({"quality"}, 3)],  # quality rows start `lag` (=3) days early
)
def test_truth_at_d_is_unchanged_by_different_future_shocks(monkeypatch, streams, offset):
    cfg = SynthConfig(n_tickers=6, n_days=200, seed=5, lag=3)
    base = generate_market(cfg)
    k = 120  # the swapped streams draw new numbers from their row k on
    monkeypatch.setattr(synth_mod, "_Streams", lambda seed: _FutureSwap(seed, streams, k))
    swapped = generate_market(cfg)
    last_safe = base.dates[k - offset - 1]  # the last day whose state precedes every swapped draw
    b, s = base.truth, swapped.truth
    same = b["date"] <= last_safe
    np.testing.assert_array_equal(b.loc[same, "expected_return"], s.loc[same, "expected_return"])
    np.testing.assert_array_equal(b.loc[same, "quality"], s.loc[same, "quality"])
    after = b["date"] > last_safe
    assert not np.allclose(b.loc[after, "expected_return"], s.loc[after, "expected_return"])  # the swap bites


@pytest.mark.slow
def test_fifty_tickers_two_thousand_days_in_a_few_seconds():
    t0 = time.perf_counter()
    store = generate_market(SynthConfig(n_tickers=50, n_days=2000))
    assert time.perf_counter() - t0 < 10
    assert len(store.bars) == 100_000
