"""CLI commands for the data stage: `thesisgym data synth | import | info`.

Each command writes or reads a MarketStore directory (Parquet + meta.json) and prints a rich summary
(tickers, days, date range, events per kind), so a user sees at once what the later stages will get.
pandas and the generators are imported inside the commands to keep `thesisgym --help` fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from thesisgym.cli.common import fail

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


def print_summary(store: MarketStore, *, path: Path | None = None) -> None:
    """Rich table of a store: shape, date range, events per kind, import notes."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    bars, events = store.bars, store.events
    table = Table(title=f"MarketStore {store.name}" + (f"  ({path})" if path else ""), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    tickers = store.tickers
    shown = ", ".join(tickers[:8]) + (f", ... (+{len(tickers) - 8})" if len(tickers) > 8 else "")
    table.add_row("market", str(store.meta.get("market", "?")))
    table.add_row("tickers", f"{len(tickers)}: {shown}")
    if len(bars):
        table.add_row(
            "days", f"{bars['date'].nunique()} ({bars['date'].min().date()} .. {bars['date'].max().date()})"
        )
    table.add_row("bars", f"{len(bars):,}")
    counts = events["kind"].value_counts().to_dict() if len(events) else {}
    table.add_row(
        "events", f"{len(events):,}  " + ", ".join(f"{k}: {v:,}" for k, v in sorted(counts.items()))
    )
    if len(events):
        pub = events["published_at"]
        table.add_row("published", f"{pub.min()} .. {pub.max()}")
        table.add_row("market-wide events", f"{int((events['ticker'] == '').sum()):,}")
    table.add_row("truth", "yes (expected_return, quality, regime)" if store.truth is not None else "no")
    if store.meta.get("lucky_ticker"):
        table.add_row(
            "lucky ticker",
            f"{store.meta['lucky_ticker']} (drift flips on {store.meta.get('lucky_switch_date')})",
        )
    for rep in store.meta.get("imports", []):
        extra = "".join(f", {k.replace('_', ' ')} {v:,}" for k, v in rep.get("counts", {}).items())
        table.add_row(
            f"import {rep['file']}",
            f"{rep['rows_read']:,} read, {rep['kept']:,} kept, {rep['duplicates']:,} duplicates "
            f"({rep['dropped_duplicates']:,} dropped), {rep['dropped_other_tickers']:,} for other tickers dropped"
            + extra,
        )
    q = store.meta.get("quality")
    if q:
        st = q.get("suspicious_timestamps", {})
        table.add_row(
            "near-duplicates merged",
            f"{q.get('near_duplicates_merged', 0):,} (within {q.get('merge_window_days')} days)",
        )
        table.add_row(
            "suspicious timestamps",
            f"{st.get('count', 0):,} flagged ({st.get('not_started', 0):,} name a quarter not yet started; "
            f"{q.get('dropped_not_started_quarter', 0):,} of those dropped)"
            + "".join(
                f"\n  {e['published_at'][:16]} {e['ticker'] or '(market)'}: {e['title'][:80]}"
                for e in st.get("examples", [])[:3]
            ),
        )
    console.print(table)


@data_app.command("synth")
def synth(
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
    market: str | None = typer.Option(None, "--market", help="A (momentum pays) or B (it reverses)"),
    tickers: int | None = typer.Option(None, "--tickers", help="number of tickers"),
    days: int | None = typer.Option(None, "--days", help="number of business days"),
    seed: int | None = typer.Option(None, "--seed", help="random seed"),
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


@data_app.command("import")
def import_(
    prices: list[Path] | None = typer.Option(
        None, "--prices", help="price files (CSV or Parquet); repeat the option"
    ),
    events: list[Path] | None = typer.Option(
        None, "--events", help="event or headline files; repeat the option"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
    name: str = typer.Option("real", "--name", help="store name"),
    unknown_tickers: str = typer.Option(
        "error", "--unknown-tickers", help="events for tickers without bars: error | drop (counted)"
    ),
    duplicates: str = typer.Option("keep", "--duplicates", help="duplicate headlines: keep | drop (counted)"),
    assume_timezone: str | None = typer.Option(
        None,
        "--assume-timezone",
        help="zone for naive/date-only generic event times (date-only -> 23:59 local)",
    ),
    no_ticker_map: bool = typer.Option(
        False, "--no-ticker-map", help="do not rename FB to META in headline files"
    ),
    fundamentals: list[Path] | None = typer.Option(
        None, "--fundamentals", help="SEC companyfacts JSON (one per company); repeat"
    ),
    submissions: list[Path] | None = typer.Option(
        None, "--submissions", help="SEC submissions JSON (acceptance times), matched by CIK in the name"
    ),
    insider: list[Path] | None = typer.Option(None, "--insider", help="insider transaction CSVs"),
    insider_delay: int = typer.Option(
        2, "--insider-delay", help="business days after the trade when a file has no filing date"
    ),
    earnings: list[Path] | None = typer.Option(
        None, "--earnings", help="earnings CSVs (reported vs estimated EPS)"
    ),
    analyst: list[Path] | None = typer.Option(
        None, "--analyst", help="analyst CSVs (generic, rating headlines, trends) or Estimize zip/JSON"
    ),
    macro: list[Path] | None = typer.Option(
        None, "--macro", help="macro files: RTDSM, FRED-MD vintage, ALFRED CSV, date,value, calendar zip"
    ),
    feed: list[Path] | None = typer.Option(None, "--feed", help="RSS/Atom XML files"),
    yfinance: str | None = typer.Option(
        None, "--yfinance", help="download prices instead: comma list of tickers (needs the yfinance extra)"
    ),
    merge_days: float = typer.Option(
        3.0, "--merge-days", help="merge near-duplicate items published within this many days (0: keep all)"
    ),
    start: str | None = typer.Option(None, "--start", help="with --yfinance: first date"),
    end: str | None = typer.Option(None, "--end", help="with --yfinance: end date (exclusive)"),
) -> None:
    """Import price files (or yfinance) and any source families into a validated MarketStore at OUT."""
    from thesisgym.data.importers import DEFAULT_TICKER_MAP, import_store

    if unknown_tickers not in ("error", "drop") or duplicates not in ("keep", "drop"):
        _fail("--unknown-tickers takes error|drop and --duplicates takes keep|drop")
    families = [fundamentals, insider, earnings, analyst, macro, feed]
    if yfinance:
        from thesisgym.data.importers import fetch_yfinance

        if prices or events or any(families) or not (start and end):
            _fail("--yfinance takes --start and --end and no other inputs")
        try:
            store = fetch_yfinance(
                [t.strip() for t in yfinance.split(",") if t.strip()], start, end, name=name
            )
        except (ValueError, OSError, ImportError, TypeError) as exc:
            _fail(exc)
        store.save(out)
        print_summary(store, path=out)
        return
    if not prices:
        _fail("give --prices (repeat for several files) or --yfinance")
    if any(families) or submissions:
        from thesisgym.data.sources import import_sources

        try:
            store = import_sources(
                prices=prices,
                events=events or [],
                fundamentals=fundamentals or [],
                submissions=submissions or [],
                insider=insider or [],
                earnings=earnings or [],
                analyst=analyst or [],
                macro=macro or [],
                feeds=feed or [],
                name=name,
                ticker_map=None if no_ticker_map else DEFAULT_TICKER_MAP,
                insider_delay_days=insider_delay,
                assume_timezone=assume_timezone,
                merge_window_days=merge_days or None,
            )
        except (ValueError, OSError) as exc:
            _fail(exc)
        store.save(out)
        print_summary(store, path=out)
        return
    try:
        store = import_store(
            prices=prices,
            events=events or [],
            name=name,
            unknown_tickers=unknown_tickers,  # type: ignore[arg-type]
            duplicates=duplicates,
            assume_timezone=assume_timezone,  # type: ignore[arg-type]
            ticker_map=None if no_ticker_map else DEFAULT_TICKER_MAP,
            merge_window_days=merge_days or None,
        )
    except (ValueError, OSError) as exc:
        hint = "  (use --unknown-tickers drop to drop and count them)" if "unknown ticker" in str(exc) else ""
        _fail(str(exc) + hint)
    store.save(out)
    print_summary(store, path=out)


@data_app.command("import-shared")
def import_shared_(
    root: Path = typer.Argument(..., help="the shared data folder (../shared/data)"),
    out: Path = typer.Option(..., "--out", "-o", help="directory to write the MarketStore to"),
) -> None:
    """The Magnificent-7 2013-2023 store with every source family of ROOT (see its README)."""
    from thesisgym.data.sources import import_shared

    try:
        store = import_shared(root)
    except (ValueError, OSError) as exc:
        _fail(exc)
    store.save(out)
    print_summary(store, path=out)


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
    config: Path | None = typer.Option(None, "--config", help="with --coverage: SplitConfig YAML"),
) -> None:
    """Validate a MarketStore directory and print its summary (and, with --coverage, prompt coverage)."""
    from thesisgym.data.validate import load_store

    try:
        store = load_store(path, validate=not no_validate)
    except (ValueError, OSError) as exc:
        _fail(exc)
    print_summary(store, path=path)
    if coverage:
        from rich.console import Console

        from thesisgym.build.splits import SplitConfig, build_splits
        from thesisgym.cli.build import print_coverage

        try:
            cfg = SplitConfig.from_yaml(config) if config else SplitConfig()
            # canonical prompts only: coverage is about the evidence, not the augmentation
            cfg = cfg.model_copy(update={"variations": 1, "eval_variations": 1})
            splits = build_splits(store, cfg, show_progress=False)
        except (ValueError, OSError) as exc:
            _fail(exc)
        print_coverage(Console(), splits.meta)
