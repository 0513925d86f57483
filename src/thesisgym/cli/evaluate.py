"""CLI: `thesisgym evaluate` — run a policy on a built split, backtest it against baselines, write a report.

Exactly one policy source: `--model PATH` (transformers / vLLM), `--completions FILE.jsonl`
(precomputed; e.g. the completions.jsonl of an earlier run) or `--openai-model NAME --base-url URL`
(any OpenAI-compatible server). The market store defaults to the one recorded in the dataset's
build_meta.json ("store": path, or {"path": ...}).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer


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


def _fmt(metric: str, v: float) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if metric in (
        "cumulative_return",
        "annualized_return",
        "max_drawdown",
        "hit_rate",
        "annualized_volatility",
    ):
        return f"{100 * v:.2f}%"
    return f"{v:.3f}"


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
            None, "--completions", help="JSONL of precomputed completions"
        ),
        openai_model: str | None = typer.Option(
            None, "--openai-model", help="model name on an OpenAI-compatible server"
        ),
        base_url: str | None = typer.Option(
            None, "--base-url", help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1"
        ),
        api_key_env: str = typer.Option(
            "OPENAI_API_KEY", "--api-key-env", help="env var holding the API key"
        ),
        probes: str = typer.Option("anon,shift,digits", "--probes", help="comma list of probes; '' for none"),
        max_rows: int | None = typer.Option(None, "--max-rows", help="evaluate at most N rows: whole as-of dates (every ticker) spread evenly over the split"),
        cost_bps: float = typer.Option(
            5.0, "--cost-bps", help="trading cost per unit of position change, in bps"
        ),
        long_only: bool = typer.Option(False, "--long-only", help="map short decisions to flat"),
        hold_days: int | None = typer.Option(
            None, "--hold-days", help="close positions after N days (default: until the next decision)"
        ),
        max_new_tokens: int = typer.Option(1024, "--max-new-tokens"),
        batch_size: int = typer.Option(8, "--batch-size"),
        temperature: float = typer.Option(0.0, "--temperature"),
        seed: int = typer.Option(0, "--seed"),
    ) -> None:
        """Generate theses on a split, backtest them vs baselines/oracles, run probes, write an HTML report."""
        from rich.console import Console
        from rich.table import Table

        sources = [x is not None for x in (model, completions, openai_model)]
        if sum(sources) != 1:
            raise typer.BadParameter("give exactly one of --model, --completions, --openai-model")
        if openai_model is not None and base_url is None:
            raise typer.BadParameter("--openai-model needs --base-url", param_hint="--base-url")

        from datasets import Dataset, load_from_disk

        from thesisgym.data.store import MarketStore
        from thesisgym.evaluate import HFPolicy, JsonlPolicy, OpenAIPolicy, evaluate

        if not (dataset / "dataset_dict.json").exists():
            raise typer.BadParameter(
                f"{dataset}: not a split directory (dataset_dict.json missing)", param_hint="--dataset"
            )
        # load only the split asked for: a DatasetDict with an empty split (e.g. no held-out tickers)
        # cannot be loaded as a whole by datasets' load_from_disk
        if (dataset / split / "dataset_info.json").exists():
            data = Dataset.load_from_disk(str(dataset / split))
        else:
            dd = load_from_disk(str(dataset))
            if split not in dd:
                raise typer.BadParameter(
                    f"{dataset}: no split {split!r}; have {list(dd)}", param_hint="--split"
                )
            data = dd[split]
        if len(data) == 0:
            raise typer.BadParameter(f"{dataset}: split {split!r} is empty", param_hint="--split")
        mstore = MarketStore.load(_store_path(dataset, store))
        if completions is not None:
            policy = JsonlPolicy(completions)
        elif model is not None:
            policy = HFPolicy(
                model,
                max_new_tokens=max_new_tokens,
                batch_size=batch_size,
                temperature=temperature,
                seed=seed,
            )
        else:
            policy = OpenAIPolicy(
                base_url,
                openai_model,
                api_key_env=api_key_env,
                temperature=temperature,
                max_tokens=max_new_tokens,
            )
        try:
            result = evaluate(
                policy,
                data,
                mstore,
                probes=probes or None,
                out_dir=out,
                max_rows=max_rows,
                cost_bps=cost_bps,
                long_only=long_only,
                hold_days=hold_days,
                seed=seed,
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc

        import sys

        # piped output (CI logs) gets a width the 9-column table fits in instead of rich's 80
        console = Console(width=None if sys.stdout.isatty() else 130)
        cols = [
            "cumulative_return",
            "annualized_return",
            "sharpe",
            "sortino",
            "max_drawdown",
            "calmar",
            "hit_rate",
            "turnover",
        ]
        table = Table(
            title=f"{result.policy} on {dataset.name}/{split} ({result.config['backtest_rows']} ticker-days, {cost_bps:g} bps)"
        )
        short = {
            "cumulative_return": "cum ret",
            "annualized_return": "ann ret",
            "sharpe": "Sharpe",
            "sortino": "Sortino",
            "max_drawdown": "max DD",
            "calmar": "Calmar",
            "hit_rate": "hit",
            "turnover": "turn/d",
        }
        table.add_column("strategy", no_wrap=True)
        for c in cols:
            table.add_column(short[c], justify="right", no_wrap=True)
        for name, row in result.metrics.iterrows():
            style = "bold" if name == result.policy else None
            table.add_row(str(name), *(_fmt(c, row[c]) for c in cols), style=style)
        console.print(table)
        r = result.reasoning
        console.print(
            f"decision accuracy {_fmt('hit_rate', r['decision_accuracy'])}, invalid {_fmt('hit_rate', r['invalid_decision_rate'])}, "
            f"hallucination {_fmt('x', r['hallucination_rate'])}, grounding {_fmt('x', r['grounding'])}, loop {_fmt('x', r['loop_rate'])}"
        )
        for name, p in result.probes.items():
            console.print(
                f"probe {name}: flip rate {_fmt('hit_rate', p['flip_rate'])}"
                + (f" ({p['skipped']})" if p.get("skipped") else "")
            )
        from thesisgym.evaluate.report import verdict

        for line in verdict(result):
            console.print(f"- {line}")
        console.print(f"report: {result.report_path}")
