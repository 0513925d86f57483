"""Experiments built on the public pipeline: paired checkpoint comparisons and Trade-R1 in miniature."""

from thesisgym.experiments.compare import (
    CHANGE_KEYS,
    change_table,
    format_change_table,
    mean_ci,
    paired_change,
    score_with_s,
)

__all__ = ["CHANGE_KEYS", "change_table", "format_change_table", "mean_ci", "paired_change", "score_with_s"]
