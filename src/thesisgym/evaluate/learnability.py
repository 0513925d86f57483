"""Is this dataset learnable? A transparent reader of the prompt's evidence against every constant.

GRPO on data where no reading of the evidence predicts the label (or the forward return) learns a
constant: the best response to the rewards is to say the same thing every time. This check says so
before anyone spends GPU hours, on any built dataset (`thesisgym data learnability DATASET`):

1. Features of each row's EVIDENCE ITEMS only (`row_features`): per section the item count and the
   lexicon stance of its items (`consistency.judges.item_stances`, the judge's own reading); parsed
   technical levels (RSI, MACD histogram, %B, z-score, volatility, ATR, 5/20-day returns, close
   against each moving average, the latest change); the latest earnings surprise and revenue
   growth; analyst upgrades / downgrades / target moves; insider buys and sells. Never the label,
   the forward return or the truth columns, and never an item dated after the row's as-of date.
2. The reader: scikit-learn's L2-regularised multinomial logistic regression on standardised
   features, fitted on the train split's canonical rows (variation 0); the regularisation C is
   chosen from a small grid by log-loss on val. Its decision is the most probable class.
3. On val and test: accuracy with paired differences against the train majority class and
   always-BUY, and the skill measures (`evaluate.skill`: IC, market-neutral book, decision mix),
   each with a date-block 95 % interval; beside them the template teacher (its evidence rule),
   the train majority class and, on a synthetic store, the truth oracle (true expected return cut
   into the label mix).
4. The expected reward of every shipped recipe (`reward_audit.SKILL_RECIPES`) for the reader's
   decisions, the teacher's and each constant decision: the reward audit's skill-check table
   (`reward_audit.decision_rewards`: the teacher's label-free thesis closed by each decision,
   scored by the one reward stack), averaged over the split's rows. One verdict per recipe says
   whether reading pays or a constant does (the paired difference reader minus the best constant,
   with its interval).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate import stats as S
from thesisgym.evaluate.skill import Sample, skill_table
from thesisgym.schema import DEFAULT_POSITIONS, LABELS, REWARD_HORIZON

SECTIONS = ("technical", "fundamentals", "news", "insider", "analyst", "macro")
_NUM = r"([+-]?\d+(?:,\d{3})*(?:\.\d+)?)"
# feature -> pattern whose first group is the value (first match among the items, newest first)
LEVELS = {
    "rsi": r"\bRSI\(\d+\)\s+" + _NUM,
    "macd_hist": r"histogram\s+" + _NUM,
    "pct_b": r"%B\s+" + _NUM,
    "zscore": r"z-score\(\d+\)[^\d+-]*" + _NUM,
    "volatility": r"volatility\(\d+\)[^\d+-]*" + _NUM + r"%",
    "atr_pct": r"ATR\(\d+\)[^(]*\(" + _NUM + r"% of close",
    "return_5d": r"return 5d\s+" + _NUM + "%",
    "return_20d": r"return 20d\s+" + _NUM + "%",
    "change": r"\bchange\s+" + _NUM + "%",
    "surprise": r"\(" + _NUM + r"% surprise\)",
    "target_gap": r"\(" + _NUM + r"% vs \$",
}
_MA_RE = re.compile(r"\b(SMA|EMA)\((\d+)\)\s+" + _NUM)
_CLOSE_RE = re.compile(r"(?<!of )\bclose\s+\$?(\d+(?:,\d{3})*(?:\.\d+)?)")  # a price, not "z-score of close -0.2"
_GROWTH_RE = re.compile(r"revenue (up|down) " + _NUM + "%", re.I)
_MOVE_RE = re.compile(r"price target to \$" + _NUM + r" from \$" + _NUM)
COUNTS = {"upgrades": r"\bupgrades\b", "downgrades": r"\bdowngrades\b", "insider_buys": r"\bbuys\b",
          "insider_sells": r"\bsells\b"}
C_GRID = (0.01, 0.1, 1.0)


def _f(x: str) -> float:
    return float(x.replace(",", ""))


def row_features(row: Mapping[str, Any]) -> dict[str, float]:
    """Features of one row's evidence items dated on or before its as-of date (module docstring, 1)."""
    from thesisgym.consistency.judges import item_stances

    evidence = row.get("evidence")
    if not isinstance(evidence, list):
        raise ValueError(f"learnability: row ({row.get('ticker')}, {row.get('asof')}) has no 'evidence' list "
                         "(a `thesisgym build` dataset?)")
    asof = str(row.get("asof", ""))[:10]
    items = [it for it in evidence if isinstance(it, dict) and str(it.get("date", ""))[:10] <= asof]
    stances = item_stances(items)
    out: dict[str, float] = {}
    for sec in SECTIONS:
        st = [stances.get(str(it.get("id", "")).strip().upper(), 0.0) for it in items if it.get("section") == sec]
        out[f"{sec}_items"] = float(len(st))
        out[f"{sec}_stance"] = float(np.sum(st)) if st else 0.0
        out[f"{sec}_stance_mean"] = float(np.mean(st)) if st else 0.0
    texts = [str(it.get("text", "")) for it in items]
    close = next((_f(m.group(1)) for t in texts if (m := _CLOSE_RE.search(t))), math.nan)
    for name, pat in LEVELS.items():
        val = next((_f(m.group(1)) for t in texts if (m := re.search(pat, t, re.I))), math.nan)
        out[name] = val
    if math.isfinite(out["macd_hist"]) and close > 0:
        out["macd_hist"] = 100 * out["macd_hist"] / close  # a price-scale level, made comparable across tickers
    for m in (m for t in texts for m in _MA_RE.finditer(t)):
        key = f"close_vs_{m.group(1).lower()}{m.group(2)}"
        if key not in out and close > 0:
            out[key] = 100 * (close / _f(m.group(3)) - 1)
    growth = next((g for t in texts if (g := _GROWTH_RE.search(t))), None)
    out["revenue_growth"] = (_f(growth.group(2)) * (1 if growth.group(1).lower() == "up" else -1)) if growth else math.nan
    moves = [100 * (_f(m.group(1)) / _f(m.group(2)) - 1) for t in texts for m in _MOVE_RE.finditer(t) if _f(m.group(2)) > 0]
    out["target_move"] = float(np.mean(moves)) if moves else math.nan
    for name, pat in COUNTS.items():
        out[name] = float(sum(bool(re.search(pat, t)) for t in texts))
    # the template teacher's evidence rule (recency- and size-weighted stance), per section and overall:
    # a reader at least as good as that fixed rule, still read from the evidence alone
    from thesisgym.teachers.template import evidence_score

    for sec in SECTIONS:
        out[f"{sec}_weighted"] = evidence_score(items, [sec], asof=asof or None)
    out["weighted_overall"] = evidence_score(items, list(SECTIONS), asof=asof or None)
    return out


