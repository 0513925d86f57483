"""One self-contained HTML report (+ the same plots as PNG files) of an evaluation.

Written for a person deciding whether a trained analyst is any good, in the order they need it:
a smoke-run banner when it is one, the bottom line (one sentence that names degenerate behaviour
before any metric, `verdict.bottom_line`), the model card (what was trained, on what, for how long,
where; the run settings fold out below it), the verdict, then the evidence: headline table next to
the baselines and oracles, NAV and drawdown, decision accuracy, held-out tickers, reasoning quality,
example theses, training material (the caller's `ReportSection`s and the trainer log), probes and
per-ticker results. docs/report.md describes each part.

Figures that mean nothing on the sample are not shown as if they did: an annualised return over
fewer than `min_annualize_days` days is n/a, a "[CI]" header appears only over intervals, a probe on
a constant or mostly invalid policy is marked not meaningful. "n/a" is the one symbol for an
undefined figure. Tables keep the columns a reader compares and wrap, so the page reads without
sideways scrolling at 900 px (secondary columns appear on wider screens and in metrics.json).
PNGs are written beside report.html and embedded as base64, so the file can be mailed on its own.

The page is the Jinja2 template evaluate/report.html (autoescaped): its CSS, section order, headings
and the decision-skill table live there, so a user restyles the report by editing a copy and passing
it as `write_report(..., template=PATH)`. The older sections' tables are still built here as
escaped HTML fragments and handed to the template as safe markup.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate import stats as S
from thesisgym.evaluate.metrics import METRIC_LABELS
from thesisgym.evaluate.plots import Plot, all_plots
from thesisgym.evaluate.result import EvalResult
from thesisgym.evaluate.stats import NA, fmt_interval
from thesisgym.evaluate.verdict import bottom_line, ci_text, decision_mix, verdict

PCT_METRICS = {"cumulative_return", "annualized_return", "annualized_volatility", "max_drawdown", "hit_rate",
               "hit_rate_traded", "turnover", "to_invalid_rate", "flip_rate", "invalid_rate", "invalid_decision_rate",
               "decision_accuracy", "direction_accuracy", "hallucination_rate", "loop_rate"}
COUNT_METRICS = {"days", "rows", "decisions", "dates", "compared", "from_invalid", "invalid_in_both"}

def _fmt(metric: str, v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return NA
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if metric in PCT_METRICS:
        return f"{100 * float(v):.1f}%"
    if metric in COUNT_METRICS:
        return f"{int(v)}"
    return f"{float(v):.3f}"


def _e(x: Any) -> str:
    return html.escape(str(x))


def _ci_cell(m: pd.DataFrame, k: str, metric: str, *, pct: bool = False, cls: str = "") -> str:
    """A table cell: the value, and its interval on a second, smaller line."""
    value, _, interval = ci_text(m, k, metric, pct=pct).partition(" [")
    attr = f" class='{cls}'" if cls else ""
    return f"<td{attr}>{_e(value)}" + (f"<br><span class='ci'>[{_e(interval)}</span>" if interval else "") + "</td>"


def _has_ci(m: pd.DataFrame, metric: str) -> bool:
    lo = m.get(f"{metric}_lo")
    return lo is not None and bool(np.isfinite(pd.to_numeric(lo, errors="coerce")).any())


def _kv(rows: list[tuple[str, str]] | dict[str, Any]) -> str:
    items = rows.items() if isinstance(rows, dict) else rows
    return "<table class='kv'>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in items) + "</table>"


def _figure(plots: dict[str, Plot], title: str) -> str:
    if title not in plots:
        return ""
    p = plots[title]
    b64 = base64.b64encode(p.path.read_bytes()).decode()
    return (f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{b64}"><figcaption class="howto">'
            f"How to read this: {_e(p.caption)} (file: {_e(p.path.name)})</figcaption></figure>")


# --- the top: model card (the banner and the bottom line are in the template) ---------------------
def card_rows(result: EvalResult) -> list[tuple[str, str]]:
    """The model card: where the theses came from, what was trained, what was evaluated, where."""
    from thesisgym.train.card import RunCard, card_summary

    c, cfg = result.card, result.config
    rows = [("policy", f"{result.policy}: {c.get('source', 'unknown')}")]
    if c.get("run"):
        rows += list(card_summary(RunCard.model_validate(c["run"])).items())
    elif c.get("card_problem"):
        rows.append(("training", c["card_problem"]))
    decoding = ", ".join(f"{k.replace('_', ' ')} {c[k]}" for k in ("temperature", "max_new_tokens", "seed") if k in c)
    if decoding:
        rows.append(("decoding", decoding))
    if result.has_policy:
        n, invalid, valid = decision_mix(result)
        mix = ", ".join([f"{k} {v}" for k, v in valid.most_common()] + ([f"INVALID {invalid}"] if invalid else []))
        rows.append(("decisions", f"{mix} (of {n} theses)"))
    rows.append(("evaluated on", f"store {cfg.get('store')}: {cfg.get('rows')} rows, {cfg.get('backtest_rows')} "
                                 f"ticker-days on {cfg.get('decision_dates')} dates, {cfg.get('start')} to "
                                 f"{cfg.get('end')}; held <= {cfg.get('hold_days')} days, {cfg.get('cost_bps')} bps"))
    m = c.get("machine") or {}
    threads = f", {m['torch_threads']} torch threads" if "torch_threads" in m else ""
    rows.append(("evaluation", f"{result.seconds:.0f} s on {m.get('cpus', '?')} CPUs{threads}, {m.get('platform', '?')}"
                 if np.isfinite(result.seconds) else NA))
    return rows


def _card(result: EvalResult) -> str:
    settings = {k.replace("_", " "): _setting(v) for k, v in result.config.items()}
    return ("<section id='card'><h2>Model card</h2>" + _kv(card_rows(result))
            + "<details><summary>Run settings</summary>" + _kv(settings) + "</details></section>")


def _setting(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {x:g}" if isinstance(x, (int, float)) else f"{k} {x}" for k, x in v.items()) or NA
    if isinstance(v, list):
        return ", ".join(map(str, v)) or "none"
    return NA if v is None else str(v)


# --- tables ------------------------------------------------------------------------------------------
def _headline(m: pd.DataFrame, policy: str) -> str:
    main = [(c, pct) for c, pct in (("cumulative_return", True), ("sharpe", False), ("hit_rate", True))]
    plain = [("max_drawdown", ""), ("decisions", ""), ("annualized_return", "sec"), ("sortino", "sec"),
             ("hit_rate_traded", "sec"), ("turnover", "sec")]
    head = "".join(f"<th>{_e(METRIC_LABELS.get(c, c))}{' [CI]' if _has_ci(m, c) else ''}</th>" for c, _ in main)
    head += "".join(f"<th{' class=sec' if cls else ''}>{_e(METRIC_LABELS.get(c, c))}</th>"
                    for c, cls in plain if c in m.columns)
    body = []
    for k in m.index:
        cells = "".join(_ci_cell(m, k, c, pct=pct) for c, pct in main)
        cells += "".join(f"<td{' class=sec' if cls else ''}>{_e(_fmt(c, m.loc[k, c]))}</td>"
                         for c, cls in plain if c in m.columns)
        body.append(f"<tr{' class=policy' if k == policy else ''}><td>{_e(k)}</td>{cells}</tr>")
    return f"<table><tr><th>strategy</th>{head}</tr>{''.join(body)}</table>"


def _headline_howto(result: EvalResult) -> str:
    m, cfg = result.metrics, result.config
    ci = ("Brackets: " + str(cfg.get("bootstrap", "bootstrap")) + "." if _has_ci(m, "sharpe")
          else f"No intervals: {cfg.get('decision_dates')} decision dates are too few for a bootstrap.")
    days = int(m["days"].max()) if "days" in m.columns and len(m) else 0
    ann = ("" if days >= int(cfg.get("min_annualize_days", 0)) else
           f" Annualised return is n/a: {days} trading days are under {cfg.get('min_annualize_days')}, so it would be an "
           "extrapolation.")
    return ("<p class='howto'>How to read this: one row per strategy on the same ticker-days and costs, all measured over "
            f"{cfg.get('decision_dates')} decision dates; the highlighted row is the policy. {_e(ci)} buy_and_hold buys "
            "every ticker once and never rebalances; equal_weight_long is long everything, rebalanced at each decision "
            "date. Hit rate = share of covered ticker-days where the position's sign matches the return's (flat days "
            "included). Oracles use future information and mark the ceiling. n/a = undefined (e.g. Sharpe of a flat "
            f"policy, Sortino with no losing day).{_e(ann)} Annualised return, Sortino, traded-day hit rate and turnover "
            "appear on wider screens and are all in metrics.json.</p>")


def _accuracy(acc: pd.DataFrame) -> str:
    if not len(acc):
        return "<p>No labelled rows.</p>"
    first = acc.index[0]
    ci = " [CI]" if _has_ci(acc, "accuracy") else ""
    body = []
    for k in acc.index:
        d = acc.loc[k]
        diff = (fmt_interval(float(d.get("first_minus_this", np.nan)), float(d.get("first_minus_this_lo", np.nan)),
                             float(d.get("first_minus_this_hi", np.nan)), pct=True) if "first_minus_this" in acc.columns else NA)
        value, _, interval = diff.partition(" [")
        diff_cell = f"<td>{_e(value)}" + (f"<br><span class='ci'>[{_e(interval)}</span>" if interval else "") + "</td>"
        body.append(f"<tr{' class=policy' if k == first else ''}><td>{_e(k)}</td>{_ci_cell(acc, k, 'accuracy', pct=True)}"
                    f"{_ci_cell(acc, k, 'direction_accuracy', pct=True)}{diff_cell}</tr>")
    n, nd = int(acc["rows"].iloc[0]), int(acc["dates"].iloc[0])
    return (f"<table><tr><th>decider</th><th>accuracy{ci}</th><th>direction accuracy{ci}</th><th>{_e(first)} minus "
            f"this{ci}</th></tr>{''.join(body)}</table><p class='howto'>How to read this: {n} labelled rows on {nd} "
            "dates (all variations). Exact 5-class agreement with the label, and the coarser direction (bullish / "
            "neutral / bearish). Chance is not 20 %: compare with the majority class and always-BUY. The difference "
            "column is paired (same rows), with its own interval.</p>")


def _reasoning(result: EvalResult) -> str:
    if not result.reasoning:
        return "<p>No policy.</p>"
    rows = [(k.replace("_", " "), _fmt(k, v)) for k, v in result.reasoning.items()]
    sc = result.scores
    variants = [("market", "market_only reward r"), ("s", "consistency s"), ("fsr", "fsr"), ("dsr", "dsr"),
                ("weighted", "weighted")]
    for col, label in variants:
        if col in sc.columns:
            v = sc[col].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            rows.append((f"mean {label}", f"{v.mean():.3f} (n={len(v)})" if len(v) else NA))
    s_real = "s_is_placeholder" in sc.columns and bool((sc["s_is_placeholder"] == 0).all())
    note = ("s is the Trade-R1 consistency of the configured judge, so fsr/dsr are the rewards the fsr/dsr recipes "
            "train on" if s_real else "s was not computed by a judge for every row (placeholder grounding): fsr/dsr "
            "are NOT the training rewards")
    return (_kv(rows) + f"<p class='howto'>How to read this: invalid decision rate and hallucination rate should be near "
            f"0, grounding near 1. {_e(note)}.</p>")


def _probes(result: EvalResult, plots: dict[str, Plot]) -> str:
    if not result.probes:
        return "<p>No probes were run.</p>"
    body = []
    for k, pr in result.probes.items():
        note = pr.get("skipped") or pr.get("note") or pr.get("what") or ""
        if pr.get("of_rows", 0) > pr.get("rows", 0):
            note = f"probed a subset: {pr['rows']} of {pr['of_rows']} rows. {note}".strip()
        body.append(f"<tr><td>{_e(k)}</td><td>{_e(_fmt('flip_rate', pr.get('flip_rate')))}</td>"
                    f"<td>{_e(_fmt('compared', pr.get('compared')))}</td>"
                    f"<td>{_e(_fmt('to_invalid_rate', pr.get('to_invalid_rate')))}</td><td class='txt'>{_e(note)}</td></tr>")
    return ("<table class='text'><tr><th>probe</th><th>flip rate</th><th>compared</th><th>to invalid</th><th>note</th></tr>"
            + "".join(body) + "</table>" + _figure(plots, "Probe flip rates"))


def _section_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(c, r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _training(result: EvalResult, plots: dict[str, Plot]) -> str:
    parts = []
    for s in result.sections:
        imgs = "".join(f'<img alt="{_e(s.title)}" src="data:image/png;base64,'
                       f'{base64.b64encode(Path(p).read_bytes()).decode()}">' for p in s.images)
        parts.append(f"<h3>{_e(s.title)}</h3>" + (f"<p>{_e(s.text)}</p>" if s.text else "") + _section_table(s.table)
                     + imgs + (f"<p class='howto'>How to read this: {_e(s.caption)}</p>" if s.caption else ""))
    log = _figure(plots, "Training curves")
    if log:
        parts.append("<h3>Trainer log</h3>" + log)
    if not parts:
        return ""
    return "<section id='training'><h2>Training and extra material</h2>" + "".join(parts) + "</section>"


# --- example theses ----------------------------------------------------------------------------------
def bullet_marks(completion: Any, row: dict) -> list[dict[str, Any]]:
    """Each bullet as the reward stack's evidence check judged it: section, text, quote, cited ids,
    verdict (verified | hallucinated | misfiled | unsupported) and why. The verdict and the reason
    are `rewards.evidence.evidence_report`'s own; nothing is re-checked here."""
    from thesisgym.rewards.base import evidence_index, parsed
    from thesisgym.rewards.evidence import evidence_report

    thesis = parsed(completion)
    report = evidence_report(thesis, evidence_index(row.get("evidence")))
    bullets = [(sec.name, b) for sec in thesis.sections for b in sec.bullets]
    out = []
    for (sec, b), check in zip(bullets, report.bullets, strict=True):
        reasons = "; ".join(check.reasons)
        if check.hallucinated:
            mark = "hallucinated"
        elif reasons.startswith("misfiled"):
            mark = "misfiled"
        elif check.quote_verified:
            mark, reasons = "verified", reasons or "quote found in the cited item"
        else:
            mark, reasons = "unsupported", reasons or "no verified quote"
        out.append({"section": sec, "text": b.text, "quote": " | ".join(b.quotes), "ids": list(b.citations),
                    "verdict": mark, "why": reasons})
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
        items = "".join(
            f"<tr class='{_e(m['verdict'])}'><td>{_e(m['section'])}</td><td class='txt'>{_e(m['text'])}</td>"
            f"<td class='mark'>{_e(m['verdict'])}</td><td class='txt'>{_e(m['why'])}</td></tr>"
            for m in bullet_marks(comp, row)
        ) or "<tr><td colspan='4'>no bullets</td></tr>"
        parts.append(
            f"<h3>{what}: {_e(row['ticker'])} {_e(str(row['asof'])[:10])}, decision {_e(sc['decision'].iloc[i])}, "
            f"label {_e(row.get('label'))}</h3><table class='text'><tr><th>section</th><th>bullet</th><th>check</th>"
            f"<th>why</th></tr>{items}</table><details><summary>full thesis</summary><pre>{_e(comp)}</pre></details>")
    return "".join(parts)


