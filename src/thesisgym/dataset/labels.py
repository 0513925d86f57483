"""Forward, volatility-normalised, five-class labels (Trading-R1 Algorithm S1 with two fixes).

docs/spec.md, section 4. Per ticker, on its own bars only (nothing crosses tickers):

- EMA: ``close.ewm(span=3, adjust=False).mean()``. ``adjust=False`` is the recursive EMA
  (e_t = a*c_t + (1-a)*e_{t-1}, a = 2/(span+1)) that trading code and the paper use; it depends
  only on closes up to t, so the EMA itself never looks ahead.
- Forward return: ``R_tau(d) = EMA(d+tau) / EMA(d) - 1`` for tau in ``schema.HORIZONS`` (3, 7, 15).
  The paper's code shifts the wrong way and computes the trailing return EMA(d)/EMA(d-tau) - 1;
  ``mode="paper"`` reproduces that for comparison.
- Volatility: ``V_tau(d)`` = rolling ``VOL_WINDOW``-day (20) sample std (ddof=1) of the R_tau values
  *realised by d*. The forward return of day d' is only known at the close of d'+tau, so the
  series is shifted by tau before rolling: V_tau(d) = std(R_tau(d-tau-19) .. R_tau(d-tau)). A plain
  rolling std of R_tau would read prices up to d+tau into the normaliser (a leak). The window needs
  all 20 values; a zero std (flat prices) gives nan rather than an infinite score.
- ``S_tau = R_tau / V_tau``; ``composite = 0.3*S3 + 0.5*S7 + 0.2*S15``.
- Classes: cut points at the 0.03/0.15/0.53/0.85 quantiles of the composite. The paper fits them on
  the whole series, so future prices move past labels. Here :class:`LabelThresholds` is fitted on the
  training split only, frozen, saved as JSON and applied unchanged to validation and test.

Also per row: ``fwd_return = close(d+REWARD_HORIZON)/close(d) - 1`` (what a position taken at the
close of d earns; used by the market reward and backtests) and ``fwd_vol`` = std of the 20 daily close
returns up to d times sqrt(REWARD_HORIZON) (known at d). Rows whose forward window is incomplete
(the last 15 days of a ticker) or whose normaliser lacks history get composite nan and label None.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from thesisgym.schema import (
    EMA_SPAN,
    HORIZON_WEIGHTS,
    HORIZONS,
    LABEL_QUANTILES,
    LABELS,
    REWARD_HORIZON,
    VOL_WINDOW,
)

LabelMode = Literal["forward", "paper"]

LABEL_COLUMNS: tuple[str, ...] = (
    "ticker",
    "date",
    *(f"R{t}" for t in HORIZONS),
    *(f"V{t}" for t in HORIZONS),
    *(f"S{t}" for t in HORIZONS),
    "composite",
    "fwd_return",
    "fwd_vol",
    "label",
    "label_id",
)


def class_ids(values: pd.Series | np.ndarray | list[float], cuts: tuple[float, ...] | np.ndarray) -> np.ndarray:
    """Class ids (index into schema.LABELS) of `values` cut at four cut points, -1 where a value is not finite.

    The one mapping from cut points to classes (labels here, the truth oracle of evaluate/baselines.py, the
    reward audit's oracle): a value equal to a cut point belongs to the class above it (side="right", so
    the 0.03 quantile itself is SELL).
    """
    c = np.asarray(cuts, dtype="float64")
    if c.shape != (len(LABELS) - 1,):
        raise ValueError(f"cut points: expected {len(LABELS) - 1}, got {list(np.ravel(c))}")
    x = np.asarray(values, dtype="float64")
    ids = np.searchsorted(c, x, side="right").astype("int64")
    ids[~np.isfinite(x)] = -1
    return ids


def class_names(values: pd.Series | np.ndarray | list[float], cuts: tuple[float, ...] | np.ndarray) -> np.ndarray:
    """`class_ids` as label names (object array of str), None where a value is not finite."""
    return np.array((*LABELS, None), dtype=object)[class_ids(values, cuts)]  # id -1 indexes the trailing None



class LabelThresholds(BaseModel):
    """Frozen composite cut points: STRONG_SELL < c0 <= SELL < c1 <= HOLD < c2 <= BUY < c3 <= STRONG_BUY."""

    model_config = ConfigDict(frozen=True)

    cuts: tuple[float, float, float, float]
    quantiles: tuple[float, float, float, float] = LABEL_QUANTILES  # type: ignore[assignment]
    n_fit: int = 0
    mode: str = "forward"

    @field_validator("cuts")
    @classmethod
    def _sorted(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not all(np.isfinite(v)):
            raise ValueError(f"LabelThresholds.cuts: must be finite, got {v}")
        if any(b < a for a, b in zip(v, v[1:], strict=False)):
            raise ValueError(f"LabelThresholds.cuts: must be non-decreasing, got {v}")
        return v

    @classmethod
    def fit(
        cls,
        composite: pd.Series | np.ndarray | list[float],
        *,
        quantiles: tuple[float, ...] = LABEL_QUANTILES,
        mode: str = "forward",
    ) -> LabelThresholds:
        """Fit the cut points on the composites of the training split (nan values are ignored)."""
        x = np.asarray(composite, dtype="float64")
        x = x[np.isfinite(x)]
        if x.size == 0:
            raise ValueError(
                "LabelThresholds.fit: no finite composite values to fit on (is the training split empty?)"
            )
        if len(quantiles) != 4:
            raise ValueError(f"LabelThresholds.fit: need 4 quantiles, got {quantiles}")
        cuts = tuple(float(c) for c in np.quantile(x, quantiles))
        return cls(cuts=cuts, quantiles=tuple(float(q) for q in quantiles), n_fit=int(x.size), mode=mode)

    def apply_ids(self, composite: pd.Series | np.ndarray | list[float]) -> np.ndarray:
        """Class ids (index into schema.LABELS), -1 where the composite is nan."""
        return class_ids(composite, self.cuts)

    def apply(self, composite: pd.Series | np.ndarray | list[float]) -> np.ndarray:
        """Label names (object array of str), None where the composite is nan."""
        return class_names(composite, self.cuts)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    @classmethod
    def from_json(cls, text: str) -> LabelThresholds:
        return cls.model_validate(json.loads(text))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> LabelThresholds:
        path = Path(path)
        try:
            return cls.from_json(path.read_text())
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: not a LabelThresholds JSON file ({exc})") from exc


def ema(close: pd.Series) -> pd.Series:
    """The label EMA: recursive (adjust=False) EMA of span schema.EMA_SPAN; uses closes up to t only."""
    return close.ewm(span=EMA_SPAN, adjust=False).mean()


def forward_returns(e: pd.Series, tau: int) -> pd.Series:
    """R_tau(d) = EMA(d+tau)/EMA(d) - 1 (nan for the last tau rows)."""
    return e.shift(-tau) / e - 1.0


def realised_volatility(r: pd.Series, tau: int, *, window: int = VOL_WINDOW) -> pd.Series:
    """Std of the last `window` forward returns already realised at d, i.e. R_tau(d') with d'+tau <= d."""
    v = r.shift(tau).rolling(window, min_periods=window).std()
    return v.where(v > 0)


def _ticker_frame(close: pd.Series, *, mode: LabelMode) -> dict[str, np.ndarray]:
    e = ema(close)
    out: dict[str, np.ndarray] = {}
    comp = np.zeros(len(close))
    for tau, w in zip(HORIZONS, HORIZON_WEIGHTS, strict=False):
        if mode == "forward":
            r = forward_returns(e, tau)
            v = realised_volatility(r, tau)
        else:
            # The paper's Algorithm S1 as coded: trailing EMA return, plain rolling std of it.
            r = e / e.shift(tau) - 1.0
            v = r.rolling(VOL_WINDOW, min_periods=VOL_WINDOW).std()
            v = v.where(v > 0)
        s = r / v
        out[f"R{tau}"] = r.to_numpy()
        out[f"V{tau}"] = v.to_numpy()
        out[f"S{tau}"] = s.to_numpy()
        comp = comp + w * s.to_numpy()
    out["composite"] = comp
    c = close.to_numpy()
    fwd = np.full(len(c), np.nan)
    if len(c) > REWARD_HORIZON:
        fwd[:-REWARD_HORIZON] = c[REWARD_HORIZON:] / c[:-REWARD_HORIZON] - 1.0
    out["fwd_return"] = fwd
    daily = close.pct_change()
    out["fwd_vol"] = (
        daily.rolling(VOL_WINDOW, min_periods=VOL_WINDOW).std() * np.sqrt(REWARD_HORIZON)
    ).to_numpy()
    return out


def compute_labels(
    bars: pd.DataFrame,
    *,
    mode: LabelMode = "forward",
    thresholds: LabelThresholds | None = None,
) -> pd.DataFrame:
    """Per (ticker, date): R/V/S per horizon, composite, fwd_return, fwd_vol, label, label_id.

    forward mode: labels come from `thresholds` (fit them on the training split with
    :meth:`LabelThresholds.fit` and pass them here); without thresholds `label` is None and
    `label_id` -1 everywhere, so nothing is ever labelled with cut points that saw the future.
    paper mode: trailing returns and, without thresholds, cut points fitted on the full sample
    of `bars` (the paper's leak, kept to measure it).
    """
    if mode not in ("forward", "paper"):
        raise ValueError(f"compute_labels: mode must be 'forward' or 'paper', got {mode!r}")
    if not isinstance(bars, pd.DataFrame):
        raise TypeError(f"compute_labels: bars must be a pandas DataFrame, got {type(bars).__name__}")
    missing = {"ticker", "date", "close"} - set(bars.columns)
    if missing:
        raise ValueError(f"compute_labels: bars is missing column(s) {sorted(missing)}")
    bars = bars.sort_values(["ticker", "date"], kind="stable")
    bad = ~np.isfinite(bars["close"].to_numpy(dtype="float64")) | (
        bars["close"].to_numpy(dtype="float64") <= 0
    )
    if bad.any():
        row = bars.index[np.argmax(bad)]
        raise ValueError(f"compute_labels: bars row {row} field 'close': must be a finite positive price")
    if bars.duplicated(["ticker", "date"]).any():
        row = bars.index[np.argmax(bars.duplicated(["ticker", "date"]).to_numpy())]
        raise ValueError(f"compute_labels: bars row {row}: duplicate (ticker, date)")

    parts = []
    for ticker, g in bars.groupby("ticker", sort=True):
        cols = _ticker_frame(g["close"].astype("float64").reset_index(drop=True), mode=mode)
        part = pd.DataFrame({"ticker": str(ticker), "date": g["date"].to_numpy(), **cols})
        parts.append(part)
    if parts:
        frame = pd.concat(parts, ignore_index=True)
    else:
        frame = pd.DataFrame({c: pd.Series([], dtype="float64") for c in LABEL_COLUMNS[2:-2]})
        frame.insert(0, "date", pd.Series([], dtype="datetime64[ns]"))
        frame.insert(0, "ticker", pd.Series([], dtype=object))

    if thresholds is None and mode == "paper" and np.isfinite(frame["composite"]).any():
        thresholds = LabelThresholds.fit(frame["composite"], mode="paper")
    if thresholds is not None:
        frame["label"] = pd.Series(thresholds.apply(frame["composite"]), dtype=object)
        frame["label_id"] = thresholds.apply_ids(frame["composite"])
    else:
        frame["label"] = pd.Series([None] * len(frame), dtype=object)
        frame["label_id"] = np.full(len(frame), -1, dtype="int64")
    return frame[list(LABEL_COLUMNS)]


def apply_thresholds(labels: pd.DataFrame, thresholds: LabelThresholds) -> pd.DataFrame:
    """A copy of a labels frame with `label` / `label_id` recomputed from frozen `thresholds`."""
    out = labels.copy()
    out["label"] = pd.Series(thresholds.apply(out["composite"]), index=out.index, dtype=object)
    out["label_id"] = thresholds.apply_ids(out["composite"])
    return out


def class_mix(labels: pd.Series | np.ndarray | list) -> dict[str, float]:
    """Share of each class among the labelled rows (None rows ignored), in schema.LABELS order."""
    s = pd.Series(labels, dtype=object)
    s = s[s.notna()]
    n = len(s)
    counts = s.value_counts()
    return {name: (float(counts.get(name, 0)) / n if n else 0.0) for name in LABELS}
