"""Run configurations for SFT / GRPO / curriculum, loaded from YAML with dotted CLI overrides.

Why pydantic with extra="forbid": a typo in a recipe (`learnig_rate`) must fail before an hour of
training, with the key named; a wrong type must name the field. The configs are thin: each field
maps onto one TRL `SFTConfig` / `GRPOConfig` argument (see `to_trl_kwargs`), and `trl:` passes any
other TRL argument through unchanged (its names are checked against the TRL dataclass), so nothing
here re-implements a trainer. Device defaults are resolved once (`resolve_device`): CPU gets
`use_cpu=True` with bf16 autocast where the CPU computes bf16 natively, CUDA gets bf16 when supported.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from thesisgym.schema import StrictModel

# reward name -> dataset columns it reads (validated before training; see thesisgym.train.rewards)
REWARD_COLUMNS: dict[str, tuple[str, ...]] = {
    "structure": ("sections",),
    "evidence": ("evidence",),
    "decision": ("label",),
    "market": ("fwd_return", "fwd_vol"),
    "loop": (),
    "consistency": ("evidence",),
    "weighted": ("evidence", "sections", "label"),
    "fsr": ("evidence", "fwd_return", "fwd_vol"),
    "dsr": ("evidence", "fwd_return", "fwd_vol"),
    "market_only": ("fwd_return", "fwd_vol"),
}


class TinyConfig(StrictModel):
    """Size of the `tiny` preset built from the training corpus when model.name_or_path == "tiny"."""

    vocab_size: int = Field(4096, gt=256)
    hidden_size: int = Field(192, gt=0)
    layers: int = Field(4, gt=0)
    heads: int = Field(4, gt=0)
    kv_heads: int = Field(2, gt=0)
    max_corpus_rows: int = Field(4000, gt=0)
    copy_tokens: bool = Field(True, description="one token per digit and quote marks kept apart, so quotes copy token for token")


class ModelConfig(StrictModel):
    name_or_path: str = "tiny"
    lora: dict[str, Any] | None = None
    dtype: str = "auto"
    trust_remote_code: bool = False
    tiny: TinyConfig = Field(default_factory=TinyConfig)


class DataConfig(StrictModel):
    dataset: str
    split: str = "train"
    eval_split: str | None = Field(None, description="SFT only: split whose loss is measured every save_steps "
                                                     "(GRPO and curriculum configs refuse it: see no_eval_split)")
    max_rows: int | None = Field(None, gt=0)


def no_eval_split(data: DataConfig, kind: str) -> None:
    """Refuse `data.eval_split` where no trainer reads it, instead of validating a setting that does nothing.

    Why GRPO does not evaluate on it: a GRPO evaluation is a generation pass scored by the reward stack
    (minutes per pass on CPU, every eval step), and the run's own train-batch rewards are logged every
    step already; what a held-out split should answer is `thesisgym evaluate` on the saved model.
    """
    if data.eval_split is not None:
        raise ValueError(
            f"data.eval_split: {kind} does not evaluate during training (only SFT reads eval_split); remove it and "
            f"evaluate the saved model on that split with `thesisgym evaluate --model OUTPUT_DIR --dataset "
            f"{data.dataset} --split {data.eval_split}`"
        )


class RunConfig(StrictModel):
    """Fields shared by SFT and GRPO runs. `output_dir` is the run directory."""

    output_dir: str
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig
    seed: int = 0
    max_steps: int = -1
    num_train_epochs: float = Field(1.0, gt=0)
    learning_rate: float = Field(1e-5, gt=0)
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    per_device_train_batch_size: int = Field(4, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    logging_steps: int = Field(1, gt=0)
    save_steps: int = Field(50, gt=0)
    save_total_limit: int | None = 2
    device: Literal["auto", "cpu", "cuda"] = "auto"
    bf16: bool | None = Field(None, description="bf16 autocast; None = on where the device computes bf16 natively "
                              "(CUDA, or a CPU with avx512_bf16/AMX for pretrained models)")
    gradient_checkpointing: bool | None = None
    report_to: str | list[str] = "auto"
    trl: dict[str, Any] = Field(default_factory=dict)

    @field_validator("report_to")
    @classmethod
    def _report_to(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str) and v not in ("auto", "none", "all", "tensorboard", "wandb", "trackio", "mlflow"):
            raise ValueError(f"unknown report_to {v!r}")
        return v


class SFTRunConfig(RunConfig):
    kind: Literal["sft"] = "sft"
    learning_rate: float = Field(1e-4, gt=0)
    max_length: int | None = 4096
    completion_only_loss: bool = True
    packing: bool = False


class RewardConfig(StrictModel):
    """Reward functions by name (`REWARD_COLUMNS` keys), with one weight each.

    A weight of 0 keeps a component as a logged metric (rewards/<name>/mean) without training on it.
    `consistency` picks the judge used by the `consistency` reward and the fsr/dsr combiners.
    """

    funcs: list[str] = Field(default_factory=lambda: ["structure", "evidence", "decision", "loop"])
    weights: list[float] | None = None
    consistency: Literal["local", "llm"] = "local"
    consistency_options: dict[str, Any] = Field(default_factory=dict)
    combined_options: dict[str, Any] = Field(default_factory=dict)
    diagnostics: bool = True

    @field_validator("funcs")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one reward function is needed")
        unknown = [f for f in v if f not in REWARD_COLUMNS and ":" not in f]
        if unknown:
            raise ValueError(f"unknown reward(s) {unknown}; known: {sorted(REWARD_COLUMNS)} or 'module:function'")
        if len(set(v)) != len(v):
            raise ValueError(f"reward names must be unique, got {v}")
        return v

    @model_validator(mode="after")
    def _weights_match(self) -> RewardConfig:
        if self.weights is not None and len(self.weights) != len(self.funcs):
            raise ValueError(f"rewards.weights has {len(self.weights)} entries for {len(self.funcs)} funcs {self.funcs}")
        return self


class ToolRunConfig(StrictModel):
    """GRPO through the point-in-time tool environment (thesisgym.tools): the policy looks evidence up."""

    store: str | None = Field(None, description="MarketStore directory (default: the one the dataset records)")
    max_calls: int = Field(2, gt=0, description="tool-calling rounds per rollout (TRL max_tool_calling_iterations)")
    max_items: int = Field(6, gt=0, description="items one tool call may return")
    max_chars: int = Field(1200, gt=0, description="characters one tool call may return")
    price_per_call: float = Field(0.0, ge=0, description="reward cost of each call (0 = counted, not priced)")
    price_per_failed_call: float = Field(0.0, ge=0)


class GRPORunConfig(RunConfig):
    kind: Literal["grpo"] = "grpo"
    learning_rate: float = Field(1e-6, gt=0)
    rewards: RewardConfig = Field(default_factory=RewardConfig)
    num_generations: int = Field(4, ge=2)
    max_completion_length: int = Field(1024, gt=0)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    beta: float = Field(0.0, ge=0)
    scale_rewards: Literal["group", "batch", "none"] = "group"
    multi_objective_aggregation: Literal["sum_then_normalize", "normalize_then_sum"] = "sum_then_normalize"
    loss_type: str | None = None
    log_completions: bool = False
    tools: ToolRunConfig | None = Field(None, description="train a tool-using analyst (prompts without evidence)")
    # scale-out: mapped 1:1 onto GRPOConfig (TRL's vLLM generation)
    use_vllm: bool = False
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1)
    vllm_tensor_parallel_size: int = Field(1, gt=0)

    @model_validator(mode="after")
    def _eval_split(self) -> GRPORunConfig:
        no_eval_split(self.data, "GRPO")
        return self

    @model_validator(mode="after")
    def _vllm(self) -> GRPORunConfig:
        if self.vllm_server_base_url and not (self.use_vllm and self.vllm_mode == "server"):
            raise ValueError("vllm_server_base_url is only read with use_vllm: true and vllm_mode: server")
        if self.use_vllm and self.device == "cpu":
            raise ValueError("use_vllm: true needs a GPU, but device is 'cpu'")
        return self


class DistillStageConfig(StrictModel):
    """Rejection-sampling filter settings (see thesisgym.teachers.distill.DistillConfig)."""

    n: int = Field(4, gt=0)
    min_grounding: float = Field(0.8, ge=0, le=1)
    max_hallucination_rate: float = Field(0.0, ge=0, le=1)
    decision_tolerance: int = Field(0, ge=0, le=4)
    keep_per_prompt: int = Field(1, gt=0)
    max_new_tokens: int = Field(1024, gt=0)
    temperature: float = Field(1.0, gt=0)


class CurriculumStage(StrictModel):
    name: str
    sft: dict[str, Any] = Field(default_factory=dict)
    grpo: dict[str, Any] = Field(default_factory=dict)
    self_distill: DistillStageConfig | None = Field(default_factory=DistillStageConfig)


class CurriculumConfig(StrictModel):
    """Trading-R1 curriculum: per stage SFT warm start -> GRPO -> rejection-sampling self-distillation.

    `sft`/`grpo` hold the fields shared by every stage; a stage's own `sft`/`grpo` dicts override
    them (dotted-free, one level deep merge). `teacher` builds the first SFT set from `data`.
    """

    kind: Literal["curriculum"] = "curriculum"
    output_dir: str
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig
    seed: int = 0
    teacher: Literal["template", "openai"] = "template"
    teacher_options: dict[str, Any] = Field(default_factory=dict)
    distill: DistillStageConfig = Field(default_factory=DistillStageConfig)
    sft: dict[str, Any] = Field(default_factory=dict)
    grpo: dict[str, Any] = Field(default_factory=dict)
    stages: list[CurriculumStage]

    @field_validator("stages")
    @classmethod
    def _nonempty(cls, v: list[CurriculumStage]) -> list[CurriculumStage]:
        if not v:
            raise ValueError("a curriculum needs at least one stage")
        return v

    @model_validator(mode="after")
    def _eval_split(self) -> CurriculumConfig:
        no_eval_split(self.data, "the curriculum")
        return self


AnyRunConfig = SFTRunConfig | GRPORunConfig | CurriculumConfig
_KINDS: dict[str, type[BaseModel]] = {"sft": SFTRunConfig, "grpo": GRPORunConfig, "curriculum": CurriculumConfig}


# --- loading ---------------------------------------------------------------------------------------
def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key `{loc}`")
        elif err["type"] == "missing":
            lines.append(f"missing required key `{loc}`")
        else:
            lines.append(f"field `{loc}`: {err['msg']} (got {err.get('input')!r})")
    return f"{source}: invalid config: " + "; ".join(lines)


_FLOAT_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a", "b", "c"], yaml-parsed value). Floats like 1e-4 parse as floats."""
    if "=" not in item:
        raise ValueError(f"--set {item!r}: expected key=value (dotted keys for nesting, e.g. rewards.consistency=llm)")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not all(parts):
        raise ValueError(f"--set {item!r}: empty key segment in {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ValueError(f"--set {item!r}: value is not valid YAML: {exc}") from exc
    # YAML 1.1 reads "1e-4" as a string; a learning rate on the command line should be a float
    if isinstance(value, str) and _FLOAT_RE.fullmatch(value.strip()):
        value = float(value)
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """Apply `--set` overrides in order onto a (copied) config dict."""
    import copy

    out = copy.deepcopy(data)
    for item in overrides or []:
        parts, value = parse_override(item)
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ValueError(f"--set {item!r}: `{p}` is not a mapping")
            node = nxt
        node[parts[-1]] = value
    return out


def build_config(data: dict[str, Any], *, kind: str | None = None, source: str = "<config>") -> AnyRunConfig:
    """Validate a config dict into the run config of its `kind` (or the given one)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a config must be a YAML mapping, got {type(data).__name__}")
    k = kind or data.get("kind")
    if k not in _KINDS:
        raise ValueError(f"{source}: unknown or missing `kind` {k!r}; expected one of {sorted(_KINDS)}")
    if data.get("kind", k) != k:
        raise ValueError(f"{source}: file has kind {data.get('kind')!r} but a {k!r} run was requested")
    try:
        return _KINDS[k].model_validate({**data, "kind": k})
    except ValidationError as exc:
        raise ValueError(_describe(exc, source)) from None


def load_config(path: str | Path, *, overrides: list[str] | None = None, kind: str | None = None) -> AnyRunConfig:
    """Load a YAML run config, apply `--set` overrides, validate. Relative dataset paths stay as given."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"config file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{p}: not valid YAML: {exc}") from exc
    return build_config(apply_overrides(data, overrides), kind=kind, source=str(p))


def dump_config(config: BaseModel) -> str:
    """The resolved config as YAML (saved in every run directory)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


# --- mapping onto TRL ------------------------------------------------------------------------------
def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("config: device='cuda' but no CUDA device is available")
    return device


def cpu_has_bf16() -> bool:
    """True when this CPU computes bf16 natively (avx512_bf16 or AMX), so bf16 autocast pays off."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="ignore")
    except OSError:
        flags = ""
    if flags:
        return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))
    import torch

    probe = getattr(getattr(torch, "cpu", None), "_is_avx512_bf16_supported", None)
    return bool(probe()) if callable(probe) else False


