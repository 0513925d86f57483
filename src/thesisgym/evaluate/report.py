"""One self-contained HTML report (+ the same plots as PNG files) of an evaluation.

Written for a person deciding whether a trained analyst is any good: the headline table puts the
policy next to the baselines and oracles, and every plot has a title, axis labels and a one-line
"how to read this". PNGs are drawn with matplotlib's Agg backend (no display needed), written
beside report.html and also embedded as base64 so the HTML file can be mailed on its own.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate.metrics import METRIC_LABELS
from thesisgym.evaluate.result import EvalResult
from thesisgym.evaluate.stats import fmt_interval

PCT_METRICS = {
    "cumulative_return",
    "annualized_return",
    "annualized_volatility",
    "max_drawdown",
    "hit_rate",
    "hit_rate_traded",
    "turnover",
    "to_invalid_rate",
    "flip_rate",
    "invalid_rate",
    "invalid_decision_rate",
    "decision_accuracy",
    "direction_accuracy",
    "hallucination_rate",
    "loop_rate",
}
REWARD_FIRST = (
    "structure",
    "evidence",
    "decision_reward",
    "market",
    "s",
    "consistency",
    "loop_penalty",
    "hallucination_rate",
    "citation_precision",
    "grounding",
    "fsr",
    "dsr",
    "weighted",
)
SCORE_SKIP = {"ticker", "asof", "variation", "decision", "label", "transport_error", "s_is_placeholder"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;color:#222;padding:0 1em}
.wide{overflow-x:auto} .txt{text-align:left;max-width:40em} pre{white-space:pre-wrap;font-size:.85em}
table.settings th{text-align:left;font-weight:500;color:#444} tr.hallucinated td{background:#fdecea}
tr.misfiled td{background:#fff6e0} tr.verified td{background:#eef9ee} details{margin:.4em 0}
table.bullets th,table.bullets td{text-align:left} .ci{color:#666;font-size:.85em;white-space:nowrap} td{vertical-align:top}
h1{margin-bottom:.2em} h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} th,td{border:1px solid #ddd;padding:.3em .6em;text-align:right}
th:first-child,td:first-child{text-align:left} tr.policy td{font-weight:600;background:#eef5ff}
.howto{color:#555;font-size:.9em;margin:.2em 0 1em} img{max-width:100%;border:1px solid #eee}
.meta{color:#666;font-size:.85em}
"""


def _fmt(metric: str, v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if metric in PCT_METRICS:
        return f"{100 * float(v):.2f}%"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if metric in ("days", "rows", "decisions", "dates", "compared", "from_invalid", "invalid_in_both"):
        return f"{int(v)}"
    return f"{float(v):.3f}"


def _table(df: pd.DataFrame, *, highlight: str | None = None, index_name: str = "") -> str:
    head = "".join(f"<th>{html.escape(METRIC_LABELS.get(str(c), str(c)))}</th>" for c in df.columns)
    body = []
    for idx, row in df.iterrows():
        cls = ' class="policy"' if highlight is not None and idx == highlight else ""
        cells = "".join(
            f"<td>{html.escape(_fmt(str(c), row[c]) if not isinstance(row[c], str) else row[c])}</td>"
            for c in df.columns
        )
        body.append(f"<tr{cls}><td>{html.escape(str(idx))}</td>{cells}</tr>")
    return f"<div class='wide'><table><tr><th>{html.escape(index_name)}</th>{head}</tr>{''.join(body)}</table></div>"


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.dates as mdates

    for ax in fig.axes:
        if ax.xaxis.get_label().get_text() == "date":
            loc = mdates.AutoDateLocator(maxticks=8)
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


STRATEGY_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)


def _style(name: str, i: int, policy: str) -> dict[str, Any]:
    """Distinct colour per strategy; the policy black and thick; oracles dashed."""
    if name == policy:
        return {"lw": 2.4, "color": "black"}
    return {"lw": 1.3, "color": STRATEGY_COLORS[i % len(STRATEGY_COLORS)], "ls": "--" if "oracle" in name else "-"}