def _tickers(result: EvalResult) -> str:
    out = []
    for k, ts in result.all_ticker_stats().items():
        cols = [c for c in ("cumulative_return", "sharpe", "hit_rate", "max_drawdown", "days") if c in ts.columns]
        if not len(ts):
            continue
        head = "".join(f"<th>{_e(METRIC_LABELS.get(c, c))}</th>" for c in cols)
        body = "".join(f"<tr><td>{_e(t)}</td>" + "".join(f"<td>{_e(_fmt(c, ts.loc[t, c]))}</td>" for c in cols)
                       + "</tr>" for t in ts.index)
        out.append(f"<details{' open' if k == result.policy else ''}><summary>{_e(k)}</summary><table><tr>"
                   f"<th>ticker</th>{head}</tr>{body}</table></details>")
    return "".join(out) or "<p>No ticker traded.</p>"


def _heldout(result: EvalResult) -> str:
    h = result.heldout
    if h is None:
        return ""
    return ("<section id='heldout'><h2>Held-out tickers</h2><p class='howto'>Tickers never seen in training, same "
            f"period and settings.</p><p class='bottom'>{_e(bottom_line(h))}</p><ul>"
            + "".join(f"<li>{_e(v)}</li>" for v in verdict(h)) + "</ul>" + _headline(h.metrics, h.policy)
            + _accuracy(h.accuracy) + "</section>")


