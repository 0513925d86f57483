"""The result in words: a one-sentence bottom line, then the verdict, written from the numbers alone.

The bottom line names degenerate behaviour before any metric, in this order (the first that
applies is the sentence):

1. no policy: baselines only;
2. mostly invalid: half or more of the theses have no valid decision;
3. constant: every valid decision is the same (the policy *is* the always-X baseline);
4. too few dates: no Sharpe difference has an interval;
5. otherwise where the policy's Sharpe stands against buy-and-hold, the equal-weight long portfolio,
   momentum and random decisions at the configured confidence (above / below / indistinguishable),
   with "nearly constant" said when one decision covers 90 % or more of the valid ones.

`verdict` is the list of sentences that follows it in the report, the CLI and the demo: the
warnings (each once, with a count), where the policy stands between the baselines and the ceiling,
accuracy against the accuracy baselines, probes against resampling noise, grounding.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from thesisgym.evaluate.policies import INVALID
from thesisgym.evaluate.result import EvalResult
from thesisgym.evaluate.stats import fmt_interval

NEARLY_CONSTANT = 0.9  # one decision on this share of the valid rows or more: "nearly constant"
BASELINE_WORDS = {
    "buy_and_hold": "buy-and-hold",
    "equal_weight_long": "the equal-weight long portfolio",
    "random": "random decisions",
}


def ci_text(m: pd.DataFrame | pd.Series, k: str, metric: str, *, pct: bool = False) -> str:
    """`value [lo, hi]` of `metric` for row `k` of a metrics or accuracy table (n/a when undefined)."""
    row = m.loc[k] if isinstance(m, pd.DataFrame) else m
    get = lambda c: float(row[c]) if c in row.index and row[c] is not None else float("nan")  # noqa: E731
    return fmt_interval(get(metric), get(f"{metric}_lo"), get(f"{metric}_hi"), pct=pct)


def compare_words(lo: float, hi: float, what: str | None, confidence: float) -> str:
    """Where the interval of a difference (policy minus `what`) lies, in words."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval for the difference (too few dates)"
    of = f" {what}" if what else ""
    if lo > 0:
        return f"above{of} at {confidence:.0%}"
    if hi < 0:
        return f"below{of} at {confidence:.0%}"
    return f"indistinguishable{' from' + of if what else ''} at {confidence:.0%}"


def decision_mix(result: EvalResult) -> tuple[int, int, Counter]:
    """(rows, invalid rows, counts of each valid decision) of the policy's theses."""
    decisions = list(result.scores["decision"]) if "decision" in result.scores.columns else []
    valid = Counter(d for d in decisions if d != INVALID)
    return len(decisions), len(decisions) - sum(valid.values()), valid


def _sample(result: EvalResult) -> str:
    return (f"{int(result.config.get('decision_dates', 0))} decision dates, "
            f"{int(result.config.get('backtest_rows', 0))} ticker-days")


def baseline_words(name: str) -> str:
    """`momentum_20d` -> `20-day momentum`; the fixed baselines from BASELINE_WORDS."""
    if name.startswith("momentum_") and name.endswith("d"):
        return f"{name.removeprefix('momentum_').removesuffix('d')}-day momentum"
    return BASELINE_WORDS.get(name, name.replace("_", " "))


