"""evaluate() end to end on a small hand-made market, and the HTML report in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from thesisgym.data.store import MarketStore
from thesisgym.evaluate import CallablePolicy, EvalConfig, EvalResult, JsonlPolicy, ReportSection, evaluate
from thesisgym.schema import LABELS, SYSTEM_PROMPT
from thesisgym.thesis import extract_numbers

TICKERS = ("AAA", "BBB", "CCC")


@pytest.fixture(scope="module")
def market():
    rng = np.random.default_rng(7)
    dates = pd.bdate_range("2022-01-03", periods=90)
    bars, truth = [], []
    for k, t in enumerate(TICKERS):
        drift = (k - 1) * 0.002
        close = 50 * np.exp(np.cumsum(rng.normal(drift, 0.015, len(dates))))
        bars.append(
            pd.DataFrame(
                {
                    "ticker": t,
                    "date": dates,
                    "open": close,
                    "high": close,
                    "low": close,
                    "close": close,
                    "volume": 1e6,
                }
            )
        )
        truth.append(
            pd.DataFrame(
                {
                    "ticker": t,
                    "date": dates,
                    "expected_return": drift * 7 + rng.normal(0, 1e-4, len(dates)),
                    "quality": drift,
                    "regime": 0,
                }
            )
        )
    store = MarketStore(
        bars=pd.concat(bars),
        truth=pd.concat(truth),
        name="handmade",
        meta={"companies": {"AAA": "Alpha Inc.", "BBB": "Beta Corp.", "CCC": "Gamma plc"}},
    )
    rows = []
    for t in TICKERS:
        b = store.bars[store.bars["ticker"] == t].reset_index(drop=True)
        for i in range(30, 70):
            d = b["date"].iloc[i]
            trail = b["close"].iloc[i] / b["close"].iloc[i - 5] - 1
            text = f"{t} close {b['close'].iloc[i]:.2f}, 5-day return {100 * trail:.1f}%"
            fwd = b["close"].iloc[i + 7] / b["close"].iloc[i] - 1
            label = LABELS[int(np.clip(np.digitize(fwd, [-0.04, -0.01, 0.01, 0.04]), 0, 4))]
            for v in (0, 1):
                user = f"Evidence for {t} as of {d.date()}:\n[T1] {d.date()} prices: {text}"
                rows.append(
                    {
                        "ticker": t,
                        "asof": str(d.date()),
                        "variation": v,
                        "label": label,
                        "fwd_return": fwd,
                        "prompt": [
                            {"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user", "content": user},
                        ],
                        "prompt_text": SYSTEM_PROMPT + "\n\n" + user,
                        "evidence": [
                            {
                                "id": "T1",
                                "section": "technical",
                                "date": str(d.date()),
                                "source": "prices",
                                "text": text,
                                "numbers": extract_numbers(text),
                            }
                        ],
                        "sections": ["technical"],
                    }
                )
    return store, rows


def _momentum_writer(row: dict) -> str:
    ret = row["evidence"][0]["numbers"][-1]
    dec = "STRONG_BUY" if ret > 1 else "BUY" if ret > 0 else "SELL" if ret > -1 else "STRONG_SELL"
    quote = row["evidence"][0]["text"]
    return f'<technical>\n- The recent move matters for the coming week and it is a clear signal "{quote}" [T1]\n</technical>\n<conclusion>Trend.</conclusion>\n<decision>{dec}</decision>'


def _thesis_of(decision: str, row: dict) -> str:
    quote = row["evidence"][0]["text"]
    return (f'<technical>\n- The recent move matters for the coming week and it is a clear signal "{quote}" [T1]\n'
            f"</technical>\n<conclusion>Trend.</conclusion>\n<decision>{decision}</decision>")


# the rows of the demo's SFT-vs-GRPO change table (experiments.change_table), nan included
CHANGE_ROWS = [
    {"component": "grounding", "before": 0.1, "after": 0.2, "change": 0.1, "lo": 0.02, "hi": 0.18, "n": 16},
    {"component": "hallucination_rate", "before": float("nan"), "after": float("nan"), "change": float("nan"),
     "lo": float("nan"), "hi": float("nan"), "n": 0},
]


def _stub_scorer(completion, row):
    return {
        "structure": 0.5 + 0.5 * ("<technical>" in completion),
        "evidence": 0.9,
        "hallucination_rate": 0.0,
        "loop": 0.0,
    }


@pytest.fixture(scope="module")
def result(market, tmp_path_factory) -> tuple[EvalResult, object]:
    store, rows = market
    out = tmp_path_factory.mktemp("eval")
    res = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows, store,
                   EvalConfig(out_dir=out, progress=False, cost_bps=5), scorer=_stub_scorer)
    return res, out


def test_evaluate_builds_all_strategies_on_one_grid(result):
    res, out = result
    assert list(res.metrics.index) == [
        "momo-writer",
        "buy_and_hold",
        "equal_weight_long",
        "momentum_20d",
        "random",
        "label_oracle",
        "truth_oracle",
    ]
    # one decision per (ticker, asof): 3 tickers x 40 days, variation 1 rows are not traded;
    # buy-and-hold buys each ticker once
    assert all(bt.meta["decisions"] == 120 for k, bt in res.backtests.items() if k != "buy_and_hold")
    assert res.backtests["buy_and_hold"].meta["decisions"] == 3
    assert (res.metrics["dates"] == 40).all() and res.metrics.loc["momo-writer", "decisions"] == 120
    assert res.config["rows"] == 240 and res.config["backtest_rows"] == 120
    # the label oracle sees the future 7-day return: it must beat random by a wide margin
    assert res.metrics.loc["label_oracle", "sharpe"] > res.metrics.loc["random", "sharpe"] + 1
    assert res.reasoning["invalid_decision_rate"] == 0.0 and res.reasoning["grounding"] == pytest.approx(0.9)
    assert res.confusion.to_numpy().sum() == 240
    # a policy reading only the evidence does not care about names or dates; digits may flip a few
    assert res.probes["anon"]["flip_rate"] == 0.0 and res.probes["shift"]["flip_rate"] == 0.0
    assert 0.0 <= res.probes["digits"]["flip_rate"] < 0.2
    assert set(res.ticker_stats.index) == set(TICKERS)


def test_outputs_are_written_and_replayable(result, market):
    res, out = result
    for name in (
        "report.html",
        "metrics.json",
        "completions.jsonl",
        "scores.csv",
        "nav.png",
        "drawdown.png",
        "confusion.png",
        "rewards.png",
        "probes.png",
    ):
        assert (out / name).exists() and (out / name).stat().st_size > 0, name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["metrics"]["momo-writer"]["sharpe"] == pytest.approx(
        res.metrics.loc["momo-writer", "sharpe"]
    )
    # completions.jsonl replays the same evaluation, probes included
    store, rows = market
    again = evaluate(JsonlPolicy(out / "completions.jsonl"), rows, store, EvalConfig(progress=False, cost_bps=5),
                     scorer=_stub_scorer)
    pd.testing.assert_series_equal(
        again.backtests["completions"].returns, res.backtests["momo-writer"].returns, check_names=False
    )
    assert again.probes["digits"]["flip_rate"] == res.probes["digits"]["flip_rate"]


def test_report_html_is_self_contained(result):
    _, out = result
    html = (out / "report.html").read_text()
    for section in ("verdict", "headline", "nav", "drawdown", "reasoning", "tickers", "probes"):
        assert f"id='{section}'" in html
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) == 5
    assert html.count("How to read this") >= 7
    assert 'src="http' not in html and "<script" not in html  # nothing to fetch


CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
# injected into a copy of the report (the report itself has no script): where does content overflow?
_OVERFLOW_PROBE = """<script>window.addEventListener('load',()=>{const w=document.documentElement.clientWidth;
const bad=[];document.querySelectorAll('table,img,pre,h1,p,li,figure').forEach(e=>{const r=e.getBoundingClientRect();
if(r.width>0&&r.right>w+1)bad.push(e.tagName+' in #'+((e.closest('section')||{}).id||'top'))});
const o=document.createElement('div');o.id='overflow';o.textContent=JSON.stringify(bad);document.body.appendChild(o);});
</script>"""


def render(report, tmp_path, widths=(900, 1400), name="report"):
    """(DOM text, {width: overflowing elements}) of a report in headless Chromium; screenshots beside."""
    url = report.resolve().as_uri()
    base = [*CHROMIUM, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    probe = tmp_path / f"{name}-probe.html"
    probe.write_text(report.read_text().replace("</body>", _OVERFLOW_PROBE + "</body>"))
    overflow = {}
    for width in widths:
        run = subprocess.run([*base, f"--window-size={width},2000", "--dump-dom", probe.as_uri()],
                             capture_output=True, text=True, timeout=120)
        overflow[width] = json.loads(re.search(r'<div id="overflow">(.*?)</div>', run.stdout).group(1))
        shot = tmp_path / f"{name}{width}.png"
        subprocess.run([*base, f"--screenshot={shot}", f"--window-size={width},3000", url], capture_output=True,
                       timeout=120)
        assert shot.exists() and shot.stat().st_size > 20_000  # a real page, not blank
    return dom.stdout, overflow


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium_and_fits_900_px(result, market, tmp_path):
    _, out = result
    dom, overflow = render(out / "report.html", tmp_path)
    for text in ("Model card", "Headline metrics", "Net asset value", "Drawdown", "Reasoning quality",
                 "Per-ticker results", "Memorisation probes", "momo-writer", "truth_oracle",
                 "Decision accuracy vs baselines", "Example theses", "equal_weight_long", "Run settings"):
        assert text in dom
    assert dom.count("<img") == 5
    # the bottom line comes before any table or figure
    assert dom.index("id=\"bottom-line\"") < dom.index("<table") and dom.index("bottom-line") < dom.index("<img")
    # nothing scrolls sideways on a laptop half-screen or a desktop
    assert overflow == {900: [], 1400: []}
    # a smoke run of a constant policy, with the demo's extra sections: same checks
    store, rows = market
    smoke = evaluate(CallablePolicy(lambda row: _thesis_of("BUY", row), name="always-buy"), rows, store,
                     EvalConfig(out_dir=tmp_path / "smoke", progress=False, probes=["digits"], smoke=True,
                                bootstrap_reps=50, sections=[ReportSection(title="SFT vs GRPO", table=CHANGE_ROWS,
                                                                           images=[out / "nav.png"])]),
                     scorer=_stub_scorer)
    dom, overflow = render(smoke.report_path, tmp_path, name="smoke")
    assert "Smoke run." in dom and "SFT vs GRPO" in dom and overflow == {900: [], 1400: []}


def test_cli_evaluate_with_completions(result, market, tmp_path):
    from datasets import Dataset, DatasetDict
    from typer.testing import CliRunner

    from thesisgym.cli import app

    res, out = result
    store, rows = market
    store.save(tmp_path / "store")
    ds_dir = tmp_path / "ds"
    DatasetDict({"test": Dataset.from_list(rows)}).save_to_disk(str(ds_dir))
    (ds_dir / "build_meta.json").write_text(
        json.dumps({"store": {"name": "handmade", "path": str(tmp_path / "store")}})
    )
    cli = CliRunner().invoke(
        app,
        [
            "evaluate",
            "--dataset",
            str(ds_dir),
            "--completions",
            str(out / "completions.jsonl"),
            "--out",
            str(tmp_path / "ev"),
            "--probes",
            "anon",
            "--cost-bps",
            "5",
        ],
    )
    assert cli.exit_code == 0, cli.output
    assert (
        "completions" in cli.output
        and "report:" in cli.output
        and "probe anon: flip rate 0.0% of 120 decisions valid in both runs" in cli.output
        and "Sharpe vs buy-and-hold" in cli.output
    )
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics["metrics"]["completions"]["sharpe"] == pytest.approx(
        res.metrics.loc["momo-writer", "sharpe"]
    )
    bad = CliRunner().invoke(app, ["evaluate", "--dataset", str(ds_dir), "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "exactly one of" in bad.output


@pytest.mark.slow
def test_end_to_end_on_the_synthetic_market_with_the_real_pipeline(tmp_path):
    """generate_market -> build_splits -> TemplateTeacher as the policy -> evaluate (real reward stack)."""
    import thesisgym.data.synth as synth
    import thesisgym.dataset.splits as splits
    import thesisgym.teachers.template as template
    store = synth.generate_market(synth.SynthConfig(n_tickers=6, n_days=300, seed=1))
    dd = splits.build_splits(store, splits.SplitConfig(stride=2, variations=2), show_progress=False)
    teacher = template.TemplateTeacher()
    policy = CallablePolicy(lambda row: teacher.write(row, n=1, seed=0)[0], name="template")
    res = evaluate(policy, dd["test"], store, EvalConfig(out_dir=tmp_path, progress=False))
    assert "truth_oracle" in res.metrics.index and res.reasoning["invalid_decision_rate"] == 0.0
    assert res.reasoning["hallucination_rate"] == 0.0  # the template teacher quotes verbatim
    # probed rows are still verifiable: the teacher re-writes from them without hallucinating
    assert all(p["invalid_rate"] == 0.0 for p in res.probes.values() if not p.get("skipped"))
    assert res.metrics.loc["label_oracle", "sharpe"] > res.metrics.loc["random", "sharpe"]


def test_max_rows_keeps_every_ticker_on_whole_consecutive_dates(market):
    store, rows = market  # sorted by ticker: the first 24 rows are one ticker's first 12 days
    res = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows, store,
                   EvalConfig(probes=[], max_rows=24, progress=False), scorer=_stub_scorer)
    traded = res.backtests["momo-writer"].positions
    assert res.config["rows"] == 24 and res.config["backtest_rows"] == 12
    assert set(traded.columns) == set(TICKERS)
    # 4 whole dates (3 tickers x 2 variations each): the first 4 consecutive as-of days
    recs = pd.DataFrame(res.completions)
    days = sorted(recs["asof"].unique())
    assert days == sorted({r["asof"] for r in rows})[:4]
    # positions are held for the label horizon at most (7 days), not until the end of the data
    assert res.config["hold_days"] == 7
    assert res.backtests["momo-writer"].positions.index[-1] <= pd.Timestamp(days[-1]) + pd.offsets.BDay(7)
    assert recs.groupby("asof")["ticker"].nunique().eq(3).all()


def test_verdict_says_where_the_policy_stands(result, market):
    from thesisgym.evaluate import verdict

    res, _ = result
    lines = verdict(res)
    c = res.comparisons["buy_and_hold"]
    said = "indistinguishable from" if c["lo"] <= 0 <= c["hi"] else "above" if c["lo"] > 0 else "below"
    assert any(ln.startswith("Sharpe vs buy-and-hold") and f"{said} buy-and-hold at 95%" in ln for ln in lines)
    assert any(ln.startswith("momo-writer: Sharpe") and "40 decision dates, 120 ticker-days" in ln for ln in lines)
    assert any(ln.startswith("Decision accuracy") and "always BUY" in ln for ln in lines)
    assert any(ln.startswith("The truth oracle") for ln in lines)
    assert not any("no valid decision" in ln for ln in lines)
    # a policy that never commits is called out, not dressed up
    store, rows = market
    mute = evaluate(CallablePolicy(lambda row: "no idea", name="mute"), rows[:20], store,
                    EvalConfig(probes=[], progress=False), scorer=_stub_scorer)
    said = " ".join(verdict(mute))
    assert "no valid decision on 100%" in said and "no Sharpe ratio" in said


class _Coin:
    """Decides at random from its seed: what pure sampling noise looks like under the probes."""

    name = "coin"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def reseeded(self, seed: int) -> _Coin:
        return _Coin(seed)

    def decide(self, rows):
        def one(row):  # a draw per (seed, row): batching does not change it
            rng = np.random.default_rng([self.seed, int(row["asof"].replace("-", "")), ord(row["ticker"][0])])
            return f"<decision>{LABELS[int(rng.integers(5))]}</decision>"

        return [one(r) for r in rows]


def test_probes_come_with_a_resampling_noise_baseline(market):
    store, rows = market
    res = evaluate(_Coin(), rows, store, EvalConfig(probes=["anon"], progress=False, bootstrap_reps=100),
                   scorer=_stub_scorer)
    # same seed on the rewritten prompts: nothing flips; a new seed on the same prompts: ~80 % flip
    assert res.probes["anon"]["flip_rate"] == 0.0
    assert 0.65 < res.probes["noise"]["flip_rate"] < 0.95 and res.probes["noise"]["meaningful"]
    from thesisgym.evaluate import verdict

    assert any("Probe anon flips 0% of the valid decisions vs" in ln and "from resampling alone" in ln
               for ln in verdict(res))


def test_baselines_only_mode(market, tmp_path):
    store, rows = market
    res = evaluate(None, rows, store, EvalConfig(out_dir=tmp_path, progress=False, bootstrap_reps=100, min_dates=50))
    assert not res.has_policy and res.policy == "baselines" and "buy_and_hold" in res.metrics.index
    assert res.probes == {} and res.reasoning == {}
    from thesisgym.evaluate import verdict

    lines = verdict(res)
    assert lines[0].startswith("every backtest figure rests on 40 decision date(s)")  # under min_dates
    assert any(ln.startswith("Baselines only (40 decision dates, 120 ticker-days)") for ln in lines)
    assert (tmp_path / "report.html").exists()
    # the true buy-and-hold is bought once; the daily-rebalanced long book is a different strategy
    bh, ew = res.backtests["buy_and_hold"], res.backtests["equal_weight_long"]
    assert bh.meta["decisions"] == 3 and ew.meta["decisions"] == 120
    assert not np.allclose(bh.returns.to_numpy(), ew.returns.to_numpy())
    nav = (1 + bh.net).cumprod().mean(axis=1)
    assert bh.nav.iloc[-1] == pytest.approx(nav.iloc[-1])


def test_bullets_are_marked_verified_hallucinated_or_misfiled():
    from thesisgym.evaluate.report import bullet_marks

    row = {
        "evidence": [
            {"id": "T1", "section": "technical", "date": "2024-01-02", "source": "prices", "text": "close 10.5 up 2%",
             "numbers": [10.5, 2.0]},
            {"id": "N1", "section": "news", "date": "2024-01-02", "source": "wire", "text": "Acme wins a contract",
             "numbers": []},
        ]
    }
    words = "which matters for the coming week of trading in this name"
    thesis = (
        f'<technical>\n- The close is strong {words} "close 10.5 up 2%" [T1]\n'
        f'- A contract win {words} "Acme wins a contract" [N1]\n'
        f'- A quote nobody wrote {words} "close 99.9 down" [T1]\n</technical>\n'
        "<conclusion>ok</conclusion>\n<decision>BUY</decision>"
    )
    marks = bullet_marks(thesis, row)
    assert [m["verdict"] for m in marks] == ["verified", "misfiled", "hallucinated"]
    # the reasons are the reward stack's own (rewards.evidence), not a second check
    assert marks[1]["why"] == "misfiled: cites N1 (news) under <technical>"
    assert marks[2]["why"].startswith("quote not in the evidence")
    assert marks[0]["quote"] == "close 10.5 up 2%" and marks[0]["ids"] == ["T1"] and marks[0]["section"] == "technical"


def test_training_curves_are_read_from_the_model_dir(market, tmp_path):
    store, rows = market
    model_dir = tmp_path / "run" / "final"
    model_dir.mkdir(parents=True)
    log = [{"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.01 * s} for s in range(1, 6)]
    (tmp_path / "run" / "log_history.json").write_text(json.dumps(log))
    pol = CallablePolicy(_momentum_writer, name="momo-writer")
    pol.model_path = str(model_dir)
    res = evaluate(pol, rows[:60], store, EvalConfig(probes=[], out_dir=tmp_path / "ev", progress=False,
                                                     bootstrap_reps=100), scorer=_stub_scorer)
    html = (tmp_path / "ev" / "report.html").read_text()
    assert "id='training'" in html and (tmp_path / "ev" / "training.png").exists()
    assert res.config["model_dir"] == str(model_dir)
    # the run settings are a table, not a Python dict
    assert "<summary>Run settings</summary><table class='kv'>" in html
    assert "{'" not in html.split("<section id='verdict'>")[0]


# --- the bottom line, the model card, meaningless figures ---------------------------------------------
def test_the_bottom_line_names_a_constant_policy_before_any_metric(market, tmp_path):
    from thesisgym.evaluate import bottom_line, verdict

    store, rows = market
    res = evaluate(CallablePolicy(lambda row: _thesis_of("BUY", row), name="always-buy"), rows, store,
                   EvalConfig(out_dir=tmp_path, progress=False, probes=["anon"], bootstrap_reps=50),
                   scorer=_stub_scorer)
    line = ("always-buy is degenerate: it decided BUY on 240 of 240 rows, so it is the always-BUY baseline, "
            "not an analyst.")
    assert bottom_line(res) == line
    html = (tmp_path / "report.html").read_text()
    assert html.index(line) < html.index("<table")
    # its 0 % flips under a probe say nothing: marked, in the verdict too
    assert res.probes["anon"]["meaningful"] is False
    assert ("Probe anon: not meaningful: the policy decided BUY on every valid row of both runs (a constant policy "
            "ignores what a probe changes).") in verdict(res)


def test_bottom_line_rules(market):
    from thesisgym.evaluate import bottom_line

    store, rows = market
    cfg = EvalConfig(probes=[], progress=False, bootstrap_reps=50)
    mute = evaluate(CallablePolicy(lambda row: "no idea", name="mute"), rows[:60], store, cfg, scorer=_stub_scorer)
    assert bottom_line(mute) == ("mute is degenerate: 60 of 60 theses (100%) have no valid decision, so its backtest "
                                 "measures a format failure, not judgement.")
    first3 = sorted({r["asof"] for r in rows})[:3]
    few = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), [r for r in rows if r["asof"] in first3],
                   store, cfg, scorer=_stub_scorer)
    assert bottom_line(few) == ("momo-writer cannot be told from the baselines: 3 decision dates, 9 ticker-days are "
                                "too few for an interval on its Sharpe ratio.")
    full = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows, store, cfg, scorer=_stub_scorer)
    c = full.comparisons
    same = [k for k in ("buy_and_hold", "equal_weight_long", "random", "momentum_20d") if c[k]["lo"] <= 0 <= c[k]["hi"]]
    assert bottom_line(full).startswith("momo-writer is ") and "on Sharpe at 95% (40 decision dates" in bottom_line(full)
    if same:
        assert "indistinguishable from" in bottom_line(full)
    baselines = evaluate(None, rows, store, cfg)
    assert bottom_line(baselines) == "Baselines only: no policy was evaluated (40 decision dates, 120 ticker-days)."


def test_meaningless_figures_are_marked_not_shown(market, tmp_path):
    store, rows = market
    res = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows, store,
                   EvalConfig(out_dir=tmp_path, progress=False, probes=[], bootstrap_reps=50, max_rows=24),
                   scorer=_stub_scorer)
    # 4 decision dates held 7 days: about 11 trading days, far too few to annualise
    assert res.metrics["annualized_return"].isna().all() and res.metrics["calmar"].isna().all()
    html = (tmp_path / "report.html").read_text()
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)
    assert "Annualised return is n/a:" in text
    assert not re.search(r"\bnan\b", text, re.I) and "–" not in text  # one symbol for n/a
    assert "[CI]" not in text and "No intervals: 4 decision dates are too few for a bootstrap." in text


def test_the_heldout_run_honours_what_was_asked(market):
    store, rows = market
    main = [r for r in rows if r["ticker"] != "CCC"]
    held = [r for r in rows if r["ticker"] == "CCC"]
    teacher = CallablePolicy(lambda row: _thesis_of("SELL", row), name="teacher")
    keyed = {(r["ticker"], r["asof"], r["variation"]): "HOLD" for r in rows}
    cfg = EvalConfig(probes=["anon"], progress=False, bootstrap_reps=50, noise_seed=11, log_nav=True, cost_bps=9)
    res = evaluate(_Coin(), main, store, cfg, heldout=held, accuracy_policies={"teacher": teacher},
                   accuracy_baselines={"always HOLD": keyed}, scorer=_stub_scorer)
    h = res.heldout
    assert {"teacher", "always HOLD"} <= set(res.accuracy.index) and {"teacher", "always HOLD"} <= set(h.accuracy.index)
    assert h.accuracy.loc["teacher", "rows"] == len(held)
    for key in ("noise_seed", "log_nav", "cost_bps", "bootstrap_reps"):
        assert h.config[key] == res.config[key], key
    assert h.config["role"] == "heldout" and h.probes == {}  # the held-out run has no probes
    # decisions for other rows only: an error on the main split, left out (and said) on the held-out one
    with pytest.raises(ValueError, match=r"accuracy_baselines\['partial'\]: no decision for 80 of 160 rows"):
        evaluate(_Coin(), main, store, cfg, accuracy_baselines={"partial": {k: v for k, v in keyed.items()
                                                                            if k[0] == "AAA"}}, scorer=_stub_scorer)
    res = evaluate(_Coin(), main, store, cfg, heldout=held, scorer=_stub_scorer,
                   accuracy_baselines={"main only": {k: v for k, v in keyed.items() if k[0] != "CCC"}})
    assert "main only" not in res.heldout.accuracy.index
    assert any("left out of the held-out table" in w for w in res.heldout.warnings)


def test_extra_sections_are_rendered_with_tables_and_images(market, tmp_path):
    store, rows = market
    with pytest.raises(ValueError, match="no such image file"):
        ReportSection(title="curves", images=[tmp_path / "missing.png"])
    res = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows[:60], store,
                   EvalConfig(out_dir=tmp_path, progress=False, probes=[], bootstrap_reps=50,
                              sections=[ReportSection(title="SFT vs GRPO", text="same prompts", table=CHANGE_ROWS,
                                                      caption="change = after - before")]), scorer=_stub_scorer)
    html = res.report_path.read_text()
    assert "<h2>Training and extra material</h2><h3>SFT vs GRPO</h3><p>same prompts</p>" in html
    assert "<td>grounding</td><td>0.100</td><td>0.200</td><td>0.100</td><td>0.020</td><td>0.180</td><td>16</td>" in html
    assert "<td>hallucination_rate</td><td>n/a</td>" in html and "How to read this: change = after - before" in html


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A one-step SFT then a one-step GRPO run of a minimal tiny model (the run cards are what matters)."""
    import torch

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from thesisgym.train.config import build_config
    from thesisgym.train.grpo import run_grpo
    from thesisgym.train.sft import run_sft
    from toydata import toy_dataset

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("card")
    ctx = toy_dataset(8, seed=0, items_per_section=2, sections=("technical", "news"))
    from datasets import DatasetDict

    DatasetDict({"train": ctx}).save_to_disk(str(root / "contexts"))
    distill(ctx, TemplateTeacher(bullets=(1, 2)), n=2, decision_tolerance=1, min_grounding=0.0).save(
        root / "distilled", split="train")
    tiny = {"vocab_size": 600, "hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
    common = {"max_steps": 1, "save_steps": 1000, "report_to": "none", "seed": 5}
    sft = run_sft(build_config({"output_dir": str(root / "sft"), "model": {"name_or_path": "tiny", "tiny": tiny},
                                "data": {"dataset": str(root / "distilled")}, "per_device_train_batch_size": 2,
                                "learning_rate": 1e-3, "max_length": 1024, **common}, kind="sft"))
    grpo = run_grpo(build_config({"output_dir": str(root / "grpo"), "model": {"name_or_path": str(sft)},
                                  "data": {"dataset": str(root / "contexts")}, "per_device_train_batch_size": 2,
                                  "num_generations": 2, "max_completion_length": 8, "learning_rate": 1e-4,
                                  "rewards": {"funcs": ["structure", "evidence"], "weights": [0.5, 1.0]}, **common},
                                 kind="grpo"))
    return sft, grpo


def test_run_cards_record_what_training_did(trained):
    from thesisgym.train.card import CARD_FILE, read_card

    sft, grpo = trained
    card = read_card(grpo)
    assert (grpo / CARD_FILE).is_file() and card is not None
    first, second = card.chain()
    assert (first.kind, second.kind) == ("sft", "grpo") and second.previous == read_card(sft)
    assert first.base_model.endswith("tiny-base") and second.base_model == str(sft)
    assert first.steps == 1 and first.batch_size == 2 and first.train_rows > 0 and first.seed == 5
    assert second.rewards == {"structure": 0.5, "evidence": 1.0} and second.settings["num_generations"] == 2
    assert second.parameters > 0 and "1 layers, hidden 32" in second.architecture
    assert second.wall_seconds > 0 and second.machine["cpus"] and second.versions["trl"]
    with pytest.raises(ValueError, match="not a thesisgym run card"):
        (sft / CARD_FILE).write_text('{"kind": "sft"}')
        read_card(sft)


def test_the_report_opens_with_the_model_card(trained, market, tmp_path):
    from thesisgym.evaluate.report import card_rows

    _, grpo = trained
    store, rows = market
    pol = CallablePolicy(_momentum_writer, name="momo-writer")
    pol.model_path = str(grpo)
    res = evaluate(pol, rows[:60], store, EvalConfig(out_dir=tmp_path, progress=False, probes=[], bootstrap_reps=50),
                   scorer=_stub_scorer)
    card = dict(card_rows(res))
    assert card["policy"] == f"momo-writer: model {grpo}"
    assert card["base model"].startswith(str(grpo.parent.parent / "sft" / "tiny-base"))
    assert card["SFT"].startswith("1 steps x 2 examples, lr 0.001, seed 5,")
    assert card["GRPO"].startswith("1 steps x 2 completions, lr 0.0001, seed 5,")
    assert card["GRPO"].endswith("; rewards structure 0.5, evidence 1")
    assert card["SFT data"].endswith("distilled [train], 7 rows") and card["GRPO data"].endswith("contexts [train], 8 rows")
    assert card["training wall time"].endswith(" s") and card["machine"].startswith("cpu, ")
    assert card["decisions"].endswith("(of 60 theses)") and card["evaluated on"].startswith("store handmade: 60 rows")
    html = res.report_path.read_text()
    assert html.index("<h2>Model card</h2>") < html.index("<h2>Headline metrics</h2>")
    # a model without a card says so instead of guessing
    pol.model_path = str(tmp_path)
    res = evaluate(pol, rows[:60], store, EvalConfig(progress=False, probes=[], bootstrap_reps=50), scorer=_stub_scorer)
    assert dict(card_rows(res))["training"].startswith(f"no training record (thesisgym_run.json) in {tmp_path}")


def test_skill_table_sits_beside_the_ceilings_in_report_and_json(market, tmp_path):
    store, rows = market
    rows = [dict(r, fwd_vol=0.03) for r in rows]
    res = evaluate(CallablePolicy(_momentum_writer, name="momo-writer"), rows, store,
                   EvalConfig(out_dir=tmp_path, progress=False, probes=[], bootstrap_reps=100), scorer=_stub_scorer,
                   train=rows)
    sk = res.skill
    assert sk.index[0] == "momo-writer" and int(sk.loc["momo-writer", "rows"]) == 120
    assert {"always BUY", "random", "reader ceiling", "label_oracle", "truth_oracle"} <= set(sk.index)
    for col in ("ic", "ic_lo", "ic_hi", "neutral", "neutral_lo", "neutral_hi"):
        assert sk.loc["always BUY", col] == 0.0
    # the label is the forward return cut into classes: its rank correlation with it is high
    assert sk.loc["label_oracle", "ic"] > 0.8 and sk.loc["label_oracle", "neutral_lo"] > 0
    html = (tmp_path / "report.html").read_text()
    assert "id='skill'" in html and "0 by definition" in html and "reader ceiling" in html
    assert json.loads((tmp_path / "metrics.json").read_text())["skill"]["momo-writer"]["rows"] == 120


def test_probes_run_on_a_spread_subset_when_probe_rows_is_set(market):
    store, rows = market
    res = evaluate(_Coin(), rows, store, EvalConfig(probes=["anon"], probe_rows=10, progress=False,
                                                    bootstrap_reps=50), scorer=_stub_scorer)
    canonical = sum(int(r.get("variation", 0) or 0) == 0 for r in rows)  # probes re-ask the variation-0 rows
    assert res.probes["anon"]["rows"] == 10 and res.probes["anon"]["of_rows"] == canonical > 10
    assert res.probes["noise"]["rows"] == 10  # the noise baseline re-asks the same subset
    probed = [c for c in res.completions if c["probe"] == "anon"]
    assert len(probed) == 10 and len({c["asof"] for c in probed}) > 1  # spread, not the first ten rows of a date


def test_a_second_decider_is_tested_against_the_constants(market):
    """A decider beside the policy (the demo's SFT checkpoint) gets its own paired accuracy test against the
    train majority and always-BUY, in the table and the verdict: one that always says BUY is exactly
    always-BUY (difference 0, interval [0, 0]); the labels themselves are above both."""
    from thesisgym.evaluate import verdict

    store, rows = market
    labels = {(r["ticker"], r["asof"], r["variation"]): r["label"] for r in rows}
    cfg = EvalConfig(probes=[], progress=False, bootstrap_reps=200)
    res = evaluate(_Coin(), rows, store, cfg, train=rows, scorer=_stub_scorer,
                   accuracy_baselines={"labels": labels, "buyer": {k: "BUY" for k in labels}})
    acc = res.accuracy
    assert (acc.loc["buyer", ["minus_always_buy", "minus_always_buy_lo", "minus_always_buy_hi"]] == 0).all()
    assert acc.loc["labels", "minus_always_buy_lo"] > 0 and acc.loc["labels", "minus_majority_lo"] > 0
    assert np.isnan(acc.loc["always BUY", "minus_always_buy"])  # a constant is not tested against itself
    lines = verdict(res)
    assert any(line.startswith("labels: accuracy") and "always BUY above" in line for line in lines), lines
    assert any(line.startswith("buyer: accuracy") and "always BUY indistinguishable" in line for line in lines), lines
