"""The whole pipeline in one call, offline on CPU: the `thesisgym demo` command.

synthesize a market -> build embargoed datasets -> distil SFT data from the template teacher ->
SFT the `tiny` model -> GRPO it with the verifiable reward stack -> evaluate on held-out days
(backtest vs baselines and the true-expected-return oracle, reasoning metrics, probes) -> HTML report.

Every stage is the same public function a researcher would call by hand (`generate_market`,
`build_splits`, `distill`, `run_sft`, `run_grpo`, `evaluate`), so the demo doubles as a worked
example. Sizes are one knob (`quick`) because the point is to see the pipeline run end to end, not to
train a good analyst on two CPU cores: the report says honestly how weak the tiny policy is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class DemoConfig(BaseModel):
    """Sizes of the demo run. `quick()` is the 3-minute smoke version."""

    model_config = ConfigDict(extra="forbid")

    out: str = "demo_out"
    seed: int = 0
    tickers: int = Field(12, ge=3)
    days: int = Field(520, ge=120)
    stride: int = Field(2, ge=1, description="keep every k-th trading day in the datasets")
    token_budget: int = Field(800, gt=400, description="approximate prompt tokens (the instructions take ~300)")
    heldout_tickers: int = Field(2, ge=0)
    distill_n: int = Field(4, ge=1)
    sft_steps: int = Field(200, ge=1)
    sft_learning_rate: float = Field(3e-3, gt=0)
    grpo_steps: int = Field(8, ge=1)
    num_generations: int = Field(4, ge=2)
    # the distilled theses run to ~300-400 tokens of the tiny tokenizer: a shorter budget cuts the
    # decision (the last tag) off even a perfect imitation
    max_completion_length: int = Field(448, gt=16)
    eval_rows: int = Field(48, ge=1, description="test-split rows the trained policy writes theses for")
    # Greedy decoding makes a model this small loop inside a quote until the budget runs out (no
    # decision); seeded sampling, as in GRPO's rollouts, is how the policy was trained to write.
    eval_temperature: float = Field(0.7, ge=0.0)
    probes: str = "anon,digits"

    @classmethod
    def quick(cls, **overrides: object) -> DemoConfig:
        base = dict(tickers=6, days=300, stride=2, heldout_tickers=1, sft_steps=40, grpo_steps=2,
                    eval_rows=16, probes="digits")
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**base)


# Compact contexts: a 3.5M-parameter model on two CPU cores cannot read Trading-R1's 3k-token
# prompts or write its 4-7 bullets per section in minutes, so the demo shows fewer bars and items
# and asks the teacher for one short-quoted bullet per section. The pipeline is the same at any size.
DEMO_CONTEXT = dict(bars=3, indicators=False, news_buckets=((0, 3, 3), (4, 10, 2), (11, 30, 1)), fundamentals_items=2,
                    insider_items=2, analyst_items=2, macro_items=2,
                    section_keep_prob=0.35)


def run_demo(config: DemoConfig, *, log: Callable[[str], None] = print) -> dict:
    """Run every stage; returns a summary dict (also written to `<out>/summary.json`)."""
    import datasets
    from datasets import DatasetDict

    from thesisgym.context.build import ContextConfig
    from thesisgym.data import generate_market
    from thesisgym.data.synth import SynthConfig
    from thesisgym.distill import distill
    from thesisgym.evaluate import HFPolicy, evaluate
    from thesisgym.evaluate.report import verdict
    from thesisgym.splits import SplitConfig, build_splits
    from thesisgym.teachers import TemplateTeacher
    from thesisgym.train import (
        CompactProgress,
        DataConfig,
        GRPORunConfig,
        ModelConfig,
        RewardConfig,
        SFTRunConfig,
        run_grpo,
        run_sft,
    )

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()  # the stage lines and one compact bar per trainer say enough
    timings: dict[str, float] = {}
    t_all = time.perf_counter()

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        log(f"[bold cyan]==> {name}[/]")
        t0 = time.perf_counter()
        yield
        timings[name] = round(time.perf_counter() - t0, 1)

    with stage("market"):
        store = generate_market(SynthConfig(n_tickers=config.tickers, n_days=config.days, seed=config.seed, market="A"))
        store.save(out / "market")
        log(f"    synthetic market A: {len(store.tickers)} tickers x {len(store.dates)} days, {len(store.events)} events -> {out / 'market'}")

    with stage("datasets"):
        split_cfg = SplitConfig(stride=config.stride, token_budget=config.token_budget,
                                heldout_tickers=config.heldout_tickers, seed=config.seed,
                                context=ContextConfig(**DEMO_CONTEXT))
        data_dir = out / "dataset"
        splits = build_splits(store, split_cfg, out=data_dir, store_path=(out / "market").resolve(), show_progress=False)
        log("    " + ", ".join(f"{k}: {len(v)}" for k, v in splits.items()) + f" rows -> {data_dir}")

    with stage("distil (template teacher, rejection sampling)"):
        # calibrated cut points give the teacher the label's class mix; within one class of the label
        # counts as agreement because the rule-based teacher reads the evidence, not the future
        teacher = TemplateTeacher(noise=0.15, wrong_decision_rate=0.2, seed=config.seed, bullets=(1, 1),
                                  quote_words=(3, 8), think=False)
        teacher.calibrate(list(splits["train"]))
        result = distill(splits["train"], teacher, n=config.distill_n, min_grounding=0.75, decision_tolerance=1,
                         seed=config.seed)
        sft_dir = out / "sft_data"
        DatasetDict({"train": result.dataset}).save_to_disk(str(sft_dir))
        acc = result.stats["acceptance_rate"]
        log(f"    kept {result.stats['kept_rows']} theses, acceptance rate {acc:.0%} -> {sft_dir}")

    with stage("SFT (tiny Qwen2 + local BPE tokenizer, TRL SFTTrainer)"):
        sft_cfg = SFTRunConfig(
            output_dir=str(out / "sft"), model=ModelConfig(name_or_path="tiny"),
            data=DataConfig(dataset=str(sft_dir), split="train"), seed=config.seed, max_steps=config.sft_steps,
            learning_rate=config.sft_learning_rate, warmup_ratio=0.05, per_device_train_batch_size=4,
            logging_steps=max(1, config.sft_steps // 5), save_steps=10_000, report_to="none",
            max_length=2 * config.token_budget + 2 * config.max_completion_length,
        )
        sft_model = run_sft(sft_cfg, callbacks=[CompactProgress(label="SFT")])

    with stage("GRPO (TRL GRPOTrainer, verifiable reward stack)"):
        grpo_cfg = GRPORunConfig(
            output_dir=str(out / "grpo"), model=ModelConfig(name_or_path=str(sft_model)),
            data=DataConfig(dataset=str(data_dir), split="train"), seed=config.seed, max_steps=config.grpo_steps,
            learning_rate=1e-4, per_device_train_batch_size=config.num_generations,
            num_generations=config.num_generations, max_completion_length=config.max_completion_length,
            save_steps=10_000, report_to="none", logging_steps=max(1, config.grpo_steps // 4),
            rewards=RewardConfig(funcs=["structure", "evidence", "decision", "dsr", "loop"],
                                 weights=[0.5, 1.0, 0.5, 1.0, 1.0]),
        )
        grpo_model = run_grpo(grpo_cfg, callbacks=[CompactProgress(label="GRPO")])

    with stage("evaluate (held-out test period)"):
        policy = HFPolicy(grpo_model, max_new_tokens=config.max_completion_length, batch_size=16, name="tiny-grpo",
                          temperature=config.eval_temperature, seed=config.seed)
        probes = [p for p in config.probes.split(",") if p]
        res = evaluate(policy, splits["test"], store, probes=probes, out_dir=out / "report",
                       max_rows=config.eval_rows, seed=config.seed, progress=True, train=splits["train"])

    summary = {
        "out": str(out.resolve()),
        "report": str(Path(res.report_path).resolve()),
        "rows": {k: len(v) for k, v in splits.items()},
        "distill": {k: result.stats[k] for k in ("samples", "accepted_samples", "acceptance_rate", "kept_rows")},
        "sft_model": str(sft_model),
        "grpo_model": str(grpo_model),
        "metrics": res.to_json()["metrics"],
        "reasoning": res.reasoning,
        "probes": res.probes,
        "verdict": verdict(res),
        "seconds": {**timings, "total": round(time.perf_counter() - t_all, 1)},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
