"""The Trading-R1 curriculum runner: per stage SFT warm start -> GRPO -> rejection-sampling self-distillation.

Stages (recipe `trading_r1.yaml`): structure -> evidence (claims) -> decision. The first SFT set is
distilled from a teacher; after each stage's GRPO the policy writes `n` theses per training prompt,
the distillation filter (decision + grounding) keeps the good ones, and they become the next
stage's SFT set (Trading-R1's self-distillation). Each step is a normal `run_sft` / `run_grpo` in
its own directory (`<output_dir>/<k>-<stage>/{sft,grpo,self-distill}`), so a crashed curriculum
resumes: finished steps (a `final/` model or a saved distilled set) are skipped and the step in
progress continues from its last checkpoint when `resume=True`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thesisgym.train.config import (
    CurriculumConfig,
    DistillStageConfig,
    GRPORunConfig,
    SFTRunConfig,
    build_config,
)


class PolicyTeacher:
    """A trained HF policy behind the `Teacher` protocol (sampling with transformers `generate`)."""

    def __init__(self, model_path: str | Path, *, max_new_tokens: int = 1024, temperature: float = 1.0,
                 top_p: float = 1.0, device: str = "auto") -> None:
        import torch

        from thesisgym.train.models import load_model

        self.model, self.tokenizer = load_model(model_path)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.model.to(self.device).eval()
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.model_path = str(model_path)

    def __repr__(self) -> str:
        return f"PolicyTeacher({self.model_path!r}, max_new_tokens={self.max_new_tokens}, temperature={self.temperature})"

    def write(self, row: dict, *, n: int = 1, seed: int = 0) -> list[str]:
        import torch

        if "prompt" not in row:
            raise ValueError("PolicyTeacher.write: row has no 'prompt' column")
        text = self.tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        enc = self.tokenizer(text, return_tensors="pt", add_special_tokens=False).to(self.device)
        torch.manual_seed(seed)
        with torch.no_grad():
            out = self.model.generate(**enc, do_sample=True, temperature=self.temperature, top_p=self.top_p,
                                      max_new_tokens=self.max_new_tokens, num_return_sequences=n,
                                      pad_token_id=self.tokenizer.pad_token_id)
        prompt_len = enc["input_ids"].shape[1]
        return [self.tokenizer.decode(seq[prompt_len:], skip_special_tokens=True) for seq in out]


def _merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _distill_to(rows: Any, teacher: Any, params: DistillStageConfig, out: Path, *, seed: int) -> dict:
    from thesisgym.teachers.distill import distill

    result = distill(rows, teacher, n=params.n, min_grounding=params.min_grounding,
                     max_hallucination_rate=params.max_hallucination_rate,
                     decision_tolerance=params.decision_tolerance, keep_per_prompt=params.keep_per_prompt,
                     seed=seed, progress=True)
    if result.stats["kept_rows"]:
        result.save(out, split="train")
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "distill_stats.json").write_text(json.dumps(result.stats, indent=2, default=str))
    return result.stats


def _has_dataset(path: Path) -> bool:
    return (path / "dataset_dict.json").exists()


def stage_configs(config: CurriculumConfig, k: int, *, model: str, sft_set: str) -> tuple[SFTRunConfig, GRPORunConfig]:
    """The SFT and GRPO run configs of stage k (0-based) given the incoming model and SFT set."""
    stage = config.stages[k]
    sdir = Path(config.output_dir) / f"{k + 1}-{stage.name}"
    model_cfg = config.model.model_dump() if k == 0 else {"name_or_path": model}
    sft = build_config(_merge(config.sft, stage.sft, {
        "output_dir": str(sdir / "sft"), "model": model_cfg, "seed": config.seed,
        "data": {"dataset": sft_set, "split": "train"}}), kind="sft", source=f"curriculum stage {stage.name} sft")
    grpo = build_config(_merge(config.grpo, stage.grpo, {
        "output_dir": str(sdir / "grpo"), "model": {"name_or_path": str(sdir / "sft" / "final")},
        "seed": config.seed, "data": config.data.model_dump()}), kind="grpo",
        source=f"curriculum stage {stage.name} grpo")
    return sft, grpo  # type: ignore[return-value]


def validate_curriculum(config: CurriculumConfig) -> None:
    """Build every stage's configs up front so a typo in stage 3 fails before stage 1 trains."""
    for k in range(len(config.stages)):
        stage_configs(config, k, model="<previous stage>", sft_set="<distilled>")


def run_curriculum(config: CurriculumConfig, *, resume: bool = False) -> Path:
    """Run every stage (module docstring); returns the final policy directory."""
    from thesisgym.teachers import make_teacher
    from thesisgym.train.common import load_split, write_run_info
    from thesisgym.train.grpo import run_grpo
    from thesisgym.train.sft import run_sft

    if not isinstance(config, CurriculumConfig):
        raise TypeError(f"run_curriculum expects a CurriculumConfig, got {type(config).__name__}")
    validate_curriculum(config)
    root = Path(config.output_dir)
    write_run_info(config, root, resume=resume)  # type: ignore[arg-type]
    contexts = load_split(config.data.dataset, config.data.split, max_rows=config.data.max_rows)
    summary: dict[str, Any] = {"stages": []}
    sft_set = root / "0-teacher-distill"
    if not _has_dataset(sft_set):
        options = dict(config.teacher_options)
        calibrate = options.pop("calibrate", True)
        teacher = make_teacher(config.teacher, **options)
        if calibrate and hasattr(teacher, "calibrate") and len(contexts) >= 10:
            teacher.calibrate(contexts)
        summary["teacher_distill"] = _distill_to(contexts, teacher, config.distill, sft_set, seed=config.seed)
        if not _has_dataset(sft_set):
            raise ValueError(f"curriculum: the teacher's distillation kept no thesis (see {sft_set}/distill_stats.json)")
    model = config.model.name_or_path
    for k, stage in enumerate(config.stages):
        sft_cfg, grpo_cfg = stage_configs(config, k, model=model, sft_set=str(sft_set))
        sft_final = Path(sft_cfg.output_dir) / "final"
        if not (sft_final / "config.json").exists():
            has_ckpt = any(Path(sft_cfg.output_dir).glob("checkpoint-*"))
            run_sft(sft_cfg, resume=resume and has_ckpt)
        grpo_final = Path(grpo_cfg.output_dir) / "final"
        if not (grpo_final / "config.json").exists():
            has_ckpt = any(Path(grpo_cfg.output_dir).glob("checkpoint-*"))
            run_grpo(grpo_cfg, resume=resume and has_ckpt)
        model = str(grpo_final)
        entry: dict[str, Any] = {"stage": stage.name, "sft": str(sft_final), "grpo": model}
        if stage.self_distill is not None and k + 1 < len(config.stages):
            out = root / f"{k + 1}-{stage.name}" / "self-distill"
            if not _has_dataset(out):
                teacher = PolicyTeacher(model, max_new_tokens=stage.self_distill.max_new_tokens,
                                        temperature=stage.self_distill.temperature)
                entry["self_distill"] = _distill_to(contexts, teacher, stage.self_distill, out, seed=config.seed)
            # an empty self-distilled set keeps the previous SFT set rather than stopping the run
            if _has_dataset(out):
                sft_set = out
            entry["next_sft_set"] = str(sft_set)
        summary["stages"].append(entry)
    (root / "curriculum.json").write_text(json.dumps(summary, indent=2, default=str))
    return Path(model)
