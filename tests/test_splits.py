"""Splits: time periods with an embargo, held-out tickers, train-only frozen thresholds, saved meta."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from thesisgym.data.store import MarketStore
from thesisgym.data.synth import SynthConfig, generate_market
from thesisgym.dataset.labels import LabelThresholds, class_mix
from thesisgym.dataset.splits import META_FILE, SplitConfig, build_splits, load_splits, load_thresholds
from thesisgym.schema import CONTEXT_COLUMNS, HORIZONS, LABELS

H = max(HORIZONS)


@pytest.fixture(scope="module")
def store() -> MarketStore:
    return generate_market(SynthConfig(n_tickers=5, n_days=320, seed=3, events_per_day=0.3))


@pytest.fixture(scope="module")
def splits(store):
    cfg = SplitConfig(train_end=0.6, val_end=0.8, heldout_tickers=["SYN004"], stride=2)
    return build_splits(store, cfg, show_progress=False)


def _bar_after(store: MarketStore, ticker: str, day: str, k: int) -> pd.Timestamp:
    dates = store.bars.loc[store.bars["ticker"] == ticker, "date"].reset_index(drop=True)
    i = int(np.searchsorted(dates, pd.Timestamp(day)))
    return dates.iloc[i + k] if i + k < len(dates) else pd.Timestamp.max


def test_periods_are_embargoed_so_no_label_window_crosses(store, splits):
    meta = splits.meta
    cal = store.dates
    ends = {p: pd.Timestamp(meta["periods"][p][1]) for p in ("train", "val")}
    for name in ("train", "val"):
        ds = splits[name]
        assert len(ds) > 0
        end_i = int(np.searchsorted(cal, ends[name]))
        for t, d in zip(ds["ticker"], ds["asof"], strict=False):
            assert _bar_after(store, t, d, H) <= ends[name], (name, t, d)
            assert int(np.searchsorted(cal, pd.Timestamp(d))) <= end_i - 15
    last_train = max(pd.Timestamp(d) for d in splits["train"]["asof"])
    first_val = min(pd.Timestamp(d) for d in splits["val"]["asof"])
    assert first_val > ends["train"] and len(cal[(cal > last_train) & (cal < first_val)]) >= 15
    first_test = min(pd.Timestamp(d) for d in splits["test"]["asof"])
    assert first_test > ends["val"]
    # stride 2 on the shared calendar
    assert all(int(np.searchsorted(cal, pd.Timestamp(d))) % 2 == 0 for d in splits["train"]["asof"])
    for name in splits:
        assert list(splits[name].column_names) == list(CONTEXT_COLUMNS)
        assert set(splits[name]["split"]) <= {name}
        assert all(lab in LABELS for lab in splits[name]["label"])  # unlabelled rows are counted, not kept


def test_heldout_tickers_never_in_train_or_val(splits):
    assert splits.meta["heldout_tickers"] == ["SYN004"]
    for name in ("train", "val", "test"):
        assert "SYN004" not in set(splits[name]["ticker"])
    assert set(splits["heldout"]["ticker"]) == {"SYN004"}
    assert min(splits["heldout"]["asof"]) >= splits.meta["periods"]["test"][0]
    drawn = build_splits.__globals__["_heldout"](["A", "B", "C", "D"], 2, 7)
    assert len(drawn) == 2 and drawn == build_splits.__globals__["_heldout"](["A", "B", "C", "D"], 2, 7)


def test_thresholds_fit_on_train_only_and_frozen(store, splits):
    th = LabelThresholds.model_validate(splits.meta["thresholds"])
    train_comp = np.array(splits["train"]["composite"])
    # stride 2 keeps half of the fitted rows: the train mix is close to the quantile shares
    mix = class_mix(splits["train"]["label"])
    print(
        "class mix per split:",
        json.dumps({n: {k: round(v, 3) for k, v in m.items()} for n, m in splits.meta["class_mix"].items()}),
    )
    for name, want in zip(LABELS, (0.03, 0.12, 0.38, 0.32, 0.15), strict=False):
        assert abs(mix[name] - want) < 0.06
    assert list(th.apply(train_comp)) == splits["train"]["label"]
    assert list(th.apply(splits["test"]["composite"])) == splits["test"]["label"]
    assert splits.meta["class_mix"]["test"] == class_mix(splits["test"]["label"])
    # rewrite every price after the validation period: thresholds and train/val rows do not move
    bars = store.bars.copy()
    test_start = pd.Timestamp(splits.meta["periods"]["test"][0])
    late = bars["date"] >= test_start
    for col in ("open", "high", "low", "close"):
        bars.loc[late, col] *= np.linspace(0.3, 3.0, int(late.sum()))
    changed = MarketStore(bars=bars, events=store.events, truth=store.truth, name=store.name, meta=store.meta)
    cfg = SplitConfig(train_end=0.6, val_end=0.8, heldout_tickers=["SYN004"], stride=2)
    again = build_splits(changed, cfg, show_progress=False)
    assert again.meta["thresholds"] == splits.meta["thresholds"]
    for name in ("train", "val"):
        assert again[name]["prompt_text"] == splits[name]["prompt_text"]
        assert again[name]["label"] == splits[name]["label"]
    assert again["test"]["composite"] != splits["test"]["composite"]


def test_paper_mode_thresholds_see_the_test_period(store):
    cfg = SplitConfig(label_mode="paper", stride=8)
    a = build_splits(store, cfg, show_progress=False)
    bars = store.bars.copy()
    late = bars["date"] >= pd.Timestamp(a.meta["periods"]["test"][0])
    bars.loc[late, "close"] *= np.exp(np.linspace(0, -2, int(late.sum())))
    b = build_splits(MarketStore(bars=bars, events=store.events, name=store.name), cfg, show_progress=False)
    assert a.meta["thresholds"] != b.meta["thresholds"]  # the leak the forward mode fixes


def test_save_load_and_meta(tmp_path, store, splits):
    out = tmp_path / "ds"
    build_splits(
        store,
        SplitConfig(heldout_tickers=1, stride=10, variations=2),
        out=out,
        store_path="somewhere",
        show_progress=False,
    )
    meta = json.loads((out / META_FILE).read_text())
    assert meta["store"] == {"name": store.name, "path": "somewhere"}
    assert meta["config"]["variations"] == 2 and len(meta["heldout_tickers"]) == 1
    assert set(meta["counts"]) == {"train", "val", "test", "heldout"} and set(meta["class_mix"]) == set(
        meta["counts"]
    )
    loaded = load_splits(out)
    assert loaded.meta == meta
    assert len(loaded["train"]) == meta["counts"]["train"]["rows"] == 2 * meta["counts"]["train"]["days"]
    assert (
        len(loaded["test"]) == meta["counts"]["test"]["days"]
    )  # evaluation splits: one canonical row per day
    assert set(loaded["test"]["variation"]) == {0}
    assert load_thresholds(out) == LabelThresholds.model_validate(meta["thresholds"])
    with pytest.raises(ValueError, match="not a saved split"):
        load_splits(tmp_path)


def test_config_validation_and_yaml(tmp_path, store):
    with pytest.raises(ValueError, match="embargo_days=10"):
        SplitConfig(embargo_days=10)
    with pytest.raises(ValueError, match="before val_end"):
        SplitConfig(train_end=0.8, val_end=0.5)
    with pytest.raises(ValueError, match="in \\(0, 1\\)"):
        SplitConfig(train_end=1.5)
    with pytest.raises(ValueError, match="unknown ticker"):
        build_splits(store, SplitConfig(heldout_tickers=["NOPE"]), show_progress=False)
    with pytest.raises(ValueError, match="outside"):
        build_splits(store, SplitConfig(train_end="1990-01-01", val_end="1991-01-01"), show_progress=False)
    y = tmp_path / "c.yaml"
    y.write_text("train_end: 2020-06-30\nval_end: 0.9\nstride: 3\ncontext:\n  bars: 10\n")
    cfg = SplitConfig.from_yaml(y, stride=None, seed=4)
    assert str(cfg.train_end) == "2020-06-30" and cfg.val_end == 0.9 and cfg.stride == 3 and cfg.seed == 4
    assert cfg.context.bars == 10
    y.write_text("stride: 0\n")
    with pytest.raises(ValueError, match="c.yaml"):
        SplitConfig.from_yaml(y)


def test_cli_build_and_show_prompt(tmp_path, store):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    store.save(tmp_path / "store")
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["build", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "ds"), "--stride", "10"]
    res = runner.invoke(
        app, [*args, "--heldout-tickers", "SYN001", "--variations", "2", "--sample-chars", "300"]
    )
    assert res.exit_code == 0, res.output
    assert "class mix per split" in res.output and "held-out tickers: SYN001" in res.output
    assert "Ticker: SYN000" in res.output  # the sample prompt
    meta = json.loads((tmp_path / "ds" / META_FILE).read_text())
    assert meta["config"]["variations"] == 2 and meta["heldout_tickers"] == ["SYN001"]
    res = runner.invoke(app, ["show-prompt", str(tmp_path / "ds"), "--split", "heldout", "--index", "0"])
    assert (
        res.exit_code == 0
        and "Ticker: SYN001" in res.output
        and "You are an equity research analyst" in res.output
    )
    res = runner.invoke(app, ["show-prompt", str(tmp_path / "ds"), "--index", "99999"])
    assert res.exit_code == 2 and "out of range" in res.output
    res = runner.invoke(app, [*args, "--embargo", "5"])
    assert res.exit_code == 2 and "embargo_days=5" in res.output


def test_named_split_presets_work_from_any_folder(tmp_path, monkeypatch):
    from thesisgym.dataset.splits import presets, resolve_preset

    monkeypatch.chdir(tmp_path)
    assert "mag7" in presets()
    cfg = SplitConfig.from_yaml("mag7", stride=5)
    assert cfg.heldout_tickers == ["META", "NVDA"] and cfg.stride == 5 and cfg.context.insider_days == 60
    (tmp_path / "mine.yaml").write_text("train_end: 0.5\n")
    assert resolve_preset("mine.yaml") == Path("mine.yaml")  # a file wins
    with pytest.raises(ValueError, match=r"nope: neither a file nor a split preset \(presets: .*mag7"):
        SplitConfig.from_yaml("nope")
    with pytest.raises(ValueError, match="missing.yaml: no such SplitConfig file"):
        SplitConfig.from_yaml("missing.yaml")
    # the documented sequence `data import-shared ... --out mag7` then `build --store mag7 --config mag7`:
    # a folder named like the preset is the store, not the config (it raised "Is a directory")
    (tmp_path / "mag7").mkdir()
    assert SplitConfig.from_yaml("mag7").heldout_tickers == ["META", "NVDA"]
    (tmp_path / "store").mkdir()
    with pytest.raises(ValueError, match="store: a folder, not a SplitConfig YAML file"):
        SplitConfig.from_yaml("store")