def _transport(result: EvalResult) -> str:
    t = result.transport
    if not t:
        return ""
    first = f"; first error: {_e(t['first_error'])}" if t["first_error"] else ""
    return (f"<p><b>Transport</b>: {t['errors']} of {t['requests']} requests to {_e(t['endpoint'])} failed "
            f"({100 * t['error_rate']:.1f}%){first}. Failed requests are empty theses: they count as invalid "
            "decisions and flat days.</p>")


def skill_context(result: EvalResult) -> dict[str, Any]:
    """The skill table as plain rows for the template: per decider IC (pooled, per date) and the
    market-neutral book with their intervals, and the decision mix."""
    from thesisgym.evaluate.skill import CONSTANT_NOTE, SKILL_LABELS, mix_text

    sk = result.skill
    if not len(sk):
        return {"rows": []}
    rows = []
    for k in sk.index:
        cells = []
        for col in ("ic", "ic_date", "neutral"):
            value, _, interval = ci_text(sk, k, col, pct=col == "neutral").partition(" [")
            cells.append({"value": value, "interval": interval.rstrip("]"), "cls": ""})
        cls = "policy" if k == result.policy else "ceiling" if k in CEILINGS else ""
        rows.append({"name": k, "cells": cells, "mix": mix_text(sk.loc[k].to_dict()), "cls": cls})
    return {"rows": rows, "header": [SKILL_LABELS[c] + (" [CI]" if _has_ci(sk, c) else "") for c in ("ic", "ic_date", "neutral")],
            "rows_n": int(sk["rows"].iloc[0]), "dates": int(sk["dates"].iloc[0]),
            "left_out": int(sk["left_out"].iloc[0]), "constant_note": CONSTANT_NOTE,
            "bootstrap": (f"circular block bootstrap over decision dates (every ticker of a date together), blocks of "
                          f"{int(sk['block'].iloc[0])} date(s) spanning one holding period, "
                          f"{result.config.get('bootstrap_reps', S.DEFAULT_REPS)} resamples, "
                          f"{float(result.config.get('confidence', S.DEFAULT_CONFIDENCE)):.0%} percentile intervals")}