def feature_frame(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows x features; a missing level is 0 with a `has_<feature>` flag, so absence is itself a feature.
    `columns`: the train frame's columns (a feature unseen in train is dropped, one never seen here is 0)."""
    frame = pd.DataFrame([row_features(r) for r in rows])
    levels = [c for c in frame.columns if frame[c].isna().any()]
    for c in levels:
        frame[f"has_{c}"] = frame[c].notna().astype(float)
    frame = frame.fillna(0.0)
    if columns is not None:
        frame = frame.reindex(columns=list(columns), fill_value=0.0)
    return frame


@dataclass
class Reader:
    """The fitted transparent reader: standardised features -> multinomial logistic regression."""

    model: Any
    columns: list[str]
    C: float

    @property
    def classes(self) -> list[str]:
        return [str(c) for c in self.model.classes_]

    def proba(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        return self.model.predict_proba(feature_frame(rows, self.columns).to_numpy())

    def decide(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """The most probable class of each row."""
        if not rows:
            return []
        return [self.classes[i] for i in self.proba(rows).argmax(axis=1)]

    def score(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Expected position under the reader's class probabilities (a continuous reading)."""
        pos = np.array([DEFAULT_POSITIONS[c] for c in self.classes])
        return self.proba(rows) @ pos

    def weights(self, k: int = 8) -> list[tuple[str, float]]:
        """The `k` features with the largest bullish-minus-bearish weight (in standard deviations)."""
        coef = getattr(self.model[-1], "coef_", None)
        if coef is None:
            return []
        pos = np.array([DEFAULT_POSITIONS[c] for c in self.classes])
        tilt = pos @ coef if coef.shape[0] == len(pos) else coef[0]
        order = np.argsort(-np.abs(tilt))[:k]
        return [(self.columns[i], float(tilt[i])) for i in order]


def fit_reader(train: Sequence[Mapping[str, Any]], val: Sequence[Mapping[str, Any]] | None = None, *,
               seed: int = 0) -> Reader:
    """Fit the reader on `train` (labelled rows); C by val log-loss when `val` has labelled rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train = [r for r in train if r.get("label") in LABELS]
    if not train:
        raise ValueError("learnability: the train split has no labelled rows")
    x = feature_frame(train)
    y = [r["label"] for r in train]
    if len(set(y)) < 2:  # one class: nothing to read, the reader is that constant
        from sklearn.dummy import DummyClassifier

        return Reader(make_pipeline(DummyClassifier(strategy="most_frequent")).fit(x.to_numpy(), y), list(x.columns),
                      math.nan)
    val = [r for r in (val or []) if r.get("label") in LABELS]
    xv = feature_frame(val, list(x.columns)).to_numpy() if val else None
    fits: list[tuple[float, float, Any]] = []  # (val log-loss, C, model); the first C wins a tie
    for c in C_GRID if val else (0.1,):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000, random_state=seed))
        model.fit(x.to_numpy(), y)
        loss = log_loss([r["label"] for r in val], model.predict_proba(xv), labels=model.classes_) if val else 0.0
        fits.append((loss, c, model))
    loss, c, model = min(fits, key=lambda f: f[0])
    return Reader(model, list(x.columns), c)


# --- the check -------------------------------------------------------------------------------------
def canonical(rows: Any) -> list[dict]:
    """The variation-0 rows of a split (HF Dataset or list of dicts), one per (ticker, asof)."""
    rows = rows.to_list() if hasattr(rows, "to_list") else [dict(r) for r in rows]
    return [r for r in rows if int(r.get("variation", 0) or 0) == 0]


@dataclass
class SplitCheck:
    """The check on one split: accuracy, skill and recipe rewards of every decider, and the verdicts."""

    split: str
    accuracy: pd.DataFrame
    skill: pd.DataFrame
    rewards: pd.DataFrame  # recipe x (decider mean, *_lo, *_hi), best constant, reader minus best
    verdicts: list[str]
    reward_rows: int = 0
    score_ic: float = math.nan  # IC of the reader's expected position (its continuous reading)


@dataclass
class Learnability:
    """The result of `check_learnability`: the reader and one `SplitCheck` per split."""

    dataset: str
    reader: Reader
    train_rows: int
    splits: dict[str, SplitCheck] = field(default_factory=dict)
    seconds: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        def frame(df: pd.DataFrame) -> dict:
            return {str(k): {c: (None if isinstance(v, float) and not math.isfinite(v) else v) for c, v in row.items()}
                    for k, row in df.to_dict("index").items()}

        return {"dataset": self.dataset, "train_rows": self.train_rows, "C": self.reader.C,
                "features": self.reader.columns, "top_weights": self.reader.weights(),
                "seconds": round(self.seconds, 1),
                "splits": {k: {"accuracy": frame(v.accuracy), "skill": frame(v.skill), "rewards": frame(v.rewards),
                               "verdicts": v.verdicts, "reward_rows": v.reward_rows, "score_ic": v.score_ic}
                           for k, v in self.splits.items()}}


def check_learnability(
    splits: Mapping[str, Any],
    *,
    name: str = "dataset",
    evaluate_on: Sequence[str] = ("val", "test"),
    reward_rows: int | None = 200,
    horizon: int = REWARD_HORIZON,
    reps: int = S.DEFAULT_REPS,
    seed: int = 0,
) -> Learnability:
    """Fit the reader on `splits["train"]` and judge it on each split of `evaluate_on` (module docstring).
    `reward_rows`: rows (whole dates) the recipe rewards are averaged over per split (None: all)."""
    from thesisgym.teachers import TemplateTeacher

    started = time.monotonic()
    if "train" not in splits:
        raise ValueError(f"learnability: {name} has no 'train' split (splits: {sorted(splits)})")
    train = canonical(splits["train"])
    val = canonical(splits["val"]) if "val" in splits else None
    reader = fit_reader(train, val, seed=seed)
    teacher = TemplateTeacher(seed=seed).calibrate(train)
    labels = [r["label"] for r in train if r.get("label") in LABELS]
    majority = max(LABELS, key=labels.count)
    out = Learnability(name, reader, len(train))
    for split in evaluate_on:
        if split not in splits or not len(splits[split]):
            continue
        rows = [r for r in canonical(splits[split]) if r.get("label") in LABELS]
        if rows:
            out.splits[split] = check_split(split, rows, reader, teacher, majority, horizon=horizon,
                                            reward_rows=reward_rows, reps=reps, seed=seed)
    out.seconds = time.monotonic() - started
    return out


def _deciders(rows: list[dict], reader: Reader, majority: str) -> dict[str, list[str]]:
    from thesisgym.evaluate.reward_audit import truth_decisions

    out = {"reader": reader.decide(rows), f"majority of train ({majority})": [majority] * len(rows),
           "always BUY": ["BUY"] * len(rows)}
    truth = [r.get("true_expected_return") for r in rows]
    if len(rows) >= 10 and all(isinstance(t, (int, float)) and math.isfinite(t) for t in truth):
        out["truth oracle"] = truth_decisions(truth)
    return out


def check_split(split: str, rows: list[dict], reader: Reader, teacher: Any, majority: str, *, horizon: int,
                reward_rows: int | None, reps: int, seed: int) -> SplitCheck:
    """Accuracy, skill and recipe rewards of the reader, the teacher and the constants on one split."""
    from thesisgym.evaluate.reward_audit import Doc, decision_rewards
    from thesisgym.evaluate.stats import rate_block, subset_indices

    deciders = _deciders(rows, reader, majority)
    # the teacher's thesis of row i is its sample i; the reward rows reuse the very same theses
    deciders["teacher"] = [Doc.parse(teacher.write(r, seed=i)[0]).decision for i, r in enumerate(rows)]
    kw = dict(block=rate_block([r["asof"] for r in rows], horizon), reps=reps, seed=seed)
    idx = list(range(len(rows))) if reward_rows is None or len(rows) <= reward_rows else \
        subset_indices([r["asof"] for r in rows], reward_rows)
    table = decision_rewards([rows[i] for i in idx], teacher=teacher, seed=seed, indices=idx)
    dates = [str(r["asof"])[:10] for r in rows]
    sample = Sample(dates, [r.get("fwd_return") for r in rows], [r.get("fwd_vol") for r in rows])
    rewards = reward_table([deciders["reader"][i] for i in idx], [t["teacher"] for t in table], table,
                           [dates[i] for i in idx], **kw)
    return SplitCheck(split, accuracy_table(deciders, rows, **kw), skill_table(deciders, sample, **kw), rewards,
                      verdicts(rewards), len(idx), _score_ic(reader, rows, sample))


def _score_ic(reader: Reader, rows: list[dict], sample: Sample) -> float:
    from thesisgym.evaluate.skill import spearman

    score = reader.score(rows)[sample.keep]
    return spearman(score, sample.z)


def accuracy_table(deciders: Mapping[str, list[str]], rows: list[dict], **kw: Any) -> pd.DataFrame:
    """Accuracy [CI] of each decider, and the reader's paired difference against each (first minus this)."""
    dates = [str(r["asof"])[:10] for r in rows]
    truth = [r["label"] for r in rows]
    hits = {k: [float(p == t) for p, t in zip(d, truth, strict=True)] for k, d in deciders.items()}
    first = hits["reader"]
    out = {}
    for k, h in hits.items():
        acc, lo, hi, n, nd = S.rate_interval(dates, h, **kw)
        row = {"accuracy": acc, "accuracy_lo": lo, "accuracy_hi": hi, "rows": float(n), "dates": float(nd)}
        if k != "reader":
            d, dlo, dhi, _, _ = S.rate_interval(dates, [a - b for a, b in zip(first, h, strict=True)], **kw)
            row.update(reader_minus_this=d, reader_minus_this_lo=dlo, reader_minus_this_hi=dhi)
        out[k] = row
    return pd.DataFrame.from_dict(out, orient="index")


def reward_table(reader: list[str], teacher: list[str], table: list[dict], dates: list[str], **kw: Any) -> pd.DataFrame:
    """Per recipe: mean reward [CI] of the reader, the teacher and each constant decision; the best
    constant; the reader minus the best constant (paired, same rows) with its interval."""
    from thesisgym.evaluate.reward_audit import SKILL_RECIPES

    out = {}
    for recipe in SKILL_RECIPES:
        per = {d: [t["table"][recipe][d] for t in table] for d in LABELS}
        use = [i for i in range(len(table)) if all(math.isfinite(per[d][i]) for d in LABELS)]
        if not use:
            continue
        ds = [dates[i] for i in use]
        vals = {"reader": [per[reader[i]][i] for i in use], "teacher": [per[teacher[i]][i] for i in use],
                **{d: [per[d][i] for i in use] for d in LABELS}}
        row: dict[str, Any] = {"rows": float(len(use))}
        for k, v in vals.items():
            m, lo, hi, _, _ = S.rate_interval(ds, v, **kw)
            row[k], row[f"{k}_lo"], row[f"{k}_hi"] = m, lo, hi
        best = max(LABELS, key=lambda d: row[d])
        diff, lo, hi, _, _ = S.rate_interval(ds, [a - b for a, b in zip(vals["reader"], vals[best], strict=True)], **kw)
        row.update(best_constant=best, reader_minus_best=diff, reader_minus_best_lo=lo, reader_minus_best_hi=hi)
        out[recipe] = row
    return pd.DataFrame.from_dict(out, orient="index")


def verdict(recipe: str, row: Mapping[str, Any]) -> str:
    """One line: does reading pay under `recipe`, or does a constant?"""
    best, d = row["best_constant"], S.fmt_interval(row["reader_minus_best"], row["reader_minus_best_lo"],
                                                   row["reader_minus_best_hi"], digits=3)
    lo, hi = row["reader_minus_best_lo"], row["reader_minus_best_hi"]
    if np.isfinite(lo) and lo > 0:
        return f"recipe {recipe}: reading pays: the reader earns more than the best constant ({best}), by {d}"
    if np.isfinite(hi) and hi < 0:
        return f"recipe {recipe}: a constant ({best}) earns more than reading (reader minus it {d}); GRPO will collapse to it"
    if row["reader_minus_best"] <= 0:
        return (f"recipe {recipe}: a constant ({best}) earns as much as reading (reader minus it {d}); GRPO has no "
                "reason to read and may collapse to it")
    return f"recipe {recipe}: reading is ahead of the best constant ({best}) by {d}, but the interval includes 0"


def verdicts(rewards: pd.DataFrame) -> list[str]:
    return [verdict(str(k), rewards.loc[k]) for k in rewards.index]


# --- tables for the CLI and docs ------------------------------------------------------------------
def _ci(row: Mapping[str, Any], col: str, *, pct: bool = False, digits: int = 3) -> str:
    v = row.get(col, math.nan)
    if not isinstance(v, (int, float)):
        return S.NA
    return S.fmt_interval(float(v), float(row.get(f"{col}_lo", math.nan)), float(row.get(f"{col}_hi", math.nan)),
                          pct=pct, digits=digits)


def tables(result: Learnability) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table of the check: per split, deciders and recipe rewards."""
    from thesisgym.evaluate.skill import mix_text

    out = []
    for split, chk in result.splits.items():
        acc, sk = chk.accuracy, chk.skill
        n, nd = int(acc["rows"].iloc[0]), int(acc["dates"].iloc[0])
        rows = []
        for k in acc.index:
            a, s = acc.loc[k].to_dict(), sk.loc[k].to_dict()
            rows.append([str(k), _ci(a, "accuracy", pct=True), _ci(a, "reader_minus_this", pct=True) if k != "reader"
                         else "", _ci(s, "ic"), _ci(s, "ic_date"), _ci(s, "neutral", pct=True), mix_text(s)])
        out.append((f"{split}: {n} rows on {nd} dates (reader IC of its expected position {chk.score_ic:.3f})",
                    ["decider", "accuracy", "reader minus this", "IC pooled", "IC per date", "neutral book / date",
                     "decision mix"], rows))
        rw = chk.rewards
        rows = [[str(k), _ci(r, "reader"), _ci(r, "teacher"), *(f"{r[d]:.3f}" for d in LABELS), str(r["best_constant"]),
                 _ci(r, "reader_minus_best")] for k, r in ((k, rw.loc[k].to_dict()) for k in rw.index)]
        out.append((f"{split}: mean reward per recipe on {chk.reward_rows} rows (the audit's skill-check table)",
                    ["recipe", "reader", "teacher", *LABELS, "best constant", "reader minus best"], rows))
    return out


def markdown(result: Learnability) -> str:
    """The check as Markdown: the tables and the verdicts of each split."""
    parts = [f"Reader: logistic regression, C={result.reader.C}, {len(result.reader.columns)} features, fitted on "
             f"{result.train_rows} train rows; strongest bullish(+)/bearish(-) weights: "
             + ", ".join(f"{k} {v:+.2f}" for k, v in result.reader.weights(5)) + "."]
    verdict_of = {s: c.verdicts for s, c in result.splits.items()}
    for title, header, rows in tables(result):
        parts.append(f"**{title}**\n\n| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
                     + "\n".join("| " + " | ".join(r) + " |" for r in rows))
        split = title.split(":")[0]
        if "recipe" in header[0]:
            parts.append("\n".join(f"- {v}" for v in verdict_of.get(split, [])))
    return "\n\n".join(parts) + "\n"
