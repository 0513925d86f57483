"""Training through TRL: the tiny preset, SFT and GRPO runs with the reward stack, the curriculum.

Public API (TRL-like config/runner pairs; heavy libraries load on first use):
    SFTRunConfig, GRPORunConfig, CurriculumConfig, load_config
    run_sft(config) -> Path, run_grpo(config) -> Path, run_curriculum(config) -> Path
    build_tiny(corpus_texts, out_dir, ...), load_model(name_or_path, *, lora=None)
    CompactProgress(): pass in `callbacks=` for one bar and one short metrics line per log
"""

from __future__ import annotations

from typing import Any

from thesisgym.train.config import (
    CurriculumConfig,
    DataConfig,
    GRPORunConfig,
    ModelConfig,
    RewardConfig,
    SFTRunConfig,
    load_config,
)

__all__ = [
    "CompactProgress",
    "CurriculumConfig",
    "DataConfig",
    "GRPORunConfig",
    "ModelConfig",
    "RewardConfig",
    "SFTRunConfig",
    "build_tiny",
    "load_config",
    "load_model",
    "recipe_path",
    "run_curriculum",
    "run_grpo",
    "run_sft",
]

_LAZY = {
    "run_sft": "thesisgym.train.sft",
    "run_grpo": "thesisgym.train.grpo",
    "run_curriculum": "thesisgym.train.curriculum",
    "build_tiny": "thesisgym.train.models",
    "load_model": "thesisgym.train.models",
    "recipe_path": "thesisgym.train.recipes",
    "CompactProgress": "thesisgym.train.progress",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'thesisgym.train' has no attribute {name!r}")
