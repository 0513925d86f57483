"""CLI commands for the data stage: `thesisgym data synth | import | import-shared | fetch-sec | info | audit |
learnability`.

Each command writes or reads a MarketStore directory (Parquet + meta.json) and prints a short rich
summary (tickers, days, events per kind, how insider trades were dated, the split history, what the
quality pass merged or quarantined), so a user sees at once what the later stages will get; `--verbose`
adds one line per imported file. `data audit` checks built prompts (or a store's canonical ones) for
point-in-time leaks and exits 1 when it finds one. `data learnability` fits an evidence-only reader and
says, per recipe, whether reading pays or a constant decision does (evaluate/learnability.py). pandas
and the generators are imported inside the commands to keep `thesisgym --help` fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from thesisgym.cli.common import fail
from thesisgym.cli.options import config_command, given

if TYPE_CHECKING:
    from thesisgym.data.store import MarketStore

data_app = typer.Typer(
    help="Create, import and inspect market data (MarketStore directories).", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.add_typer(data_app, name="data")


def _fail(problem: str | Exception) -> None:
    fail(problem)  # the one CLI error printer: "error: ...", exit 2, option names for an ArgumentError


def print_summary(store: MarketStore, *, path: Path | None = None, verbose: bool = False) -> None:
    """Rich table of a store: shape, date range, events per kind, dating, splits, quality; with
    `verbose`, one line per imported file."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"MarketStore {store.name}" + (f"  ({path})" if path else ""), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for what, value in _summary_rows(store):
        table.add_row(what, value)
    imports = store.meta.get("imports", [])
    if verbose:
        for rep in imports:
            table.add_row(f"import {rep['file']}", _import_line(rep))
    elif imports:
        read = sum(r["rows_read"] for r in imports)
        kept = sum(r["kept"] for r in imports)
        other = sum(r["dropped_other_tickers"] for r in imports)
        table.add_row("imports", f"{len(imports)} files: {read:,} rows read, {kept:,} events kept"
                      + (f", {other:,} for tickers without prices left out" if other else "")
                      + "  (--verbose: per file)")
    Console().print(table)


def _summary_rows(store: MarketStore) -> list[tuple[str, str]]:
    bars, events = store.bars, store.events
    tickers = store.tickers
    shown = ", ".join(tickers[:8]) + (f", ... (+{len(tickers) - 8})" if len(tickers) > 8 else "")
    rows = [("market", str(store.meta.get("market", "?"))), ("tickers", f"{len(tickers)}: {shown}")]
    if len(bars):
        rows.append(("days", f"{bars['date'].nunique()} ({bars['date'].min().date()} .. {bars['date'].max().date()})"))
    rows.append(("bars", f"{len(bars):,}"))
    counts = events["kind"].value_counts().to_dict() if len(events) else {}
    rows.append(("events", f"{len(events):,}  " + ", ".join(f"{k}: {v:,}" for k, v in sorted(counts.items()))))
    if len(events):
        rows.append(("published", f"{events['published_at'].min()} .. {events['published_at'].max()}"))
    if len(store.actions):
        rows.append(("splits", ", ".join(f"{r.ticker} {r.date.date()} {r.value:g}:1"
                                         for r in store.actions.itertuples(index=False))))
    rows += _insider_rows(store.meta.get("insider") or {})
    rows += _quality_rows(store.meta.get("quality") or {})
    rows.append(("truth", "yes (expected_return, quality, regime)" if store.truth is not None else "no"))
    if store.meta.get("lucky_ticker"):
        rows.append(("lucky ticker",
                     f"{store.meta['lucky_ticker']} (drift flips on {store.meta.get('lucky_switch_date')})"))
    return rows


def _insider_rows(ins: dict) -> list[tuple[str, str]]:
    by = ins.get("events_by_timing") or {}
    if not by:
        return []
    total = sum(by.values())
    real = by.get("filed", 0) + by.get("form4 index", 0)
    rows = [("insider dating", f"{real:,} of {total:,} ({100 * real / total:.1f}%) by a real Form 4 filing "
             f"({by.get('filed', 0):,} filing-dated, {by.get('form4 index', 0):,} via the Form 4 index); "
             f"{by.get('form5 deadline', 0):,} at their Form 5 deadline"
             + (f", {by['availability rule']:,} by the old availability rule" if by.get("availability rule") else ""))]
    u = ins.get("undated") or {}
    if u.get("trades"):
        rows.append(("undated insider", f"{u['trades']:,} trades no filing record dates: choice {u['choice']} "
                     f"(form5_deadline moves them, drop leaves them out)"))
    m = ins.get("availability_rule") or {}
    if m.get("rows_with_both_dates"):
        rows.append(("old availability rule", f"trade + {m['days']} business days would miss {m['missed']:,} of "
                     f"{m['rows_with_both_dates']:,} trades with both dates ({100 * m['miss_share']:.1f}%)"))
    return rows


