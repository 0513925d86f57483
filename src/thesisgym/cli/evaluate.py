"""CLI: `thesisgym evaluate` — run a policy on a built split, backtest it against baselines, write a report.

Exactly one policy source: `--model PATH` (transformers / vLLM), `--completions FILE.jsonl`
(precomputed; e.g. the completions.jsonl of an earlier run), `--openai-model NAME --base-url URL`
(any OpenAI-compatible server) or `--baselines-only`. The market store defaults to the one recorded
in the dataset's build_meta.json ("store": path, or {"path": ...}).

The evaluation settings are an `EvalConfig`: from the options, or from a YAML file (`--config`,
its keys are EvalConfig's fields) with the options given on the command line overriding it.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from thesisgym.cli.common import EXIT_FAILURE, THREADS_OPTION, fail, message_of, quiet_libraries, set_threads
from thesisgym.cli.options import config_command, given
from thesisgym.llm import DEFAULT_CACHE_PATH


class Judge(StrEnum):
    local = "local"
    llm = "llm"
    none = "none"


# option name -> EvalConfig field: these options take their default and help from EvalConfig (cli/options.py);
# one given on the command line overrides --config
CONFIG_OPTIONS = {"out": "out_dir", "max_rows": "max_rows", "probes": "probes", "cost_bps": "cost_bps",
                  "long_only": "long_only", "hold_days": "hold_days", "seed": "seed", "judge": "judge",
                  "judge_model": "judge_model", "judge_base_url": "judge_base_url", "max_error_rate": "max_error_rate",
                  "bootstrap_reps": "bootstrap_reps", "log_nav": "log_nav"}
NAN = float("nan")
SOURCE = "Policy (exactly one)"
LLM = "OpenAI-compatible endpoints (--openai-model, --judge llm)"
GEN = "Generation (--model, --openai-model)"
EVAL = "Evaluation settings (also in --config)"

_DATASET = typer.Option(..., "--dataset", help="split directory written by `thesisgym build`")
_OUT = typer.Option(..., "--out", help="directory for report.html, PNGs, metrics.json, completions.jsonl")
_SPLIT = typer.Option("test", "--split", help="which split to evaluate")
_STORE = typer.Option(None, "--store", show_default="from the dataset's build_meta.json", help="MarketStore directory")
_CONFIG = typer.Option(None, "--config", show_default="none", help="YAML of EvalConfig settings; options given here override it")
_MODEL = typer.Option(None, "--model", rich_help_panel=SOURCE, help="HF model path or id to generate with")
_COMPLETIONS = typer.Option(None, "--completions", rich_help_panel=SOURCE,
                            help="JSONL of precomputed completions (keyed by split row 'index' or ticker+asof+variation)")
_OPENAI_MODEL = typer.Option(None, "--openai-model", rich_help_panel=SOURCE, help="model name on an OpenAI-compatible server")
_BASELINES = typer.Option(False, "--baselines-only", show_default="off", rich_help_panel=SOURCE,
                          help="no policy: backtest the baselines and oracles alone")
_TEACHER = typer.Option(None, "--teacher-completions", show_default="none",
                        help="JSONL of the teacher's theses on the split: its accuracy becomes a baseline")
_BASE_URL = typer.Option(None, "--base-url", rich_help_panel=LLM, help="--openai-model: base URL, e.g. http://localhost:8000/v1")
_API_KEY_ENV = typer.Option("OPENAI_API_KEY", "--api-key-env", rich_help_panel=LLM, help="env var holding the API key")
_CONCURRENCY = typer.Option(8, "--concurrency", min=1, rich_help_panel=LLM, help="--openai-model: requests in flight")
_TIMEOUT = typer.Option(120.0, "--timeout", min=0.001, rich_help_panel=LLM, help="seconds per request attempt")
_RETRIES = typer.Option(4, "--retries", min=0, rich_help_panel=LLM, help="retries on 429/5xx/timeouts/connection errors")
_CACHE = typer.Option(DEFAULT_CACHE_PATH, "--cache", rich_help_panel=LLM, help="sqlite response cache ('' = off)")
_MAX_ERROR_RATE = typer.Option(None, "--max-error-rate", rich_help_panel=LLM)
_JUDGE = typer.Option(None, "--judge", rich_help_panel=EVAL)
_JUDGE_MODEL = typer.Option(None, "--judge-model", rich_help_panel=LLM)
_JUDGE_BASE_URL = typer.Option(None, "--judge-base-url", rich_help_panel=LLM)
_PROBES = typer.Option(None, "--probes", rich_help_panel=EVAL)
_MAX_ROWS = typer.Option(None, "--max-rows", rich_help_panel=EVAL)
_COST = typer.Option(None, "--cost-bps", rich_help_panel=EVAL)
_LONG_ONLY = typer.Option(None, "--long-only/--no-long-only", rich_help_panel=EVAL)
_HOLD = typer.Option(None, "--hold-days", rich_help_panel=EVAL)
_HELDOUT = typer.Option(True, "--heldout/--no-heldout", help="also evaluate the held-out-ticker split when there is one")
_LOG_NAV = typer.Option(None, "--log-nav/--no-log-nav", rich_help_panel=EVAL)
_REPS = typer.Option(None, "--bootstrap-reps", rich_help_panel=EVAL)
_MAX_NEW = typer.Option(1024, "--max-new-tokens", min=1, rich_help_panel=GEN, help="tokens per thesis at most")
_BATCH = typer.Option(8, "--batch-size", min=1, rich_help_panel=GEN, help="--model: prompts per generate() call")
_TEMPERATURE = typer.Option(0.0, "--temperature", min=0.0, rich_help_panel=GEN, help="0 = greedy")
_SEED = typer.Option(None, "--seed", rich_help_panel=EVAL)


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("evaluate", cls=config_command("thesisgym.evaluate.config:EvalConfig", CONFIG_OPTIONS))(evaluate_cmd)


def evaluate_cmd(
    ctx: typer.Context, dataset: Path = _DATASET, out: Path = _OUT, split: str = _SPLIT, store: Path | None = _STORE,
    config: Path | None = _CONFIG, model: str | None = _MODEL, completions: Path | None = _COMPLETIONS,
    openai_model: str | None = _OPENAI_MODEL, baselines_only: bool = _BASELINES,
    teacher_completions: Path | None = _TEACHER, base_url: str | None = _BASE_URL, api_key_env: str = _API_KEY_ENV,
    concurrency: int = _CONCURRENCY, timeout: float = _TIMEOUT, retries: int = _RETRIES, cache: str = _CACHE,
    max_error_rate: float | None = _MAX_ERROR_RATE, judge: Judge | None = _JUDGE, judge_model: str | None = _JUDGE_MODEL,
    judge_base_url: str | None = _JUDGE_BASE_URL, probes: str | None = _PROBES, max_rows: int | None = _MAX_ROWS,
    cost_bps: float | None = _COST, long_only: bool | None = _LONG_ONLY, hold_days: int | None = _HOLD,
    heldout: bool = _HELDOUT, log_nav: bool | None = _LOG_NAV, bootstrap_reps: int | None = _REPS,
    max_new_tokens: int = _MAX_NEW, batch_size: int = _BATCH, temperature: float = _TEMPERATURE,
    seed: int | None = _SEED, threads: int | None = THREADS_OPTION,
) -> None:
    """Generate theses on a split, backtest them vs baselines/oracles with intervals, run probes, write an HTML report."""
    from thesisgym.evaluate.runner import EndpointError

    options = dict(ctx.params, judge=None if judge is None else judge.value, out=out)
    check_source(options)
    cfg = eval_config(config, options)
    options["seed"] = cfg.seed  # the sampling seed is the evaluation's (EvalConfig.seed, --config included)
    data, held, train = load_splits(dataset, split, heldout=heldout)
    if model is not None:
        quiet_libraries()  # no weight-loading bars: the evaluation prints its own progress
        set_threads(threads, model=model)
    try:
        result = run(options, cfg, dataset, store, data, held, train)
    except EndpointError as exc:
        fail(exc, code=EXIT_FAILURE)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        fail(exc)
    print_result(result, title=f"{result.policy} on {dataset.name}/{split}", cost_bps=cfg.cost_bps)
    if baselines_only:
        learnability(dataset, cfg)


def learnability(dataset: Path, cfg) -> None:
    """`--baselines-only` also asks whether the dataset is learnable at all (`thesisgym data learnability`)."""
    import json

    from thesisgym.cli.data import print_learnability
    from thesisgym.dataset.splits import load_splits as load_all
    from thesisgym.evaluate.learnability import check_learnability, markdown

    console = _console()
    try:
        result = check_learnability(load_all(dataset), name=str(dataset), reps=cfg.bootstrap_reps, seed=cfg.seed)
    except (ValueError, OSError) as exc:  # the baselines stand on their own; say why the check is missing
        console.print(f"learnability check not run: {exc}", markup=False, highlight=False, soft_wrap=True)
        return
    print_learnability(result, console)
    if cfg.out_dir is not None:
        (Path(cfg.out_dir) / "learnability.json").write_text(json.dumps(result.as_dict(), indent=2, default=str))
        (Path(cfg.out_dir) / "learnability.md").write_text(markdown(result))


def check_source(o: dict[str, Any]) -> None:
    sources = [flag for flag, given in (("--model", o["model"] is not None), ("--completions", o["completions"] is not None),
                                        ("--openai-model", o["openai_model"] is not None),
                                        ("--baselines-only", o["baselines_only"])) if given]
    if len(sources) != 1:
        fail("give exactly one of --model, --completions, --openai-model, --baselines-only"
             + (f" (got {', '.join(sources)})" if sources else ""))
    if o["openai_model"] is not None and o["base_url"] is None:
        fail("--openai-model needs --base-url")


def eval_config(path: Path | None, options: dict[str, Any]):
    """EvalConfig from `--config` (if any) with the options given on the command line on top."""
    import yaml
    from pydantic import ValidationError

    from thesisgym.evaluate.config import EvalConfig

    base: dict[str, Any] = {}
    if path is not None:
        try:
            base = yaml.safe_load(path.read_text()) or {}
            EvalConfig.model_validate(base)
        except OSError as exc:
            fail(f"--config {path}: {exc.strerror or exc}")
        except yaml.YAMLError as exc:
            fail(f"--config {path}: not valid YAML ({str(exc).splitlines()[0]})")
        except ValidationError as exc:
            fail(f"--config {path}: " + "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
                                                 for e in exc.errors()))
        if not isinstance(base, dict):
            fail(f"--config {path}: expected a mapping of EvalConfig settings")
    base.update(given(options, CONFIG_OPTIONS))
    if base.get("judge") == "llm":
        base.setdefault("judge_options", {}).update(timeout=options["timeout"], max_retries=options["retries"],
                                                    cache_path=options["cache"] or None)
    try:
        return EvalConfig.model_validate(base)
    except ValidationError as exc:
        fail(exc)


def store_path(dataset_dir: Path, store: Path | None) -> Path:
    from thesisgym.dataset.splits import META_FILE, recorded_store

    if store is not None:
        return store
    found = recorded_store(dataset_dir)
    if found is None:
        fail(f"--store: {dataset_dir / META_FILE} does not exist or records no store path; pass --store DIR")
    return found


def load_splits(dataset: Path, split: str, *, heldout: bool):
    """(the split, the held-out split or None, the train split or None); errors name --dataset/--split."""
    from thesisgym.dataset.splits import load_split

    try:
        data = load_split(dataset, split)
        held = load_split(dataset, "heldout", required=False) if heldout and split == "test" else None
        train = load_split(dataset, "train", required=False)
    except ValueError as exc:
        fail(f"--dataset {message_of(exc)}")
    if len(data) == 0:
        fail(f"--split: {dataset}: split {split!r} is empty")
    return data, held, train


def build_policy(o: dict[str, Any]):
    from thesisgym.evaluate import HFPolicy, JsonlPolicy, OpenAIPolicy

    if o["completions"] is not None:
        return JsonlPolicy(o["completions"])
    if o["model"] is not None:
        return HFPolicy(o["model"], max_new_tokens=o["max_new_tokens"], batch_size=o["batch_size"],
                        temperature=o["temperature"], seed=o["seed"])
    if o["openai_model"] is not None:
        return OpenAIPolicy(o["base_url"], o["openai_model"], api_key_env=o["api_key_env"], temperature=o["temperature"],
                            max_tokens=o["max_new_tokens"], concurrency=o["concurrency"], timeout=o["timeout"],
                            max_retries=o["retries"], cache_path=o["cache"] or None, seed=o["seed"])
    return None


def run(o: dict[str, Any], cfg, dataset: Path, store: Path | None, data, held, train):
    from thesisgym.data.store import MarketStore
    from thesisgym.evaluate import JsonlPolicy, evaluate

    mstore = MarketStore.load(store_path(dataset, store))
    teacher = {"teacher": JsonlPolicy(o["teacher_completions"])} if o["teacher_completions"] else None
    return evaluate(build_policy(o), data, mstore, cfg, train=train, heldout=held, accuracy_policies=teacher)


# --- printing ----------------------------------------------------------------------------------------
def _console():
    import sys

    from rich.console import Console

    # piped output (CI logs) gets a width the table fits in instead of rich's 80
    return Console(width=None if sys.stdout.isatty() else 160)


def print_result(result, *, title: str, cost_bps: float, console=None) -> None:
    """What `evaluate` prints: the summary of the split (and of the held-out tickers), the report path."""
    console = console or _console()
    cfg = result.config
    print_summary(result, console=console,
                  title=f"{title}: {cfg['backtest_rows']} ticker-days on {cfg['decision_dates']} dates, "
                        f"held <= {cfg['hold_days']} days, {cost_bps:g} bps")
    if result.heldout is not None:
        print_summary(result.heldout, console=console,
                      title=f"held-out tickers ({result.heldout.config['backtest_rows']} ticker-days)")
    console.print(f"report: {result.report_path}", markup=False, highlight=False, soft_wrap=True)


def _headline_table(result, title: str):
    from rich.table import Table

    from thesisgym.evaluate.stats import fmt_interval
    from thesisgym.evaluate.verdict import ci_text

    m = result.metrics
    ci = " [95% CI]" if "sharpe_lo" in m.columns and m["sharpe_lo"].notna().any() else ""
    table = Table(title=title)
    for col in ("strategy", f"cum ret{ci}", f"Sharpe{ci}", f"hit{ci}", "hit traded", "Sortino", "max DD", "decisions"):
        table.add_column(col, justify="left" if col == "strategy" else "right", no_wrap=True)
    for name in m.index:
        row = m.loc[name]
        table.add_row(str(name), ci_text(m, name, "cumulative_return", pct=True), ci_text(m, name, "sharpe"),
                      ci_text(m, name, "hit_rate", pct=True), fmt_interval(row["hit_rate_traded"], NAN, NAN, pct=True),
                      fmt_interval(row["sortino"], NAN, NAN), fmt_interval(row["max_drawdown"], NAN, NAN, pct=True),
                      f"{int(row['decisions'])}", style="bold" if name == result.policy else None)
    return table


def _accuracy_table(result):
    from rich.table import Table

    from thesisgym.evaluate.verdict import ci_text

    acc = result.accuracy
    table = Table(title=f"decision accuracy ({int(acc['rows'].iloc[0])} labelled rows on "
                        f"{int(acc['dates'].iloc[0])} dates, all variations)")
    for col in ("decider", "accuracy", "direction"):
        table.add_column(col, justify="left" if col == "decider" else "right", no_wrap=True)
    for k in acc.index:
        table.add_row(str(k), ci_text(acc, k, "accuracy", pct=True), ci_text(acc, k, "direction_accuracy", pct=True),
                      style="bold" if k == result.policy else None)
    return table


def _skill_table(result):
    from rich.table import Table

    from thesisgym.evaluate.skill import CONSTANT_NOTE, mix_text
    from thesisgym.evaluate.verdict import ci_text

    sk = result.skill
    table = Table(title=f"decision skill ({int(sk['rows'].iloc[0])} ticker-days on {int(sk['dates'].iloc[0])} dates)",
                  caption=CONSTANT_NOTE)
    for col in ("decider", "IC pooled", "IC per date", "neutral book / date", "decision mix"):
        table.add_column(col, justify="left" if col in ("decider", "decision mix") else "right")
    for k in sk.index:
        table.add_row(str(k), ci_text(sk, k, "ic"), ci_text(sk, k, "ic_date"), ci_text(sk, k, "neutral", pct=True),
                      mix_text(sk.loc[k].to_dict()), style="bold" if k == result.policy else None)
    return table


def print_summary(result, *, title: str, console) -> None:
    """The headline table with intervals, the accuracy table, probes, the verdict and the bottom line
    (what `evaluate` and the demo print)."""
    from rich.text import Text

    from thesisgym.evaluate.stats import fmt_interval
    from thesisgym.evaluate.verdict import bottom_line, verdict

    console.print(_headline_table(result, title))
    if len(result.accuracy):
        console.print(_accuracy_table(result))
    if len(result.skill):
        console.print(_skill_table(result))
    for name, pr in result.probes.items():
        if pr.get("skipped"):
            line = f"probe {name}: skipped ({pr['skipped']})"
        else:
            note = "" if pr.get("meaningful", True) else f" ({pr.get('note')})"
            subset = (f" (probed a subset: {pr['rows']} of {pr['of_rows']} rows)"
                      if pr.get("of_rows", 0) > pr.get("rows", 0) else "")
            line = (f"probe {name}: flip rate {fmt_interval(pr['flip_rate'], NAN, NAN, pct=True)} of "
                    f"{pr['compared']} decisions valid in both runs{subset}, to invalid "
                    f"{fmt_interval(pr['to_invalid_rate'], NAN, NAN, pct=True)}{note}")
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.transport:
        t = result.transport
        console.print(f"transport: {t['errors']} of {t['requests']} requests failed ({100 * t['error_rate']:.1f}%) at "
                      f"{t['endpoint']}", markup=False, highlight=False, soft_wrap=True)
    for line in verdict(result):
        console.print(f"- {line}", soft_wrap=True, markup=False, highlight=False)
    console.print(Text("bottom line: ", style="bold") + Text(bottom_line(result)), soft_wrap=True, highlight=False)
