"""Technical indicators of one ticker, vectorised over all its days at once, and their evidence texts.

Every indicator at row i is computed from bars 0..i only (rolling windows and recursive EMAs look
backwards), so the context builder can compute them once per ticker and index row d without any
look-ahead; the leakage tests perturb every later bar and check row d is unchanged.

Each indicator becomes one evidence item whose text states its parameters and value, e.g.
``RSI(14) 61.3``. The numbers of each text are produced next to the text from the same rounded
values, so `EvidenceItem.numbers` equals ``thesisgym.thesis.extract_numbers(text)`` without paying
for a regex per item (tests check the two agree).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# RSI and ATR use Wilder's smoothing (alpha = 1/14), the textbook definition.
RSI_PERIOD = 14
ATR_PERIOD = 14
BOLL_PERIOD = 20
BOLL_K = 2
Z_PERIOD = 20
VOL_PERIOD = 20


def as_of_basis(bars: pd.DataFrame, factor: float, volume_factor: float | None = None) -> pd.DataFrame:
    """Bars on another basis: prices x `factor`, volumes / `volume_factor` (default `factor`);
    thesisgym.data.asof gives both for an as-of day; (1, 1) returns the frame itself."""
    volume_factor = factor if volume_factor is None else volume_factor
    if factor == 1.0 and volume_factor == 1.0:
        return bars
    out = bars.copy()
    for c in ("open", "high", "low", "close"):
        out[c] = out[c].to_numpy(dtype="float64") * factor
    out["volume"] = out["volume"].to_numpy(dtype="float64") / volume_factor
    return out


def compute_indicators(bars: pd.DataFrame) -> pd.DataFrame:
    """Indicator columns for one ticker's bars (sorted by date), aligned row for row with `bars`."""
    c = bars["close"].astype("float64").reset_index(drop=True)
    h = bars["high"].astype("float64").reset_index(drop=True)
    lo = bars["low"].astype("float64").reset_index(drop=True)
    out = pd.DataFrame(index=c.index)
    for n in (5, 20, 50):
        out[f"sma{n}"] = c.rolling(n, min_periods=n).mean()
    for n in (12, 26):
        # min_periods keeps the first values (dominated by the seed) out of the prompt.
        out[f"ema{n}"] = c.ewm(span=n, adjust=False, min_periods=n).mean()
    macd = out["ema12"] - out["ema26"]
    signal = macd.ewm(span=9, adjust=False, min_periods=9).mean()
    out["macd"], out["macd_signal"], out["macd_hist"] = macd, signal, macd - signal
    delta = c.diff()
    gain = delta.clip(lower=0).ewm(alpha=1 / RSI_PERIOD, adjust=False, min_periods=RSI_PERIOD).mean()
    loss = (-delta.clip(upper=0)).ewm(alpha=1 / RSI_PERIOD, adjust=False, min_periods=RSI_PERIOD).mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        rsi = 100 - 100 / (1 + gain / loss)
    out["rsi"] = rsi.where(loss > 0, 100.0).where(gain.notna())
    prev = c.shift(1)
    tr = pd.concat([h - lo, (h - prev).abs(), (lo - prev).abs()], axis=1).max(axis=1, skipna=False)
    tr.iloc[0] = h.iloc[0] - lo.iloc[0] if len(tr) else np.nan
    out["atr"] = tr.ewm(alpha=1 / ATR_PERIOD, adjust=False, min_periods=ATR_PERIOD).mean()
    out["atr_pct"] = out["atr"] / c * 100
    mid = c.rolling(BOLL_PERIOD, min_periods=BOLL_PERIOD).mean()
    sd = c.rolling(BOLL_PERIOD, min_periods=BOLL_PERIOD).std(ddof=0)
    out["boll_up"], out["boll_lo"] = mid + BOLL_K * sd, mid - BOLL_K * sd
    width = out["boll_up"] - out["boll_lo"]
    out["boll_pb"] = ((c - out["boll_lo"]) / width).where(width > 0)
    zsd = c.rolling(Z_PERIOD, min_periods=Z_PERIOD).std()
    out["zscore"] = ((c - c.rolling(Z_PERIOD, min_periods=Z_PERIOD).mean()) / zsd).where(zsd > 0)
    ret = c.pct_change()
    out["vol20"] = ret.rolling(VOL_PERIOD, min_periods=VOL_PERIOD).std() * math.sqrt(252) * 100
    out["ret5"] = (c / c.shift(5) - 1) * 100
    out["ret20"] = (c / c.shift(20) - 1) * 100
    out["chg"] = ret * 100
    return out


