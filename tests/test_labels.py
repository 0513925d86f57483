"""Labels: forward EMA returns, realised-vol normalisation, frozen train-fitted thresholds (docs/spec.md, section 4)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from thesisgym.dataset.labels import (
    LabelThresholds,
    apply_thresholds,
    class_mix,
    compute_labels,
    realised_volatility,
)
from thesisgym.schema import HORIZON_WEIGHTS, HORIZONS, LABELS, REWARD_HORIZON

PRICES = Path(__file__).resolve().parents[2] / "shared" / "data" / "prices"


def _real_bars(tickers: tuple[str, ...] = ("NVDA", "AAPL", "SPY")) -> pd.DataFrame:
    if not PRICES.exists():
        pytest.skip("shared real data (../shared/data/prices) not present")
    frames = []
    for t in tickers:
        df = pd.read_csv(PRICES / f"{t}.csv")
        df.columns = [c.lower() for c in df.columns]
        df["ticker"] = t
        df["date"] = pd.to_datetime(df["date"])
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _toy_bars(n: int = 120, seed: int = 0, tickers: tuple[str, ...] = ("AAA", "BBB")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    days = pd.bdate_range("2021-01-04", periods=n)
    frames = []
    for t in tickers:
        close = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, n)))
        frames.append(pd.DataFrame({"ticker": t, "date": days, "close": close}))
    return pd.concat(frames, ignore_index=True)


def _reference(close: list[float]) -> dict[str, list[float]]:
    """Straightforward loops: recursive EMA, forward returns, std of the returns realised by d."""
    a = 2 / (3 + 1)
    e = [close[0]]
    for c in close[1:]:
        e.append(a * c + (1 - a) * e[-1])
    n = len(close)
    out: dict[str, list[float]] = {}
    comp = [0.0] * n
    for tau, w in zip(HORIZONS, HORIZON_WEIGHTS, strict=False):
        r = [e[d + tau] / e[d] - 1 if d + tau < n else math.nan for d in range(n)]
        v = []
        for d in range(n):
            known = [r[j] for j in range(d - tau - 19, d - tau + 1) if j >= 0 and j + tau <= d]
            if len(known) < 20:
                v.append(math.nan)
                continue
            m = sum(known) / 20
            v.append(math.sqrt(sum((x - m) ** 2 for x in known) / 19))
        s = [ri / vi if vi == vi and ri == ri else math.nan for ri, vi in zip(r, v, strict=False)]
        out[f"R{tau}"], out[f"V{tau}"], out[f"S{tau}"] = r, v, s
        comp = [c + w * x for c, x in zip(comp, s, strict=False)]
    out["composite"] = comp
    out["fwd_return"] = [
        close[d + REWARD_HORIZON] / close[d] - 1 if d + REWARD_HORIZON < n else math.nan for d in range(n)
    ]
    return out


def test_real_prices_match_independent_computation_and_class_mix():
    bars = _real_bars()
    frame = compute_labels(bars)
    mixes = {}
    for t in ("NVDA", "AAPL", "SPY"):
        got = frame[frame["ticker"] == t].reset_index(drop=True)
        ref = _reference(bars.loc[bars["ticker"] == t, "close"].astype(float).tolist())
        for col, values in ref.items():
            np.testing.assert_allclose(
                got[col].to_numpy(),
                np.array(values),
                rtol=1e-9,
                atol=1e-12,
                equal_nan=True,
                err_msg=f"{t} {col}",
            )
        # thresholds fitted on this ticker's sample reproduce the paper's 3/12/38/32/15 mix on it
        th = LabelThresholds.fit(got["composite"])
        mixes[t] = class_mix(th.apply(got["composite"]))
        for name, want in zip(LABELS, (0.03, 0.12, 0.38, 0.32, 0.15), strict=False):
            assert abs(mixes[t][name] - want) < 0.005, (t, mixes[t])
    print(
        "class mix on fitted sample:",
        json.dumps({t: {k: round(v, 3) for k, v in m.items()} for t, m in mixes.items()}),
    )


def test_real_prices_out_of_sample_class_mix_with_train_fitted_thresholds():
    """The mix a user actually gets: thresholds fitted on 2013-2020, applied unchanged to 2021-2023."""
    frame = compute_labels(_real_bars())
    dates = pd.to_datetime(frame["date"])
    train, test = frame[dates < "2021-01-01"], frame[dates >= "2021-01-01"]
    th = LabelThresholds.fit(train["composite"])
    fitted = class_mix(th.apply(train["composite"]))
    oos = class_mix(th.apply(test["composite"].dropna()))
    for name, want in zip(LABELS, (0.03, 0.12, 0.38, 0.32, 0.15), strict=False):
        assert abs(fitted[name] - want) < 0.005, fitted
    assert sum(oos.values()) == pytest.approx(1.0)
    # frozen thresholds do not re-balance the later period: its mix is its own, not the paper's
    assert max(abs(oos[k] - fitted[k]) for k in LABELS) > 0.005
    # refitting on the later period would restore the paper's mix: the gap above is what leakage hides
    refit = class_mix(LabelThresholds.fit(test["composite"]).apply(test["composite"].dropna()))
    assert abs(refit["HOLD"] - 0.38) < 0.01
    print("class mix 2021-2023 with 2013-2020 thresholds (NVDA+AAPL+SPY):",
          json.dumps({k: round(v, 3) for k, v in oos.items()}))


def test_forward_window_incomplete_rows_have_no_label():
    bars = _toy_bars()
    th = LabelThresholds.fit(compute_labels(bars)["composite"])
    f = compute_labels(bars, thresholds=th)
    for _, g in f.groupby("ticker"):
        assert g["label"].iloc[-max(HORIZONS) :].isna().all()
        assert (g["label_id"].iloc[-max(HORIZONS) :] == -1).all()
        # 20 realised returns need tau + 20 days of history
        assert g["label"].iloc[: max(HORIZONS) + 19].isna().all()
        assert g["label"].iloc[max(HORIZONS) + 19 : -max(HORIZONS)].notna().all()
        assert np.isnan(g["fwd_return"].iloc[-REWARD_HORIZON:]).all()
    assert compute_labels(bars)["label"].isna().all()  # no thresholds -> nothing labelled


def test_volatility_and_past_labels_do_not_change_when_future_prices_change():
    bars = _toy_bars(n=150)
    d = 90
    future = bars.copy()
    is_a = future["ticker"] == "AAA"
    idx = future.index[is_a][d + 1 :]
    future.loc[idx, "close"] *= np.linspace(0.5, 3.0, len(idx))  # rewrite everything after d
    base, pert = compute_labels(bars), compute_labels(future)
    a0, a1 = (
        base[base["ticker"] == "AAA"].reset_index(drop=True),
        pert[pert["ticker"] == "AAA"].reset_index(drop=True),
    )
    for tau in HORIZONS:
        np.testing.assert_array_equal(a0[f"V{tau}"][: d + 1], a1[f"V{tau}"][: d + 1])
        # the forward return of d' is unchanged when its window ends by d
        np.testing.assert_array_equal(a0[f"R{tau}"][: d + 1 - tau], a1[f"R{tau}"][: d + 1 - tau])
    np.testing.assert_array_equal(a0["fwd_vol"][: d + 1], a1["fwd_vol"][: d + 1])
    # labels of rows whose whole window ends by d are unchanged under frozen thresholds
    th = LabelThresholds.fit(a0["composite"][: d + 1 - max(HORIZONS)])
    l0, l1 = th.apply(a0["composite"]), th.apply(a1["composite"])
    assert list(l0[: d + 1 - max(HORIZONS)]) == list(l1[: d + 1 - max(HORIZONS)])
    # the other ticker is untouched (nothing crosses tickers)
    pd.testing.assert_frame_equal(base[base["ticker"] == "BBB"], pert[pert["ticker"] == "BBB"])


def test_a_plain_rolling_std_would_leak_and_ours_does_not():
    r = pd.Series(np.random.default_rng(1).normal(size=80))
    v = realised_volatility(r, 7)
    r2 = r.copy()
    r2.iloc[50:] += 100.0  # R(d') for d' >= 50 is realised at d'+7 >= 57
    v2 = realised_volatility(r2, 7)
    np.testing.assert_array_equal(v[:57], v2[:57])
    assert not np.allclose(v[57:60], v2[57:60])
    leaky = r.rolling(20).std()
    assert not np.allclose(leaky[50:57], r2.rolling(20).std()[50:57])


def test_paper_mode_uses_trailing_returns_and_leaks_through_full_sample_quantiles():
    bars = _toy_bars(n=200, tickers=("AAA",))
    fwd, paper = compute_labels(bars), compute_labels(bars, mode="paper")
    for tau in HORIZONS:
        # the paper's R_tau(d) is our R_tau(d - tau): a trailing return
        np.testing.assert_allclose(
            paper[f"R{tau}"].to_numpy()[tau:], fwd[f"R{tau}"].to_numpy()[:-tau], equal_nan=True
        )
    crash = bars.copy()
    crash.loc[crash.index[150:], "close"] *= np.exp(np.linspace(0, -1.5, 50))
    p0, p1 = compute_labels(bars, mode="paper"), compute_labels(crash, mode="paper")
    early = slice(0, 120)  # rows whose own prices did not change at all
    np.testing.assert_array_equal(p0["composite"][early], p1["composite"][early])
    assert (p0["label"][early] != p1["label"][early]).any(), (
        "paper mode: future prices should move past labels"
    )
    # forward mode with thresholds frozen from the early sample: early labels do not move
    th = LabelThresholds.fit(fwd["composite"][:120])
    f0 = compute_labels(bars, thresholds=th)
    f1 = compute_labels(crash, thresholds=th)
    assert list(f0["label"][: 150 - max(HORIZONS)]) == list(f1["label"][: 150 - max(HORIZONS)])


def test_thresholds_fit_apply_boundaries_json_and_frozen(tmp_path):
    x = np.arange(1000, dtype=float)
    th = LabelThresholds.fit(np.concatenate([x, [np.nan]]))
    assert th.n_fit == 1000
    ids = th.apply_ids([th.cuts[0] - 1e-9, th.cuts[0], th.cuts[3], np.nan])
    assert ids.tolist() == [0, 1, 4, -1]
    assert list(th.apply([-1e9, 1e9, np.nan])) == ["STRONG_SELL", "STRONG_BUY", None]
    assert LabelThresholds.from_json(th.to_json()) == th
    assert LabelThresholds.load(th.save(tmp_path / "t.json")) == th
    with pytest.raises(ValidationError):
        th.cuts = (0.0, 1.0, 2.0, 3.0)  # type: ignore[misc]
    with pytest.raises(ValueError, match="no finite"):
        LabelThresholds.fit([np.nan])
    with pytest.raises(ValueError, match="non-decreasing"):
        LabelThresholds(cuts=(1.0, 0.0, 2.0, 3.0))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json"):
        LabelThresholds.load(tmp_path / "bad.json")


def test_apply_thresholds_and_class_mix():
    bars = _toy_bars()
    raw = compute_labels(bars)
    th = LabelThresholds.fit(raw["composite"])
    lab = apply_thresholds(raw, th)
    assert raw["label"].isna().all() and lab["label"].notna().any()
    mix = class_mix(lab["label"])
    assert abs(sum(mix.values()) - 1) < 1e-12 and list(mix) == list(LABELS)
    assert (lab["label_id"] == [LABELS.index(x) if x else -1 for x in lab["label"]]).all()


def test_bad_input_raises_naming_the_field():
    bars = _toy_bars()
    with pytest.raises(ValueError, match="close"):
        compute_labels(bars.drop(columns=["close"]))
    bad = bars.copy()
    bad.loc[5, "close"] = -1.0
    with pytest.raises(ValueError, match="row 5 field 'close'"):
        compute_labels(bad)
    with pytest.raises(ValueError, match="duplicate"):
        compute_labels(pd.concat([bars, bars.iloc[:1]]))
    with pytest.raises(ValueError, match="mode"):
        compute_labels(bars, mode="backward")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compute_labels([1, 2, 3])  # type: ignore[arg-type]


def test_cut_points_map_to_classes_one_way_everywhere():
    """labels, the truth oracle (evaluate/baselines.py) and the reward audit's oracle share `class_ids`:
    a value on a cut point goes to the class above it, a non-finite one to no class."""
    from thesisgym.dataset.labels import class_ids, class_names
    from thesisgym.evaluate.baselines import truth_oracle
    from thesisgym.evaluate.reward_audit import truth_decisions

    cuts = (-0.02, -0.01, 0.01, 0.02)
    values = [-0.03, -0.02, -0.015, 0.0, 0.01, 0.05, math.nan]
    assert class_ids(values, cuts).tolist() == [0, 1, 1, 2, 3, 4, -1]
    assert class_names(values, cuts).tolist() == [*(LABELS[i] for i in (0, 1, 1, 2, 3, 4)), None]
    assert LabelThresholds(cuts=cuts).apply(values).tolist() == class_names(values, cuts).tolist()
    with pytest.raises(ValueError, match="cut points: expected 4"):
        class_ids(values, cuts[:3])
    finite = values[:-1]
    keys = pd.DataFrame({"ticker": ["A"] * len(finite), "date": pd.date_range("2024-01-01", periods=len(finite))})
    truth = keys.assign(expected_return=finite)
    oracle = truth_oracle(keys, truth, thresholds=cuts)["decision"].tolist()
    assert oracle == class_names(finite, cuts).tolist()
    spread = np.linspace(-1, 1, 101)
    audit_cuts = np.quantile(spread, [0.03, 0.15, 0.53, 0.85])
    assert truth_decisions(spread) == class_names(spread, audit_cuts).tolist()
