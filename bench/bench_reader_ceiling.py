"""Reader ceiling of a synthetic market: how well a prompt-only reader predicts the demo's label.

    python bench/bench_reader_ceiling.py [--preset reading|noisy] [--market A|B] [--skill-rows 450]
    python bench/bench_reader_ceiling.py --sweep 0,0.2,0.4,0.6,0.8 --png docs/img/reader_ceiling.png

Builds the demo's market and dataset (`thesisgym.experiments.demo.DemoConfig`: 12 tickers x 1,040 days, the demo's
context and splits), parses simple features from each prompt's evidence only (per section and age
bucket: count, summed lexicon stance, summed signed stated percentage, EPS surprises, analyst target
moves, the day's price change, the template teacher's recency- and size-weighted score; never a label
column), fits a regularised multinomial logistic
regression (scikit-learn) on the train split and decides on the test split by cutting its expected class
at the label mix's quantiles of the train scores (`Reader`). Baselines measured in the
same run on the same rows: every constant decision (the train majority class among them) and the
template teacher (`thesisgym.teachers.TemplateTeacher`, cut points calibrated on train evidence).

Prints, with 95 % intervals from a circular block bootstrap over test dates (blocks of 4 dates, the
7-day holding period at the demo's stride 2; `thesisgym.evaluate.stats.bootstrap_indices`):
- accuracy of reader and teacher, and their paired differences to the train-majority constant and to
  always-BUY (the demo's hardest constant: docs/training.md, section 5m);
- IC: Spearman of the position (STRONG_SELL -1 ... STRONG_BUY +1) and fwd_return / fwd_vol (pooled);
  a constant's IC is 0 by definition;
- each shipped recipe's mean reward (`evaluate.reward_audit` skill check: one honest label-free
  thesis closed by each decision, scored on the realised forward return) for reader, teacher and the
  best constant, with the paired difference reader - best constant.
`--sweep` varies `event_impact` (the signal knob) and writes the reader ceiling curve (PNG + table).
This is a measurement tool; the product's check is `thesisgym data learnability`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

AGES = (0, 3, 8, 15)  # calendar-day age buckets: 0-2, 3-7, 8-14, 15+
FEATURE_SECTIONS = ("technical", "fundamentals", "news", "analyst", "insider", "macro")
_PCT = re.compile(r"([-+]?\d+(?:\.\d+)?)\s*%")
_SURPRISE = re.compile(r"([-+]\d+(?:\.\d+)?)% surprise")
_TARGET = re.compile(r"to \$(\d+(?:\.\d+)?) from \$(\d+(?:\.\d+)?)")
_VS = re.compile(r"\(([-+]\d+(?:\.\d+)?)% vs")
_CHANGE = re.compile(r"change ([-+]\d+(?:\.\d+)?)%")
BLOCK = 4


def features(row: dict) -> list[float]:
    """Numbers parsed from the prompt's evidence (module docstring); nothing else of the row."""
    import pandas as pd

    from thesisgym.teachers.template import evidence_score, item_stance

    asof = pd.Timestamp(row["asof"])
    feats = np.zeros((len(FEATURE_SECTIONS), len(AGES), 4))
    extra = [0.0, 0.0]
    for it in row["evidence"]:
        sec, text = it.get("section"), str(it.get("text", ""))
        if sec not in FEATURE_SECTIONS:
            continue
        age = (asof - pd.Timestamp(it.get("date") or row["asof"])).days
        b = int(np.searchsorted(AGES, age, side="right") - 1)
        stance = item_stance(it)
        pct = _PCT.search(text)
        size = min(abs(float(pct.group(1))), 40.0) if pct else 0.0
        move = 0.0
        if (m := _SURPRISE.search(text)) is not None:
            move = float(m.group(1))
        elif (m := _TARGET.search(text)) is not None:
            move = 100 * (float(m.group(1)) / float(m.group(2)) - 1)
        elif (m := _VS.search(text)) is not None:
            move = float(m.group(1))
        if sec == "technical" and (m := _CHANGE.search(text)) is not None:
            extra[0] += float(m.group(1))
        s = FEATURE_SECTIONS.index(sec)
        feats[s, b] += (1.0, stance, stance * size, move)
    extra[1] = float(len(row["evidence"]))
    # the template teacher's rule as parsed features too: recency- and size-weighted stance, overall
    # and per section (a reader at least as good as that rule)
    decayed = [evidence_score(row["evidence"], [sec], asof=row["asof"]) for sec in FEATURE_SECTIONS]
    overall = evidence_score(row["evidence"], row["sections"], asof=row["asof"])
    return feats.ravel().tolist() + extra + decayed + [overall]