@dataclass(frozen=True)
class ItemSpec:
    """One indicator item: a text template, its constant parameters and its value columns.

    `values` are (column, decimals) with decimals "p" = the row's price decimals, "p+1" one
    more, an int, or a signed int "+2" (explicit sign). Templates list the parameters first, then the
    values, so the numbers of a text are `params + values` in reading order.
    """

    template: str
    params: tuple[float, ...]
    values: tuple[tuple[str, str], ...]


INDICATOR_ITEMS: tuple[ItemSpec, ...] = (
    ItemSpec("SMA(5) {}", (5,), (("sma5", "p"),)),
    ItemSpec("SMA(20) {}", (20,), (("sma20", "p"),)),
    ItemSpec("SMA(50) {}", (50,), (("sma50", "p"),)),
    ItemSpec("EMA(12) {}", (12,), (("ema12", "p"),)),
    ItemSpec("EMA(26) {}", (26,), (("ema26", "p"),)),
    ItemSpec(
        "MACD(12,26,9) line {} signal {} histogram {}",
        (12, 26, 9),
        (("macd", "p+1"), ("macd_signal", "p+1"), ("macd_hist", "p+1")),
    ),
    ItemSpec("RSI(14) {}", (14,), (("rsi", "1"),)),
    ItemSpec("ATR(14) {} ({}% of close)", (14,), (("atr", "p"), ("atr_pct", "2"))),
    ItemSpec(
        "Bollinger(20,2) upper {} lower {} %B {}",
        (20, 2),
        (("boll_up", "p"), ("boll_lo", "p"), ("boll_pb", "2")),
    ),
    ItemSpec("z-score(20) of close {}", (20,), (("zscore", "2"),)),
    ItemSpec("volatility(20) annualised {}%", (20,), (("vol20", "1"),)),
    ItemSpec("return 5d {}%", (5,), (("ret5", "+2"),)),
    ItemSpec("return 20d {}%", (20,), (("ret20", "+2"),)),
)


def _fmt(decimals: str, price_dec: int) -> str:
    """printf-style format of one value ("%.2f" prints exactly what f"{x:.2f}" prints)."""
    if decimals.startswith("p"):
        return f"%.{price_dec + (1 if decimals == 'p+1' else 0)}f"
    sign = "+" if decimals.startswith("+") else ""
    return f"%{sign}.{int(decimals.lstrip('+'))}f"


def price_decimals(close: np.ndarray) -> np.ndarray:
    """Decimals for the prices of each row: 2, or 4 below $1 so moves stay visible.

    Decided from the row's own close, never from a ticker-wide statistic: a median over the whole
    series would let future prices change how past prompts are printed (a leak the tests caught).
    """
    close = np.asarray(close, dtype="float64")
    return np.where(np.isfinite(close) & (close < 1.0), 4, 2)


def _format_col(values: list[float], dec: str, decimals: np.ndarray) -> list[str]:
    """Format one value column; "p" columns use each row's price decimals."""
    if not dec.startswith("p") or decimals.size == 0 or (decimals == decimals[0]).all():
        return list(map(_fmt(dec, int(decimals[0]) if decimals.size else 2).__mod__, values))
    f2, f4 = _fmt(dec, 2), _fmt(dec, 4)
    return [(f2 if d == 2 else f4) % x for x, d in zip(values, decimals.tolist(), strict=False)]


