"""`EvalResult`: everything one evaluation produced, the object the report renders and `metrics.json` holds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thesisgym.evaluate.backtest import BacktestResult

# the policy name of a run with no policy (baselines only)
BASELINES_ONLY = "baselines"


@dataclass
class EvalResult:
    """Everything one evaluation produced; `write_report` renders it."""

    policy: str  # the policy's name, or "baselines" when no policy was evaluated
    metrics: pd.DataFrame  # strategies x metrics (policy first), with *_lo/*_hi intervals, decisions, dates
    backtests: dict[str, BacktestResult]
    ticker_stats: pd.DataFrame  # the policy's per-ticker metrics (first strategy's in baselines-only mode)
    scores: pd.DataFrame  # one row per completion
    reasoning: dict[str, float]
    confusion: pd.DataFrame
    probes: dict[str, dict[str, Any]]
    accuracy: pd.DataFrame = field(default_factory=pd.DataFrame)  # policy + accuracy baselines
    comparisons: dict[str, dict[str, float]] = field(default_factory=dict)  # policy vs baseline Sharpe
    skill: pd.DataFrame = field(default_factory=pd.DataFrame)  # IC, market-neutral book, mix (evaluate.skill)
    transport: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    heldout: EvalResult | None = None
    rows: list[dict] = field(default_factory=list)  # the evaluated dataset rows (examples in the report)
    completions: list[dict] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the run's settings (EvalConfig.settings() + sample)
    card: dict[str, Any] = field(default_factory=dict)  # where the theses came from (runner.describe_policy)
    seconds: float = float("nan")  # wall time of the evaluation
    sections: list[Any] = field(default_factory=list)  # extra report sections (config.ReportSection)
    report_path: Path | None = None

    @property
    def has_policy(self) -> bool:
        return self.policy in self.metrics.index and self.policy != BASELINES_ONLY

    def all_ticker_stats(self) -> dict[str, pd.DataFrame]:
        return {k: bt.ticker_stats() for k, bt in self.backtests.items()}

    def to_json(self) -> dict[str, Any]:
        def clean(x: Any) -> Any:
            if isinstance(x, (float, np.floating)):
                return float(x) if math.isfinite(x) else None
            if isinstance(x, (np.integer, np.bool_)):
                return x.item()
            if isinstance(x, dict):
                return {str(k): clean(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            return x

        return clean(
            {
                "policy": self.policy,
                "metrics": {
                    k: {m: float(v) for m, v in row.items()} for k, row in self.metrics.to_dict("index").items()
                },
                "accuracy": self.accuracy.to_dict("index") if len(self.accuracy) else {},
                "skill": self.skill.to_dict("index") if len(self.skill) else {},
                "comparisons": self.comparisons,
                "reasoning": self.reasoning,
                "confusion": self.confusion.to_dict("index"),
                "probes": self.probes,
                "transport": self.transport,
                "warnings": self.warnings,
                "heldout": self.heldout.to_json() if self.heldout is not None else None,
                "config": self.config,
                "card": self.card,
                "seconds": self.seconds,
            }
        )