def build(preset: str, market: str, seed: int, out: Path, **knobs: float) -> dict:
    """The demo's market (`DemoConfig`: 12 tickers x 1,040 days) and splits for these knobs; {split: rows}."""
    import datasets

    from thesisgym.data.synth import SynthConfig, generate_market
    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.dataset.splits import SplitConfig, build_splits
    from thesisgym.experiments.demo import DEMO_CONTEXT, DemoConfig

    datasets.disable_progress_bars()
    demo = DemoConfig(out=str(out), seed=seed)
    store = generate_market(SynthConfig(n_tickers=demo.tickers, n_days=demo.days, seed=seed, market=market,
                                        preset=preset, **knobs))
    split_cfg = SplitConfig(stride=demo.stride, token_budget=demo.token_budget, heldout_tickers=demo.heldout_tickers,
                            seed=seed, context=ContextConfig(**DEMO_CONTEXT))
    splits = build_splits(store, split_cfg, show_progress=False)
    return {k: [dict(r) for r in splits[k]] for k in ("train", "test")}


class Reader:
    """Standardised features -> multinomial logistic regression (C=0.1) fitted on the train rows' labels;
    a row's score is its expected class index (STRONG_SELL 0 ... STRONG_BUY 4) and the decisions cut it at
    the label mix's quantiles of the train scores (schema.LABEL_QUANTILES), as the teacher's calibration
    does: on this data that beats the most probable class in accuracy and IC (by about 2 points / 0.03)."""

    def __init__(self, train: list[dict]) -> None:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from thesisgym.schema import LABEL_QUANTILES

        x = np.array([features(r) for r in train])
        y = np.array([r["label"] for r in train])
        self.model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=3000)).fit(x, y)
        self.cuts = np.quantile(self._score(x), list(LABEL_QUANTILES))

    def _score(self, x: np.ndarray) -> np.ndarray:
        from thesisgym.schema import LABELS

        classes = np.array([LABELS.index(c) for c in self.model.classes_], dtype=float)
        return self.model.predict_proba(x) @ classes

    def decide(self, rows: list[dict]) -> list[str]:
        from thesisgym.schema import LABELS

        scores = self._score(np.array([features(r) for r in rows]))
        return [LABELS[int(np.searchsorted(self.cuts, s, side="right"))] for s in scores]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0  # a constant position has no rank order: IC 0 by definition
    return float(spearmanr(a, b).statistic)


class DateBootstrap:
    """Resamples of the test rows by circular blocks of consecutive dates (paired across policies)."""

    def __init__(self, dates: list[str], reps: int = 1000, seed: int = 0) -> None:
        from thesisgym.evaluate.stats import bootstrap_indices

        keys = sorted(set(dates))
        self.by_date = [np.flatnonzero(np.asarray(dates) == k) for k in keys]
        self.n_dates = len(keys)
        self.samples = [np.concatenate([self.by_date[i] for i in ix])
                        for ix in bootstrap_indices(len(keys), block=BLOCK, reps=reps, seed=seed)]

    def interval(self, stat, *arrays: np.ndarray) -> tuple[float, float, float]:
        point = stat(*arrays)
        draws = np.array([stat(*(a[ix] for a in arrays)) for ix in self.samples])
        lo, hi = np.percentile(draws[np.isfinite(draws)], [2.5, 97.5])
        return float(point), float(lo), float(hi)


def skill_tables(rows: list[dict], seed: int = 0) -> list[dict]:
    """Per row, each shipped recipe's reward for each decision (`reward_audit._skill_row`)."""
    from thesisgym.evaluate.reward_audit import Doc, _Scorer, _skill_row
    from thesisgym.teachers import TemplateTeacher

    scorer, teacher = _Scorer(), TemplateTeacher(seed=seed)
    return [_skill_row(scorer, Doc.parse(teacher.write(r, seed=i)[0]), r)["table"] for i, r in enumerate(rows)]