def indicator_texts(
    ind: pd.DataFrame, *, decimals: np.ndarray, rows: np.ndarray | None = None
) -> tuple[list[int], list[str], np.ndarray, np.ndarray]:
    """For each requested row (all rows by default): the indicator items available (nan ones skipped).

    Returns (starts, texts, values, offsets), flattened row-major: the k-th requested row's items
    are texts[starts[k]:starts[k+1]]; item j's numbers are values[offsets[j]:offsets[j+1]].
    Vectorised per indicator: each value is formatted once, the text and the number both come from
    that string.
    """
    rows_a = np.arange(len(ind)) if rows is None else np.asarray(rows, dtype="int64")
    row_dec = np.asarray(decimals)[rows_a]
    r = len(rows_a)
    k = len(INDICATOR_ITEMS)
    text_m = np.empty((r, k), dtype=object)
    ok_m = np.zeros((r, k), dtype=bool)
    num_blocks, mask_blocks, widths = [], [], []
    for j, spec in enumerate(INDICATOR_ITEMS):
        arrs = [ind[c].to_numpy(dtype="float64")[rows_a] for c, _ in spec.values]
        ok = np.logical_and.reduce([np.isfinite(a) for a in arrs])
        # map() over C-level methods: no Python frame per value (this is the builder's hot loop)
        strs = [_format_col(a.tolist(), dec, row_dec) for (_, dec), a in zip(spec.values, arrs, strict=False)]
        head, _, tail = spec.template.partition("{}")
        if len(strs) == 1 and "{}" not in tail:
            col = [head + x + tail for x in strs[0]]
        else:
            col = list(
                map(spec.template.replace("%", "%%").replace("{}", "%s").__mod__, zip(*strs, strict=False))
            )
        text_m[:, j] = col if r else []
        ok_m[:, j] = ok
        vals = np.empty((r, len(spec.params) + len(strs)))
        vals[:, : len(spec.params)] = spec.params
        for q, ss in enumerate(strs):
            vals[:, len(spec.params) + q] = list(map(float, ss)) if r else []
        num_blocks.append(vals)
        mask_blocks.append(np.repeat(ok[:, None], vals.shape[1], axis=1))
        widths.append(vals.shape[1])
    texts = text_m[ok_m].tolist()
    values = np.hstack(num_blocks)[np.hstack(mask_blocks)] if r else np.zeros(0)
    lengths = (ok_m * np.asarray(widths)[None, :])[ok_m]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype("int64")
    starts = np.concatenate([[0], np.cumsum(ok_m.sum(axis=1))]).astype("int64").tolist()
    return starts, texts, values, offsets


def bar_texts(
    bars: pd.DataFrame, chg: np.ndarray, *, decimals: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """One evidence text per bar: OHLC, volume and the close-to-close change (when known).

    Returns (texts, values, offsets) like `indicator_texts`: bar i's numbers are
    values[offsets[i]:offsets[i+1]].
    """
    n = len(bars)
    dec = np.asarray(decimals)
    cols = [
        _format_col(bars[k].to_numpy(dtype="float64").tolist(), "p", dec)
        for k in ("open", "high", "low", "close")
    ]
    v = bars["volume"].to_numpy(dtype="float64")
    vol = np.where(np.isfinite(v), np.round(v), 0).astype("int64")
    cols.append(list(map(str, vol.tolist())))
    texts = list(map("open %s high %s low %s close %s volume %s".__mod__, zip(*cols, strict=False)))
    has = np.isfinite(chg)
    chg_s = list(map("%+.2f".__mod__, chg.tolist()))
    texts = [
        t + " change " + c + "%" if h else t for t, c, h in zip(texts, chg_s, has.tolist(), strict=False)
    ]
    vals = np.empty((n, 6))
    for q, col in enumerate(cols[:4]):
        vals[:, q] = list(map(float, col)) if n else []
    vals[:, 4] = vol
    vals[:, 5] = [float(c) if h else np.nan for c, h in zip(chg_s, has.tolist(), strict=False)] if n else []
    mask = np.ones((n, 6), dtype=bool)
    mask[:, 5] = has
    values = vals[mask]
    offsets = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype("int64")
    return texts, values, offsets