def training_log(model_dir: str | Path | None) -> list[dict[str, Any]]:
    """The trainer's log history next to a model: log_history.json, or the newest
    checkpoint-*/trainer_state.json, in the model dir or its parent; [] when there is none."""
    if not model_dir:
        return []
    import json

    base = Path(model_dir)
    for d in (base, base.parent):
        if not d.is_dir():
            continue
        if (d / "log_history.json").is_file():
            data = json.loads((d / "log_history.json").read_text())
            return data if isinstance(data, list) else data.get("log_history", [])
        states = sorted(d.glob("checkpoint-*/trainer_state.json"), key=lambda q: int(q.parent.name.split("-")[-1]))
        if (d / "trainer_state.json").is_file():
            states.append(d / "trainer_state.json")
        if states:
            return json.loads(states[-1].read_text()).get("log_history", [])
    return []


CURVE_KEYS = ("loss", "reward", "kl", "rewards/", "diag/", "mean_token_accuracy")


def _plots(result: EvalResult, out: Path, *, log_nav: bool = False) -> list[tuple[str, str, Path]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: list[tuple[str, str, Path]] = []
    pol = result.policy

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, (name, bt) in enumerate(result.backtests.items()):
        ax.plot(bt.nav.index, bt.nav.to_numpy(), label=name, **_style(name, i, pol))
    ax.axhline(1.0, color="grey", lw=0.8)
    if log_nav:
        from matplotlib.ticker import ScalarFormatter

        ax.set_yscale("log")
        for axis in (ax.yaxis,):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(ScalarFormatter())
    ax.set(
        title="Net asset value after costs: policy vs baselines and oracles" + (" (log scale)" if log_nav else ""),
        xlabel="date",
        ylabel="NAV (start = 1.0)",
    )
    ax.legend(loc="best", fontsize=8)
    plots.append(
        (
            "Net asset value",
            "Growth of 1 unit of capital. The black line is the policy; dashed lines are oracles that see the future (a ceiling, not a target). Above buy-and-hold and random = it adds something, if the intervals in the table agree.",
            _save(fig, out / "nav.png"),
        )
    )

    fig, ax = plt.subplots(figsize=(10, 3.2))
    for i, (name, bt) in enumerate(result.backtests.items()):
        dd = bt.drawdown
        if name == pol:
            ax.fill_between(dd.index, dd.to_numpy() * 100, 0, color="tab:red", alpha=0.35, label=name)
        else:
            ax.plot(dd.index, dd.to_numpy() * 100, label=name, **{**_style(name, i, pol), "lw": 0.9})
    ax.set(title="Drawdown from the running peak", xlabel="date", ylabel="drawdown (%)")
    ax.legend(loc="lower left", fontsize=8)
    plots.append(
        (
            "Drawdown",
            "How far each strategy is below its best NAV so far; the red area is the policy. Deep or long red valleys mean painful losing stretches.",
            _save(fig, out / "drawdown.png"),
        )
    )

    cm = result.confusion
    if len(cm):
        fig, ax = plt.subplots(figsize=(6.4, 5))
        ax.imshow(cm.to_numpy(dtype=float), cmap="Blues")
        ax.set_xticks(range(cm.shape[1]), [str(c) for c in cm.columns], rotation=35, ha="right")
        ax.set_yticks(range(cm.shape[0]), [str(i) for i in cm.index])
        vmax = max(cm.to_numpy().max(), 1)
        for i in range(cm.shape[0]):
            for j in range(cm.shape[1]):
                v = int(cm.iat[i, j])
                ax.text(j, i, str(v), ha="center", va="center", color="white" if v > vmax / 2 else "black", fontsize=9)
        ax.set(title="Decision vs true label (counts)", xlabel="predicted decision", ylabel="true label")
        plots.append(
            (
                "Confusion matrix",
                "Rows are the true labels, columns the policy's decisions; a good analyst fills the diagonal. The INVALID column counts theses without a usable decision.",
                _save(fig, out / "confusion.png"),
            )
        )

    num_cols = [
        c
        for c in result.scores.columns
        if c not in SCORE_SKIP and pd.api.types.is_numeric_dtype(result.scores[c])
    ]
    # the reward components first; counters and ids (n_bullets, decision_id, ...) only if room is left
    num_cols = sorted(
        num_cols, key=lambda c: (c not in REWARD_FIRST, REWARD_FIRST.index(c) if c in REWARD_FIRST else 0)
    )[:12]
    num_cols = [c for c in num_cols if np.isfinite(result.scores[c].to_numpy(dtype=float)).any()]
    if num_cols and result.has_policy:
        n = len(num_cols)
        ncol = min(4, n)
        nrow = math.ceil(n / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.6 * nrow), squeeze=False)
        for ax, col in zip(axes.ravel(), num_cols, strict=False):
            vals = result.scores[col].to_numpy(dtype=float)
            vals = vals[np.isfinite(vals)]
            ax.hist(vals, bins=20, color="tab:blue", alpha=0.8)
            ax.set(title=col, xlabel="value", ylabel="completions")
        for ax in axes.ravel()[n:]:
            ax.axis("off")
        fig.suptitle("Reward components and diagnostics per completion")
        plots.append(
            (
                "Reward components",
                "Distribution over completions of each reward component and diagnostic (e.g. hallucination_rate near 0 is good). A spike at one value often means a collapsed or templated policy.",
                _save(fig, out / "rewards.png"),
            )
        )

    if result.probes:
        names = list(result.probes)
        vals = [float(result.probes[k].get("flip_rate", float("nan"))) for k in names]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        colors = ["tab:gray" if k == "noise" else "tab:orange" for k in names]
        bars = ax.bar(names, [0 if not math.isfinite(v) else 100 * v for v in vals], color=colors)
        # label every bar: a 0 % flip rate is a result, not a missing bar
        labels = []
        for k, v in zip(names, vals, strict=True):
            if not math.isfinite(v):
                labels.append("n/a")
            else:
                labels.append(f"{100 * v:.1f}%" + ("" if result.probes[k].get("meaningful", True) else " (n.m.)"))
        ax.bar_label(bars, labels=labels)
        ax.set(title="Decision flip rate under probes (grey: resampling noise)", xlabel="probe",
               ylabel="valid decisions changed (%)", ylim=(0, 100))
        plots.append(
            (
                "Probe flip rates",
                "Share of decisions (valid in both runs) that change when the company is anonymised, dates are shifted or the last digits of numbers are perturbed; the grey bar is the same prompt with a new sampling seed. A probe matters only above the grey bar; n.m. = not meaningful (too few valid decisions).",
                _save(fig, out / "probes.png"),
            )
        )

    logs = training_log(result.config.get("model_dir"))
    keys = sorted({k for e in logs for k, v in e.items() if isinstance(v, (int, float)) and k != "step"
                   and any(k == c or k.startswith(c) for c in CURVE_KEYS) and not k.endswith("/std")})[:12]
    if keys:
        ncol = min(4, len(keys))
        nrow = math.ceil(len(keys) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.5 * nrow), squeeze=False)
        for ax, k in zip(axes.ravel(), keys, strict=False):
            pts = [(e.get("step", i), e[k]) for i, e in enumerate(logs) if isinstance(e.get(k), (int, float))]
            ax.plot([a for a, _ in pts], [b for _, b in pts], marker=".", color="tab:blue")
            ax.set(title=k, xlabel="step", ylabel="value")
        for ax in axes.ravel()[len(keys):]:
            ax.axis("off")
        fig.suptitle("Training curves (trainer log of the evaluated model)")
        plots.append(
            (
                "Training curves",
                "The trainer's logged loss, KL, reward components and diagnostics by step, from the model directory. A reward that rises while the held-out figures above do not is the signature of overfitting or reward hacking.",
                _save(fig, out / "training.png"),
            )
        )
    return plots


