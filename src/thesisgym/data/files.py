"""Opening source files for the importers: text that is really text, JSON that is really JSON, CSV
rows with their physical line numbers, and `EventsImport`, what every events importer returns.

Every importer reads through these helpers, so a wrong file fails the same way whatever the family:
a binary file, a file that is not UTF-8, a header-only CSV or malformed JSON raise a ValueError whose
message starts with the file name (and, for JSON, the line and column), never a codec traceback or
an empty store.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.validate import DataValidationError, Problem, raise_rows, require_columns

__all__ = [
    "EventsImport",
    "check_text_file",
    "date_column",
    "layout_columns",
    "number_column",
    "peek_columns",
    "read_json",
    "read_json_records",
    "read_table",
    "read_text",
    "read_zip_member",
    "require_layout",
]

_SNIFF = 8192


def _decode(path: Path, data: bytes, encoding: str) -> str:
    nul = data.find(b"\x00", 0, _SNIFF)
    if nul >= 0:
        raise ValueError(f"{path.name}: binary file (NUL byte at offset {nul}), expected text")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise ValueError(
            f"{path.name}: not {encoding.upper().replace('-SIG', '')} text (byte 0x{bad} at offset {exc.start}); "
            "re-encode the file as UTF-8"
        ) from exc


def read_text(path: str | Path, *, encoding: str = "utf-8-sig") -> str:
    """The file's text; binary and wrongly encoded files raise a ValueError naming the file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    return _decode(path, path.read_bytes(), encoding)


def check_text_file(path: str | Path) -> None:
    """Raise unless `path` is UTF-8 text (reads it once; cheap next to parsing it)."""
    read_text(path)


def read_json(path: str | Path, *, text: str | None = None) -> object:
    """Parsed JSON; malformed JSON raises a ValueError naming the file, line and column."""
    path = Path(path)
    text = read_text(path) if text is None else text
    if not text.strip():
        raise ValueError(f"{path.name}: empty file, expected JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path.name}, line {exc.lineno}, column {exc.colno}: malformed JSON ({exc.msg})"
        ) from exc


def read_zip_member(path: str | Path, suffix: str) -> tuple[str, str]:
    """(member name, text) of the single member of a zip archive whose name ends with `suffix`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.lower().endswith(suffix)]
            if len(names) != 1:
                raise ValueError(f"{path.name}: expected one *{suffix} member, found {names or 'none'}")
            return names[0], _decode(Path(f"{path.name}:{names[0]}"), zf.read(names[0]), "utf-8-sig")
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{path.name}: not a zip archive ({exc})") from exc


def read_json_records(path: str | Path, what: str) -> tuple[str, list]:
    """(source name, list) of a JSON list file or of the one .json member of a zip; each element must
    be an object, else a ValueError names the file (and member) and the record."""
    path = Path(path)
    if path.suffix.lower() == ".zip":
        member, text = read_zip_member(path, ".json")
        name = f"{path.name}:{member}"
        obj = read_json(Path(name), text=text)
    else:
        name, obj = path.name, read_json(path)
    if not isinstance(obj, list):
        raise ValueError(f"{name}: expected a JSON list of {what}, got {type(obj).__name__}")
    for k, r in enumerate(obj):
        if not isinstance(r, dict):
            raise ValueError(f"{name}, record {k}: expected an object, got {type(r).__name__}")
    return name, obj


@dataclass
class EventsImport:
    """An imported events frame plus the bookkeeping of what was counted or removed, and why."""

    events: pd.DataFrame
    source: str
    rows_read: int
    duplicates: int = 0  # rows repeating an earlier (ticker, title, day) row
    dropped_duplicates: int = 0
    dropped_other_tickers: int = 0  # rows whose ticker was outside `keep_tickers`
    notes: list[str] = field(default_factory=list)
    # family-specific counts (e.g. "stamped_by_acceptance_time", "restatements", "skipped_no_value")
    counts: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        extra = "".join(f", {k.replace('_', ' ')} {v}" for k, v in self.counts.items())
        return (
            f"{self.source}: {self.rows_read} rows read, {len(self.events)} kept, {self.duplicates} duplicates "
            f"({self.dropped_duplicates} dropped), {self.dropped_other_tickers} dropped for tickers not kept"
            + extra
        )

    def meta(self) -> dict:
        """The store.meta["imports"] entry of this import."""
        return {
            "file": self.source,
            "rows_read": self.rows_read,
            "kept": len(self.events),
            "duplicates": self.duplicates,
            "dropped_duplicates": self.dropped_duplicates,
            "dropped_other_tickers": self.dropped_other_tickers,
            **({"counts": dict(self.counts)} if self.counts else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


def _read_csv(path: Path, skipped: list[int] | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """All cells as strings plus the file line where each record starts (header = line 1).

    A record with the wrong number of fields raises, unless `skipped` is a list: then its line is
    appended there (for the caller to count) and the record is left out.

    The csv module rather than pandas: records may span lines (quoted newlines) and blank lines are
    skipped, and both would make "row index + 2" lie about where a bad cell is.
    """
    text = read_text(path)  # binary / non-UTF-8 files fail here, naming the file
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        header: list[str] | None = None
        rows: list[list[str]] = []
        starts: list[int] = []
        last_end = 0
        for record in reader:
            start, last_end = last_end + 1, reader.line_num
            if not record or all(not c.strip() for c in record):
                continue
            if header is None:
                header = [c.strip() for c in record]
                if start != 1:
                    raise ValueError(f"{path.name}, line {start}: the header must be on line 1")
                continue
            if len(record) != len(header):
                if skipped is not None:
                    skipped.append(start)
                    continue
                raise DataValidationError(
                    [Problem(path.name, start, "*", f"{len(record)} fields, header has {len(header)}", True)]
                )
            rows.append(record)
            starts.append(start)
    if header is None:
        raise ValueError(f"{path.name}: empty file (no header)")
    if not rows:
        raise ValueError(f"{path.name}: header only, no data rows (header: {', '.join(header)})")
    return pd.DataFrame(rows, columns=header, dtype=object), np.asarray(starts, dtype=np.int64)


def read_table(path: Path, skipped: list[int] | None = None) -> tuple[pd.DataFrame, np.ndarray | None]:
    """A CSV (all cells as strings, with the line each record starts on) or a Parquet file (no lines)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv(path, skipped)
    if suffix in (".parquet", ".pq"):
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        return pd.read_parquet(path), None
    raise ValueError(f"{path}: unsupported file type {suffix!r} (expected .csv or .parquet)")