def resolve_report_to(report_to: str | list[str]) -> str | list[str]:
    if report_to != "auto":
        return report_to
    try:
        import tensorboard  # noqa: F401

        return "tensorboard"
    except ImportError:
        return "none"


def _check_trl_passthrough(extra: dict[str, Any], trl_cls: type, taken: dict[str, Any]) -> None:
    names = {f.name for f in dataclasses.fields(trl_cls)}
    unknown = sorted(k for k in extra if k not in names)
    if unknown:
        raise ValueError(f"config key `trl`: unknown {trl_cls.__name__} field(s) {unknown}")
    clash = sorted(k for k in extra if k in taken)
    if clash:
        raise ValueError(f"config key `trl`: {clash} are first-class config fields; set them at the top level")


def to_trl_kwargs(config: RunConfig, *, tiny: bool = False) -> dict[str, Any]:
    """Keyword arguments for SFTConfig / GRPOConfig from a run config (CPU-safe defaults)."""
    device = resolve_device(config.device)
    on_cpu = device == "cpu"
    if on_cpu and getattr(config, "use_vllm", False):
        raise ValueError("config: use_vllm=True needs a GPU; this run resolves to device='cpu' (set use_vllm: false)")
    if config.bf16 and on_cpu and not cpu_has_bf16():
        import warnings

        warnings.warn("bf16 on a CPU without native bf16 (avx512_bf16 / AMX) runs through emulation and is usually "
                      "slower than float32", stacklevel=2)
    if on_cpu:
        # accelerate (1.15) runs an FSDP or DeepSpeed launch config on CPU as plain data parallel
        # (MULTI_CPU) without a word: the run would "pass" while sharding nothing
        import os

        for env, what in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
            if os.environ.get(env, "false").lower() == "true":
                raise ValueError(f"accelerate config: {what} needs GPUs; on CPU accelerate would silently run plain "
                                 f"data parallel instead. Use configs/accelerate/cpu.yaml for CPU processes")
    if config.bf16 is None:
        import torch

        # CPU: bf16 autocast measured 1.6-1.9x faster than float32 on avx512_bf16 cores (bench/bench_train.py);
        # the tiny preset keeps float32, where bf16 rounding matters more than the time it saves
        bf16 = (cpu_has_bf16() and not tiny) if on_cpu else torch.cuda.is_bf16_supported()
    else:
        bf16 = config.bf16
    gc = config.gradient_checkpointing
    if gc is None:
        gc = not (tiny or on_cpu)
    kw: dict[str, Any] = dict(
        output_dir=config.output_dir,
        seed=config.seed,
        data_seed=config.seed,
        max_steps=config.max_steps,
        num_train_epochs=config.num_train_epochs,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_ratio,  # transformers 5: a float in [0, 1) is a ratio
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        logging_steps=config.logging_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        use_cpu=on_cpu,
        bf16=bf16,
        gradient_checkpointing=gc,
        report_to=resolve_report_to(config.report_to),
    )
    if isinstance(config, SFTRunConfig):
        kw.update(max_length=config.max_length, completion_only_loss=config.completion_only_loss,
                  packing=config.packing)
    elif isinstance(config, GRPORunConfig):
        kw.update(
            num_generations=config.num_generations,
            max_completion_length=config.max_completion_length,
            temperature=config.temperature,
            top_p=config.top_p,
            beta=config.beta,
            scale_rewards=config.scale_rewards,
            multi_objective_aggregation=config.multi_objective_aggregation,
            log_completions=config.log_completions,
            use_vllm=config.use_vllm,
            vllm_mode=config.vllm_mode,
            vllm_server_base_url=config.vllm_server_base_url,
            vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            vllm_tensor_parallel_size=config.vllm_tensor_parallel_size,
        )
        if config.loss_type is not None:
            kw["loss_type"] = config.loss_type
        if config.tools is not None:
            kw["max_tool_calling_iterations"] = config.tools.max_calls
    return kw


def trl_args(config: SFTRunConfig | GRPORunConfig, *, tiny: bool = False):
    """Build the TRL args dataclass (SFTConfig or GRPOConfig) with `trl:` passthrough applied."""
    if isinstance(config, GRPORunConfig):
        from trl import GRPOConfig as cls
    else:
        from trl import SFTConfig as cls
    kw = to_trl_kwargs(config, tiny=tiny)
    _check_trl_passthrough(config.trl, cls, kw)
    # defaults that `trl:` may override: every parameter of a full fine-tune is used in the forward,
    # so DDP's extra unused-parameter traversal is wasted work
    kw.update({"ddp_find_unused_parameters": False, **config.trl})
    names = {f.name for f in dataclasses.fields(cls)}
    if "activation_checkpointing" in names and "gradient_checkpointing" not in config.trl:
        # transformers 5 renamed it; the new name wins over TRL's gradient_checkpointing=True default
        kw["activation_checkpointing"] = kw.pop("gradient_checkpointing")
    try:
        return cls(**kw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config -> {cls.__name__}: {exc}") from exc
