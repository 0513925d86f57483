"""Opening source files for the importers: text that is really text, JSON that is really JSON.

Every importer reads through these helpers, so a wrong file fails the same way whatever the family:
a binary file, a file that is not UTF-8, a header-only CSV or malformed JSON raise a ValueError whose
message starts with the file name (and, for JSON, the line and column), never a codec traceback or
an empty store.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

__all__ = ["check_text_file", "read_json", "read_json_records", "read_text", "read_zip_member"]

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