def measure(splits: dict, *, skill_rows: int, seed: int = 0) -> dict:
    """Reader, teacher and constants on the test split (module docstring); JSON-ready."""
    from thesisgym.evaluate.reward_audit import SKILL_RECIPES
    from thesisgym.schema import DEFAULT_POSITIONS, LABELS
    from thesisgym.teachers import TemplateTeacher

    train, test = splits["train"], [r for r in splits["test"] if r["label"] in LABELS]
    dec = {"reader": Reader(train).decide(test)}
    teacher = TemplateTeacher(seed=seed).calibrate(train)
    dec["teacher"] = [teacher.decision(r) for r in test]
    labels = np.array([r["label"] for r in test])
    majority = max(LABELS, key=[r["label"] for r in train].count)
    boot = DateBootstrap([str(r["asof"]) for r in test], seed=seed)
    z = np.array([r["fwd_return"] / r["fwd_vol"] if r["fwd_vol"] else np.nan for r in test])
    ok = np.isfinite(z)
    out: dict = {"rows": len(test), "dates": boot.n_dates, "majority": majority,
                 "majority_accuracy": float(np.mean(labels == majority)), "buy_accuracy": float(np.mean(labels == "BUY"))}
    for name, d in dec.items():
        d = np.array(d)
        hit = (d == labels).astype(float)
        out[name] = {
            "accuracy": boot.interval(np.mean, hit),
            "accuracy_minus_majority": boot.interval(np.mean, hit - (labels == majority)),
            # the demo's hardest constant: BUY is the widest band of a rising test period
            "accuracy_minus_buy": boot.interval(np.mean, hit - (labels == "BUY")),
            "ic": boot.interval(lambda p, r: _spearman(p[np.isfinite(r)], r[np.isfinite(r)]),
                                np.array([DEFAULT_POSITIONS[x] for x in d]), np.where(ok, z, np.nan)),
            "mix": {lab: float(np.mean(d == lab)) for lab in LABELS},
        }
    if skill_rows:
        pick = np.linspace(0, len(test) - 1, min(skill_rows, len(test))).round().astype(int)
        tables = skill_tables([test[i] for i in pick], seed=seed)
        rewards: dict = {}
        for recipe in SKILL_RECIPES:
            const = {c: np.array([t[recipe][c] for t in tables]) for c in LABELS}
            best = max(LABELS, key=lambda c: float(np.nanmean(const[c])))
            sub = DateBootstrap([str(test[i]["asof"]) for i in pick], seed=seed)
            entry = {"best_constant": best, "constant": {c: float(np.nanmean(v)) for c, v in const.items()}}
            for name, d in dec.items():
                mine = np.array([t[recipe][d[i]] for t, i in zip(tables, pick, strict=True)])
                entry[name] = float(np.nanmean(mine))
                entry[f"{name}_minus_best_constant"] = sub.interval(np.nanmean, mine - const[best])
                # "beats every constant": the smallest lower bound of the paired difference to each
                entry[f"{name}_min_lower_bound"] = min(sub.interval(np.nanmean, mine - const[c])[1] for c in LABELS)
            rewards[recipe] = entry
        out["rewards"] = rewards
        out["skill_rows"] = len(pick)
    return out


def _fmt(t: tuple[float, float, float], pct: bool = False) -> str:
    f = (lambda v: f"{100 * v:.1f}") if pct else (lambda v: f"{v:.3f}")
    return f"{f(t[0])} [{f(t[1])}, {f(t[2])}]"


