"""CLI commands for the build stage: `thesisgym build` (store -> train/val/test/heldout datasets) and
`thesisgym show-prompt` (print one rendered prompt of a built directory).

`build` reads a MarketStore directory, cuts it with a SplitConfig (YAML file and/or flags; flags win),
builds the contexts with a rich progress bar, saves them with `save_to_disk` plus build_meta.json, and
prints the class mix per split and a truncated sample prompt, so a user sees at once whether the labels
are balanced and what the model will read. Heavy imports happen inside the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from thesisgym.cli.common import fail
from thesisgym.cli.options import config_command

# option name -> SplitConfig field: these options take their default (and, where the field has one, help)
# from SplitConfig (cli/options.py); given ones override --config
SPLIT_OPTIONS = {"variations": "variations", "stride": "stride", "token_budget": "token_budget",
                 "heldout_tickers": "heldout_tickers", "embargo": "embargo_days", "seed": "seed",
                 "train_end": "train_end", "val_end": "val_end", "label_mode": "label_mode"}


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("build", cls=config_command("thesisgym.dataset.splits:SplitConfig", SPLIT_OPTIONS))(build)
    app.command("show-prompt")(show_prompt)


def _fail(problem: str | Exception) -> None:
    fail(problem)  # the one CLI error printer: "error: ...", exit 2, option names for an ArgumentError


def _period_end(value: str | None, flag: str) -> str | float | None:
    """'0.6' -> 0.6 (fraction of the calendar); '2021-06-30' -> the date string."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import pandas as pd

    try:
        pd.Timestamp(value)
    except ValueError:
        _fail(f"{flag} {value!r}: expected a fraction like 0.6 or a date like 2021-06-30")
    return value


