"""Evaluation: leakage-safe backtests, metrics, baselines, policies, probes and the HTML report.

>>> from thesisgym.evaluate import evaluate, JsonlPolicy
>>> result = evaluate(JsonlPolicy("completions.jsonl"), dataset["test"], store, out_dir="eval/")
"""

from thesisgym.evaluate.backtest import Backtest, BacktestResult
from thesisgym.evaluate.baselines import buy_and_hold, label_oracle, momentum, random_decisions, truth_oracle
from thesisgym.evaluate.metrics import summary
from thesisgym.evaluate.policies import (
    CallablePolicy,
    HFPolicy,
    JsonlPolicy,
    OpenAIPolicy,
    Policy,
    confusion_matrix,
    decision_of,
    reasoning_metrics,
    score_rows,
)
from thesisgym.evaluate.probes import PROBES, flip_rate, probe_row, probe_rows
from thesisgym.evaluate.report import write_report
from thesisgym.evaluate.runner import EvalResult, evaluate, save_result

__all__ = [
    "PROBES",
    "Backtest",
    "BacktestResult",
    "CallablePolicy",
    "EvalResult",
    "HFPolicy",
    "JsonlPolicy",
    "OpenAIPolicy",
    "Policy",
    "buy_and_hold",
    "confusion_matrix",
    "decision_of",
    "evaluate",
    "flip_rate",
    "label_oracle",
    "momentum",
    "probe_row",
    "probe_rows",
    "random_decisions",
    "reasoning_metrics",
    "save_result",
    "score_rows",
    "summary",
    "truth_oracle",
    "write_report",
]
