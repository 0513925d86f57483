"""Train / val / test / heldout datasets by time, with an embargo, held-out tickers and frozen labels.

docs/spec.md, section 4. The trading-day calendar (union over tickers) is cut at `train_end` and `val_end`
(dates, or fractions of the calendar). A row (ticker, d) belongs to a period only if its whole label
window does: the bar 15 trading days after d (max(HORIZONS), the longest EMA horizon) must be dated on
or before the period's last day, and d must lie at least `embargo_days` trading days before it. With
embargo_days >= max(HORIZONS) (enforced) no training label is computed from a price of the
validation period, and no validation label from the test period.

Label cut points are fitted on the composites of the training rows only (all training days of the
training tickers, before striding) and applied unchanged to val/test/heldout; they are stored in
`build_meta.json`. `heldout` = held-out tickers over the test period; they never appear in train or
val. Rows without a label (incomplete forward window, too little history for the volatility) are
not put in any split and are counted in the meta as `unlabelled`.

Variations (random section subsets/orders) augment training: `variations` applies to train, while
val/test/heldout get `eval_variations` (default 1, the canonical context), so a backtest sees one row
per ticker-day unless asked otherwise.

The meta also holds the coverage of every split (per ticker x split x section: share of prompts with
the section and mean items, thesisgym.data.quality.coverage_table) and a warning for every split or
ticker that has none of a section.

`label_mode="paper"` reproduces Trading-R1 (trailing returns, cut points from the full sample, so
information from the test period reaches training labels) for comparison only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, field_validator, model_validator

from thesisgym.data.quality import coverage_table, coverage_warnings, store_sections
from thesisgym.data.store import MarketStore
from thesisgym.dataset.contexts import ContextConfig, build_contexts
from thesisgym.dataset.labels import LabelThresholds, apply_thresholds, class_mix, compute_labels
from thesisgym.schema import HORIZONS, StrictModel

SPLITS: tuple[str, ...] = ("train", "val", "test", "heldout")
META_FILE = "build_meta.json"
PRESET_DIR = Path(__file__).resolve().parents[1] / "configs" / "splits"


class SplitConfig(StrictModel):
    """How to cut a MarketStore into datasets (all fields can come from YAML or CLI flags)."""

    train_end: date | float = Field(
        0.6, description="last day of the training period, or a fraction of the calendar"
    )
    val_end: date | float = Field(0.8, description="last day of the validation period, or a fraction")
    embargo_days: int = Field(
        max(HORIZONS), description="trading days dropped before each period end (>= 15)"
    )
    heldout_tickers: list[str] | int = Field(
        0, description="tickers kept out of train/val, or how many to draw"
    )
    tickers: list[str] | None = Field(None, description="restrict to these tickers (default: all)")
    variations: int = Field(1, ge=1, description="contexts per ticker-day in train (augmentation)")
    eval_variations: int = Field(1, ge=1, description="contexts per ticker-day in val/test/heldout")
    seed: int = 0
    token_budget: int | None = Field(None, gt=0)
    stride: int = Field(1, ge=1, description="keep every k-th trading day")
    label_mode: Literal["forward", "paper"] = "forward"
    context: ContextConfig = Field(default_factory=ContextConfig)

    @field_validator("embargo_days")
    @classmethod
    def _embargo(cls, v: int) -> int:
        if v < max(HORIZONS):
            raise ValueError(
                f"embargo_days={v} is shorter than the longest label horizon ({max(HORIZONS)} trading days): "
                "training labels would see validation prices"
            )
        return v

    @field_validator("train_end", "val_end")
    @classmethod
    def _frac(cls, v: date | float) -> date | float:
        if isinstance(v, float) and not 0.0 < v < 1.0:
            raise ValueError(f"a fractional split end must be in (0, 1), got {v}")
        return v

    @field_validator("heldout_tickers")
    @classmethod
    def _heldout(cls, v: list[str] | int) -> list[str] | int:
        if isinstance(v, int) and v < 0:
            raise ValueError(f"heldout_tickers must be >= 0, got {v}")
        return v

    @model_validator(mode="after")
    def _order(self) -> SplitConfig:
        a, b = self.train_end, self.val_end
        if type(a) is type(b) and not a < b:  # type: ignore[operator]
            raise ValueError(f"train_end ({a}) must come before val_end ({b})")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: object) -> SplitConfig:
        """Load from a YAML file, or a named preset (`"mag7"`: thesisgym/configs/splits/mag7.yaml) when
        `path` is a bare name and no such file exists; keyword overrides (e.g. from CLI flags, None =
        not given) win."""
        import yaml

        path = resolve_preset(path)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML ({exc})") from exc
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of SplitConfig fields, got {type(data).__name__}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc


def presets() -> list[str]:
    """Names of the split presets shipped with the package (thesisgym/configs/splits/*.yaml)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_preset(path: str | Path) -> Path:
    """`path` itself when it is a file or names a folder; else the preset of that name (a bare name
    that is also a folder here, "mag7" beside the store `data import-shared --out mag7` wrote, is the preset)."""
    path = Path(path)
    bare_preset = len(path.parts) == 1 and (PRESET_DIR / f"{path.name}.yaml").exists()
    if path.is_dir() and not bare_preset:
        raise ValueError(f"{path}: a folder, not a SplitConfig YAML file (presets: {', '.join(presets())})")
    if (path.exists() and not bare_preset) or len(path.parts) > 1 or path.suffix in (".yaml", ".yml"):
        if not path.exists():
            raise ValueError(f"{path}: no such SplitConfig file (presets: {', '.join(presets())})")
        return path
    preset = PRESET_DIR / f"{path.name}.yaml"
    if not preset.exists():
        raise ValueError(f"{path}: neither a file nor a split preset (presets: {', '.join(presets())})")
    return preset


def _period_end(calendar: pd.DatetimeIndex, end: date | float, name: str) -> int:
    """Index in `calendar` of the last day of a period."""
    if isinstance(end, float):
        i = int(round(end * len(calendar))) - 1
    else:
        i = int(np.searchsorted(calendar.asi8, pd.Timestamp(end).as_unit("ns").value, side="right")) - 1
    if not 0 <= i < len(calendar) - 1:
        raise ValueError(
            f"SplitConfig.{name}={end}: outside the store's calendar {calendar[0].date()}..{calendar[-1].date()}"
        )
    return i


def _heldout(store_tickers: list[str], spec: list[str] | int, seed: int) -> list[str]:
    if isinstance(spec, int):
        if spec >= len(store_tickers):
            raise ValueError(
                f"SplitConfig.heldout_tickers={spec}: must leave at least one training ticker of {len(store_tickers)}"
            )
        rng = np.random.default_rng(seed)
        return sorted(rng.choice(store_tickers, size=spec, replace=False).tolist()) if spec else []
    unknown = sorted(set(spec) - set(store_tickers))
    if unknown:
        raise ValueError(f"SplitConfig.heldout_tickers: unknown ticker(s) {unknown}")
    if set(spec) >= set(store_tickers):
        raise ValueError("SplitConfig.heldout_tickers: every ticker is held out, nothing is left to train on")
    return sorted(spec)


def assign_periods(
    store: MarketStore, config: SplitConfig, labels: pd.DataFrame
) -> tuple[pd.DataFrame, dict]:
    """Per labels row: its `period` (train/val/test or "" when embargoed/unlabelled) and kept flag.

    Returns (frame with columns ticker, date, period, kept) aligned to `labels`, and the period
    boundaries as ISO dates.
    """
    calendar = store.dates.as_unit("ns")
    if len(calendar) < 3:
        raise ValueError(f"MarketStore {store.name!r}: too few trading days ({len(calendar)}) to split")
    t_i = _period_end(calendar, config.train_end, "train_end")
    v_i = _period_end(calendar, config.val_end, "val_end")
    if not t_i < v_i:
        raise ValueError(
            f"SplitConfig: train_end ({calendar[t_i].date()}) must come before val_end ({calendar[v_i].date()})"
        )
    h = max(HORIZONS)
    ci = np.searchsorted(calendar.asi8, pd.DatetimeIndex(labels["date"]).as_unit("ns").asi8)
    # calendar index of the last bar the label of each row reads (d + h bars of the same ticker)
    end_ci = np.full(len(labels), np.iinfo("int64").max)
    for _, idx in labels.groupby("ticker", sort=False).indices.items():
        if len(idx) > h:
            end_ci[idx[:-h]] = ci[idx[h:]]
    e = config.embargo_days
    period = np.full(len(labels), "", dtype=object)
    period[(ci <= t_i - e) & (end_ci <= t_i)] = "train"
    period[(ci > t_i) & (ci <= v_i - e) & (end_ci <= v_i)] = "val"
    period[ci > v_i] = "test"
    kept = (ci % config.stride) == 0
    bounds = {
        "train": [str(calendar[0].date()), str(calendar[t_i].date())],
        "val": [str(calendar[t_i + 1].date()), str(calendar[v_i].date())],
        "test": [str(calendar[v_i + 1].date()), str(calendar[-1].date())],
    }
    return pd.DataFrame(
        {
            "ticker": labels["ticker"].to_numpy(),
            "date": labels["date"].to_numpy(),
            "period": period,
            "kept": kept,
        }
    ), bounds


def build_splits(
    store: MarketStore,
    config: SplitConfig | None = None,
    *,
    out: str | Path | None = None,
    store_path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
):
    """Build the DatasetDict (train/val/test/heldout); with `out`, also save it and build_meta.json.

    The returned DatasetDict carries the meta dict as `.meta` (the same content as the JSON file).
    cache_dir: stream each split to `<cache_dir>/<split>.arrow` (memory-mapped) instead of holding
    it in memory; for builds larger than RAM.
    """
    from datasets import DatasetDict

    config = config or SplitConfig()
    tickers = store.tickers if config.tickers is None else list(config.tickers)
    unknown = sorted(set(tickers) - set(store.tickers))
    if unknown:
        raise ValueError(f"SplitConfig.tickers: unknown ticker(s) {unknown}")
    held = _heldout(tickers, config.heldout_tickers, config.seed)
    train_tickers = [t for t in tickers if t not in held]
    # labels read the prices after each day by definition: through the door's adjusted-series reader
    raw = compute_labels(store.timeline().label_bars(tickers), mode=config.label_mode)
    per, bounds = assign_periods(store, config, raw)
    is_train_t = raw["ticker"].isin(train_tickers).to_numpy()
    thresholds = _fit_thresholds(raw, (per["period"].to_numpy() == "train") & is_train_t, config.label_mode)
    labels = apply_thresholds(raw, thresholds)
    period, kept = per["period"].to_numpy(), per["kept"].to_numpy()
    labelled = np.isfinite(raw["composite"].to_numpy())
    masks = {
        "train": (period == "train") & is_train_t,
        "val": (period == "val") & is_train_t,
        "test": (period == "test") & is_train_t,
        "heldout": (period == "test") & ~is_train_t,
    }
    parts, counts, unlabelled = {}, {}, {}
    for name in SPLITS:
        m = masks[name] & kept
        unlabelled[name] = int((m & ~labelled).sum())
        sel = labels.loc[m & labelled, ["ticker", "date"]]
        dates = {str(t): g["date"].tolist() for t, g in sel.groupby("ticker", sort=True)}
        parts[name] = build_contexts(
            store,
            tickers=sorted(dates),
            dates=dates,
            variations=config.variations if name == "train" else config.eval_variations,
            seed=config.seed,
            token_budget=config.token_budget,
            labels=labels,
            config=config.context,
            split=name,
            cache_file=None if cache_dir is None else Path(cache_dir) / f"{name}.arrow",
            show_progress=show_progress,
        )
        counts[name] = {"rows": len(parts[name]), "days": int(len(sel)), "tickers": len(dates)}
    dd = DatasetDict(parts)
    meta = _meta(store, config, store_path, thresholds, bounds, held, train_tickers, counts, unlabelled, parts)
    dd.meta = meta  # type: ignore[attr-defined]
    if out is not None:
        save_splits(dd, out, meta=meta)
    return dd


def _fit_thresholds(raw: pd.DataFrame, fit_mask: np.ndarray, mode: str) -> LabelThresholds:
    if mode == "paper":
        return LabelThresholds.fit(raw["composite"], mode="paper")  # the paper's full-sample fit
    labelled = np.isfinite(raw["composite"].to_numpy())
    if not (fit_mask & labelled).any():
        raise ValueError("build_splits: the training period has no labelled rows (move train_end later or add data)")
    return LabelThresholds.fit(raw["composite"].to_numpy()[fit_mask])


def _meta(store, config, store_path, thresholds, bounds, held, train_tickers, counts, unlabelled, parts) -> dict:
    from thesisgym import __version__

    meta = {
        "thesisgym_version": __version__,
        "store": {"name": store.name, "path": str(store_path) if store_path is not None else None},
        "config": config.model_dump(mode="json"),
        "thresholds": thresholds.model_dump(mode="json"),
        "periods": bounds,
        "heldout_tickers": held,
        "train_tickers": train_tickers,
        "counts": counts,
        "unlabelled": unlabelled,
        "class_mix": {n: class_mix(parts[n]["label"]) for n in SPLITS},
    }
    cov = coverage_table(parts)
    meta["coverage"] = cov.to_dict("records")
    meta["coverage_warnings"] = coverage_warnings(cov, sections=store_sections(store))
    if store.meta.get("quality"):
        meta["store_quality"] = store.meta["quality"]
    return meta


def save_splits(splits, out: str | Path, *, meta: dict | None = None) -> Path:
    """`save_to_disk(out)` plus `out/build_meta.json`."""
    from datasets import DatasetDict

    out = Path(out)
    meta = meta if meta is not None else getattr(splits, "meta", None)
    # An empty split (e.g. heldout with heldout_tickers=0) saves fine but `load_from_disk` of the
    # whole dict then fails inside pyarrow's concat; such splits are left out and listed in the meta.
    empty = [k for k, v in splits.items() if len(v) == 0]
    DatasetDict({k: v for k, v in splits.items() if len(v)}).save_to_disk(str(out))
    if meta is not None:
        meta = {**meta, "empty_splits": empty}
        (out / META_FILE).write_text(json.dumps(meta, indent=2, default=str))
    return out


def load_splits(path: str | Path):
    """The DatasetDict saved by `save_splits`, with `.meta` read back from build_meta.json."""
    from datasets import load_from_disk

    path = Path(path)
    if not (path / "dataset_dict.json").exists():
        raise ValueError(f"{path}: not a saved split directory (dataset_dict.json is missing)")
    dd = load_from_disk(str(path))
    meta_path = path / META_FILE
    dd.meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}  # type: ignore[attr-defined]
    return dd


def load_split(path: str | Path, split: str, *, required: bool = True):
    """One split of a `thesisgym build` directory (or of any `save_to_disk` dataset); None for an
    absent optional split. Only the split asked for is read: a DatasetDict saved with an empty split
    cannot be loaded whole by datasets' `load_from_disk`."""
    from datasets import Dataset, DatasetDict, load_from_disk

    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such dataset directory")
    if (path / split / "dataset_info.json").exists():
        return Dataset.load_from_disk(str(path / split))
    if (path / "dataset_dict.json").exists() and not required:
        return None
    try:
        loaded = load_from_disk(str(path))
    except Exception as exc:  # datasets raises FileNotFoundError/ValueError variants
        raise ValueError(f"{path}: cannot load a dataset saved with save_to_disk ({exc})") from exc
    if isinstance(loaded, DatasetDict):
        if split not in loaded:
            if not required:
                return None
            raise ValueError(f"{path}: no split {split!r}; available: {sorted(loaded)}")
        return loaded[split]
    return loaded


def recorded_store(path: str | Path) -> Path | None:
    """The MarketStore directory a built split directory records in its build_meta.json (None if none)."""
    meta_path = Path(path) / META_FILE
    if not meta_path.exists():
        return None
    entry = json.loads(meta_path.read_text()).get("store")
    store = entry.get("path") if isinstance(entry, dict) else entry
    if not store:
        return None
    p = Path(store)
    return p if p.is_absolute() or p.exists() else Path(path) / p


def load_thresholds(path: str | Path) -> LabelThresholds:
    """The frozen thresholds stored in a split directory's build_meta.json."""
    meta_path = Path(path) / META_FILE
    if not meta_path.exists():
        raise ValueError(f"{path}: {META_FILE} is missing")
    return LabelThresholds.model_validate(json.loads(meta_path.read_text())["thresholds"])


__all__: Sequence[str] = [
    "SPLITS",
    "SplitConfig",
    "assign_periods",
    "build_splits",
    "load_splits",
    "load_thresholds",
    "presets",
    "resolve_preset",
    "save_splits",
]
