"""Write a built split in the dataset format of another RL stack (`thesisgym export`).

- `verl`: parquet rows `{data_source, prompt: [{role, content}], ability, reward_model: {style:
  "rule", ground_truth}, extra_info}` (verl's RLHFDataset reads `prompt` as chat messages and
  hands `reward_model.ground_truth` and `extra_info` to the reward function).
- `openrlhf`: JSONL rows `{prompt: [{role, content}], label}` for `--input_key prompt
  --label_key label --apply_chat_template`; OpenRLHF passes `label` to the reward function.

Both carry the same ground truth, `core.ground_truth_json(row)`: exactly the verifier's fields
(evidence items, sections, label, forward return and volatility). Rows without a complete
forward window (no label or forward return) cannot be scored by the market or decision rewards;
they are skipped and counted unless `keep_incomplete`. The file is written to a temporary name
and renamed, so an interrupted export leaves no partial file.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thesisgym.integrations.core import ground_truth_json
from thesisgym.integrations.verl import DATA_SOURCE, export_row

__all__ = ["FORMATS", "ExportResult", "complete_window", "export_rows"]

FORMATS = ("verl", "openrlhf")


@dataclass(frozen=True)
class ExportResult:
    path: Path
    written: int
    skipped_incomplete: int


def complete_window(row: Mapping[str, Any]) -> bool:
    """True when the row has a label and finite forward return and volatility."""

    def finite(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    return row.get("label") is not None and finite(row.get("fwd_return")) and finite(row.get("fwd_vol"))


def export_rows(
    rows: Iterable[Mapping[str, Any]],
    out: Path,
    *,
    fmt: str,
    split: str,
    recipe: str | None = None,
    data_source: str = DATA_SOURCE,
    keep_incomplete: bool = False,
) -> ExportResult:
    """Convert `rows` (a built split, in order) and write them to `out` atomically."""
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {FORMATS}, got {fmt!r}")
    if recipe and fmt != "verl":
        raise ValueError("recipe: only verl rows carry a recipe (extra_info); OpenRLHF's reward "
                         "function reads $THESISGYM_RECIPE")
    records, skipped = [], 0
    for i, row in enumerate(rows):
        if not keep_incomplete and not complete_window(row):
            skipped += 1
            continue
        if fmt == "verl":
            records.append(export_row(row, split=split, index=i, data_source=data_source, recipe=recipe))
        else:
            verl_row = export_row(row, split=split, index=i, data_source=data_source, recipe=recipe)
            records.append({"prompt": verl_row["prompt"], "label": ground_truth_json(row, where=f"row {i}")})
    if not records:
        raise ValueError(f"split {split!r}: no row to export ({skipped} without a complete forward window)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        if fmt == "verl":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(records), tmp)
        else:
            with tmp.open("w", encoding="utf-8") as fh:
                for record in records:
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportResult(out, len(records), skipped)