def _quality_rows(q: dict) -> list[tuple[str, str]]:
    if not q:
        return []
    rows = [("near-duplicates merged", f"{q.get('near_duplicates_merged', 0):,} (within {q.get('merge_window_days')} days)")]
    cd = q.get("content_dates")
    if cd:
        rules = ", ".join(f"{k} {v:,}" for k, v in cd.get("by_rule", {}).items() if v)
        what = "quarantined" if cd.get("mode") == "quarantine" else "kept, flagged"
        rows.append(("content-date check", f"{cd.get('suspects', 0):,} items name a later period ({rules or 'none'}): "
                     f"{what}" + "".join(f"\n  {e['published_at'][:16]} {e['ticker'] or '(market)'}: {e['title'][:80]}"
                                         for e in cd.get("examples", [])[:3])))
    if q.get("after_last_bar"):
        rows.append(("after the last bar", f"{q['after_last_bar']:,} events published after the price history ends "
                     "(never shown)"))
    return rows


def _import_line(rep: dict) -> str:
    extra = "".join(f", {k.replace('_', ' ')} {v:,}" for k, v in rep.get("counts", {}).items())
    return (f"{rep['rows_read']:,} read, {rep['kept']:,} kept, {rep['duplicates']:,} duplicates "
            f"({rep['dropped_duplicates']:,} dropped), {rep['dropped_other_tickers']:,} for other tickers dropped" + extra)


# option name -> SynthConfig field: default and help from SynthConfig (cli/options.py)
SYNTH_OPTIONS = {"market": "market", "tickers": "n_tickers", "days": "n_days", "seed": "seed"}


@data_app.command("synth", cls=config_command("thesisgym.data.synth:SynthConfig", SYNTH_OPTIONS))
def synth(
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
    market: str | None = typer.Option(None, "--market"),
    tickers: int | None = typer.Option(None, "--tickers"),
    days: int | None = typer.Option(None, "--days"),
    seed: int | None = typer.Option(None, "--seed"),
    config: Path | None = typer.Option(None, "--config", help="YAML file of SynthConfig fields"),
) -> None:
    """Generate a synthetic market with known ground truth and write it to OUT."""
    from rich.console import Console

    from thesisgym.data.synth import SynthConfig, generate_market

    overrides = {"market": market, "n_tickers": tickers, "n_days": days, "seed": seed}
    try:
        if config is not None:
            cfg = SynthConfig.from_yaml(config, **overrides)
        else:
            cfg = SynthConfig(**{k: v for k, v in overrides.items() if v is not None})
    except (ValueError, OSError) as exc:
        _fail(exc)
    with Console().status(f"generating {cfg.n_tickers} tickers x {cfg.n_days} days (market {cfg.market})"):
        store = generate_market(cfg)
        store.save(out)
    print_summary(store, path=out)


# option name -> ImportConfig field: these options take their default and help from ImportConfig (cli/options.py)
IMPORT_OPTIONS = {"prices": "prices", "events": "events", "name": "name", "assume_timezone": "assume_timezone",
                  "actions": "actions", "bars_adjusted_as_of": "bars_adjusted_as_of",
                  "bars_adjusted_for": "bars_adjusted_for", "fundamentals": "fundamentals",
                  "submissions": "submissions", "insider": "insider", "insider_days": "insider_availability_days",
                  "insider_undated": "insider_undated",
                  "earnings": "earnings", "analyst": "analyst", "macro": "macro", "feed": "feeds",
                  "merge_days": "merge_window_days"}
_FAMILIES = ("fundamentals", "submissions", "insider", "earnings", "analyst", "macro", "feeds", "actions")


