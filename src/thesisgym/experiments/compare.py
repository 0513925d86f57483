"""Paired before/after comparison of two policies on the same rows, with bootstrap intervals.

Why: "GRPO helped" is a claim about a difference measured on a sample. Both checkpoints write one
thesis per held-out row (same prompts, same decoding, same seed), every completion is scored by the
shared verifier (`thesisgym.rewards.score_completion`), and each reward component's change is the
mean of the per-row differences with a 95 % bootstrap interval (`scipy.stats.bootstrap`, seeded, so
two runs print the same numbers). Rows where a component is not applicable (nan) on either side
are left out of that component and its `n` says how many remained.

Decisions are also judged by the skill measures no constant can fake (`decision_skill`, through
`thesisgym.evaluate.skill`, the code path of `evaluate` and the demo): IC pooled and mean per date,
the market-neutral book, accuracy paired against the train majority class and always-BUY, the
decision mix, each with a 95 % block-bootstrap-over-dates interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from thesisgym.schema import LABELS, REWARD_HORIZON

# components of score_completion shown in the change table, then the total the demo trains on
CHANGE_KEYS: tuple[str, ...] = ("structure", "evidence", "decision", "market", "s", "dsr", "loop_penalty", "grounding",
                                "hallucination_rate", "decision_valid", "decision_correct")


# reward function name (thesisgym.train.rewards) -> the score_completion key holding its value
SCORE_KEY_OF_REWARD: dict[str, str] = {"loop": "loop_penalty", "market_only": "market", "consistency": "s"}


def score_with_s(completions: Sequence[str], rows: Sequence[dict]) -> list[dict]:
    """score_completion per row with `s` from the local consistency judge, as the fsr/dsr rewards use it.

    Without it score_completion falls back to the grounding placeholder for `s`, so fsr/dsr would not
    be the values GRPO was paid.
    """
    from thesisgym.consistency import make_consistency_reward
    from thesisgym.rewards import score_completion

    s = make_consistency_reward(judge="local")([r["prompt"] for r in rows], list(completions),
                                               evidence=[r["evidence"] for r in rows])
    return [score_completion(c, r, consistency_s=si) for c, r, si in zip(completions, rows, s, strict=True)]


# row fields the skill measures read, copied into every scored row so a summary can be recomputed from
# the saved per-row scores alone
SKILL_ROW_FIELDS: tuple[str, ...] = ("asof", "fwd_return", "fwd_vol", "label")


def with_row_fields(scored: Sequence[dict], rows: Sequence[dict]) -> list[dict]:
    """Each `score_completion` dict with its row's SKILL_ROW_FIELDS (the as-of date as ISO text)."""
    def plain(k: str, v: Any) -> Any:
        return str(v)[:10] if k == "asof" else (float(v) if isinstance(v, (int, float)) else v)

    return [{**s, **{k: plain(k, r.get(k)) for k in SKILL_ROW_FIELDS}} for s, r in zip(scored, rows, strict=True)]


def decision_name(decision_id: Any) -> str:
    """The decision of a `score_completion` dict's `decision_id` (INVALID for -1 or a missing id)."""
    i = int(decision_id) if isinstance(decision_id, (int, float)) and math.isfinite(decision_id) else -1
    return LABELS[i] if 0 <= i < len(LABELS) else "INVALID"


def decision_skill(scored: Sequence[dict], *, majority: str | None = None, sections: Sequence[Any] | None = None,
                   seed: int = 0, reps: int | None = None) -> dict[str, Any]:
    """The decision-skill measures of scored rows that carry SKILL_ROW_FIELDS (`with_row_fields`):
    `evaluate.skill.skill_measures` (IC pooled and per date, market-neutral book, decision mix) and
    `evaluate.skill.paired_accuracy` against always-BUY (`acc_vs_buy`) and, when given, the train
    majority class (`acc_vs_majority`), intervals from a block bootstrap over dates (blocks of one
    holding period). `sections` (e.g. the seed of each row) keeps pooled runs' cross-sections apart.
    {} when some row lacks the fields (results saved before they were recorded)."""
    from thesisgym.evaluate import stats as S
    from thesisgym.evaluate.skill import Sample, paired_accuracy, skill_measures

    if not scored or any(k not in s for s in scored for k in SKILL_ROW_FIELDS):
        return {}
    decisions = [decision_name(s.get("decision_id")) for s in scored]
    dates = [s["asof"] for s in scored]
    kw = dict(block=S.rate_block(dates, REWARD_HORIZON), reps=reps or S.DEFAULT_REPS, seed=seed)
    sample = Sample(dates, [s["fwd_return"] for s in scored], [s["fwd_vol"] for s in scored], sections)
    refs = {"buy": ["BUY"] * len(scored)}
    if majority in LABELS:
        refs["majority"] = [majority] * len(scored)
    out: dict[str, Any] = {**skill_measures(decisions, sample, **kw),
                           **paired_accuracy(decisions, [s["label"] for s in scored], dates, refs, **kw)}
    out["majority"] = majority if majority in LABELS else None
    return out


SKILL_HEAD: tuple[str, ...] = ("rows", "dates", "IC pooled", "IC mean per date", "market-neutral book / date",
                               "accuracy", "acc - train majority", "acc - always BUY", "decision mix")


