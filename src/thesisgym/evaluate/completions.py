"""Completions files: the one JSONL reader and the one join to a dataset split.

`thesisgym evaluate --completions`, `thesisgym score` and `JsonlPolicy` all read completions through
`read_completions` and attach them to dataset rows through `join_completions`, so a line means the
same row everywhere. A line is a JSON object with

- `completion`: a string, or TRL conversational messages (a list of {"role", "content": str});
- which row it answers, either `index`: the row number in the SPLIT (0-based, the position in the
  saved split, not in any subset that is evaluated), or the row's keys `ticker` + `asof`
  (YYYY-MM-DD) + `variation` (default 0). When both are given they must agree;
- optionally `probe` (default ""): the name of the probe whose rewritten prompt it answers.

Nothing is guessed: a malformed line names the file, line and field; unknown keys, out-of-range
indices, duplicates and (at decision time) missing rows are reported with their count and a first
example.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thesisgym.thesis import completion_text

Key = tuple[str, str, int, str]  # (ticker, asof YYYY-MM-DD, variation, probe)


@dataclass
class CompletionRecord:
    """One line of a completions file, validated."""

    line: int
    completion: Any  # str or list of chat messages
    index: int | None = None
    ticker: str | None = None
    asof: str | None = None
    variation: int = 0
    probe: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return completion_text(self.completion)


def row_key(row: dict, *, probe: str | None = None) -> Key:
    """The join key of a dataset row (its `probe` field, or `probe` when given)."""
    return (
        str(row["ticker"]),
        str(row["asof"])[:10],
        int(row.get("variation", 0) or 0),
        str(probe if probe is not None else row.get("probe", "") or ""),
    )


def _check_completion(value: Any, where: str) -> None:
    if isinstance(value, str):
        return
    if isinstance(value, list) and value and all(
        isinstance(m, dict) and isinstance(m.get("content"), str) for m in value
    ):
        return
    raise ValueError(
        f"{where}: field 'completion' must be a string or a list of chat messages with string 'content', "
        f"got {type(value).__name__} {str(value)[:60]!r}"
    )


def read_completions(path: str | Path) -> list[CompletionRecord]:
    """Parse and validate a completions JSONL file (see the module docstring for the fields)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: completions file does not exist")
    out: list[CompletionRecord] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            if "completion" not in rec:
                raise ValueError(f"{where}: missing field 'completion'")
            _check_completion(rec["completion"], where)
            idx = rec.get("index")
            if idx is not None and (isinstance(idx, bool) or not isinstance(idx, int) or idx < 0):
                raise ValueError(f"{where}: field 'index' must be a non-negative integer, got {idx!r}")
            has_keys = "ticker" in rec or "asof" in rec
            if has_keys and not ("ticker" in rec and "asof" in rec):
                raise ValueError(f"{where}: 'ticker' and 'asof' go together; got only one of them")
            if idx is None and not has_keys:
                raise ValueError(f"{where}: needs 'index' (row of the split) or 'ticker' + 'asof'")
            for name in ("ticker", "asof", "probe"):
                if name in rec and not isinstance(rec[name], str):
                    raise ValueError(f"{where}: field {name!r} must be a string, got {rec[name]!r}")
            var = rec.get("variation", 0)
            if isinstance(var, bool) or not isinstance(var, int) or var < 0:
                raise ValueError(f"{where}: field 'variation' must be a non-negative integer, got {var!r}")
            known = {"completion", "index", "ticker", "asof", "variation", "probe"}
            out.append(
                CompletionRecord(
                    line=lineno,
                    completion=rec["completion"],
                    index=idx,
                    ticker=rec.get("ticker"),
                    asof=rec["asof"][:10] if "asof" in rec else None,
                    variation=var,
                    probe=rec.get("probe", "") or "",
                    extra={k: v for k, v in rec.items() if k not in known},
                )
            )
    if not out:
        raise ValueError(f"{path}: no completions")
    return out


def _problem(kind: str, items: list[str]) -> str:
    return f"{len(items)} {kind} (first: {items[0]})"


def split_keys(dataset: Any) -> list[Key]:
    """Keys of every row of a split (HF Dataset or list of dicts), in row order."""
    if hasattr(dataset, "column_names"):
        missing = {"ticker", "asof"} - set(dataset.column_names)
        if missing:
            raise ValueError(f"dataset: missing column(s) {sorted(missing)} to join completions on")
        n = len(dataset)
        var = dataset["variation"] if "variation" in dataset.column_names else [0] * n
        return [
            (str(t), str(a)[:10], int(v or 0), "")
            for t, a, v in zip(dataset["ticker"], dataset["asof"], var, strict=True)
        ]
    return [row_key(r, probe="") for r in dataset]


def join_completions(
    records: Sequence[CompletionRecord],
    keys: Sequence[Key],
    *,
    path: str | Path,
    allow_duplicates: bool = False,
) -> tuple[dict[Key, CompletionRecord], list[int]]:
    """Attach each record to a split row.

    Returns ({key with probe: record}, [split row index of each record]). Raises one ValueError
    listing every kind of problem by count and first example: duplicate rows in the split, indices
    out of range, index/keys that disagree, keys not in the split, two records for one row (unless
    `allow_duplicates`, as when scoring several samples per prompt; the dict then keeps the first).
    """
    position: dict[Key, int] = {}
    dup_rows: list[str] = []
    for i, k in enumerate(keys):
        if k in position:
            dup_rows.append(f"rows {position[k]} and {i} are both {k[:3]}")
        else:
            position[k] = i
    if dup_rows:
        raise ValueError(f"dataset: {_problem('duplicate (ticker, asof, variation) rows', dup_rows)}")
    out: dict[Key, CompletionRecord] = {}
    rows: list[int] = []
    bad_index: list[str] = []
    disagree: list[str] = []
    unknown: list[str] = []
    dups: list[str] = []
    first_line: dict[Key, int] = {}
    for rec in records:
        where = f"line {rec.line}"
        if rec.index is not None:
            if rec.index >= len(keys):
                bad_index.append(f"{where}: index {rec.index} (split has {len(keys)} rows)")
                continue
            base = keys[rec.index]
            if rec.ticker is not None and (rec.ticker, rec.asof, rec.variation) != base[:3]:
                disagree.append(
                    f"{where}: index {rec.index} is {base[:3]} but the line says "
                    f"{(rec.ticker, rec.asof, rec.variation)}"
                )
                continue
            idx = rec.index
        else:
            base = (str(rec.ticker), str(rec.asof), rec.variation, "")
            if base not in position:
                unknown.append(f"{where}: ticker={rec.ticker} asof={rec.asof} variation={rec.variation}")
                continue
            idx = position[base]
        key = (*base[:3], rec.probe)
        if key in out and not allow_duplicates:
            dups.append(f"lines {first_line[key]} and {rec.line} both answer {key}")
            continue
        if key not in out:
            out[key], first_line[key] = rec, rec.line
        rows.append(idx)
    problems = [
        _problem(kind, items)
        for kind, items in (
            ("indices out of range", bad_index),
            ("lines whose index and keys disagree", disagree),
            ("lines with keys not in the split", unknown),
            ("duplicate completions", dups),
        )
        if items
    ]
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return out, rows