@data_app.command("import", cls=config_command("thesisgym.data.sources:ImportConfig", IMPORT_OPTIONS))
def import_(
    ctx: typer.Context,
    prices: list[Path] | None = typer.Option(None, "--prices", help="repeat for several files"),
    events: list[Path] | None = typer.Option(None, "--events"),
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
    name: str | None = typer.Option(None, "--name"),
    unknown_tickers: str = typer.Option(
        "error", "--unknown-tickers",
        help="events for tickers without bars: error | drop (counted); with other source families: always drop"
    ),
    duplicates: str = typer.Option("keep", "--duplicates", help="duplicate headlines: keep | drop (counted)"),
    assume_timezone: str | None = typer.Option(None, "--assume-timezone"),
    no_ticker_map: bool = typer.Option(False, "--no-ticker-map", help="do not rename FB to META in headline files"),
    actions: list[Path] | None = typer.Option(None, "--splits"),
    bars_adjusted_as_of: str | None = typer.Option(None, "--prices-adjusted-as-of"),
    bars_adjusted_for: str | None = typer.Option(None, "--prices-adjusted-for"),
    fundamentals: list[Path] | None = typer.Option(None, "--fundamentals"),
    submissions: list[Path] | None = typer.Option(None, "--submissions"),
    insider: list[Path] | None = typer.Option(None, "--insider"),
    insider_days: int | None = typer.Option(None, "--insider-availability-days"),
    insider_undated: str | None = typer.Option(None, "--insider-undated"),
    earnings: list[Path] | None = typer.Option(None, "--earnings"),
    trust_pre_market: bool = typer.Option(
        False, "--trust-pre-market", help="take a vendor's unconfirmed 'pre-market' label at 08:00 (default: 16:05)"
    ),
    analyst: list[Path] | None = typer.Option(None, "--analyst"),
    macro: list[Path] | None = typer.Option(None, "--macro"),
    feed: list[Path] | None = typer.Option(None, "--feed"),
    yfinance: str | None = typer.Option(None, "--yfinance", help="download prices instead: comma list of tickers"),
    merge_days: float | None = typer.Option(None, "--merge-days"),
    keep_content_suspects: bool = typer.Option(
        False, "--keep-content-suspects", help="keep (flagged) items whose text names a later period; default: quarantine"
    ),
    start: str | None = typer.Option(None, "--start", help="with --yfinance: first date"),
    end: str | None = typer.Option(None, "--end", help="with --yfinance: end date (exclusive)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="one summary line per imported file"),
) -> None:
    """Import price files (or yfinance) and any source families into a validated MarketStore at OUT."""
    if unknown_tickers not in ("error", "drop") or duplicates not in ("keep", "drop"):
        _fail("--unknown-tickers takes error|drop and --duplicates takes keep|drop")
    fields = given(ctx.params, IMPORT_OPTIONS)
    if yfinance:
        if prices or events or any(f in fields for f in _FAMILIES) or not (start and end):
            _fail("--yfinance takes --start and --end and no other inputs")
        _import_yfinance(yfinance, start, end, name or "real", out)
        return
    if not prices:
        _fail("give --prices (repeat for several files) or --yfinance")
    explicit_error = ctx.get_parameter_source("unknown_tickers").name == "COMMANDLINE" and unknown_tickers == "error"
    _check_scope(fields, duplicates=duplicates, trust_pre_market=trust_pre_market, unknown_error=explicit_error)
    if no_ticker_map:
        fields["ticker_map"] = {}
    fields.update(content_dates="keep" if keep_content_suspects else "quarantine",
                  earnings_pre_market="trust" if trust_pre_market else "next_day")
    store = _import_files(import_config(fields), families=any(f in fields for f in _FAMILIES)
                          or "bars_adjusted_as_of" in fields or "bars_adjusted_for" in fields,
                          unknown_tickers=unknown_tickers, duplicates=duplicates)
    store.save(out)
    print_summary(store, path=out, verbose=verbose)


def _check_scope(fields: dict, *, duplicates: str, trust_pre_market: bool, unknown_error: bool) -> None:
    """Refuse an option that would act on nothing given, instead of ignoring it."""
    if "insider_availability_days" in fields and "insider" not in fields:
        _fail("--insider-availability-days dates --insider files; give some or leave it out")
    if "insider_undated" in fields and "insider" not in fields:
        _fail("--insider-undated dates --insider files; give some or leave it out")
    if trust_pre_market and "earnings" not in fields:
        _fail("--trust-pre-market times --earnings files; give some or leave it out")
    if unknown_error and any(f in fields for f in _FAMILIES):
        _fail("--unknown-tickers error works on --prices/--events imports; with other source families the events "
              "of tickers without prices are always dropped and counted per file (--verbose)")
    if duplicates != "keep" and any(f in fields for f in _FAMILIES):
        _fail("--duplicates works on --prices/--events imports; with other source families near-duplicates are "
              "merged by --merge-days")


# ImportConfig field -> its option, for error messages
_FLAGS = {field: "--" + name.replace("_", "-") for name, field in IMPORT_OPTIONS.items()} | {
    "actions": "--splits", "bars_adjusted_as_of": "--prices-adjusted-as-of",
    "bars_adjusted_for": "--prices-adjusted-for", "feeds": "--feed",
    "insider_availability_days": "--insider-availability-days"}


def import_config(fields: dict):
    """The ImportConfig of the options given; a bad value exits 2 naming its option."""
    from pydantic import ValidationError

    from thesisgym.cli.common import validation_message
    from thesisgym.data.sources import ImportConfig

    try:
        return ImportConfig(**fields)
    except ValidationError as exc:
        _fail(validation_message(exc, _FLAGS))


def _import_files(cfg, *, families: bool, unknown_tickers: str, duplicates: str) -> MarketStore:
    """`import_sources` with every family, or `import_store` for prices and event files only."""
    from thesisgym.data.importers import import_store
    from thesisgym.data.sources import import_sources

    try:
        if families:
            return import_sources(cfg)
        return import_store(
            prices=cfg.prices, events=cfg.events, name=cfg.name, unknown_tickers=unknown_tickers,  # type: ignore[arg-type]
            duplicates=duplicates, assume_timezone=cfg.assume_timezone,  # type: ignore[arg-type]
            ticker_map=cfg.ticker_map, merge_window_days=cfg.merge_window_days, content_dates=cfg.content_dates,
        )
    except (ValueError, OSError) as exc:
        hint = "  (use --unknown-tickers drop to drop and count them)" if "unknown ticker" in str(exc) else ""
        _fail(_message(exc) + hint)


def _message(exc: BaseException) -> str:
    from thesisgym.schema import ArgumentError

    return exc.for_cli() if isinstance(exc, ArgumentError) else str(exc)


def _import_yfinance(tickers: str, start: str, end: str, name: str, out: Path) -> None:
    from thesisgym.data.importers import fetch_yfinance

    try:
        store = fetch_yfinance([t.strip() for t in tickers.split(",") if t.strip()], start, end, name=name)
    except (ValueError, OSError, ImportError, TypeError) as exc:
        _fail(exc)
    store.save(out)
    print_summary(store, path=out)


@data_app.command("import-shared")
def import_shared_(
    root: Path = typer.Argument(..., help="the shared data folder (../shared/data)"),
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
    keep_content_suspects: bool = typer.Option(
        False, "--keep-content-suspects", help="keep (flagged) items whose text names a later period; default: quarantine"
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="one summary line per imported file"),
) -> None:
    """The Magnificent-7 2013-2023 store with every source family of ROOT (see its README)."""
    from thesisgym.data.sources import import_shared

    try:
        store = import_shared(root, content_dates="keep" if keep_content_suspects else "quarantine")
    except (ValueError, OSError) as exc:
        _fail(exc)
    store.save(out)
    print_summary(store, path=out, verbose=verbose)


@data_app.command("fetch-sec")
def fetch_sec(
    cik: int = typer.Option(..., "--cik", help="the company's SEC CIK, e.g. 320193 for Apple"),
    ticker: str = typer.Option(..., "--ticker", help="the ticker the files are named after, e.g. AAPL"),
    user_agent: str = typer.Option(
        ..., "--user-agent", help="your name and contact e-mail, as the SEC requires"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="directory for the JSON files"),
) -> None:
    """Download SEC companyfacts + submissions (at most 10 requests a second) for `data import`."""
    from thesisgym.data.sec import fetch_company

    try:
        facts, subs = fetch_company(cik, out, user_agent=user_agent, ticker=ticker)
    except (ValueError, OSError) as exc:
        _fail(exc)
    print(
        f"wrote {facts} and {len(subs)} submissions file(s); import with --fundamentals {facts} "
        + " ".join(f"--submissions {p}" for p in subs)
    )


@data_app.command("info")
def info(
    path: Path = typer.Argument(..., help="a MarketStore directory"),
    no_validate: bool = typer.Option(False, "--no-validate", help="skip validation of the stored frames"),
    coverage: bool = typer.Option(
        False, "--coverage", help="build the canonical prompts of every split and print their coverage"
    ),
    config: str | None = typer.Option(None, "--config", help="with --coverage: SplitConfig YAML or preset (mag7)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="one summary line per imported file"),
) -> None:
    """Validate a MarketStore directory and print its summary (and, with --coverage, prompt coverage)."""
    from thesisgym.data.validate import load_store

    try:
        store = load_store(path, validate=not no_validate)
    except (ValueError, OSError) as exc:
        _fail(exc)
    print_summary(store, path=path, verbose=verbose)
    if coverage:
        from rich.console import Console

        from thesisgym.cli.build import print_coverage
        from thesisgym.dataset.splits import SplitConfig, build_splits

        try:
            cfg = SplitConfig.from_yaml(config) if config else SplitConfig()
            # canonical prompts only: coverage is about the evidence, not the augmentation
            cfg = cfg.model_copy(update={"variations": 1, "eval_variations": 1})
            splits = build_splits(store, cfg, show_progress=False)
        except (ValueError, OSError) as exc:
            _fail(exc)
        print_coverage(Console(), splits.meta)


@data_app.command("audit")
def audit(
    target: Path = typer.Argument(..., help="a built dataset directory (`thesisgym build --out`) or a MarketStore"),
    store: Path | None = typer.Option(None, "--store", help="the store the dataset was built from (default: its build_meta)"),
    reference: Path | None = typer.Option(
        None, "--reference", help="store whose split history and filing records re-date the items (default: --store)"
    ),
    config: str | None = typer.Option(None, "--config", help="for a store: SplitConfig YAML or preset (mag7)"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the full report (with examples) as JSON"),
    coverage: bool = typer.Option(False, "--coverage", help="also print coverage per ticker x split x family"),
) -> None:
    """Point-in-time audit: every prompt item's public time re-derived from the store; exits 1 on any leak."""
    import json

    import pandas as pd
    from rich.console import Console
    from rich.text import Text

    from thesisgym.data.quality import render_coverage
    from thesisgym.dataset.leakage import audit_prompts, render_audit

    try:
        report = audit_prompts(target, store=store, reference=reference, config=config, show_progress=False)
    except (ValueError, OSError) as exc:
        _fail(exc)
    console = Console()
    console.print(render_audit(report))
    if coverage:
        console.print(render_coverage(pd.DataFrame(report.coverage), title="coverage per ticker x split"))
    for kind, rows in report.examples.items():
        for r in rows[:2]:
            console.print(Text(f"{kind}: ", style="yellow") + Text(f"{r['ticker']} {r['asof']} [{r['section']}] "
                                                                   f"{r['date']} | {r['source']} | {r['text'][:100]}"),
                          highlight=False)
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_dict(), indent=2, default=str))
    if not report.ok:
        raise typer.Exit(code=1)


@data_app.command("learnability")
def learnability(
    dataset: Path = typer.Argument(..., help="a built dataset directory (`thesisgym build --out`)"),
    splits: str = typer.Option("val,test", "--splits", help="comma-separated splits to judge the reader on"),
    reward_rows: int = typer.Option(200, "--reward-rows", min=1,
                                    help="rows (whole dates) per split the recipe rewards are averaged over"),
    reps: int = typer.Option(1000, "--reps", min=10, help="bootstrap resamples per interval"),
    seed: int = typer.Option(0, "--seed"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the result as JSON"),
    markdown_out: Path | None = typer.Option(None, "--markdown", help="also write the tables as Markdown"),
) -> None:
    """Can reading the evidence beat every constant decision on this dataset, under every shipped recipe?

    Fits a transparent reader (logistic regression on features of the prompt's evidence only) on train
    and prints, per split, its accuracy, IC and market-neutral return against the constants, the
    teacher and the truth oracle, the expected reward of every recipe, and one verdict per recipe.
    """
    import json

    from rich.console import Console

    from thesisgym.dataset.splits import load_splits
    from thesisgym.evaluate.learnability import check_learnability, markdown

    try:
        dd = load_splits(dataset)
        result = check_learnability(dd, name=str(dataset), evaluate_on=[s.strip() for s in splits.split(",") if s.strip()],
                                    reward_rows=reward_rows, reps=reps, seed=seed)
    except (ValueError, OSError) as exc:
        _fail(exc)
    print_learnability(result, Console())
    if json_out is not None:
        json_out.write_text(json.dumps(result.as_dict(), indent=2, default=str))
    if markdown_out is not None:
        markdown_out.write_text(markdown(result))


def print_learnability(result, console) -> None:
    """The learnability tables and one verdict line per split and recipe (also `evaluate --baselines-only`)."""
    from rich.table import Table

    from thesisgym.evaluate.learnability import tables

    for title, header, rows in tables(result):
        table = Table(title=title)
        for h in header:
            table.add_column(h)
        for r in rows:
            table.add_row(*r)
        console.print(table)
    for chk in result.splits.values():
        for v in chk.verdicts:
            console.print(f"{chk.split}: {v}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"learnability check: {result.seconds:.0f} s", markup=False, highlight=False)
