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
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from thesisgym.evaluate.metrics import METRIC_LABELS

if TYPE_CHECKING:
    from thesisgym.evaluate.runner import EvalResult

PCT_METRICS = {
    "cumulative_return",
    "annualized_return",
    "annualized_volatility",
    "max_drawdown",
    "hit_rate",
    "turnover",
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
SCORE_SKIP = {"ticker", "asof", "variation", "decision", "label"}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
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
    if metric in ("days", "rows", "decisions"):
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
    return f"<table><tr><th>{html.escape(index_name)}</th>{head}</tr>{''.join(body)}</table>"


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


def _plots(result: EvalResult, out: Path) -> list[tuple[str, str, Path]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: list[tuple[str, str, Path]] = []
    pol = result.policy

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name, bt in result.backtests.items():
        style = (
            {"lw": 2.4, "color": "black"}
            if name == pol
            else {"lw": 1.2, "ls": "--" if "oracle" in name else "-"}
        )
        ax.plot(bt.nav.index, bt.nav.to_numpy(), label=name, **style)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set(
        title="Net asset value after costs: policy vs baselines and oracles",
        xlabel="date",
        ylabel="NAV (start = 1.0)",
    )
    ax.legend(loc="best", fontsize=8)
    plots.append(
        (
            "Net asset value",
            "Growth of 1 unit of capital. The black line is the policy; dashed lines are oracles that see the future (a ceiling, not a target). Above buy-and-hold and random = it adds something.",
            _save(fig, out / "nav.png"),
        )
    )

    fig, ax = plt.subplots(figsize=(10, 3.2))
    for name, bt in result.backtests.items():
        dd = bt.drawdown
        if name == pol:
            ax.fill_between(dd.index, dd.to_numpy() * 100, 0, color="tab:red", alpha=0.35, label=name)
        else:
            ax.plot(dd.index, dd.to_numpy() * 100, lw=0.9, label=name)
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
    fig, ax = plt.subplots(figsize=(6.4, 5))
    ax.imshow(cm.to_numpy(dtype=float), cmap="Blues")
    ax.set_xticks(range(cm.shape[1]), [str(c) for c in cm.columns], rotation=35, ha="right")
    ax.set_yticks(range(cm.shape[0]), [str(i) for i in cm.index])
    vmax = max(cm.to_numpy().max(), 1)
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            v = int(cm.iat[i, j])
            ax.text(
                j, i, str(v), ha="center", va="center", color="white" if v > vmax / 2 else "black", fontsize=9
            )
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
    if num_cols:
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
        vals = [result.probes[k].get("flip_rate", float("nan")) for k in names]
        fig, ax = plt.subplots(figsize=(6, 3.2))
        bars = ax.bar(names, [0 if not math.isfinite(v) else 100 * v for v in vals], color="tab:orange")
        # label every bar: a 0 % flip rate is a result, not a missing bar
        ax.bar_label(bars, labels=["skipped" if not math.isfinite(v) else f"{100 * v:.1f}%" for v in vals])
        ax.set(
            title="Decision flip rate under probes",
            xlabel="probe",
            ylabel="decisions changed (%)",
            ylim=(0, 100),
        )
        plots.append(
            (
                "Probe flip rates",
                "Share of decisions that change when the company is anonymised, dates are shifted or the last digits of numbers are perturbed. High flip rates under anon/shift suggest memorised outcomes rather than reasoning.",
                _save(fig, out / "probes.png"),
            )
        )
    return plots


def verdict(result: EvalResult) -> list[str]:
    """The result in plain sentences: where the policy stands between the baselines and the ceiling.

    Written from the numbers alone, so a weak policy is called weak; the report opens with it and
    the demo prints it.
    """
    m, name, r = result.metrics, result.policy, result.reasoning

    def sharpe(k: str) -> float:
        v = m.loc[k, "sharpe"] if k in m.index and "sharpe" in m.columns else float("nan")
        return float(v) if v is not None and np.isfinite(v) else float("nan")

    out: list[str] = []
    invalid = float(r.get("invalid_decision_rate", float("nan")))
    if np.isfinite(invalid) and invalid >= 0.5:
        out.append(f"{name} gave no valid decision on {invalid:.0%} of the theses; those days are flat (no position), "
                   "so its returns say more about the format it failed to follow than about its judgement.")
    p = sharpe(name)
    if not np.isfinite(p):
        out.append(f"{name} has no Sharpe ratio: its returns have no variance (it never held a position).")
    else:
        for k, what in (("buy_and_hold", "buy-and-hold"), ("random", "the seeded random policy")):
            b = sharpe(k)
            if np.isfinite(b):
                out.append(f"Sharpe {p:.2f} vs {b:.2f} for {what}: {name} is "
                           f"{'above' if p > b else 'not above'} it.")
    ceiling = next((k for k in ("truth_oracle", "label_oracle") if k in m.index), None)
    if ceiling is not None and np.isfinite(sharpe(ceiling)):
        out.append(f"The {ceiling.replace('_', ' ')} (it sees the future; a ceiling, not a strategy) reaches Sharpe "
                   f"{sharpe(ceiling):.2f}.")
    g, h = float(r.get("grounding", float("nan"))), float(r.get("hallucination_rate", float("nan")))
    if np.isfinite(g):
        out.append(f"Grounding {g:.2f} (1 = every bullet quotes its cited evidence)"
                   + (f", hallucination rate {h:.0%}." if np.isfinite(h) else "; no bullets to check."))
    return out


def write_report(result: EvalResult, out_dir: str | Path) -> Path:
    """Write report.html and its PNGs into out_dir; return the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = {title: (howto, path) for title, howto, path in _plots(result, out)}

    def img(title: str) -> str:
        if title not in plots:
            return ""
        howto, path = plots[title]
        b64 = base64.b64encode(path.read_bytes()).decode()
        return f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{b64}"><figcaption class="howto">How to read this: {html.escape(howto)} (file: {html.escape(path.name)})</figcaption></figure>'

    headline_cols = [
        "cumulative_return",
        "annualized_return",
        "annualized_volatility",
        "sharpe",
        "sortino",
        "max_drawdown",
        "calmar",
        "hit_rate",
        "turnover",
        "days",
    ]
    headline = result.metrics[[c for c in headline_cols if c in result.metrics.columns]]
    reasoning = pd.DataFrame({"value": result.reasoning}).T
    probes = pd.DataFrame(result.probes).T if result.probes else pd.DataFrame()
    cfg = ", ".join(f"{k}={v}" for k, v in result.config.items())
    ts = result.ticker_stats
    ticker_cols = [c for c in headline_cols if c in ts.columns]

    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>thesisgym evaluation: {html.escape(result.policy)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Evaluation of <code>{html.escape(result.policy)}</code></h1>",
        f"<p class='meta'>{html.escape(cfg)}</p>",
        "<section id='verdict'><h2>Verdict</h2><ul>"
        + "".join(f"<li>{html.escape(v)}</li>" for v in verdict(result))
        + "</ul></section>",
        "<section id='headline'><h2>Headline metrics</h2>",
        _table(headline, highlight=result.policy, index_name="strategy"),
        "<p class='howto'>How to read this: one row per strategy on the same ticker-days and costs; the highlighted row is the policy. "
        "Sharpe uses excess daily returns over the risk-free rate; hit rate = share of days where the position's sign matches the return's; "
        "oracles use future information and mark the ceiling.</p></section>",
        "<section id='nav'><h2>Net asset value</h2>",
        img("Net asset value"),
        "</section>",
        "<section id='drawdown'><h2>Drawdown</h2>",
        img("Drawdown"),
        "</section>",
        "<section id='reasoning'><h2>Reasoning quality</h2>",
        _table(reasoning, index_name=""),
        "<p class='howto'>How to read this: invalid_decision_rate and hallucination_rate should be near 0, grounding near 1; "
        "decision_accuracy is exact-class agreement with the label, direction_accuracy only asks bullish/neutral/bearish.</p>",
        img("Confusion matrix"),
        img("Reward components"),
        "</section>",
        "<section id='tickers'><h2>Per-ticker results (policy)</h2>",
        _table(ts[ticker_cols], index_name="ticker") if len(ts) else "<p>No ticker traded.</p>",
        "<p class='howto'>How to read this: the policy's results on each ticker alone; a result carried by one ticker is fragile.</p></section>",
        "<section id='probes'><h2>Memorisation probes</h2>",
        (_table(probes, index_name="probe") + img("Probe flip rates"))
        if len(probes)
        else "<p>No probes were run.</p>",
        "</section></body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