def skill_cells(sk: dict[str, Any]) -> list[str]:
    """Cells under SKILL_HEAD for one `decision_skill` result: value [95 % interval], "n/a" where undefined."""
    from thesisgym.evaluate.skill import mix_text
    from thesisgym.evaluate.stats import NA, fmt_interval

    def cell(key: str, **kw: Any) -> str:
        return fmt_interval(sk.get(key, math.nan), sk.get(f"{key}_lo", math.nan), sk.get(f"{key}_hi", math.nan), **kw)

    if not sk:
        return [NA] * len(SKILL_HEAD)
    major = f" ({sk['majority']})" if sk.get("majority") else ""
    return [f"{sk['rows']:.0f}", f"{sk['dates']:.0f}", cell("ic"), cell("ic_date"), cell("neutral", digits=4),
            cell("accuracy", pct=True), (cell("acc_vs_majority", pct=True) + major) if major else NA,
            cell("acc_vs_buy", pct=True), mix_text(sk)]


def train_majority(rows: Any) -> str | None:
    """The most common label of a split (a datasets.Dataset or rows), None without labels."""
    labels = rows["label"] if hasattr(rows, "column_names") else [r.get("label") for r in rows]
    known = [lab for lab in labels if lab in LABELS]
    return max(LABELS, key=known.count) if known else None


def mean_ci(values: Sequence[float], *, seed: int = 0, n_resamples: int = 2000,
            confidence: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n) of the finite values with a seeded percentile-bootstrap interval.

    A constant sample (or a single value) gets the degenerate interval [mean, mean]; no finite
    value gives nan and n = 0.
    """
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return math.nan, math.nan, math.nan, 0
    if len(v) < 2 or np.ptp(v) == 0:
        return float(v.mean()), float(v.mean()), float(v.mean()), len(v)
    ci = bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                   random_state=np.random.default_rng(seed)).confidence_interval
    return float(v.mean()), float(ci.low), float(ci.high), len(v)


def difference_ci(a: Sequence[float], b: Sequence[float], *, seed: int = 0, n_resamples: int = 2000,
                  confidence: float = 0.95) -> dict[str, float]:
    """mean(a) - mean(b) of two independent samples (e.g. rows of two markets) with a seeded percentile
    bootstrap interval that resamples each sample on its own; `lo`/`hi` are nan with fewer than 2 values
    on either side."""
    from scipy.stats import bootstrap

    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if not len(x) or not len(y):
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    diff = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return {"mean": diff, "lo": math.nan, "hi": math.nan, "n": len(x) + len(y)}
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return {"mean": diff, "lo": diff, "hi": diff, "n": len(x) + len(y)}
    ci = bootstrap((x, y), lambda u, v, axis: u.mean(axis) - v.mean(axis), paired=False, vectorized=True,
                   confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                   random_state=np.random.default_rng(seed)).confidence_interval
    return {"mean": diff, "lo": float(ci.low), "hi": float(ci.high), "n": len(x) + len(y)}


def paired_change(before: Sequence[float], after: Sequence[float], *, seed: int = 0) -> dict[str, float]:
    """Mean before/after, mean paired change and its bootstrap interval (`lo`, `hi`) over finite pairs."""
    if len(before) != len(after):
        raise ValueError(f"paired_change: {len(before)} values before but {len(after)} after; pairs must align")
    b = np.asarray(before, dtype=float)
    a = np.asarray(after, dtype=float)
    keep = np.isfinite(b) & np.isfinite(a)
    b, a = b[keep], a[keep]
    change, lo, hi, n = mean_ci(a - b, seed=seed)
    return {"n": n, "before": float(b.mean()) if n else math.nan, "after": float(a.mean()) if n else math.nan,
            "change": change, "lo": lo, "hi": hi}


def change_table(before: Sequence[dict], after: Sequence[dict], *, keys: Sequence[str] = CHANGE_KEYS,
                 total: dict[str, float] | None = None, seed: int = 0) -> list[dict]:
    """One `paired_change` row per component of two aligned lists of `score_completion` dicts.

    `total` (reward name -> weight, as in a RewardConfig) adds a `total` row: the weighted sum the
    policy was trained on, computed per row with nan components counting 0 (as TRL's reward sum
    treats None); reward names map onto score keys through SCORE_KEY_OF_REWARD.
    """
    if len(before) != len(after):
        raise ValueError(f"change_table: {len(before)} scored rows before but {len(after)} after")
    rows = []
    for k in keys:
        rows.append({"component": k, **paired_change([s.get(k, math.nan) for s in before],
                                                     [s.get(k, math.nan) for s in after], seed=seed)})
    if total:
        keyed = {SCORE_KEY_OF_REWARD.get(k, k): w for k, w in total.items()}

        def tot(s: dict) -> float:
            return sum(w * (s.get(k) if isinstance(s.get(k), float) and math.isfinite(s.get(k)) else 0.0)
                       for k, w in keyed.items())

        rows.append({"component": "total", **paired_change([tot(s) for s in before], [tot(s) for s in after],
                                                           seed=seed)})
    return rows


def format_change_table(rows: Sequence[dict]) -> list[str]:
    """Plain-text lines: component, before, after, change [95 % interval], n; an undefined figure
    (nan, None) prints as 'n/a', never as nan."""
    width = max([20, *(len(str(r["component"])) + 1 for r in rows)])
    lines = [f"{'component':<{width}}{'SFT':>9}{'GRPO':>9}{'change':>9}  95% CI             n"]
    for r in rows:
        ci = (f"[{_fmt(r['lo'], '+.3f')}, {_fmt(r['hi'], '+.3f')}]" if _finite(r["lo"]) and _finite(r["hi"])
              else "n/a")
        lines.append(f"{r['component']:<{width}}{_fmt(r['before'], '.3f'):>9}{_fmt(r['after'], '.3f'):>9}"
                     f"{_fmt(r['change'], '+.3f'):>9}  {ci:<17}{r['n']:>4}")
    return lines


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _fmt(x: object, spec: str) -> str:
    from thesisgym.evaluate.stats import NA

    return format(x, spec) if _finite(x) else NA