def _ci_cell(m: pd.DataFrame, k: str, metric: str, *, pct: bool = False) -> str:
    """A table cell: the value, and its interval on a second, smaller line."""
    text = ci_text(m, k, metric, pct=pct)
    value, _, interval = text.partition(" [")
    return f"<td>{html.escape(value)}" + (f"<br><span class='ci'>[{html.escape(interval)}</span>" if interval else "") + "</td>"


def ci_text(m: pd.DataFrame | pd.Series, k: str, metric: str, *, pct: bool = False) -> str:
    row = m.loc[k] if isinstance(m, pd.DataFrame) else m
    get = lambda c: float(row[c]) if c in row.index and row[c] is not None else float("nan")  # noqa: E731
    return fmt_interval(get(metric), get(f"{metric}_lo"), get(f"{metric}_hi"), pct=pct)


def _compare_words(lo: float, hi: float, what: str | None, confidence: float) -> str:
    """Where the interval of a difference (policy minus `what`) lies, in words."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no interval for the difference (too few dates)"
    of = f" {what}" if what else ""
    if lo > 0:
        return f"above{of} at {confidence:.0%}"
    if hi < 0:
        return f"below{of} at {confidence:.0%}"
    return f"indistinguishable{' from' + of if what else ''} at {confidence:.0%}"


BASELINE_WORDS = {
    "buy_and_hold": "buy-and-hold",
    "equal_weight_long": "the equal-weight long portfolio",
    "random": "the seeded random policy",
}


def verdict(result: EvalResult) -> list[str]:
    """The result in plain sentences, in intervals: where the policy stands between the baselines
    and the ceiling, and how much of it noise can explain.

    Written from the numbers alone, so a weak policy is called weak; the report opens with it, the
    CLI and the demo print it.
    """
    m, name, r = result.metrics, result.policy, result.reasoning
    conf = float(result.config.get("confidence", 0.95)) if "confidence" in result.config else 0.95
    out: list[str] = list(result.warnings)
    n_dates = int(result.config.get("decision_dates", 0))
    n_dec = int(result.config.get("backtest_rows", 0))
    sample = f"{n_dates} decision dates, {n_dec} ticker-days"
    if not result.has_policy:
        out.append(f"Baselines only ({sample}): " + "; ".join(
            f"{k} Sharpe {ci_text(m, k, 'sharpe')}" for k in m.index) + ".")
        return out
    invalid = float(r.get("invalid_decision_rate", float("nan")))
    if np.isfinite(invalid) and invalid >= 0.5:
        out.append(f"{name} gave no valid decision on {invalid:.0%} of the theses; those days are flat (no position), "
                   "so its returns say more about the format it failed to follow than about its judgement.")
    p = float(m.loc[name, "sharpe"])
    if not np.isfinite(p):
        out.append(f"{name} has no Sharpe ratio: its returns have no variance (it never held a position).")
    else:
        out.append(f"{name}: Sharpe {ci_text(m, name, 'sharpe')} ({sample}, {conf:.0%} block-bootstrap interval).")
        for k in ("buy_and_hold", "random"):
            c = result.comparisons.get(k)
            if k not in m.index or c is None or not np.isfinite(c["sharpe_diff"]):
                continue
            out.append(
                f"Sharpe vs {BASELINE_WORDS[k]} ({ci_text(m, k, 'sharpe')}): difference "
                f"{fmt_interval(c['sharpe_diff'], c['lo'], c['hi'])}, "
                f"{_compare_words(c['lo'], c['hi'], BASELINE_WORDS[k], conf)}."
            )
    acc = result.accuracy
    if len(acc) and name in acc.index:
        parts = []
        for k in acc.index:
            if k == name:
                continue
            d = acc.loc[k]
            parts.append(f"{k} {ci_text(acc, k, 'accuracy', pct=True)}: "
                         + _compare_words(float(d["first_minus_this_lo"]), float(d["first_minus_this_hi"]), None, conf))
        out.append(f"Decision accuracy {ci_text(acc, name, 'accuracy', pct=True)} (paired, by date) over {int(acc.loc[name, 'rows'])} "
                   f"rows on {int(acc.loc[name, 'dates'])} dates; vs " + "; ".join(parts) + ".")
    ceiling = next((k for k in ("truth_oracle", "label_oracle") if k in m.index), None)
    if ceiling is not None and np.isfinite(float(m.loc[ceiling, "sharpe"])):
        out.append(f"The {ceiling.replace('_', ' ')} (it sees the future; a ceiling, not a strategy) reaches Sharpe "
                   f"{ci_text(m, ceiling, 'sharpe')}.")
    noise = result.probes.get("noise", {})
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
    g, h = float(r.get("grounding", float("nan"))), float(r.get("hallucination_rate", float("nan")))
    if np.isfinite(g):
        out.append(f"Grounding {g:.2f} (1 = every bullet quotes its cited evidence)"
                   + (f", hallucination rate {h:.0%}." if np.isfinite(h) else "; no bullets to check."))
    return out


def bullet_marks(completion: Any, row: dict) -> list[tuple[str, str, str, str]]:
    """(section, bullet text, verified | hallucinated | misfiled | unsupported, why) per bullet, from the
    reward stack's own evidence check; "misfiled" = verified, but the cited item belongs to another section."""
    from thesisgym.rewards.base import evidence_index, parsed
    from thesisgym.rewards.evidence import evidence_report

    thesis = parsed(completion)
    report = evidence_report(thesis, evidence_index(row.get("evidence")))
    section_of = {str(e.get("id", "")).upper(): e.get("section") for e in row.get("evidence") or [] if isinstance(e, dict)}
    bullets = [(sec.name, b) for sec in thesis.sections for b in sec.bullets]
    out = []
    for (sec, b), check in zip(bullets, report.bullets, strict=False):
        if check.hallucinated:
            out.append((sec, b.text, "hallucinated", "; ".join(check.reasons)))
            continue
        elsewhere = [c for c in b.citations if section_of.get(c) not in (None, sec)]
        if elsewhere:
            out.append((sec, b.text, "misfiled", f"cites {', '.join(elsewhere)} from "
                        f"{', '.join(sorted({str(section_of[c]) for c in elsewhere}))}, filed under {sec}"))
        elif check.quote_verified:
            out.append((sec, b.text, "verified", "quote found in the cited item"))
        else:
            out.append((sec, b.text, "unsupported", "no verified quote"))
    return out


