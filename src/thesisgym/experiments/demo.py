"""The whole pipeline in one call, offline on CPU: the `thesisgym demo` command.

synthesize a market -> build embargoed datasets -> distil SFT data from the template teacher ->
SFT a pretrained base (SmolLM2-135M-Instruct, resolved offline) -> GRPO it with the verifiable reward
stack -> compare SFT and GRPO on the same held-out prompts -> evaluate on held-out days (backtest vs
baselines and the true-expected-return oracle, reasoning metrics, probes) -> HTML report.

Every stage is the same public function a researcher would call by hand (`generate_market`,
`build_splits`, `distill`, `run_sft`, `run_grpo`, `evaluate`), so the demo doubles as a worked
example. Sizes are one knob (`--size quick|default|large`, `DemoConfig.sized`); `quick` trains the
locally built `tiny` model instead, as a smoke run.

GRPO's effect is measured, not asserted: the SFT and the GRPO checkpoints write theses for the same
held-out test prompts with the same decoding, and the change in every reward component (and the
weighted total GRPO trained on) is printed with a 95 % paired bootstrap interval
(`thesisgym.experiments.change_table`). The GRPO checkpoint's theses for those prompts are the ones
the evaluation scores and backtests (each checkpoint writes once per prompt). The SFT stage records a
held-out grounding curve (`thesisgym.train.curves.GroundingCurve`). Each run starts from the base
model: the `sft/` and `grpo/` run directories of an old run in the same `--out` are removed first.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field

from thesisgym.schema import COMPACT_SYSTEM_PROMPT, REWARD_HORIZON, StrictModel

# the default base: a real pretrained instruct model that resolves offline (thesisgym.train.presets)
PRETRAINED = "smollm2-135m"


class DemoConfig(StrictModel):
    """Sizes of the demo run; `sized(name)` gives the `--size` presets (`quick()` is the smoke size)."""

    out: str = "demo_out"
    seed: int = 0
    model: str = Field(PRETRAINED, description="base model: a preset (smollm2-135m), a hub id or path, or "
                                               "'tiny' (built locally, no pretraining)")
    tickers: int = Field(12, ge=3)
    days: int = Field(1040, ge=120)
    stride: int = Field(2, ge=1, description="keep every k-th trading day in the datasets")
    token_budget: int = Field(330, gt=100, description="approximate prompt words (the compact instructions take ~50)")
    heldout_tickers: int = Field(2, ge=0)
    distill_n: int = Field(4, ge=1)
    sft_steps: int = Field(128, ge=1, description="optimizer steps of SFT (128: the 135M student calls what "
                                                  "its teacher calls on 92 % of rows, docs/training.md section 5o)")
    sft_batch_size: int = Field(2, ge=1, description="theses per SFT step")
    sft_learning_rate: float = Field(1e-4, gt=0)
    lora_rank: int = Field(0, ge=0, description="LoRA rank for SFT and GRPO (0 = full fine-tune)")
    grpo_steps: int = Field(8, ge=1)
    num_generations: int = Field(4, ge=2)
    # at temperature 1 the sampled theses hallucinate 8-44 % of bullets (3 % greedy), so a group's reward
    # spread is broken bullets against none and 8 steps lost 0.06-0.14 of held-out grounding; at 0.7 it
    # held on 3 of 3 seeds (docs/training.md, section 5k)
    grpo_temperature: float = Field(0.7, gt=0, description="sampling temperature of GRPO's generations")
    grpo_learning_rate: float = Field(5e-6, gt=0)
    max_completion_length: int = Field(320, gt=16, description="tokens a thesis may take (the decision comes last)")
    # 80 dates: on 40 the evidence-only reader's own lead over HOLD is not significant at 95 %, so a
    # student's verdict against HOLD would turn on the CPU's float rounding (docs/training.md, section 5t)
    eval_rows: int = Field(320, ge=1, description="test-split rows both checkpoints write theses for")
    eval_per_date: int = Field(4, ge=1, description="tickers per decision date among the evaluation rows (>= 2 "
                                                    "defines the per-date IC and the market-neutral book)")
    eval_temperature: float = Field(0.0, ge=0.0, description="0 = greedy (stops at the end of turn)")
    probes: str = "digits"
    probe_rows: int | None = Field(8, ge=1, description="evaluation rows the probes re-ask (a spread subset; "
                                                         "None = all)")
    curve_rows: int = Field(8, ge=0, description="held-out val rows scored during SFT (0 = no curve)")
    curve_points: int = Field(2, ge=1)

    @property
    def tiny(self) -> bool:
        return self.model == "tiny"

    @classmethod
    def quick(cls, **overrides: object) -> DemoConfig:
        return cls.sized("quick", **overrides)

    @classmethod
    def sized(cls, size: str, **overrides: object) -> DemoConfig:
        """The `--size` presets: quick (smoke, tiny model), default, large (more SFT, GRPO and evaluation)."""
        if size not in DEMO_SIZES:
            raise ValueError(f"demo size must be one of {sorted(DEMO_SIZES)}, got {size!r}")
        given = {k: v for k, v in overrides.items() if v is not None}
        base = dict(DEMO_SIZES[size])
        if given.get("model", base.get("model")) == "tiny":  # whatever the size, tiny trains with its own rates
            base.update(TINY_SETTINGS)
        return cls(**{**base, **given})


# the tiny model has no pretraining: it needs many more steps at a higher rate, and its own tokenizer
# spends fewer tokens on a prompt (one per word), so it reads a larger budget in the same time
TINY_SETTINGS: dict[str, object] = dict(token_budget=600, sft_learning_rate=3e-3, sft_batch_size=4,
                                        grpo_learning_rate=1e-4, max_completion_length=448)
DEMO_SIZES: dict[str, dict[str, object]] = {
    "quick": dict(model="tiny", tickers=6, days=300, heldout_tickers=1, sft_steps=40, grpo_steps=2, eval_rows=16,
                  eval_per_date=2),
    "default": {},
    "large": dict(sft_steps=160, grpo_steps=24, eval_rows=480, eval_per_date=6, probe_rows=40, curve_rows=12,
                  curve_points=4, probes="anon,digits"),
}

# Compact contexts: two CPU cores cannot read Trading-R1's 3k-token prompts or write its 4-7 bullets per
# section in minutes, so the demo shows fewer items and asks the teacher for one short-quoted bullet per
# section. One price bar: with three, a 135M model copied numbers across adjacent bar lines (quote
# "open 16.94 high 17.01" from two bars), half its technical bullets (docs/training.md, section 5).
# The week's evidence only (FRESH_DAYS calendar days): an event moves the price over the 7 business
# days after it, so an older item's move is behind it and only dilutes a one-bullet-per-section count
# (the tally teacher's test IC 0.40 -> 0.46, accuracy 38.4 -> 48.7 %, prompts 410 -> 243 tokens;
# docs/training.md, section 5i). The pipeline is the same at any size.
FRESH_DAYS = 6
DEMO_CONTEXT = dict(bars=1, indicators=False, news_buckets=((0, 3, 2), (4, FRESH_DAYS, 2)), fundamentals_items=2,
                    fundamentals_days=FRESH_DAYS, insider_items=2, insider_days=FRESH_DAYS, analyst_items=2,
                    analyst_days=FRESH_DAYS, macro_items=2, macro_days=FRESH_DAYS,
                    section_keep_prob=0.35, system_prompt=COMPACT_SYSTEM_PROMPT)

# the reward stack GRPO trains on in the demo (name -> weight); also the `total` row of the change table.
# No market reward: in a training period whose market rose, r pays BUY whatever the evidence says, and 8
# steps of it cost 0.24 of held-out grounding (docs/training.md, section 5e); the market-based recipes
# are compared in `thesisgym experiment trade-r1`.
DEMO_REWARDS: dict[str, float] = {"structure": 0.5, "evidence": 1.0, "decision": 1.0, "consistency": 0.5,
                                  "loop": 1.0}


def run_demo(config: DemoConfig, *, log: Callable[[str], None] = print) -> dict:
    """Run every stage; returns a summary dict (also written to `<out>/summary.json`)."""
    import datasets

    from thesisgym.train import CompactProgress, RewardConfig, run_grpo

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in ("tiny-base", "warmup", "sft", "grpo"):  # never reuse an old run's model or tokenizer
        if (out / old).exists():
            shutil.rmtree(out / old)
    datasets.disable_progress_bars()  # the stage lines and one compact bar per trainer say enough
    timings: dict[str, float] = {}
    t_all = time.perf_counter()

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        log(f"==> {name}")  # plain text: log=print must not show markup
        t0 = time.perf_counter()
        yield
        timings[name] = round(time.perf_counter() - t0, 1)
        log(f"    stage time {_minutes(timings[name])} (total so far {_minutes(time.perf_counter() - t_all)})")

    with stage("market + datasets"):
        store, splits, data_dir = build_market_data(config, out, log=log)
    with stage("learnability (can reading the evidence beat every constant decision?)"):
        learn = learnability(splits, config, out, log=log)
    with stage("distil (template teacher, rejection sampling)"):
        sft_dir, distill_stats = distil_sft_data(config, splits, out, log=log)
    with stage(f"SFT ({config.model}, TRL SFTTrainer)"):
        sft_model, curve = train_sft(config, splits, sft_dir, out / "sft", log=log)
    with stage("GRPO (TRL GRPOTrainer, verifiable reward stack)"):
        grpo_cfg = grpo_config(config, sft_model, data_dir, out / "grpo",
                               RewardConfig(funcs=list(DEMO_REWARDS), weights=list(DEMO_REWARDS.values())))
        grpo_model = run_grpo(grpo_cfg, callbacks=[CompactProgress(label="GRPO")])
        drop_checkpoints(out / "grpo")
    eval_rows = rows_by_date(splits["test"], config.eval_rows, per_date=config.eval_per_date)
    policies = {"sft": demo_policy(sft_model, config, name=f"{config.model}-sft"),
                "grpo": demo_policy(grpo_model, config, name=f"{config.model}-grpo")}
    with stage("SFT vs GRPO on the same held-out prompts"):
        changes = compare_checkpoints(policies, eval_rows, config, out, log=log)
        plot_curves(out, curve.points if curve else [], out / "grpo" / "log_history.json")
    with stage("evaluate (held-out test period)"):
        res = evaluate_policy(policies, eval_rows, splits, store, config, out, changes)
    summary = _summary(config, out, res, splits, distill_stats, sft_model, grpo_model, changes, curve)
    summary["learnability"] = learn
    summary["seconds"] = {**timings, "total": round(time.perf_counter() - t_all, 1)}
    (out / "summary.json").write_text(json.dumps(_nulls(summary), indent=2, default=str))
    summary["evaluation"] = res  # the evaluation itself (not JSON): the CLI prints it as `thesisgym evaluate` does
    return summary


def _summary(config: DemoConfig, out: Path, res: Any, splits: dict, distill_stats: dict, sft_model: Path,
             grpo_model: Path, changes: list[dict], curve: Any) -> dict:
    from thesisgym.evaluate import verdict

    return {
        "out": str(out.resolve()),
        "report": str(Path(res.report_path).resolve()),
        "model": config.model,
        "rows": {k: len(v) for k, v in splits.items()},
        "distill": {k: distill_stats[k] for k in ("samples", "accepted_samples", "acceptance_rate", "kept_rows")},
        "sft_model": str(sft_model),
        "grpo_model": str(grpo_model),
        "metrics": res.to_json()["metrics"],
        "reasoning": res.reasoning,
        "probes": res.probes,
        "change": changes,
        # the baseline decision accuracy must beat: always predicting the most common label of these rows
        "majority_class_accuracy": _majority_rate(res.scores["label"].tolist()),
        # IC, market-neutral book and decision mix of the policy, the references, the reader ceiling and the oracles
        "skill": res.to_json()["skill"],
        "sft_curve": curve.points if curve else [],
        "verdict": verdict(res),
    }


def report_sections(out: Path, changes: list[dict], rows: int) -> list:
    """The demo's own material for the report (EvalConfig.sections): the SFT-vs-GRPO change table and
    the learning curves."""
    from thesisgym.evaluate import ReportSection

    curves = out / "curves" / "training.png"
    return [
        ReportSection(title="SFT vs GRPO on the same held-out prompts", table=changes,
                      text=f"Both checkpoints wrote theses for the same {rows} held-out test prompts with the same "
                           "decoding: before = SFT, after = GRPO.",
                      caption="change = GRPO minus SFT per reward component; lo and hi bound its 95% paired bootstrap "
                              "interval; total is the weighted reward GRPO trained on. An interval containing 0 is no "
                              "evidence that GRPO changed anything."),
        ReportSection(title="Learning curves", images=[curves] if curves.exists() else [],
                      caption="Left: held-out validation grounding and valid-decision rate as SFT sees more examples. "
                              "Right: GRPO's mean reward on its training prompts per step."),
    ]


def build_market_data(config: DemoConfig, out: Path, *, market: str = "A", preset: str = "reading",
                      log: Callable[[str], None] = print):
    """(store, splits, dataset dir): synthetic `market` with the knobs of `preset` (`data.synth.PRESETS`)
    saved under `out/market`, embargoed splits under `out/dataset`."""
    from thesisgym.data import generate_market
    from thesisgym.data.synth import SynthConfig
    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.dataset.splits import SplitConfig, build_splits

    store = generate_market(SynthConfig(n_tickers=config.tickers, n_days=config.days, seed=config.seed, market=market,
                                        preset=preset))
    store.save(out / "market")
    log(f"    synthetic market {market} ({preset}): {len(store.tickers)} tickers x {len(store.dates)} days, "
        f"{len(store.events)} events -> {out / 'market'}")
    split_cfg = SplitConfig(stride=config.stride, token_budget=config.token_budget,
                            heldout_tickers=config.heldout_tickers, seed=config.seed,
                            context=ContextConfig(**DEMO_CONTEXT))
    data_dir = out / "dataset"
    splits = build_splits(store, split_cfg, out=data_dir, store_path=(out / "market").resolve(), show_progress=False)
    log("    " + ", ".join(f"{k}: {len(v)}" for k, v in splits.items()) + f" rows -> {data_dir}")
    return store, splits, data_dir


def distil_sft_data(config: DemoConfig, splits: dict, out: Path, *, log: Callable[[str], None] = print,
                    layout: str = "id", conclusion: str = "tally", pick: str = "first"):
    """(SFT set dir, distil stats): compact template-teacher theses kept by the rejection filter
    (`layout`, `conclusion` and `pick`: the teacher's, see `TemplateTeacher`; bench/sft_layout.py compares them)."""
    from datasets import DatasetDict

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from thesisgym.teachers.template import COMPACT_STYLE

    # the tally's call per net count is the one the decision reward pays most for on train rows
    # (`reward_cuts`; cuts matching the label mix lost 1-4 points of accuracy, docs/training.md 5n);
    # within one class of the label counts as agreement because the teacher reads the evidence, not the future.
    # compact: one bullet per section quoting a 3-5 word run; layout "id": the id, the quote (the words
    # that carry the item's direction), then the verdict (held-out grounding after 64 SFT examples 0.40
    # -> 0.72, docs/training.md section 5g). A tally thesis decides from the verdicts it writes, so a
    # decision drawn at random would teach that the count does not matter: no decision noise there.
    style = dict(COMPACT_STYLE, layout=layout, conclusion=conclusion, pick=pick)
    teacher = TemplateTeacher(noise=0.15, wrong_decision_rate=0.0 if conclusion == "tally" else 0.2, seed=config.seed,
                              **style)
    teacher.calibrate(list(splits["train"]), tally="reward")
    result = distill(splits["train"], teacher, n=config.distill_n, min_grounding=0.75, decision_tolerance=1,
                     seed=config.seed)
    sft_dir = out / "sft_data"
    DatasetDict({"train": result.dataset}).save_to_disk(str(sft_dir))
    log(f"    kept {result.stats['kept_rows']} theses, acceptance rate {result.stats['acceptance_rate']:.0%} -> {sft_dir}")
    return sft_dir, result.stats


def _lora(config: DemoConfig) -> dict | None:
    return {"r": config.lora_rank, "lora_alpha": 2 * config.lora_rank, "lora_dropout": 0.0} if config.lora_rank else None


def train_sft(config: DemoConfig, splits: dict, sft_dir: Path, run_dir: Path, *, log: Callable[[str], None] = print):
    """(final model dir, GroundingCurve or None): SFT of the base model, its curve scored on held-out val rows.

    A pretrained base trains one thesis per forward pass (gradient accumulation makes the batch), which
    keeps activation memory at one example; the tiny model is built from the SFT set's prompts and theses
    (`tiny-base/` beside `run_dir`) and trains in batches.
    """
    import datasets

    from thesisgym.train import CompactProgress, DataConfig, ModelConfig, SFTRunConfig, run_sft
    from thesisgym.train.common import corpus_of
    from thesisgym.train.curves import GroundingCurve
    from thesisgym.train.models import build_tiny

    start = config.model
    if config.tiny:
        sft_set = datasets.load_from_disk(str(sft_dir))["train"]
        start = str(build_tiny(corpus_of(sft_set, max_rows=4000), run_dir.parent / "tiny-base", seed=config.seed))
    micro = config.sft_batch_size if config.tiny else 1
    sft_cfg = SFTRunConfig(
        output_dir=str(run_dir), model=ModelConfig(name_or_path=start, lora=_lora(config)),
        data=DataConfig(dataset=str(sft_dir), split="train"), seed=config.seed, max_steps=config.sft_steps,
        learning_rate=config.sft_learning_rate, warmup_ratio=0.05, per_device_train_batch_size=micro,
        gradient_accumulation_steps=max(1, config.sft_batch_size // micro),
        logging_steps=max(1, config.sft_steps // 5), save_steps=10_000, report_to="none",
        max_length=4 * config.token_budget + 2 * config.max_completion_length,
    )
    callbacks: list = [CompactProgress(label="SFT")]
    curve = None
    if config.curve_rows:
        val = splits["val"] if len(splits["val"]) else splits["test"]
        curve = GroundingCurve(spread_rows(val, config.curve_rows),
                               every=max(1, config.sft_steps // config.curve_points),
                               max_new_tokens=config.max_completion_length, seed=config.seed,
                               path=run_dir.parent / "curves" / "sft_grounding.json", label="SFT held-out val")
        callbacks.append(curve)
    sft_model = run_sft(sft_cfg, callbacks=callbacks)
    drop_checkpoints(run_dir)
    for pt in curve.points if curve else []:
        log(f"    held-out val ({pt['rows']} rows) after {pt['examples_seen']} SFT examples: grounding "
            f"{pt['grounding']:.3f}, valid decisions {pt['decision_valid']:.0%}, quotes found in the prompt "
            f"{pt['quotes_in_prompt']:.0%}, distinct quotes {pt['distinct_quotes']:.0%}")
    return sft_model, curve


def drop_checkpoints(run_dir: Path) -> None:
    """Remove a finished run's `checkpoint-N/` folders, keeping `final/`.

    Transformers saves one at the last step whatever `save_steps` says; for a pretrained base it holds
    the optimizer state too (1.6 GB for SmolLM2-135M next to a 0.5 GB `final/`). The demo and the
    experiments resume from `final/` and their own result files, never from a mid-run checkpoint.
    """
    for ckpt in Path(run_dir).glob("checkpoint-*"):
        shutil.rmtree(ckpt, ignore_errors=True)


def grpo_config(config: DemoConfig, model: Path, data_dir: Path, run_dir: Path, rewards: Any, *, seed: int | None = None):
    """The demo's GRPO run config (CPU-sized) for `rewards` (a RewardConfig): one prompt per step, its
    `num_generations` completions scored together; a pretrained policy updates on one at a time (the
    activations of a second would lift the demo's peak memory over 6 GiB)."""
    from thesisgym.train import DataConfig, GRPORunConfig, ModelConfig

    micro = config.num_generations if config.tiny else 1
    return GRPORunConfig(
        output_dir=str(run_dir), model=ModelConfig(name_or_path=str(model), lora=_lora(config)),
        data=DataConfig(dataset=str(data_dir), split="train"), seed=config.seed if seed is None else seed,
        max_steps=config.grpo_steps, learning_rate=config.grpo_learning_rate, per_device_train_batch_size=micro,
        gradient_accumulation_steps=max(1, config.num_generations // micro),
        num_generations=config.num_generations, max_completion_length=config.max_completion_length,
        temperature=config.grpo_temperature, save_steps=10_000, report_to="none",
        logging_steps=max(1, config.grpo_steps // 4), rewards=rewards,
    )


def spread(n: int, k: int) -> list[int]:
    """`k` indices spread evenly over `n` positions (all of them when k >= n)."""
    if k >= n:
        return list(range(n))
    return sorted({int(i * n / k) for i in range(k)})


def spread_rows(rows: Any, k: int) -> list[dict]:
    """`k` rows of a split spread over its dates: ordered by (as-of, ticker) first, so the picks move one
    date at a time and rotate through the tickers (a split is stored ticker by ticker: spreading over
    its stored order took the same few dates of every ticker)."""
    keys = [(str(a), str(t)) for a, t in zip(rows["asof"], rows["ticker"], strict=True)] if hasattr(
        rows, "column_names") else [(str(r["asof"]), str(r["ticker"])) for r in rows]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return [rows[order[i]] for i in spread(len(order), k)]


def rows_by_date(rows: Any, k: int, *, per_date: int = 2) -> list[dict]:
    """`k` rows of a split as a cross-section: `per_date` tickers on each of ceil(k / per_date) decision
    dates spread evenly over the split's dates (all of them when fewer), deterministic.

    Why: the per-date information coefficient and the market-neutral book compare tickers ON THE SAME
    DATE; one row per date (`spread_rows`) leaves both undefined. The tickers rotate from date to
    date (sorted, each date starting `per_date` further on), so every ticker is drawn about equally.
    A date with fewer tickers than `per_date` gives all it has; rows come out ordered by (as-of, ticker).
    """
    if per_date < 1:
        raise ValueError(f"rows_by_date: per_date must be >= 1, got {per_date}")
    keys = [(str(a), str(t)) for a, t in zip(rows["asof"], rows["ticker"], strict=True)] if hasattr(
        rows, "column_names") else [(str(r["asof"]), str(r["ticker"])) for r in rows]
    by_date: dict[str, list[tuple[str, int]]] = {}
    for i, (asof, ticker) in enumerate(keys):
        by_date.setdefault(asof, []).append((ticker, i))
    dates = sorted(by_date)
    picked: list[int] = []
    for n, d in enumerate(dates[j] for j in spread(len(dates), -(-k // per_date))):
        names = sorted(by_date[d])  # (ticker, row index); a ticker twice on a date (variations) keeps its first
        names = [x for j, x in enumerate(names) if j == 0 or x[0] != names[j - 1][0]]
        start = (n * per_date) % len(names)
        take = [names[(start + j) % len(names)] for j in range(min(per_date, len(names)))]
        picked += [i for _, i in sorted(take)]
    return [rows[i] for i in picked[:k]]


def _minutes(seconds: float) -> str:
    """'9 min 41 s' (or '41 s' under a minute)."""
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def _nulls(obj: Any) -> Any:
    """`obj` with every non-finite float as None: JSON has no nan (json.dumps would write a bare NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _nulls(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nulls(v) for v in obj]
    return obj


def decision_mix_text(decisions: list[str]) -> str:
    """'HOLD 90%, INVALID 8%, BUY 2%': each decision's share of `decisions`, largest first."""
    from collections import Counter

    if not decisions:
        return "n/a"
    return ", ".join(f"{d} {100 * c / len(decisions):.0f}%" for d, c in Counter(decisions).most_common())


def _majority_rate(labels: list) -> float:
    known = [lab for lab in labels if isinstance(lab, str) and lab]
    return max(known.count(lab) for lab in set(known)) / len(known) if known else float("nan")


def demo_policy(model_path: Path, config: DemoConfig, *, name: str) -> Any:
    """The demo's decoding of a checkpoint (greedy by default), writing once per prompt.

    Batches of 32: on 2 cores a decoding step costs about as much for 32 rows as for 16 (the weights are
    read once a step either way), so the comparison's 320 theses take a fifth less time than in batches
    of 16; 64 rows pad their prompts to the longest and are slower again (docs/training.md, 5q)."""
    from thesisgym.evaluate import HFPolicy, RememberingPolicy

    return RememberingPolicy(HFPolicy(model_path, max_new_tokens=config.max_completion_length, batch_size=32,
                                      temperature=config.eval_temperature, seed=config.seed, name=name))


def generate_for(model_path: Path, rows: list[dict], config: DemoConfig, *,
                 drafts: list[str] | None = None) -> list[str]:
    """Theses from a saved checkpoint with the demo's decoding (greedy by default; seeded sampling otherwise).
    `drafts`: a nearby checkpoint's theses for the same rows, to decode greedy theses faster."""
    return demo_policy(model_path, config, name=Path(model_path).name).decide(rows, drafts=drafts)


def learnability(splits: dict, config: DemoConfig, out: Path, *, log: Callable[[str], None] = print) -> dict:
    """The learnability check (evaluate/learnability.py) on the demo's test split: its verdicts are
    logged, the tables written to `<out>/learnability.md`, the result returned for summary.json."""
    from thesisgym.evaluate.learnability import check_learnability, markdown

    try:
        res = check_learnability(splits, name=str(out), evaluate_on=("test",), reward_rows=100, reps=200,
                                 seed=config.seed)
    except ValueError as exc:  # e.g. a tiny run's split too small to fit a reader: say so, go on
        log(f"    learnability check not run: {exc}")
        return {"not_run": str(exc)}
    for chk in res.splits.values():
        reader = chk.skill.loc["reader"]
        log(f"    reader on {chk.split}: accuracy {chk.accuracy.loc['reader', 'accuracy']:.1%}, IC {reader['ic']:.3f}")
        for line in chk.verdicts:
            log("    " + line)
    (out / "learnability.md").write_text(markdown(res))
    return res.as_dict()


def compare_checkpoints(policies: dict, rows: list[dict], config: DemoConfig, out: Path, *,
                        log: Callable[[str], None] = print) -> list[dict]:
    """The paired change table (every reward component and the trained total) of GRPO over SFT on `rows`."""
    from thesisgym.evaluate.policies import decision_of
    from thesisgym.evaluate.skill import Sample, skill_change
    from thesisgym.evaluate.stats import rate_block
    from thesisgym.experiments import change_table, format_change_table, score_with_s

    # GRPO's greedy theses decode from SFT's as drafts: a few GRPO steps leave most of them as they were
    written = {"sft": policies["sft"].decide(rows)}
    written["grpo"] = policies["grpo"].decide(rows, drafts=written["sft"])
    scored = {name: score_with_s(theses, rows) for name, theses in written.items()}
    changes = change_table(scored["sft"], scored["grpo"], total=DEMO_REWARDS, seed=config.seed)
    # the skill a constant cannot fake (IC, market-neutral book), paired by date
    sample = Sample([r["asof"] for r in rows], [r.get("fwd_return") for r in rows], [r.get("fwd_vol") for r in rows])
    if sample.n_rows:
        decided = {name: [decision_of(c) for c in theses] for name, theses in written.items()}
        changes += skill_change(decided["sft"], decided["grpo"], sample, seed=config.seed,
                                block=rate_block([r["asof"] for r in rows], REWARD_HORIZON))
    for line in format_change_table(changes):
        log("    " + line)
    for name, theses in written.items():  # the share of each decision: a constant policy shows at once
        log(f"    decision mix {name.upper():<5} {decision_mix_text([decision_of(c) for c in theses])}")
    dates = len({str(r['asof'])[:10] for r in rows})
    log(f"    ({len(rows)} test rows on {dates} dates; n/a = undefined on this sample)")
    (out / "change.json").write_text(json.dumps(_nulls({"rows": len(rows), "changes": changes}), indent=2))
    return changes


def evaluate_policy(policies: dict, rows: list[dict], splits: dict, store: Any, config: DemoConfig, out: Path,
                    changes: list[dict]):
    """Backtest, statistics, probes and the report for the GRPO policy on the compared rows."""
    from thesisgym.evaluate import EvalConfig, evaluate

    name = policies["grpo"].name
    eval_cfg = EvalConfig(probes=[p for p in config.probes.split(",") if p], probe_rows=config.probe_rows,
                          out_dir=out / "report", seed=config.seed,
                          smoke=config.tiny or config.sft_steps < DemoConfig().sft_steps,
                          title=f"thesisgym demo: {name}", sections=report_sections(out, changes, len(rows)))
    return evaluate(policies["grpo"], rows, store, eval_cfg, train=splits["train"],
                    accuracy_policies={"SFT checkpoint": policies["sft"]})


def plot_curves(out: Path, sft_points: list[dict], grpo_log: Path) -> None:
    """`<out>/curves/training.png`: held-out grounding vs SFT examples, and GRPO's reward per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    if sft_points:
        xs = [p["examples_seen"] for p in sft_points]
        axes[0].plot(xs, [p["grounding"] for p in sft_points], marker="o", label="grounding")
        axes[0].plot(xs, [p["decision_valid"] for p in sft_points], marker="s", linestyle="--", label="valid decision")
        axes[0].set_xlabel("SFT examples seen")
        axes[0].set_title(f"held-out val ({sft_points[0]['rows']} rows)")
        axes[0].set_ylim(-0.02, 1.02)
        axes[0].legend()
    logs = json.loads(grpo_log.read_text()) if grpo_log.exists() else []
    pts = [(e["step"], e["reward"]) for e in logs if "reward" in e and "step" in e]
    if pts:
        axes[1].plot(*zip(*pts, strict=True), marker="o")
        axes[1].set_xlabel("GRPO step")
        axes[1].set_title("GRPO mean reward (training prompts)")
    fig.tight_layout()
    (out / "curves").mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "curves" / "training.png", dpi=110)
    plt.close(fig)