def _heldout(value: str | None) -> int | list[str] | None:
    """'3' -> draw 3 tickers; 'AAA,BBB' -> exactly those."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    return [t.strip() for t in value.split(",") if t.strip()]


def build(
    store: Path = typer.Option(..., "--store", help="MarketStore directory (from `thesisgym data ...`)"),
    out: Path = typer.Option(..., "--out", help="output directory (DatasetDict + build_meta.json)"),
    config: str | None = typer.Option(
        None, "--config", help="SplitConfig YAML, or a preset name (mag7); flags below override it"
    ),
    variations: int | None = typer.Option(None, "--variations"),
    stride: int | None = typer.Option(None, "--stride"),
    token_budget: int | None = typer.Option(None, "--token-budget", help="max approximate prompt tokens"),
    heldout_tickers: str | None = typer.Option(None, "--heldout-tickers", help="a count, or a comma list of tickers"),
    embargo: int | None = typer.Option(None, "--embargo"),
    seed: int | None = typer.Option(None, "--seed", help="random seed of the build"),
    train_end: str | None = typer.Option(None, "--train-end"),
    val_end: str | None = typer.Option(None, "--val-end"),
    label_mode: str | None = typer.Option(None, "--label-mode", help="forward or paper (the paper's leaky labels)"),
    sample_chars: int = typer.Option(
        1500, "--sample-chars", help="characters of the sample prompt to print (0: none)"
    ),
) -> None:
    """Build train/val/test/heldout context datasets from a MarketStore (time splits with an embargo)."""
    from rich.console import Console

    overrides = {
        "variations": variations,
        "stride": stride,
        "token_budget": token_budget,
        "heldout_tickers": _heldout(heldout_tickers),
        "embargo_days": embargo,
        "seed": seed,
        "train_end": _period_end(train_end, "--train-end"),
        "val_end": _period_end(val_end, "--val-end"),
        "label_mode": label_mode,
    }
    cfg = _split_config(config, overrides)
    meta, sample = _run_build(store, out, cfg)
    console = Console()
    _print_class_mix(console, out, meta)
    print_coverage(console, meta)
    if sample_chars > 0 and sample is not None:
        _print_prompt(console, sample, max_chars=sample_chars, user_only=True)


def _split_config(config: str | None, overrides: dict):
    from thesisgym.dataset.splits import SplitConfig

    try:
        if config is not None:
            return SplitConfig.from_yaml(config, **overrides)
        return SplitConfig.model_validate({k: v for k, v in overrides.items() if v is not None})
    except (ValueError, OSError) as exc:
        _fail(exc)


def _run_build(store: Path, out: Path, cfg) -> tuple[dict, dict | None]:
    """Build and save the splits; (meta, the first training row or None)."""
    import shutil
    import tempfile

    import datasets

    from thesisgym.data.store import MarketStore
    from thesisgym.dataset.splits import build_splits

    datasets.disable_progress_bars()  # our own rich bar tracks the build; save_to_disk's tqdm is noise
    # Stream each split through a memory-mapped Arrow file beside `out`: peak memory stays at one
    # ticker's rows however many variations are asked for; the cache goes once the split is saved.
    out.parent.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix=f".{out.name}.build-", dir=out.parent))
    try:
        market = MarketStore.load(store)
        splits = build_splits(market, cfg, out=out, store_path=store, cache_dir=cache, show_progress=True)
        return splits.meta, (splits["train"][0] if len(splits["train"]) else None)  # read before the cache goes
    except ValueError as exc:
        _fail(exc)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _print_class_mix(console, out: Path, meta: dict) -> None:
    from rich.table import Table

    from thesisgym.schema import LABELS, SHORT_LABELS

    cuts = ", ".join(f"{c:.3f}" for c in meta["thresholds"]["cuts"])
    table = Table(title=f"{out}: class mix per split (cut points fitted on train: {cuts})")
    for col in ("split", "period", "tickers", "days", "rows", *(SHORT_LABELS[lab] for lab in LABELS)):
        table.add_column(col, justify="left" if col in ("split", "period") else "right")
    for name, counts in meta["counts"].items():
        period = meta["periods"]["test" if name == "heldout" else name]
        mix = meta["class_mix"][name]
        table.add_row(name, f"{period[0]}..{period[1]}", str(counts["tickers"]), f"{counts['days']:,}",
                      f"{counts['rows']:,}", *(f"{100 * mix[lab]:.1f}%" for lab in LABELS))
    console.print(table)
    if meta["heldout_tickers"]:
        console.print(f"held-out tickers: {', '.join(meta['heldout_tickers'])}")
    unlabelled = {k: v for k, v in meta["unlabelled"].items() if v}
    if unlabelled:
        console.print(
            "ticker-days left out for want of a label (the last 15 days of a period, or too little history): "
            + ", ".join(f"{k} {v:,}" for k, v in unlabelled.items()),
            highlight=False,
        )


def print_coverage(console, meta: dict) -> None:
    """The coverage table and warnings stored in a build meta (thesisgym.data.quality)."""
    import pandas as pd
    from rich.text import Text

    from thesisgym.data.quality import render_coverage

    console.print(
        render_coverage(pd.DataFrame(meta.get("coverage", [])), title="coverage per ticker x split")
    )
    for w in meta.get("coverage_warnings", []):
        console.print(Text("warning: ", style="yellow") + Text(w), highlight=False)
    q = meta.get("store_quality")
    if q:
        cd = q.get("content_dates") or {}
        console.print(
            f"store quality: {q.get('near_duplicates_merged', 0):,} near-duplicate items merged, "
            f"{cd.get('suspects', 0):,} items naming a later period "
            f"({'quarantined' if cd.get('mode', 'quarantine') == 'quarantine' else 'kept, flagged'})",
            highlight=False,
        )


def _print_prompt(console, row: dict, *, max_chars: int, user_only: bool = False) -> None:
    from rich.rule import Rule
    from rich.text import Text

    console.print(
        Rule(
            f"{row['split']} {row['ticker']} {row['asof']} variation {row['variation']}  label={row['label']}"
        )
    )
    text = row["prompt"][-1]["content"] if user_only else row["prompt_text"]
    cut = (
        text
        if max_chars <= 0 or len(text) <= max_chars
        else text[:max_chars] + f"\n... ({len(text) - max_chars:,} more characters)"
    )
    console.print(Text(cut), highlight=False, soft_wrap=True)


def show_prompt(
    path: Path = typer.Argument(..., help="a directory written by `thesisgym build`"),
    split: str = typer.Option("train", "--split"),
    index: int = typer.Option(0, "--index"),
    max_chars: int = typer.Option(0, "--max-chars", help="truncate the prompt (0: print all)"),
    user_only: bool = typer.Option(False, "--user-only", help="skip the (constant) system prompt"),
) -> None:
    """Print one rendered prompt (system + user) of a built dataset, with its label."""
    from rich.console import Console

    from thesisgym.dataset.splits import load_splits

    try:
        splits = load_splits(path)
    except ValueError as exc:
        _fail(exc)
    if split not in splits:
        _fail(f"{path}: no split {split!r} (have {', '.join(splits)})")
    ds = splits[split]
    if not 0 <= index < len(ds):
        _fail(f"{path} split {split}: index {index} out of range (0..{len(ds) - 1})")
    _print_prompt(Console(), ds[index], max_chars=max_chars, user_only=user_only)
