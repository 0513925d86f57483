"""A tool-using analyst against the single-prompt analyst, on the same held-out rows (`thesisgym experiment tools`).

Both start from the same pretrained base and get the same SFT budget on the same market:

1. single-prompt analyst: the demo's pipeline (template-teacher theses of the assembled prompt, SFT);
2. tool analyst: the template teacher looks its evidence up with the point-in-time tools (one call per
   section the row's context had; `thesisgym.teachers.tool_traces`), writes from the tools' ledger, the
   rejection filter keeps the verified traces, SFT trains the tool calls and the thesis (never the tool
   outputs), then GRPO through TRL's `environment_factory` (`thesisgym.tools.MarketToolEnv`) with the
   demo's reward stack scored against each rollout's own tool results;
3. every checkpoint writes one thesis per held-out test row (greedy); a tool thesis is verified against
   the items its own tool calls returned (`thesisgym.evaluate.tool_agent`), a single-prompt thesis against
   its prompt.

Per policy, with 95 % bootstrap intervals over the rows: grounding, hallucination rate, valid decisions,
decision accuracy, tool calls per thesis and tokens; and the paired differences tool minus single-prompt.
Then the decision skill (`experiments.decision_skill`, through `evaluate.skill`): IC pooled and mean per
date, market-neutral book, accuracy paired against the train majority class and always-BUY, the decision
mix, each with a block-bootstrap-over-dates interval.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from thesisgym.experiments.compare import (
    SKILL_HEAD,
    decision_skill,
    mean_ci,
    paired_change,
    score_with_s,
    skill_cells,
    train_majority,
    with_row_fields,
)
from thesisgym.schema import StrictModel

__all__ = ["ToolExperimentConfig", "format_tool_table", "run_tool_experiment"]

ROW_METRICS: tuple[str, ...] = ("grounding", "hallucination_rate", "decision_valid", "decision_correct", "s")


class ToolExperimentConfig(StrictModel):
    """Sizes of the comparison; `demo` overrides the shared market/model/SFT sizes (`DemoConfig` fields)."""

    out: str = "tools_out"
    seed: int = 0
    grpo_steps: int = Field(6, ge=0, description="GRPO steps of the tool analyst through the environment (0 = none)")
    eval_rows: int = Field(24, ge=2, description="held-out test rows both analysts write for")
    max_items: int = Field(3, gt=0, description="items one tool call may return")
    max_rounds: int = Field(2, gt=0, description="rounds of tool calls before the thesis")
    demo: dict[str, Any] = Field(default_factory=dict, description="DemoConfig field overrides")


def run_tool_experiment(config: ToolExperimentConfig, *, log: Callable[[str], None] = print) -> dict:
    """Train both analysts (or reuse finished checkpoints in `out`), evaluate, write results.json and table.md."""
    import datasets

    from thesisgym.experiments.demo import (
        DemoConfig,
        build_market_data,
        demo_policy,
        distil_sft_data,
        spread_rows,
        train_sft,
    )

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    demo = DemoConfig(**{"out": str(out), "seed": config.seed, "curve_rows": 0, **config.demo})
    t0 = time.perf_counter()
    log("==> market + datasets")
    store, splits, data_dir = build_market_data(demo, out, log=log)
    single = out / "single" / "final"
    if not (single / "config.json").exists():
        log("==> single-prompt analyst: distil + SFT")
        sft_dir, _ = distil_sft_data(demo, splits, out, log=log)
        train_sft(demo, splits, sft_dir, out / "single", log=log)
    tool_sft = out / "tool-sft" / "final"
    if not (tool_sft / "config.json").exists():
        log("==> tool analyst: tool traces + SFT")
        traces = distil_tool_sft_data(config, demo, splits, store, out, log=log)
        train_sft(demo, splits, traces, out / "tool-sft", log=log)
    tool_final = tool_sft
    if config.grpo_steps:
        tool_final = _tool_grpo(config, demo, tool_sft, data_dir, out, log=log)
    rows = spread_rows(splits["test"], config.eval_rows)
    log(f"==> evaluate on {len(rows)} held-out test rows")
    results = {"single-prompt": _single_scores(demo_policy(single, demo, name="single-prompt"), rows)}
    for name, path in (("tool SFT", tool_sft), ("tool GRPO", tool_final) if config.grpo_steps else (None, None)):
        if name:
            results[name] = _tool_scores(path, store, rows, config, demo)
    results = {name: with_row_fields(scored, rows) for name, scored in results.items()}
    table = summarize(results, seed=config.seed, majority=train_majority(splits["train"]))
    summary = {"config": config.model_dump(), "rows": len(rows), "table": table,
               "seconds": round(time.perf_counter() - t0, 1)}
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=float))
    (out / "table.md").write_text("\n".join(format_tool_table(table)) + "\n")
    return summary


def distil_tool_sft_data(config: ToolExperimentConfig, demo: Any, splits: dict, store: Any, out: Path, *,
                         log: Callable[[str], None] = print) -> Path:
    """Tool traces of the demo's compact teacher, saved as an SFT set; returns its directory."""
    from datasets import DatasetDict

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.tool_traces import distill_tool_traces
    from thesisgym.tools import ToolLimits

    teacher = TemplateTeacher(noise=0.15, wrong_decision_rate=0.2, seed=demo.seed, bullets=(1, 1),
                              quote_words=(3, 5), think=False, compact=True)
    teacher.calibrate(list(splits["train"]))
    rows = list(splits["train"].select(range(min(len(splits["train"]), 4 * demo.sft_steps * demo.sft_batch_size))))
    result = distill_tool_traces(rows, store, teacher, limits=ToolLimits(max_items=config.max_items),
                                 n=demo.distill_n, min_grounding=0.75, decision_tolerance=1, seed=demo.seed)
    path = out / "tool_traces"
    DatasetDict({"train": result.dataset}).save_to_disk(str(path))
    log(f"    kept {len(result.dataset)} tool traces, acceptance rate {result.stats['acceptance_rate']:.0%} -> {path}")
    return path


