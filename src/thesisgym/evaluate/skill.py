"""Decision skill that no constant can fake: information coefficient, market-neutral book, decision mix.

Exact 5-class accuracy against noisy weekly labels rewards whoever predicts the most common class, so a
policy that always says HOLD can beat one that reads. These measures are zero for every constant
decision BY DEFINITION, so a number above zero is skill:

- position: `schema.DEFAULT_POSITIONS` (STRONG_SELL -1, SELL -0.5, HOLD 0, BUY 0.5, STRONG_BUY 1; an
  invalid decision is flat), the same table the backtest and the market reward use;
- information coefficient (IC): Spearman rank correlation between the position and the
  vol-normalised forward return fwd_return / fwd_vol of the row, pooled over all rows, and as the
  mean over decision dates of the per-date cross-sectional Spearman. Spearman of a constant series
  is defined as 0 (not nan), so a constant policy's IC is exactly 0;
- market-neutral book: per decision date, positions demeaned across the tickers of that date and
  scaled to unit gross exposure (sum |w| = 1), the book's return sum w * fwd_return (a forward
  return over the label horizon); the figure is the mean over the dates with at least two rows (one
  name cannot be hedged). A constant demeans to no position, so its book earns exactly 0;
- decision mix: the share of each decision.

Intervals: the circular block bootstrap of `stats.block_bootstrap`, resampling whole decision DATES
(every ticker of a date together) in blocks of one holding period. The interval of a constant
policy is exactly [0, 0] (every resample is a constant too); it is returned without resampling.
Rows without a finite forward return or with fwd_vol <= 0 are left out and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate import stats as S
from thesisgym.schema import DEFAULT_POSITIONS, LABELS

SKILL_COLUMNS = ("ic", "ic_date", "neutral")
SKILL_LABELS = {
    "ic": "IC (pooled)",
    "ic_date": "IC (mean per date)",
    "neutral": "market-neutral book / date",
}
CONSTANT_NOTE = ("A constant decision's IC and market-neutral return are 0 by definition (Spearman of a constant is "
                 "defined as 0; a constant book demeans to no position), with the interval exactly [0, 0].")


def positions(decisions: Sequence[Any], table: Mapping[str, float] = DEFAULT_POSITIONS) -> np.ndarray:
    """Position of each decision (an invalid or unknown decision is flat, 0)."""
    return np.array([float(table.get(d, 0.0)) if isinstance(d, str) else 0.0 for d in decisions], dtype=float)


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation (ties get average ranks); 0 when either side is constant, nan with
    fewer than two rows."""
    from scipy.stats import rankdata

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError(f"spearman: series of different lengths {len(a)} and {len(b)}")
    if len(a) < 2:
        return float("nan")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    ra, rb = rankdata(a), rankdata(b)
    return float(np.corrcoef(ra, rb)[0, 1])


def neutral_return(pos: np.ndarray, ret: np.ndarray) -> float:
    """Return of one date's market-neutral book: demeaned positions scaled to unit gross; nan with
    fewer than two rows (one name cannot be hedged, so its book is undefined rather than flat)."""
    if len(pos) < 2:
        return float("nan")
    w = np.asarray(pos, dtype=float) - float(np.mean(pos))
    gross = float(np.abs(w).sum())
    if gross <= 1e-12:
        return 0.0
    return float(np.dot(w / gross, np.asarray(ret, dtype=float)))