def _examples(result: EvalResult, k: int = 3) -> str:
    if not result.has_policy or not result.rows:
        return "<p>No policy theses (baselines only).</p>"
    sc = result.scores
    canon = [i for i in range(len(sc)) if int(sc["variation"].iloc[i]) == 0]
    if not canon:
        return "<p>No canonical rows.</p>"
    key = "weighted" if "weighted" in sc.columns else "evidence" if "evidence" in sc.columns else None
    order = sorted(canon, key=lambda i: float(sc[key].iloc[i]) if key and np.isfinite(sc[key].iloc[i]) else -1e9)
    picks = list(dict.fromkeys([order[-1], order[len(order) // 2], order[0]]))[:k]
    comps = {(c["ticker"], c["asof"], c["variation"]): c["completion"] for c in result.completions if not c["probe"]}
    parts = []
    for i, what in zip(picks, ("best", "median", "worst"), strict=False):
        row = result.rows[i]
        comp = comps.get((row["ticker"], str(row["asof"])[:10], 0), "")
        marks = bullet_marks(comp, row)
        items = "".join(
            f"<tr class='{html.escape(st)}'><td>{html.escape(sec)}</td><td class='txt'>{html.escape(t)}</td>"
            f"<td>{html.escape(st)}</td><td class='txt'>{html.escape(why)}</td></tr>"
            for sec, t, st, why in marks
        ) or "<tr><td colspan='4'>no bullets</td></tr>"
        parts.append(
            f"<h3>{what}: {html.escape(str(row['ticker']))} {html.escape(str(row['asof'])[:10])} — decision "
            f"{html.escape(str(sc['decision'].iloc[i]))}, label {html.escape(str(row.get('label')))}</h3>"
            f"<table class='bullets'><tr><th>section</th><th>bullet</th><th>check</th><th>why</th></tr>{items}</table>"
            f"<details><summary>full thesis</summary><pre>{html.escape(str(comp))}</pre></details>"
        )
    return "".join(parts)


def _settings_table(cfg: dict[str, Any]) -> str:
    def val(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k} {x:g}" if isinstance(x, (int, float)) else f"{k} {x}" for k, x in v.items())
        return "-" if v is None else str(v)

    cells = "".join(f"<tr><th>{html.escape(k.replace('_', ' '))}</th><td>{html.escape(val(v))}</td></tr>"
                    for k, v in cfg.items())
    return f"<table class='settings'>{cells}</table>"


def _headline(m: pd.DataFrame, policy: str) -> str:
    cols = [("cumulative_return", True), ("sharpe", False), ("hit_rate", True)]
    # volatility, Calmar and the day count are in metrics.json; the table keeps what a reader compares
    plain = ["annualized_return", "sortino", "max_drawdown", "hit_rate_traded", "turnover", "decisions", "dates"]
    head = "".join(f"<th>{html.escape(METRIC_LABELS.get(c, c))} [CI]</th>" for c, _ in cols)
    head += "".join(f"<th>{html.escape(METRIC_LABELS.get(c, c))}</th>" for c in plain if c in m.columns)
    body = []
    for k in m.index:
        cls = ' class="policy"' if k == policy else ""
        cells = "".join(_ci_cell(m, k, c, pct=pct) for c, pct in cols)
        cells += "".join(f"<td>{html.escape(_fmt(c, m.loc[k, c]))}</td>" for c in plain if c in m.columns)
        body.append(f"<tr{cls}><td>{html.escape(str(k))}</td>{cells}</tr>")
    return f"<div class='wide'><table><tr><th>strategy</th>{head}</tr>{''.join(body)}</table></div>"


def _accuracy(acc: pd.DataFrame) -> str:
    if not len(acc):
        return "<p>No labelled rows.</p>"
    body = []
    for k in acc.index:
        d = acc.loc[k]
        diff = (fmt_interval(float(d.get("first_minus_this", np.nan)), float(d.get("first_minus_this_lo", np.nan)),
                             float(d.get("first_minus_this_hi", np.nan)), pct=True) if "first_minus_this" in acc.columns else "-")
        body.append(f"<tr><td>{html.escape(str(k))}</td>{_ci_cell(acc, k, 'accuracy', pct=True)}"
                    f"{_ci_cell(acc, k, 'direction_accuracy', pct=True)}<td>{html.escape(diff)}</td>"
                    f"<td>{int(d['rows'])}</td><td>{int(d['dates'])}</td></tr>")
    first = html.escape(str(acc.index[0]))
    return ("<div class='wide'><table><tr><th>decider</th><th>accuracy [CI]</th><th>direction accuracy [CI]</th>"
            f"<th>{first} minus this [CI]</th><th>rows</th><th>dates</th></tr>{''.join(body)}</table></div>")


def _reward_variants(scores: pd.DataFrame) -> str:
    cols = [("market", "market-only (r)"), ("s", "consistency s"), ("fsr", "fsr"), ("dsr", "dsr"), ("weighted", "weighted")]
    have = [(c, lab) for c, lab in cols if c in scores.columns]
    if not have:
        return ""
    s_real = "s_is_placeholder" in scores.columns and bool((scores["s_is_placeholder"] == 0).all())
    cells = []
    for c, _ in have:
        v = scores[c].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        cells.append(f"<td>{v.mean():.3f} (n={len(v)})</td>" if len(v) else "<td>-</td>")
    head = "".join(f"<th>{html.escape(lab)}</th>" for _, lab in have)
    note = ("s is the Trade-R1 consistency of the configured judge, so fsr/dsr are the rewards the fsr/dsr recipes train on"
            if s_real else "s was not computed by a judge for every row (placeholder grounding): fsr/dsr are NOT the training rewards")
    return f"<table><tr>{head}</tr><tr>{''.join(cells)}</tr></table><p class='howto'>{html.escape(note)}.</p>"


def write_report(result: EvalResult, out_dir: str | Path, *, log_nav: bool | None = None) -> Path:
    """Write report.html and its PNGs into out_dir; return the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log_nav = bool(result.config.get("log_nav")) if log_nav is None else log_nav
    plots = {title: (howto, path) for title, howto, path in _plots(result, out, log_nav=log_nav)}

    def img(title: str) -> str:
        if title not in plots:
            return ""
        howto, path = plots[title]
        b64 = base64.b64encode(path.read_bytes()).decode()
        return f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{b64}"><figcaption class="howto">How to read this: {html.escape(howto)} (file: {html.escape(path.name)})</figcaption></figure>'

    m = result.metrics
    reasoning = pd.DataFrame({"value": result.reasoning}).T if result.reasoning else pd.DataFrame()
    probes = pd.DataFrame(result.probes).T if result.probes else pd.DataFrame()
    tickers = []
    for k, ts in result.all_ticker_stats().items():
        cols = [c for c in ("cumulative_return", "sharpe", "hit_rate", "max_drawdown", "days") if c in ts.columns]
        if len(ts):
            tickers.append(f"<details{' open' if k == result.policy else ''}><summary>{html.escape(k)}</summary>"
                           + _table(ts[cols], index_name="ticker") + "</details>")
    transport = ""
    if result.transport:
        t = result.transport
        transport = (f"<p><b>Transport</b>: {t['errors']} of {t['requests']} requests to {html.escape(str(t['endpoint']))} "
                     f"failed ({100 * t['error_rate']:.1f}%)" + (f"; first error: {html.escape(str(t['first_error']))}" if t['first_error'] else "")
                     + ". Failed requests are empty theses: they count as invalid decisions and flat days.</p>")
    heldout = ""
    if result.heldout is not None:
        heldout = ("<section id='heldout'><h2>Held-out tickers</h2><p class='howto'>Tickers never seen in training, same period and settings.</p>"
                   + "<ul>" + "".join(f"<li>{html.escape(v)}</li>" for v in verdict(result.heldout)) + "</ul>"
                   + _headline(result.heldout.metrics, result.policy) + _accuracy(result.heldout.accuracy) + "</section>")

    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>thesisgym evaluation: {html.escape(result.policy)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Evaluation of <code>{html.escape(result.policy)}</code></h1>",
        "<details class='meta'><summary>Run settings</summary>" + _settings_table(result.config) + "</details>",
        "<section id='verdict'><h2>Verdict</h2><ul>"
        + "".join(f"<li>{html.escape(v)}</li>" for v in verdict(result))
        + "</ul>" + transport + "</section>",
        "<section id='headline'><h2>Headline metrics</h2>",
        _headline(m, result.policy),
        f"<p class='howto'>How to read this: one row per strategy on the same ticker-days and costs; the highlighted row is the policy. "
        f"Brackets are {html.escape(str(result.config.get('bootstrap', 'bootstrap')))}. "
        "buy_and_hold buys every ticker once and never rebalances; equal_weight_long is long everything, rebalanced daily. "
        "Hit rate = share of covered ticker-days where the position's sign matches the return's (flat days included); "
        "the traded-days rate counts only days with a position. Sortino '–' = no losing day. Oracles use future information and mark the ceiling.</p></section>",
        "<section id='nav'><h2>Net asset value</h2>",
        img("Net asset value"),
        "</section>",
        "<section id='drawdown'><h2>Drawdown</h2>",
        img("Drawdown"),
        "</section>",
        "<section id='accuracy'><h2>Decision accuracy vs baselines</h2>",
        _accuracy(result.accuracy),
        "<p class='howto'>How to read this: exact 5-class agreement with the label, and the coarser direction (bullish / neutral / bearish). "
        "Chance is not 20 %: compare with the majority class and always-BUY. The difference column is paired (same rows), with its own interval.</p></section>",
        "<section id='reasoning'><h2>Reasoning quality</h2>",
        _table(reasoning, index_name="") if len(reasoning) else "<p>No policy.</p>",
        _reward_variants(result.scores) if result.has_policy else "",
        "<p class='howto'>How to read this: invalid_decision_rate and hallucination_rate should be near 0, grounding near 1.</p>",
        img("Confusion matrix"),
        img("Reward components"),
        "</section>",
        "<section id='examples'><h2>Example theses</h2><p class='howto'>The best, median and worst canonical thesis by the weighted reward; "
        "each bullet as the verifier judged it.</p>",
        _examples(result),
        "</section>",
        "<section id='tickers'><h2>Per-ticker results</h2>",
        "".join(tickers) or "<p>No ticker traded.</p>",
        "<p class='howto'>How to read this: each strategy's results on each ticker alone; a result carried by one ticker is fragile.</p></section>",
        "<section id='probes'><h2>Memorisation probes</h2>",
        (_table(probes, index_name="probe") + img("Probe flip rates"))
        if len(probes)
        else "<p>No probes were run.</p>",
        "</section>",
        heldout,
        ("<section id='training'><h2>Training curves</h2>" + img("Training curves") + "</section>") if "Training curves" in plots else "",
        "</body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