def _tool_grpo(config: ToolExperimentConfig, demo: Any, start: Path, data_dir: Path, out: Path, *,
               log: Callable[[str], None]) -> Path:
    from thesisgym.experiments.demo import DEMO_REWARDS, drop_checkpoints, grpo_config
    from thesisgym.train import CompactProgress, RewardConfig, run_grpo
    from thesisgym.train.config import ToolRunConfig

    final = out / "tool-grpo" / "final"
    if (final / "config.json").exists():
        return final
    log("==> tool analyst: GRPO through the tool environment")
    cfg = grpo_config(demo.model_copy(update={"grpo_steps": config.grpo_steps}), start, data_dir, out / "tool-grpo",
                      RewardConfig(funcs=list(DEMO_REWARDS), weights=list(DEMO_REWARDS.values())))
    cfg = cfg.model_copy(update={"tools": ToolRunConfig(max_calls=config.max_rounds, max_items=config.max_items),
                                 "max_completion_length": 3 * demo.max_completion_length})
    final = run_grpo(cfg, callbacks=[CompactProgress(label="tool GRPO")])
    drop_checkpoints(out / "tool-grpo")
    return final


def _single_scores(policy: Any, rows: list[dict]) -> list[dict]:
    theses = policy.decide(rows)
    return [{**s, "tool_calls": 0.0, "tool_tokens": 0.0} for s in score_with_s(theses, rows)]


def _tool_scores(path: Path, store: Any, rows: list[dict], config: ToolExperimentConfig, demo: Any) -> list[dict]:
    from thesisgym.evaluate.tool_agent import ToolAgent
    from thesisgym.tools import ToolLimits

    agent = ToolAgent(path, store, max_new_tokens=demo.max_completion_length, max_rounds=config.max_rounds,
                      limits=ToolLimits(max_items=config.max_items), seed=demo.seed)
    episodes = agent.run(rows)
    scored = score_with_s([ep.thesis for ep in episodes], [ep.row() for ep in episodes])
    return [{**s, "tool_calls": float(ep.tools.usage.calls), "failed_calls": float(ep.tools.usage.failed),
             "tool_tokens": float(ep.tool_tokens), "generated_tokens": float(ep.generated_tokens)}
            for s, ep in zip(scored, episodes, strict=True)]


def summarize(results: dict[str, list[dict]], *, seed: int = 0, majority: str | None = None) -> list[dict]:
    """One row per policy: mean [95 % CI] per metric, the paired difference against the single-prompt one,
    and the decision skill (`experiments.decision_skill`; accuracy paired against `majority`, the train
    split's majority class, and always-BUY)."""
    base = results.get("single-prompt")
    table = []
    for name, scored in results.items():
        row: dict[str, Any] = {"policy": name, "rows": len(scored)}
        for m in (*ROW_METRICS, "tool_calls", "tool_tokens"):
            mean, lo, hi, n = mean_ci([s.get(m, math.nan) for s in scored], seed=seed)
            row[m] = {"mean": mean, "lo": lo, "hi": hi, "n": n}
            if base is not None and name != "single-prompt" and m in ROW_METRICS:
                row[f"vs_single.{m}"] = paired_change([s.get(m, math.nan) for s in base],
                                                      [s.get(m, math.nan) for s in scored], seed=seed)
        row["skill"] = decision_skill(scored, majority=majority, seed=seed)
        table.append(row)
    return table


def _cell(c: Any) -> str:
    if not isinstance(c, dict) or not math.isfinite(c.get("mean", c.get("change", math.nan))):
        return "n/a"
    if "change" in c:
        return f"{c['change']:+.2f} [{c['lo']:+.2f}, {c['hi']:+.2f}]"
    return f"{c['mean']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]"


def format_tool_table(table: list[dict]) -> list[str]:
    """Markdown: one row per policy, 95 % bootstrap intervals; then the paired differences vs single-prompt."""
    head = ("policy", "rows", "grounding", "hallucination", "valid decisions", "accuracy", "s", "tool calls",
            "tool tokens")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        cells = (r["policy"], str(r["rows"]), *(_cell(r[m]) for m in (*ROW_METRICS[:4], "s", "tool_calls",
                                                                     "tool_tokens")))
        lines.append("| " + " | ".join(cells) + " |")
    diffs = [r for r in table if "vs_single.grounding" in r]
    if diffs:
        lines += ["", "| paired difference vs single-prompt | " + " | ".join(ROW_METRICS) + " |",
                  "|---|" + "---|" * len(ROW_METRICS)]
        for r in diffs:
            lines.append(f"| {r['policy']} | " + " | ".join(_cell(r[f"vs_single.{m}"]) for m in ROW_METRICS) + " |")
    if any("skill" in r for r in table):  # 95 % intervals from a block bootstrap over dates; n/a where undefined
        lines += ["", "| policy | " + " | ".join(SKILL_HEAD) + " |", "|---|" + "---|" * len(SKILL_HEAD)]
        lines += [f"| {r['policy']} | " + " | ".join(skill_cells(r.get("skill", {}))) + " |" for r in table]
    return lines