class Sample:
    """The rows behind the skill measures, grouped by decision date (the bootstrap's unit).

    `sections` (one key per row, optional) splits a date's rows into separate cross-sections: the
    seeds of an experiment pooled on the same rows are resampled together by date, but each seed's
    cross-section is ranked and booked on its own, and the date's figure is their mean."""

    def __init__(self, dates: Sequence[Any], fwd_return: Sequence[Any], fwd_vol: Sequence[Any],
                 sections: Sequence[Any] | None = None) -> None:
        ret = np.array([_num(x) for x in fwd_return], dtype=float)
        vol = np.array([_num(x) for x in fwd_vol], dtype=float)
        sections = [0] * len(ret) if sections is None else list(sections)
        if not len(ret) == len(vol) == len(dates) == len(sections):
            raise ValueError(f"skill: {len(dates)} dates, {len(ret)} fwd_return, {len(vol)} fwd_vol, "
                             f"{len(sections)} sections")
        self.keep = np.isfinite(ret) & np.isfinite(vol) & (vol > 0)
        self.dropped = int((~self.keep).sum())
        self.ret, self.z = ret[self.keep], ret[self.keep] / vol[self.keep]
        kept = [str(d)[:10] for d, k in zip(dates, self.keep, strict=True) if k]
        self.keys = sorted(set(kept))
        index = {d: i for i, d in enumerate(self.keys)}
        self.date_of = np.array([index[d] for d in kept], dtype=int)
        self.groups = [np.flatnonzero(self.date_of == i) for i in range(len(self.keys))]
        part = np.array([str(x) for x, k in zip(sections, self.keep, strict=True) if k], dtype=object)
        self.parts = [[g[part[g] == key] for key in dict.fromkeys(part[g])] for g in self.groups]

    @property
    def n_rows(self) -> int:
        return len(self.ret)

    def per_date(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cross-sectional IC, market-neutral return) of each date, the mean over its sections (nan
        where no section has an IC): fixed under a resample of dates."""
        ic = np.array([_mean([spearman(pos[g], self.z[g]) for g in parts]) for parts in self.parts], dtype=float)
        book = np.array([_mean([neutral_return(pos[g], self.ret[g]) for g in parts]) for parts in self.parts],
                        dtype=float)
        return ic, book

    def stats(self, pos: np.ndarray, which: Sequence[int] | None = None,
              per_date: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, float]:
        """IC pooled, mean per-date IC and mean market-neutral return on the dates `which` (a
        resample, repeats allowed; default every date)."""
        idx = np.arange(len(self.keys)) if which is None else np.asarray(which, dtype=int)
        ic, book = self.per_date(pos) if per_date is None else per_date
        rows = np.concatenate([self.groups[i] for i in idx]) if len(idx) else np.array([], dtype=int)
        ic, book = ic[idx][np.isfinite(ic[idx])], book[idx][np.isfinite(book[idx])]
        return {
            "ic": spearman(pos[rows], self.z[rows]) if len(rows) else float("nan"),
            "ic_date": float(np.mean(ic)) if len(ic) else float("nan"),
            "neutral": float(np.mean(book)) if len(book) else float("nan"),
        }


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def skill_measures(
    decisions: Sequence[Any],
    sample: Sample,
    *,
    block: int = 1,
    reps: int = S.DEFAULT_REPS,
    confidence: float = S.DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> dict[str, float]:
    """IC (pooled, per date), market-neutral return, each with *_lo/*_hi, plus rows, dates and the
    decision mix (mix_<DECISION> shares) of `decisions` (one per row given to `sample`)."""
    decisions = list(decisions)
    if len(decisions) != len(sample.keep):
        raise ValueError(f"skill: {len(decisions)} decisions for {len(sample.keep)} rows")
    kept = [d for d, k in zip(decisions, sample.keep, strict=True) if k]
    pos = positions(kept)
    per_date = sample.per_date(pos)
    point = sample.stats(pos, per_date=per_date)
    cache: dict[bytes, dict[str, float]] = {}  # one resample serves all three measures

    def one(idx: np.ndarray, col: str) -> float:
        key = idx.tobytes()
        if key not in cache:
            cache[key] = sample.stats(pos, idx.astype(int), per_date)
        return cache[key][col]

    out: dict[str, float] = {}
    constant = len(pos) > 0 and np.ptp(pos) == 0
    for col in SKILL_COLUMNS:
        out[col] = 0.0 if constant else point[col]
        if constant:
            lo = hi = 0.0
        else:
            lo, hi = S.block_bootstrap(lambda idx, c=col: one(idx, c), np.arange(len(sample.keys)), block=block,
                                       reps=reps, confidence=confidence, seed=seed, min_days=5)
        out[f"{col}_lo"], out[f"{col}_hi"] = lo, hi
    out["rows"], out["dates"], out["left_out"] = float(sample.n_rows), float(len(sample.keys)), float(sample.dropped)
    out["block"] = float(block)  # in decision dates
    counts = Counter(kept)
    for lab in (*LABELS, "INVALID"):
        if lab in LABELS or counts.get(lab):
            out[f"mix_{lab}"] = counts.get(lab, 0) / len(kept) if kept else float("nan")
    return out


def paired_accuracy(decisions: Sequence[Any], labels: Sequence[Any], dates: Sequence[Any],
                    references: Mapping[str, Sequence[Any]], *, block: int = 1, reps: int = S.DEFAULT_REPS,
                    confidence: float = S.DEFAULT_CONFIDENCE, seed: int = 0) -> dict[str, float]:
    """Exact accuracy of `decisions` against `labels`, and per reference (e.g. the train majority class,
    always BUY) the paired difference `acc_vs_<name>` = decisions minus reference on the same rows, each
    with its date-block interval (`stats.rate_interval`, the resampling of `evaluate`'s accuracy table).
    Rows whose label is not a decision are left out; `labelled` counts the rest."""
    keep = [i for i, lab in enumerate(labels) if lab in LABELS]
    day = [str(dates[i])[:10] for i in keep]
    kw = dict(block=block, reps=reps, confidence=confidence, seed=seed)

    def hits(dec: Sequence[Any]) -> list[float]:
        if len(dec) != len(labels):
            raise ValueError(f"paired_accuracy: {len(dec)} decisions for {len(labels)} labels")
        return [float(dec[i] == labels[i]) for i in keep]

    def rate(values: list[float]) -> tuple[float, float, float]:
        return S.rate_interval(day, values, **kw)[:3] if values else (float("nan"),) * 3

    mine = hits(decisions)
    out: dict[str, float] = {"labelled": float(len(keep))}
    out["accuracy"], out["accuracy_lo"], out["accuracy_hi"] = rate(mine)
    for name, ref in references.items():
        diff = [a - b for a, b in zip(mine, hits(ref), strict=True)]
        out[f"acc_vs_{name}"], out[f"acc_vs_{name}_lo"], out[f"acc_vs_{name}_hi"] = rate(diff)
    return out


def skill_table(entries: Mapping[str, Sequence[Any]], sample: Sample, **kw: Any) -> pd.DataFrame:
    """One row of `skill_measures` per decider (entries: name -> decisions, one per sample row)."""
    if not entries or not len(sample.keep):
        return pd.DataFrame()
    return pd.DataFrame.from_dict({k: skill_measures(v, sample, **kw) for k, v in entries.items()}, orient="index")


def mix_text(row: Mapping[str, Any]) -> str:
    """'BUY 60%, HOLD 30%, SELL 10%': the decision mix of one skill-table row, largest first."""
    shares = [(k[4:], float(v)) for k, v in row.items() if str(k).startswith("mix_") and np.isfinite(v) and v > 0]
    return ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(shares, key=lambda kv: -kv[1])) or S.NA


def skill_change(before: Sequence[Any], after: Sequence[Any], sample: Sample, *, block: int = 1,
                 reps: int = S.DEFAULT_REPS, confidence: float = S.DEFAULT_CONFIDENCE, seed: int = 0) -> list[dict]:
    """Rows in `experiments.change_table`'s format (component, n, before, after, change, lo, hi) for the
    skill measures of two deciders on the same rows: the change after minus before, with a paired
    date-block interval (both resampled with the same dates)."""
    kept = [np.asarray(d, dtype=object)[sample.keep] for d in (before, after)]
    pb, pa = positions(kept[0]), positions(kept[1])
    db, da = sample.per_date(pb), sample.per_date(pa)
    rows = []
    for col in SKILL_COLUMNS:
        b, a = sample.stats(pb, per_date=db)[col], sample.stats(pa, per_date=da)[col]
        lo, hi = S.block_bootstrap(
            lambda idx, c=col: sample.stats(pa, idx.astype(int), da)[c] - sample.stats(pb, idx.astype(int), db)[c],
            np.arange(len(sample.keys)), block=block, reps=reps, confidence=confidence, seed=seed)
        rows.append({"component": SKILL_LABELS[col], "n": sample.n_rows, "before": b, "after": a, "change": a - b,
                     "lo": lo, "hi": hi})
    return rows