CEILINGS = ("reader ceiling", "label_oracle", "truth_oracle")
TEMPLATE = Path(__file__).with_name("report.html")


def write_report(result: EvalResult, out_dir: str | Path, *, log_nav: bool | None = None,
                 template: str | Path | None = None) -> Path:
    """Write report.html and its PNGs into out_dir; return the HTML path. `template`: a Jinja2
    template to render instead of the shipped evaluate/report.html (same context)."""
    import jinja2
    from markupsafe import Markup

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log_nav = bool(result.config.get("log_nav")) if log_nav is None else log_nav
    plots = all_plots(result, out, log_nav=log_nav)
    line = bottom_line(result)
    safe = {  # fragments built (and escaped) in Python
        "card": _card(result), "transport": _transport(result), "headline": _headline(result.metrics, result.policy),
        "headline_howto": _headline_howto(result), "accuracy": _accuracy(result.accuracy), "heldout": _heldout(result),
        "reasoning": _reasoning(result), "examples": _examples(result), "training": _training(result, plots),
        "probes": _probes(result, plots), "tickers": _tickers(result),
    }
    path = Path(template) if template is not None else TEMPLATE
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    html_text = env.get_template(path.name).render(
        title=result.config.get("title") or result.policy, smoke=bool(result.config.get("smoke")), bottom=line,
        bottom_bad="degenerate" in line or "cannot be told" in line, verdict=verdict(result),
        figures={t: Markup(_figure(plots, t)) for t in ("Net asset value", "Drawdown", "Confusion matrix",
                                                         "Reward components")},
        skill=skill_context(result), **{k: Markup(v) for k, v in safe.items()},
    )
    out_path = out / "report.html"
    out_path.write_text(html_text, encoding="utf-8")
    return out_path
