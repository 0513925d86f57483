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
from thesisgym.evaluate import CallablePolicy, EvalConfig, EvalResult, JsonlPolicy, evaluate
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


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium(result, tmp_path):
    _, out = result
    url = (out / "report.html").resolve().as_uri()
    base = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for text in (
        "Headline metrics",
        "Net asset value",
        "Drawdown",
        "Reasoning quality",
        "Per-ticker results",
        "Memorisation probes",
        "momo-writer",
        "truth_oracle",
    ):
        assert text in dom.stdout
    assert dom.stdout.count("<img") == 5
    for text in ("Decision accuracy vs baselines", "Example theses", "equal_weight_long", "Run settings"):
        assert text in dom.stdout
    for width in (900, 1400):  # a laptop half-screen and a desktop
        shot = tmp_path / f"shot{width}.png"
        run = subprocess.run(
            [*base, f"--screenshot={shot}", f"--window-size={width},3000", url],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert run.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000  # a real page, not blank


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
    import thesisgym.build.splits as splits
    import thesisgym.data.synth as synth
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
    from thesisgym.evaluate.report import verdict

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
    from thesisgym.evaluate.report import verdict

    assert any("Probe anon flips 0% of the valid decisions vs" in ln and "from resampling alone" in ln
               for ln in verdict(res))


def test_baselines_only_mode(market, tmp_path):
    store, rows = market
    res = evaluate(None, rows, store, EvalConfig(out_dir=tmp_path, progress=False, bootstrap_reps=100, min_dates=50))
    assert not res.has_policy and res.policy == "baselines" and "buy_and_hold" in res.metrics.index
    assert res.probes == {} and res.reasoning == {}
    from thesisgym.evaluate.report import verdict

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
    assert marks[2]["why"] == "quote not in the evidence"
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