def peek_columns(path: Path) -> list[str]:
    """The header of a CSV or Parquet file, without reading the rows."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if path.suffix.lower() != ".csv":
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} (expected .csv or .parquet)")
    with io.StringIO(read_text(path), newline="") as fh:
        return next(csv.reader(fh), [])


# --- columns of vendor layouts ----------------------------------------------------------------------
def layout_columns(raw: pd.DataFrame) -> dict[str, str]:
    """normalised name (lower, spaces -> _) -> the file's column name."""
    return {re.sub(r"\s+", "_", str(c).strip().lower()): str(c) for c in raw.columns}


def require_layout(path: Path, cols: Mapping[str, str], names: tuple[str, ...], layout: str) -> None:
    """Raise naming every column of `names` missing from `cols` (a `layout_columns` mapping); the
    message lists the file's own column names."""
    have = [k if k in names else v for k, v in cols.items()]
    require_columns(path.name, have, names, layout)


def date_column(path: Path, raw: pd.DataFrame, lines, col: str) -> pd.DatetimeIndex:
    """A YYYY-MM-DD column; a missing or malformed cell raises naming its line."""
    text = raw[col].astype(str).str.strip()
    parsed = pd.to_datetime(text, format="%Y-%m-%d", errors="coerce")
    raise_rows(
        path.name,
        lines,
        parsed.isna().to_numpy(),
        col,
        lambda i: (
            "missing date" if text.iloc[i] in ("", "None", "nan") else f"not a YYYY-MM-DD date {text.iloc[i]!r}"
        ),
    )
    return pd.DatetimeIndex(parsed)


def number_column(path: Path, raw: pd.DataFrame, lines, col: str | None, *, allow_none: bool) -> np.ndarray:
    """The column as floats ("None", "-", "" = missing); an optional column that is absent (`col`
    None, with `allow_none`) is all NaN."""
    if col is None and allow_none:
        return np.full(len(raw), np.nan)
    text = raw[col].astype(str).str.strip()
    none = text.isin(["", "None", "nan", "NaN", "-"]).to_numpy()
    vals = pd.to_numeric(text.where(~none, None), errors="coerce").to_numpy(dtype="float64")
    bad = np.isnan(vals) & ~none
    if not allow_none:
        bad |= none
    raise_rows(
        path.name, lines, bad, col, lambda i: "missing value" if none[i] else f"not a number {text.iloc[i]!r}"
    )
    return vals
