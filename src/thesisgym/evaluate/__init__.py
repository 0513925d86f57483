"""Evaluation: leakage-safe backtests, metrics, baselines, policies, probes and the HTML report.

>>> from thesisgym.evaluate import EvalConfig, JsonlPolicy, evaluate
>>> result = evaluate(JsonlPolicy("completions.jsonl"), dataset["test"], store, EvalConfig(out_dir="eval/"))
"""

from thesisgym.evaluate.backtest import Backtest, BacktestResult
from thesisgym.evaluate.baselines import (
    bought_once,
    buy_and_hold,
    equal_weight_long,
    label_oracle,
    momentum,
    random_decisions,
    truth_oracle,
)
from thesisgym.evaluate.config import EvalConfig, ReportSection
from thesisgym.evaluate.metrics import summary
from thesisgym.evaluate.policies import (
    CallablePolicy,
    HFPolicy,
    JsonlPolicy,
    OpenAIPolicy,
    Policy,
    RememberingPolicy,
    confusion_matrix,
    decision_of,
    reasoning_metrics,
    score_rows,
)
from thesisgym.evaluate.probes import PROBES, flip_rate, probe_row, probe_rows
from thesisgym.evaluate.report import write_report
from thesisgym.evaluate.result import EvalResult
from thesisgym.evaluate.runner import EndpointError, evaluate, save_result
from thesisgym.evaluate.verdict import bottom_line, verdict

__all__ = [
    "PROBES",
    "Backtest",
    "BacktestResult",
    "CallablePolicy",
    "EndpointError",
    "EvalConfig",
    "EvalResult",
    "HFPolicy",
    "JsonlPolicy",
    "RememberingPolicy",
    "OpenAIPolicy",
    "Policy",
    "ReportSection",
    "bottom_line",
    "bought_once",
    "buy_and_hold",
    "confusion_matrix",
    "decision_of",
    "equal_weight_long",
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
    "verdict",
    "write_report",
]
