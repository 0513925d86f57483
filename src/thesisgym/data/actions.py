"""Corporate actions (the split history a store keeps) so every number can be shown as it was.

Vendors adjust price history for every split up to the day they were downloaded: Apple's 2013 close
of $549.03 is stored as 19.61 because of the 7:1 split of 2014 and the 4:1 split of 2020. Shown in a
2013 prompt, 19.61 tells the model two splits are coming, and sits beside as-filed SEC and insider
numbers on another scale. The store therefore keeps the splits (`store.actions`: ticker, date =
ex-date, kind "split", value = ratio) and the door (`thesisgym.data.asof`) un-adjusts per as-of day.

Layouts read by `read_actions`:
- `ticker,date,kind,value` (kind "split": value the ratio, 4 = 4-for-1, "3:2" and "4-for-1" also read;
  kind "dividend": value the cash paid per share);
- a per-ticker Yahoo actions export `Date,Stock Splits[,Dividends]` (the ticker from the file name or
  `ticker=`): a nonzero split is a split, a nonzero dividend a dividend (kind "dividend", value the
  cash paid per share; used only for bars adjusted for dividends, `bars_adjusted_for`).

`MAG7_SPLITS` is the split history of the Magnificent-7 price files in ../shared/data/prices: the
ex-dates and ratios the companies announced, each checked against those files (no jump in the
adjusted closes at the ex-date; Alpha Vantage insider trade prices, which are as traded, sit at the
ratio of the splits still to come, e.g. AAPL x28 before June 2014, x4 until August 2020).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.asof import ACTION_COLUMNS
from thesisgym.data.files import read_table
from thesisgym.data.validate import DataValidationError, Problem, raise_rows, require_columns

__all__ = ["MAG7_SPLITS", "read_actions", "split_actions", "validate_actions"]

# (ticker, ex-date, ratio). GOOGL 2014-04-03 is the Class C distribution, which Yahoo (and so the
# shared GOOGL file) treats as a 1.998:1 split; NVDA's 10:1 of 2024-06-10 is after the price files end
# but Alpha Vantage's EPS history is already adjusted for it.
MAG7_SPLITS: tuple[tuple[str, str, float], ...] = (
    ("AAPL", "2014-06-09", 7.0),
    ("AAPL", "2020-08-31", 4.0),
    ("AMZN", "2022-06-06", 20.0),
    ("GOOGL", "2014-04-03", 1.998),
    ("GOOGL", "2022-07-18", 20.0),
    ("NVDA", "2021-07-20", 4.0),
    ("NVDA", "2024-06-10", 10.0),
    ("TSLA", "2020-08-31", 5.0),
    ("TSLA", "2022-08-25", 3.0),
)


def split_actions(rows: Iterable[tuple[str, str, float]]) -> pd.DataFrame:
    """An actions frame from (ticker, ex-date, ratio) tuples."""
    rows = list(rows)
    frame = pd.DataFrame(
        {
            "ticker": [r[0] for r in rows],
            "date": pd.to_datetime([r[1] for r in rows]),
            "kind": "split",
            "value": [float(r[2]) for r in rows],
        }
    )
    return validate_actions(frame, source="<splits>")


def _ratio(text: str) -> float:
    """4, "4", "4:1", "3:2", "4-for-1", "4 for 1" -> the ratio; nan when it is none of these."""
    t = str(text).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?::|-?for-?|/|\s)\s*(\d+(?:\.\d+)?)", t)
    if m:
        a, b = float(m.group(1)), float(m.group(2))
        return a / b if b else np.nan
    try:
        return float(t)
    except ValueError:
        return np.nan


def validate_actions(frame: pd.DataFrame, *, source: str, lines=None) -> pd.DataFrame:
    """Canonical actions frame; a bad kind, date or ratio raises naming the row and field."""
    missing = [c for c in ACTION_COLUMNS if c not in frame.columns]
    if missing:
        raise DataValidationError([Problem(source, None, c, "missing column") for c in missing])
    kind = frame["kind"].astype(str).str.strip().str.lower()
    raise_rows(source, lines, ~kind.isin(["split", "dividend"]).to_numpy(), "kind",
               lambda i: f"unknown action kind {kind.iloc[i]!r} (expected split or dividend)")
    date = pd.to_datetime(frame["date"], errors="coerce")
    raise_rows(source, lines, date.isna().to_numpy(), "date", lambda i: f"not a date {frame['date'].iloc[i]!r}")
    value = np.array([_ratio(v) for v in frame["value"]], dtype="float64")
    raise_rows(source, lines, ~(np.isfinite(value) & (value > 0)), "value",
               lambda i: f"not a positive {kind.iloc[i] == 'split' and 'split ratio' or 'cash amount'} "
               f"{frame['value'].iloc[i]!r}")
    out = pd.DataFrame(
        {
            "ticker": frame["ticker"].astype(str).str.strip().str.upper().to_numpy(),
            "date": pd.DatetimeIndex(date).normalize(),
            "kind": kind.to_numpy(),
            "value": value,
        }
    )
    dup = out.duplicated(["ticker", "date", "kind"]).to_numpy()
    raise_rows(source, lines, dup, "date", lambda i: f"a second {out['kind'].iat[i]} of {out['ticker'].iat[i]} on "
               f"{out['date'].iat[i].date()}")
    return out.sort_values(["ticker", "date"], kind="stable").reset_index(drop=True)[list(ACTION_COLUMNS)]


def read_actions(path: str | Path, *, ticker: str | None = None) -> pd.DataFrame:
    """A split-history file (module docstring: two layouts) -> a validated actions frame."""
    path = Path(path)
    raw, lines = read_table(path)
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    if "stock splits" in cols or "dividends" in cols:
        require_columns(path.name, cols, ("date",), "Yahoo actions (Date,Stock Splits[,Dividends])")
        who = ticker or path.stem.split("_")[-1].upper()
        parts = []
        for col, kind in (("stock splits", "split"), ("dividends", "dividend")):
            if col in cols:
                num = pd.to_numeric(raw[cols[col]], errors="coerce").fillna(-1.0)
                keep = (num != 0).to_numpy()  # a row holds a split or a dividend; the other column is 0
                parts.append((pd.DataFrame({"ticker": who, "date": raw[cols["date"]].astype(str).str[:10],
                                            "kind": kind, "value": raw[cols[col]]})[keep],
                              None if lines is None else lines[keep]))
        frame = pd.concat([f for f, _ in parts], ignore_index=True)
        where = None if lines is None else np.concatenate([ln for _, ln in parts])
        return validate_actions(frame, source=path.name, lines=where)
    require_columns(path.name, cols, ("ticker", "date", "value"), "actions (ticker,date,kind,value)")
    frame = pd.DataFrame(
        {
            "ticker": raw[cols["ticker"]],
            "date": raw[cols["date"]],
            "kind": raw[cols["kind"]] if "kind" in cols else "split",
            "value": raw[cols["value"]],
        }
    )
    return validate_actions(frame, source=path.name, lines=lines)
