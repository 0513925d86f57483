"""The report's plots, drawn with matplotlib's Agg backend (no display needed) and saved as PNG.

Each `*_plot` function returns a `Plot` (title, caption, file) or None when there is nothing to
draw; the caption describes exactly what that plot shows, built from the same data. Styles are
fixed so the policy never looks like a baseline: the policy is a thick solid black line, baselines
are thin coloured dashed lines, oracles (which see the future) thin dotted lines.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate.result import EvalResult

# colour-blind-safe (Okabe-Ito) colours and distinct dash patterns per strategy; black is the policy's alone
STYLES = {
    "buy_and_hold": {"color": "#E69F00", "ls": "--"},
    "equal_weight_long": {"color": "#56B4E9", "ls": "-."},
    "random": {"color": "#999999", "ls": (0, (6, 2))},
    "label_oracle": {"color": "#CC79A7", "ls": ":"},
    "truth_oracle": {"color": "#D55E00", "ls": ":"},
}
MOMENTUM = {"color": "#009E73", "ls": (0, (3, 1, 1, 1, 1, 1))}
OTHER = ("#0072B2", "#F0E442", "#000080")
REWARD_FIRST = ("structure", "evidence", "decision_reward", "market", "s", "consistency", "loop_penalty",
                "hallucination_rate", "citation_precision", "grounding", "fsr", "dsr", "weighted")
SCORE_SKIP = {"ticker", "asof", "variation", "decision", "label", "transport_error", "s_is_placeholder"}
CURVE_KEYS = ("loss", "reward", "kl", "rewards/", "diag/", "mean_token_accuracy")


@dataclass
class Plot:
    title: str
    caption: str
    path: Path


def style(name: str, i: int, policy: str) -> dict[str, Any]:
    """Line style of a strategy: the policy thick solid black; every baseline its own colour and dash
    pattern (dashed kinds for baselines, dotted for the oracles, which see the future)."""
    if name == policy:
        return {"lw": 2.6, "color": "black", "ls": "-", "zorder": 5}
    fixed = STYLES.get(name) or (MOMENTUM if name.startswith("momentum_") else None)
    if fixed is None:
        fixed = {"color": OTHER[i % len(OTHER)], "ls": ":" if "oracle" in name else "--"}
    return {"lw": 1.4, **fixed}


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    for ax in fig.axes:
        if ax.xaxis.get_label().get_text() == "date":
            loc = mdates.AutoDateLocator(maxticks=8)
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _legend_words(result: EvalResult) -> str:
    oracles = [k for k in result.backtests if "oracle" in k]
    who = f"The thick black line is {result.policy}; " if result.has_policy else ""
    return (who + "coloured dashed lines (one colour and dash pattern each) are the baselines"
            + (f"; dotted lines are oracles that see the future ({', '.join(oracles)}: a ceiling, not a target)"
               if oracles else "") + ".")


def nav_plot(result: EvalResult, out: Path, *, log_nav: bool = False) -> Plot:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, (name, bt) in enumerate(result.backtests.items()):
        ax.plot(bt.nav.index, bt.nav.to_numpy(), label=name, **style(name, i, result.policy))
    ax.axhline(1.0, color="grey", lw=0.8)
    if log_nav:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set(title="Net asset value after costs" + (" (log scale)" if log_nav else ""), xlabel="date",
           ylabel="NAV (start = 1.0)")
    ax.legend(loc="best", fontsize=8)
    caption = (f"Growth of 1 unit of capital after costs, one line per strategy. {_legend_words(result)} "
               "Ending above buy-and-hold and random decisions means something only if the intervals in the table agree.")
    return Plot("Net asset value", caption, _save(fig, out / "nav.png"))


def drawdown_plot(result: EvalResult, out: Path) -> Plot:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.2))
    for i, (name, bt) in enumerate(result.backtests.items()):
        ax.plot(bt.drawdown.index, bt.drawdown.to_numpy() * 100, label=name, **style(name, i, result.policy))
    ax.set(title="Drawdown from the running peak", xlabel="date", ylabel="drawdown (%)")
    ax.legend(loc="lower left", fontsize=8)
    caption = (f"How far each strategy is below its best NAV so far (0 = at a new high). {_legend_words(result)} "
               "Deep or long valleys mean painful losing stretches.")
    return Plot("Drawdown", caption, _save(fig, out / "drawdown.png"))


def confusion_plot(result: EvalResult, out: Path) -> Plot | None:
    import matplotlib.pyplot as plt

    cm = result.confusion
    if not len(cm):
        return None
    fig, ax = plt.subplots(figsize=(6.4, 5))
    ax.imshow(cm.to_numpy(dtype=float), cmap="Blues")
    ax.set_xticks(range(cm.shape[1]), [str(c) for c in cm.columns], rotation=35, ha="right")
    ax.set_yticks(range(cm.shape[0]), [str(i) for i in cm.index])
    vmax = max(cm.to_numpy().max(), 1)
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            v = int(cm.iat[i, j])
            ax.text(j, i, str(v), ha="center", va="center", color="white" if v > vmax / 2 else "black", fontsize=9)
    ax.set(title="Decision vs true label (counts)", xlabel="decision", ylabel="true label")
    caption = ("Rows are the true labels, columns the policy's decisions; a good analyst fills the diagonal. "
               "The INVALID column counts theses without a usable decision.")
    return Plot("Confusion matrix", caption, _save(fig, out / "confusion.png"))


def reward_plot(result: EvalResult, out: Path) -> Plot | None:
    import matplotlib.pyplot as plt

    sc = result.scores
    cols = [c for c in sc.columns if c not in SCORE_SKIP and pd.api.types.is_numeric_dtype(sc[c])]
    # the reward components first; counters and ids (n_bullets, decision_id, ...) only if room is left
    cols = sorted(cols, key=lambda c: (c not in REWARD_FIRST, REWARD_FIRST.index(c) if c in REWARD_FIRST else 0))[:12]
    cols = [c for c in cols if np.isfinite(sc[c].to_numpy(dtype=float)).any()]
    if not cols or not result.has_policy:
        return None
    ncol = min(4, len(cols))
    fig, axes = plt.subplots(math.ceil(len(cols) / ncol), ncol, figsize=(3.2 * ncol, 2.6 * math.ceil(len(cols) / ncol)),
                             squeeze=False)
    for ax, col in zip(axes.ravel(), cols, strict=False):
        vals = sc[col].to_numpy(dtype=float)
        ax.hist(vals[np.isfinite(vals)], bins=20, color="#0072B2", alpha=0.85)
        ax.set(title=col, xlabel="value", ylabel="completions")
    for ax in axes.ravel()[len(cols):]:
        ax.axis("off")
    fig.suptitle("Reward components and diagnostics per completion")
    caption = (f"One histogram per column of scores.csv over the {len(sc)} completions: {', '.join(cols)}. "
               "A spike at one value often means a collapsed or templated policy.")
    return Plot("Reward components", caption, _save(fig, out / "rewards.png"))


def probe_plot(result: EvalResult, out: Path) -> Plot | None:
    import matplotlib.pyplot as plt

    if not result.probes:
        return None
    names = list(result.probes)
    vals = [float(result.probes[k].get("flip_rate", float("nan"))) for k in names]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    bars = ax.bar(names, [0 if not math.isfinite(v) else 100 * v for v in vals],
                  color=["#999999" if k == "noise" else "#E69F00" for k in names])
    # every bar labelled: a 0 % flip rate is a result, not a missing bar
    labels = ["n/a" if not math.isfinite(v) else f"{100 * v:.1f}%"
              + ("" if result.probes[k].get("meaningful", True) else " (not meaningful)")
              for k, v in zip(names, vals, strict=True)]
    ax.bar_label(bars, labels=labels, fontsize=8)
    ax.set(title="Decision flip rate under probes", xlabel="probe", ylabel="valid decisions changed (%)", ylim=(0, 100))
    run = [k for k in names if k != "noise"]
    caption = (f"Share of decisions (valid in both runs) that change under each probe ({', '.join(run)})"
               + ("; the grey bar is the same prompts with a new sampling seed: a probe matters only above it"
                  if "noise" in names else "") + ". n/a: the probe was skipped or nothing could be compared.")
    return Plot("Probe flip rates", caption, _save(fig, out / "probes.png"))


def training_log(model_dir: str | Path | None) -> list[dict[str, Any]]:
    """The trainer's log history next to a model: log_history.json, or the newest
    checkpoint-*/trainer_state.json, in the model dir or its parent; [] when there is none."""
    if not model_dir:
        return []
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


def training_plot(result: EvalResult, out: Path) -> Plot | None:
    import matplotlib.pyplot as plt

    logs = training_log(result.config.get("model_dir"))
    keys = sorted({k for e in logs for k, v in e.items() if isinstance(v, (int, float)) and k != "step"
                   and any(k == c or k.startswith(c) for c in CURVE_KEYS) and not k.endswith("/std")})[:12]
    if not keys:
        return None
    ncol = min(4, len(keys))
    nrow = math.ceil(len(keys) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.5 * nrow), squeeze=False)
    for ax, k in zip(axes.ravel(), keys, strict=False):
        pts = [(e.get("step", i), e[k]) for i, e in enumerate(logs) if isinstance(e.get(k), (int, float))]
        ax.plot([a for a, _ in pts], [b for _, b in pts], marker=".", color="#0072B2")
        ax.set(title=k, xlabel="step", ylabel="value")
    for ax in axes.ravel()[len(keys):]:
        ax.axis("off")
    fig.suptitle("Trainer log of the evaluated model's last run")
    caption = (f"What the trainer logged by step ({', '.join(keys)}), read from the log history beside the "
               "model. A training reward that rises while the held-out figures above do not is the signature of "
               "overfitting or reward hacking.")
    return Plot("Training curves", caption, _save(fig, out / "training.png"))


def all_plots(result: EvalResult, out: Path, *, log_nav: bool = False) -> dict[str, Plot]:
    """Every plot that has data, by title."""
    import matplotlib

    matplotlib.use("Agg")
    plots = [nav_plot(result, out, log_nav=log_nav), drawdown_plot(result, out), confusion_plot(result, out),
             reward_plot(result, out), probe_plot(result, out), training_plot(result, out)]
    return {p.title: p for p in plots if p is not None}