def print_table(name: str, res: dict) -> None:
    print(f"\n## {name}: {res['rows']} test rows over {res['dates']} dates; train majority {res['majority']} "
          f"({100 * res['majority_accuracy']:.1f} % of test rows)")
    print("| policy | accuracy % | minus majority (pts) | minus always-BUY (pts) | IC | decision mix |")
    print("|---|---|---|---|---|---|")
    for p in ("reader", "teacher"):
        r = res[p]
        mix = " ".join(f"{k[:4]} {100 * v:.0f}" for k, v in r["mix"].items())
        print(f"| {p} | {_fmt(r['accuracy'], True)} | {_fmt(r['accuracy_minus_majority'], True)} | "
              f"{_fmt(r['accuracy_minus_buy'], True)} | {_fmt(r['ic'])} | {mix} |")
    print(f"| always {res['majority']} | {100 * res['majority_accuracy']:.1f} | 0 | | 0 (constant) | |")
    print(f"| always BUY | {100 * res['buy_accuracy']:.1f} | | 0 | 0 (constant) | |")
    if "rewards" in res:
        print(f"\nMean reward per recipe on {res['skill_rows']} test rows (best constant: the constant decision "
              "with the highest mean reward; paired 95 % interval of the difference):")
        print("| recipe | reader | teacher | best constant | reader - best constant | teacher - best constant | "
              "reader - any constant: lowest lower bound |")
        print("|---|---|---|---|---|---|---|")
        for recipe, e in res["rewards"].items():
            best = e["best_constant"]
            print(f"| {recipe} | {e['reader']:.3f} | {e['teacher']:.3f} | {e['constant'][best]:.3f} ({best}) | "
                  f"{_fmt(e['reader_minus_best_constant'])} | {_fmt(e['teacher_minus_best_constant'])} | "
                  f"{e['reader_min_lower_bound']:.3f} |")


def sweep(values: list[float], args, knobs: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = []
    for v in values:
        res = measure(build(args.preset, args.market, args.seed, Path(args.out), **{**knobs, "event_impact": v}), skill_rows=0,
                      seed=args.seed)
        points.append({"event_impact": v, "reader_accuracy": res["reader"]["accuracy"],
                       "majority_accuracy": res["majority_accuracy"], "reader_ic": res["reader"]["ic"],
                       "teacher_accuracy": res["teacher"]["accuracy"], "teacher_ic": res["teacher"]["ic"]})
        print(json.dumps(points[-1]), flush=True)
    print("\n| event_impact | reader accuracy % | majority % | reader IC | teacher accuracy % | teacher IC |")
    print("|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['event_impact']:g} | {_fmt(p['reader_accuracy'], True)} | {100 * p['majority_accuracy']:.1f} | "
              f"{_fmt(p['reader_ic'])} | {_fmt(p['teacher_accuracy'], True)} | {_fmt(p['teacher_ic'])} |")
    x = [p["event_impact"] for p in points]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    for key, label in (("reader", "reader (logistic, prompt only)"), ("teacher", "template teacher")):
        for k, a, scale in (("accuracy", ax[0], 100), ("ic", ax[1], 1)):
            t = np.array([p[f"{key}_{k}"] for p in points]) * scale
            a.plot(x, t[:, 0], marker="o", label=label)
            a.fill_between(x, t[:, 1], t[:, 2], alpha=0.2)
    ax[0].plot(x, [100 * p["majority_accuracy"] for p in points], "k--", label="train-majority constant")
    ax[0].set(xlabel="event_impact", ylabel="test accuracy %")
    ax[1].axhline(0, color="k", ls="--", label="any constant")
    ax[1].set(xlabel="event_impact", ylabel="IC (Spearman, position vs fwd_return/fwd_vol)")
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    fig.suptitle(f"Reader ceiling vs signal knob (demo market {args.market}, seed {args.seed}, 95 % date-block CIs)",
                 fontsize=9)
    fig.tight_layout()
    Path(args.png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.png, dpi=120)
    print(f"\ncurve -> {args.png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="reading", choices=("reading", "noisy"))
    ap.add_argument("--market", default="A", choices=("A", "B"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skill-rows", type=int, default=450, help="test rows scored under every recipe (0: skip)")
    ap.add_argument("--sweep", default=None, help="comma list of event_impact values: the ceiling curve")
    ap.add_argument("--png", default="docs/img/reader_ceiling.png")
    ap.add_argument("--out", default="/tmp/reader_ceiling")
    ap.add_argument("--json", default=None, help="write the measurement here")
    ap.add_argument("--knob", action="append", default=[], help="SynthConfig field=value over the preset; repeat")
    args = ap.parse_args()
    knobs = {k: float(v) if k != "impact_days" else int(v) for k, v in (kv.split("=", 1) for kv in args.knob)}
    t0 = time.perf_counter()
    if args.sweep:
        sweep([float(v) for v in args.sweep.split(",")], args, knobs)
    else:
        res = measure(build(args.preset, args.market, args.seed, Path(args.out), **knobs), skill_rows=args.skill_rows,
                      seed=args.seed)
        print_table(f"preset {args.preset}, market {args.market}, seed {args.seed} {knobs or ''}", res)
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=2))
    print(f"\nwall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
