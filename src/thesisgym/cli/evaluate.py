"""CLI: `thesisgym evaluate` — run a policy on a built split, backtest it against baselines, write a report.

Exactly one policy source: `--model PATH` (transformers / vLLM), `--completions FILE.jsonl`
(precomputed; e.g. the completions.jsonl of an earlier run) or `--openai-model NAME --base-url URL`
(any OpenAI-compatible server). The market store defaults to the one recorded in the dataset's
build_meta.json ("store": path, or {"path": ...}).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from thesisgym.llm import DEFAULT_CACHE_PATH


def _store_path(dataset_dir: Path, store: Path | None) -> Path:
    if store is not None:
        return store
    meta_path = dataset_dir / "build_meta.json"
    if not meta_path.exists():
        raise typer.BadParameter(f"{meta_path} does not exist; pass --store DIR", param_hint="--store")
    entry = json.loads(meta_path.read_text()).get("store")
    path = entry.get("path") if isinstance(entry, dict) else entry
    if not path:
        raise typer.BadParameter(f"{meta_path} records no store path; pass --store DIR", param_hint="--store")
    p = Path(path)
    return p if p.is_absolute() or p.exists() else dataset_dir / p


def _load_split(dataset: Path, split: str, *, required: bool = True):
    """`splits.load_split` with its ValueError shown as a --dataset usage error."""
    from thesisgym.build.splits import load_split

    try:
        return load_split(dataset, split, required=required)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dataset") from None


def print_summary(result, *, title: str, console) -> None:
    """The headline table with intervals, the accuracy table and the verdict (what `evaluate` and the demo print)."""
    from rich.table import Table

    from thesisgym.evaluate.report import ci_text, verdict
    from thesisgym.evaluate.stats import fmt_interval

    m = result.metrics
    table = Table(title=title)
    for col, just in (("strategy", "left"), ("cum ret [95% CI]", "right"), ("Sharpe [95% CI]", "right"),
                      ("hit [95% CI]", "right"), ("hit traded", "right"), ("Sortino", "right"), ("max DD", "right"),
                      ("dates", "right"), ("decisions", "right")):
        table.add_column(col, justify=just, no_wrap=True)
    for name in m.index:
        row = m.loc[name]
        table.add_row(
            str(name), ci_text(m, name, "cumulative_return", pct=True), ci_text(m, name, "sharpe"),
            ci_text(m, name, "hit_rate", pct=True), fmt_interval(row["hit_rate_traded"], *[float("nan")] * 2, pct=True),
            fmt_interval(row["sortino"], *[float("nan")] * 2), fmt_interval(row["max_drawdown"], *[float("nan")] * 2, pct=True),
            f"{int(row['dates'])}", f"{int(row['decisions'])}",
            style="bold" if name == result.policy else None,
        )
    console.print(table)
    acc = result.accuracy
    if len(acc):
        t2 = Table(title="decision accuracy (labelled rows, all variations)")
        for col in ("decider", "accuracy [95% CI]", "direction [95% CI]", "rows", "dates"):
            t2.add_column(col, justify="left" if col == "decider" else "right", no_wrap=True)
        for k in acc.index:
            t2.add_row(str(k), ci_text(acc, k, "accuracy", pct=True), ci_text(acc, k, "direction_accuracy", pct=True),
                       f"{int(acc.loc[k, 'rows'])}", f"{int(acc.loc[k, 'dates'])}",
                       style="bold" if k == result.policy else None)
        console.print(t2)
    for name, pr in result.probes.items():
        if pr.get("skipped"):
            console.print(f"probe {name}: skipped ({pr['skipped']})", markup=False)
            continue
        note = "" if pr.get("meaningful", True) else f" ({pr.get('note')})"
        console.print(
            f"probe {name}: flip rate {fmt_interval(pr['flip_rate'], float('nan'), float('nan'), pct=True)} of "
            f"{pr['compared']} decisions valid in both runs, to invalid "
            f"{fmt_interval(pr['to_invalid_rate'], float('nan'), float('nan'), pct=True)}{note}",
            markup=False,
        )
    if result.transport:
        t = result.transport
        console.print(f"transport: {t['errors']} of {t['requests']} requests failed ({100 * t['error_rate']:.1f}%) at {t['endpoint']}")
    for line in verdict(result):
        console.print(f"- {line}", soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""

    @app.command("evaluate")
    def evaluate_cmd(
        dataset: Path = typer.Option(..., "--dataset", help="split directory written by `thesisgym build`"),
        out: Path = typer.Option(
            ..., "--out", help="directory for report.html, PNGs, metrics.json, completions.jsonl"
        ),
        split: str = typer.Option("test", "--split", help="which split to evaluate"),
        store: Path | None = typer.Option(
            None, "--store", help="MarketStore directory (default: from build_meta.json)"
        ),
        model: str | None = typer.Option(None, "--model", help="HF model path or id to generate with"),
        completions: Path | None = typer.Option(
            None, "--completions", help="JSONL of precomputed completions (keyed by split row 'index' or ticker+asof+variation)"
        ),
        openai_model: str | None = typer.Option(
            None, "--openai-model", help="model name on an OpenAI-compatible server"
        ),
        teacher_completions: Path | None = typer.Option(
            None, "--teacher-completions", help="JSONL of the teacher's theses on the split: its accuracy becomes a baseline"
        ),
        baselines_only: bool = typer.Option(False, "--baselines-only", help="no policy: backtest the baselines and oracles alone"),
        base_url: str | None = typer.Option(
            None, "--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1"
        ),
        api_key_env: str = typer.Option(
            "OPENAI_API_KEY", "--api-key-env", help="env var holding the API key"
        ),
        concurrency: int = typer.Option(8, "--concurrency", min=1, help="--openai-model: requests in flight"),
        timeout: float = typer.Option(120.0, "--timeout", min=0.001, help="--openai-model and --judge llm: seconds per request attempt"),
        retries: int = typer.Option(4, "--retries", min=0, help="--openai-model and --judge llm: retries on 429/5xx/timeouts/connection errors"),
        cache: str = typer.Option(DEFAULT_CACHE_PATH, "--cache", help="--openai-model and --judge llm: sqlite response cache ('' = off)"),
        max_error_rate: float = typer.Option(0.02, "--max-error-rate", min=0.0, max=1.0,
                                             help="fail (exit 1) when more than this share of requests fail in transport"),
        judge: str = typer.Option("local", "--judge", help="consistency judge for s: local | llm | none"),
        judge_model: str | None = typer.Option(None, "--judge-model", help="--judge llm: model name"),
        judge_base_url: str | None = typer.Option(None, "--judge-base-url", help="--judge llm: OpenAI-compatible base URL"),
        probes: str = typer.Option("anon,shift,digits", "--probes", help="comma list of probes; '' for none"),
        max_rows: int | None = typer.Option(None, "--max-rows", help="evaluate at most N rows: whole consecutive as-of dates (every ticker) from the start of the split"),
        cost_bps: float = typer.Option(
            5.0, "--cost-bps", help="trading cost per unit of position change, in bps"
        ),
        long_only: bool = typer.Option(False, "--long-only", help="map short decisions to flat"),
        hold_days: int | None = typer.Option(
            None, "--hold-days", min=1, help="close positions after N trading days (default: the label horizon, 7) or at the next decision"
        ),
        heldout: bool = typer.Option(True, "--heldout/--no-heldout", help="also evaluate the held-out-ticker split when there is one"),
        log_nav: bool = typer.Option(False, "--log-nav", help="NAV plot on a log scale"),
        bootstrap_reps: int = typer.Option(1000, "--bootstrap-reps", min=100, help="bootstrap resamples per interval"),
        max_new_tokens: int = typer.Option(1024, "--max-new-tokens"),
        batch_size: int = typer.Option(8, "--batch-size"),
        temperature: float = typer.Option(0.0, "--temperature"),
        seed: int = typer.Option(0, "--seed"),
    ) -> None:
        """Generate theses on a split, backtest them vs baselines/oracles with intervals, run probes, write an HTML report."""
        import sys

        from rich.console import Console

        sources = [x for x, given in (("--model", model is not None), ("--completions", completions is not None),
                                      ("--openai-model", openai_model is not None), ("--baselines-only", baselines_only)) if given]
        if len(sources) != 1:
            raise typer.BadParameter("give exactly one of --model, --completions, --openai-model, --baselines-only"
                                     + (f" (got {', '.join(sources)})" if sources else ""))
        if openai_model is not None and base_url is None:
            raise typer.BadParameter("--openai-model needs --base-url", param_hint="--base-url")

        from thesisgym.data.store import MarketStore
        from thesisgym.evaluate import HFPolicy, JsonlPolicy, OpenAIPolicy, evaluate
        from thesisgym.evaluate.policies import make_verifier
        from thesisgym.evaluate.runner import EndpointError

        err = Console(stderr=True)

        def fail(msg: str, code: int = 2) -> None:
            from rich.markup import escape

            # escaped: messages quote user text and errors such as "[Errno 111]"
            err.print(f"[red]error:[/red] {escape(msg)}", soft_wrap=True, highlight=False)
            raise typer.Exit(code)

        data = _load_split(dataset, split)
        if len(data) == 0:
            raise typer.BadParameter(f"{dataset}: split {split!r} is empty", param_hint="--split")
        held = _load_split(dataset, "heldout", required=False) if heldout and split == "test" else None
        train = _load_split(dataset, "train", required=False)
        try:
            mstore = MarketStore.load(_store_path(dataset, store))
            client_opts = {"timeout": timeout, "max_retries": retries, "cache_path": cache or None}
            verifier = make_verifier(judge, model=judge_model, base_url=judge_base_url,
                                     **(client_opts if judge == "llm" else {}))
            if completions is not None:
                policy = JsonlPolicy(completions)
            elif model is not None:
                policy = HFPolicy(model, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                  temperature=temperature, seed=seed)
            elif openai_model is not None:
                policy = OpenAIPolicy(base_url, openai_model, api_key_env=api_key_env, temperature=temperature,
                                      max_tokens=max_new_tokens, concurrency=concurrency, timeout=timeout,
                                      max_retries=retries, cache_path=cache or None, seed=seed)
            else:
                policy = None
            result = evaluate(
                policy, data, mstore, probes=probes or None, out_dir=out, max_rows=max_rows, cost_bps=cost_bps,
                long_only=long_only, hold_days=hold_days, seed=seed, verifier=verifier, max_error_rate=max_error_rate,
                train=train, heldout=held, bootstrap_reps=bootstrap_reps, log_nav=log_nav,
                accuracy_policies={"teacher": JsonlPolicy(teacher_completions)} if teacher_completions else None,
            )
        except EndpointError as exc:
            fail(str(exc), code=1)
        except (ValueError, TypeError, FileNotFoundError) as exc:
            fail(str(exc))

        # piped output (CI logs) gets a width the table fits in instead of rich's 80
        console = Console(width=None if sys.stdout.isatty() else 160)
        title = (f"{result.policy} on {dataset.name}/{split}: {result.config['backtest_rows']} ticker-days on "
                 f"{result.config['decision_dates']} dates, held <= {result.config['hold_days']} days, {cost_bps:g} bps")
        print_summary(result, title=title, console=console)
        if result.heldout is not None:
            print_summary(result.heldout, title=f"held-out tickers ({result.heldout.config['backtest_rows']} ticker-days)",
                          console=console)
        console.print(f"report: {result.report_path}")