def _words(names: list[str]) -> str:
    words = [baseline_words(n) for n in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def bottom_line(result: EvalResult) -> str:
    """One sentence: what the policy is worth, degenerate behaviour first (see the module docstring)."""
    name = result.policy
    if not result.has_policy:
        return f"Baselines only: no policy was evaluated ({_sample(result)})."
    n, invalid, valid = decision_mix(result)
    if n and invalid / n >= 0.5:
        return (f"{name} is degenerate: {invalid} of {n} theses ({invalid / n:.0%}) have no valid decision, so "
                "its backtest measures a format failure, not judgement.")
    if len(valid) == 1 and sum(valid.values()) >= 2:
        (decision, k), = valid.items()
        extra = f" and {invalid} invalid" if invalid else ""
        return (f"{name} is degenerate: it decided {decision} on {k} of {n} rows{extra}, so it is the "
                f"always-{decision} baseline, not an analyst.")
    conf = float(result.config.get("confidence", 0.95))
    comps = {k: c for k, c in result.comparisons.items() if np.isfinite(c.get("lo", np.nan))}
    if not comps:
        return (f"{name} cannot be told from the baselines: {_sample(result)} are too few for an interval on "
                "its Sharpe ratio.")
    above = [k for k, c in comps.items() if c["lo"] > 0]
    below = [k for k, c in comps.items() if c["hi"] < 0]
    same = [k for k in comps if k not in above and k not in below]
    parts = []
    if above:
        parts.append(f"above {_words(above)}")
    if below:
        parts.append(f"below {_words(below)}")
    if same:
        parts.append(f"indistinguishable from {_words(same)}")
    top, k = valid.most_common(1)[0] if valid else ("", 0)
    nearly = (f"decided {top} on {k} of {n} rows (nearly constant) and " if valid and k / sum(valid.values())
              >= NEARLY_CONSTANT else "")
    return f"{name} {nearly}is {'; '.join(parts)} on Sharpe at {conf:.0%} ({_sample(result)})."


def _counted(messages: list[str]) -> list[str]:
    counts = Counter(messages)
    return [m if counts[m] == 1 else f"{m} (x{counts[m]})" for m in dict.fromkeys(counts)]


def _sharpe_lines(result: EvalResult, conf: float) -> list[str]:
    m, name = result.metrics, result.policy
    p = float(m.loc[name, "sharpe"])
    if not np.isfinite(p):
        return [f"{name} has no Sharpe ratio: its returns have no variance (it never held a position)."]
    out = [f"{name}: Sharpe {ci_text(m, name, 'sharpe')} ({_sample(result)}, {conf:.0%} block-bootstrap interval)."]
    for k in ("buy_and_hold", "random"):
        c = result.comparisons.get(k)
        if k not in m.index or c is None or not np.isfinite(c["sharpe_diff"]):
            continue
        out.append(f"Sharpe vs {BASELINE_WORDS[k]} ({ci_text(m, k, 'sharpe')}): difference "
                   f"{fmt_interval(c['sharpe_diff'], c['lo'], c['hi'])}, "
                   f"{compare_words(c['lo'], c['hi'], BASELINE_WORDS[k], conf)}.")
    return out


def _accuracy_line(result: EvalResult, conf: float) -> list[str]:
    acc, name = result.accuracy, result.policy
    if not len(acc) or name not in acc.index:
        return []
    parts = []
    for k in acc.index:
        if k == name:
            continue
        d = acc.loc[k]
        parts.append(f"{k} {ci_text(acc, k, 'accuracy', pct=True)}: "
                     + compare_words(float(d["first_minus_this_lo"]), float(d["first_minus_this_hi"]), None, conf))
    out = [f"Decision accuracy {ci_text(acc, name, 'accuracy', pct=True)} (paired, by date) over "
           f"{int(acc.loc[name, 'rows'])} rows on {int(acc.loc[name, 'dates'])} dates; vs " + "; ".join(parts) + "."]
    major = next((c for c in acc.index if str(c).startswith("majority of train")), None)
    constants = [(c, col) for c, col in ((major, "minus_majority"), ("always BUY", "minus_always_buy"))
                 if c is not None and col in acc.columns]
    for k in acc.index:  # a second decider (the SFT checkpoint): its own paired test against the constants
        d = acc.loc[k]
        tests = [(c, col) for c, col in constants if np.isfinite(float(d[col]))]
        if k != name and tests:
            out.append(f"{k}: accuracy {ci_text(acc, k, 'accuracy', pct=True)}; vs " + "; ".join(
                f"{c} {compare_words(float(d[f'{col}_lo']), float(d[f'{col}_hi']), None, conf)} "
                f"(paired difference {fmt_interval(float(d[col]), float(d[f'{col}_lo']), float(d[f'{col}_hi']), pct=True)})"
                for c, col in tests) + ".")
    return out


def _probe_lines(result: EvalResult) -> list[str]:
    noise = result.probes.get("noise", {})
    out = []
    for k, pr in result.probes.items():
        if k == "noise" or pr.get("skipped"):
            continue
        f = float(pr.get("flip_rate", float("nan")))
        if not pr.get("meaningful", True):
            out.append(f"Probe {k}: {pr.get('note', 'not meaningful')}.")
        elif np.isfinite(f):
            nf = float(noise.get("flip_rate", float("nan")))
            out.append(f"Probe {k} flips {f:.0%} of the valid decisions"
                       + (f" vs {nf:.0%} from resampling alone." if np.isfinite(nf) else " (no resampling baseline)."))
    return out


def _reasoning_lines(result: EvalResult) -> list[str]:
    r, name = result.reasoning, result.policy
    out = []
    invalid = float(r.get("invalid_decision_rate", float("nan")))
    if np.isfinite(invalid) and invalid >= 0.5:
        out.append(f"{name} gave no valid decision on {invalid:.0%} of the theses; those days are flat (no position), "
                   "so its returns say more about the format it failed to follow than about its judgement.")
    g, h = float(r.get("grounding", float("nan"))), float(r.get("hallucination_rate", float("nan")))
    if np.isfinite(g):
        out.append(f"Grounding {g:.2f} (1 = every bullet quotes its cited evidence)"
                   + (f", hallucination rate {h:.0%}." if np.isfinite(h) else "; no bullets to check."))
    return out


def _ceiling_line(result: EvalResult) -> list[str]:
    m = result.metrics
    ceiling = next((k for k in ("truth_oracle", "label_oracle") if k in m.index), None)
    if ceiling is None or not np.isfinite(float(m.loc[ceiling, "sharpe"])):
        return []
    return [f"The {ceiling.replace('_', ' ')} (it sees the future; a ceiling, not a strategy) reaches Sharpe "
            f"{ci_text(m, ceiling, 'sharpe')}."]


def verdict(result: EvalResult) -> list[str]:
    """The result in plain sentences, in intervals (see the module docstring)."""
    conf = float(result.config.get("confidence", 0.95))
    out = _counted(list(result.warnings))
    if not result.has_policy:
        m = result.metrics
        return [*out, f"Baselines only ({_sample(result)}): "
                + "; ".join(f"{k} Sharpe {ci_text(m, k, 'sharpe')}" for k in m.index) + "."]
    reasoning = _reasoning_lines(result)
    invalid_line = [ln for ln in reasoning if "no valid decision" in ln]
    return [*out, *invalid_line, *_sharpe_lines(result, conf), *_accuracy_line(result, conf),
            *_ceiling_line(result), *_probe_lines(result), *[ln for ln in reasoning if ln not in invalid_line]]
