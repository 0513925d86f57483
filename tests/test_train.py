"""Training through TRL on CPU with the tiny preset: real SFT/GRPO steps, resume, config errors."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.train.config import (  # noqa: E402
    SFTRunConfig,
    apply_overrides,
    build_config,
    dump_config,
    load_config,
    trl_args,
)
from toydata import toy_dataset  # noqa: E402

TINY = {"vocab_size": 600, "hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}
FULL_STACK = ["structure", "evidence", "decision", "market", "loop", "consistency", "fsr", "dsr", "market_only"]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny models are dominated by thread overhead; on a busy 2-core CI box one thread is ~10x faster."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _history(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "log_history.json").read_text())


def _subprocess_env() -> dict[str, str]:
    """What a CLI run needs here: offline, one torch thread per process (tiny models, busy box)."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A toy context split and its distilled SFT set, saved like the real pipeline saves them."""
    from datasets import DatasetDict

    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill

    root = tmp_path_factory.mktemp("data")
    ctx = toy_dataset(8, seed=0, items_per_section=2, sections=("technical", "news"))
    DatasetDict({"train": ctx}).save_to_disk(str(root / "contexts"))
    res = distill(ctx, TemplateTeacher(bullets=(1, 2)), n=2, decision_tolerance=1, min_grounding=0.0)
    res.save(root / "distilled", split="train")
    return {"contexts": root / "contexts", "distilled": root / "distilled", "root": root}


def _sft_config(data, out: Path, **kw) -> SFTRunConfig:
    cfg = {"output_dir": str(out), "model": {"name_or_path": "tiny", "tiny": TINY},
           "data": {"dataset": str(data["distilled"])}, "max_steps": 2, "per_device_train_batch_size": 4,
           "learning_rate": 1e-3, "save_steps": 1000, "report_to": "none", "max_length": 1024, **kw}
    return build_config(cfg, kind="sft")


@pytest.fixture(scope="module")
def sft_model(data) -> Path:
    from thesisgym.train.sft import run_sft

    final = run_sft(_sft_config(data, data["root"] / "sft"))
    return final


# --- models ---------------------------------------------------------------------------------------
def test_tiny_preset_is_a_normal_hf_model(sft_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(sft_model))
    model = AutoModelForCausalLM.from_pretrained(str(sft_model))
    assert model.config.model_type == "qwen2"
    assert tok.padding_side == "left"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(tok("[T1] Close 101.5").input_ids) == "[T1] Close 101.5"
    run = sft_model.parent
    info = json.loads((run / "run_info.json").read_text())
    assert {"torch", "transformers", "trl", "datasets", "thesisgym"} <= set(info["versions"])
    assert load_config(run / "config.yaml", kind="sft").max_steps == 2
    assert json.loads((sft_model / "saved.json").read_text())["kind"] == "full"  # what final/ holds is on record


def test_build_tiny_rejects_bad_sizes(tmp_path):
    from thesisgym.train.models import build_tiny

    with pytest.raises(ValueError, match="divisible"):
        build_tiny(["a b c"], tmp_path, hidden_size=30, heads=4)
    with pytest.raises(ValueError, match="corpus_texts"):
        build_tiny([], tmp_path)


def test_load_model_with_lora(sft_model):
    from thesisgym.train.models import load_model

    model, tok = load_model(sft_model, lora={"r": 4, "lora_alpha": 8})
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    assert 0 < trainable < total
    with pytest.raises(ValueError, match="config.json"):
        load_model(sft_model.parent / "tiny-base" / "nope")


# --- real TRL steps -------------------------------------------------------------------------------
def test_sft_step_loss_is_finite(sft_model):
    hist = _history(sft_model.parent)
    losses = [h["loss"] for h in hist if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert hist[-1]["step"] == 2


def test_grpo_step_with_full_reward_stack(data, sft_model, tmp_path):
    from thesisgym.train.grpo import run_grpo

    cfg = build_config({
        "output_dir": str(tmp_path / "grpo"), "model": {"name_or_path": str(sft_model)},
        "data": {"dataset": str(data["contexts"])}, "max_steps": 1, "per_device_train_batch_size": 4,
        "num_generations": 2, "max_completion_length": 24, "report_to": "none", "save_steps": 1000,
        "rewards": {"funcs": FULL_STACK, "weights": [0.2, 0.2, 0.2, 0.2, 0.2, 0.1, 1.0, 0.0, 0.0]},
    }, kind="grpo")
    final = run_grpo(cfg)
    assert (final / "config.json").exists()
    hist = _history(final.parent)
    step = next(h for h in hist if "loss" in h)
    assert math.isfinite(step["loss"])
    names = ["structure_reward", "evidence_reward", "decision_reward", "market_reward", "loop_penalty",
             "consistency_reward", "fsr_reward", "dsr_reward", "market_only_reward"]
    for name in names:
        assert f"rewards/{name}/mean" in step, sorted(step)
    assert math.isfinite(step["reward"])
    assert any(k.startswith("diag/") for k in step), sorted(step)
    info = json.loads((final.parent / "run_info.json").read_text())
    assert info["reward_funcs"][0] == "structure_reward"


def test_resume_ends_at_the_same_step_with_the_same_loss(data, tmp_path):
    from thesisgym.train.sft import run_sft

    cfg = _sft_config(data, tmp_path / "run", max_steps=4, save_steps=2, per_device_train_batch_size=2)
    run_sft(cfg)
    full = {h["step"]: h["loss"] for h in _history(tmp_path / "run") if "loss" in h}
    # simulate a crash after checkpoint-2: the later checkpoint and the final model never got written
    shutil.rmtree(tmp_path / "run" / "checkpoint-4")
    shutil.rmtree(tmp_path / "run" / "final")
    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        seen: list[int] = []

        def on_step_end(self, args, state, control, **kw):
            self.seen.append(state.global_step)

    final = run_sft(cfg, resume=True, callbacks=[Steps()])
    assert Steps.seen == [3, 4]  # only the steps after checkpoint-2 were trained again
    resumed = _history(final.parent)
    assert resumed[-1]["step"] == 4
    again = {h["step"]: h["loss"] for h in resumed if "loss" in h}
    assert again[4] == pytest.approx(full[4], rel=1e-4)
    assert list((final.parent).glob("run_info.resume-*.json"))
    with pytest.raises(ValueError, match="no checkpoint"):
        run_sft(_sft_config(data, tmp_path / "fresh"), resume=True)


def test_grpo_killed_after_a_checkpoint_resumes_to_the_same_final_step(data, sft_model, tmp_path):
    """A real crash: `thesisgym train grpo` in a subprocess is SIGKILLed once checkpoint-2 is on disk."""
    from thesisgym.train.grpo import run_grpo

    cfg = build_config({
        "output_dir": str(tmp_path / "run"), "model": {"name_or_path": str(sft_model)},
        "data": {"dataset": str(data["contexts"])}, "max_steps": 4, "save_steps": 2, "save_total_limit": None,
        "per_device_train_batch_size": 2, "num_generations": 2, "max_completion_length": 16, "report_to": "none",
        "rewards": {"funcs": ["structure", "loop"]},
    }, kind="grpo")
    (tmp_path / "run.yaml").write_text(dump_config(cfg))
    run, log = tmp_path / "run", tmp_path / "run.log"
    state = run / "checkpoint-2" / "trainer_state.json"  # the last file a checkpoint writes

    def checkpoint_done() -> bool:
        try:
            return json.loads(state.read_text())["global_step"] == 2
        except (OSError, ValueError):
            return False

    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "thesisgym.cli.launch", "grpo", "-c",
                                 str(tmp_path / "run.yaml")], env=_subprocess_env(), stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 120
            while not checkpoint_done() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    tail = log.read_text()[-3000:]
    assert proc.returncode == -9, f"the run ended ({proc.returncode}) before it was killed:\n{tail}"
    assert checkpoint_done(), log.read_text()[-3000:]
    assert [p.name for p in run.glob("checkpoint-*")] == ["checkpoint-2"]
    assert not (run / "final").exists() and not (run / "log_history.json").exists()

    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        seen: list[int] = []

        def on_step_end(self, args, state, control, **kw):
            self.seen.append(state.global_step)

    final = run_grpo(cfg, resume=True, callbacks=[Steps()])
    assert Steps.seen == [3, 4]  # started from checkpoint-2, trained only what was left
    hist = _history(run)
    assert hist[-1]["step"] == cfg.max_steps  # where an uninterrupted run ends
    logged = [h["step"] for h in hist if "loss" in h]
    assert logged == [1, 2, 3, 4]  # steps 1-2 restored from the checkpoint, 3-4 trained once
    assert all(math.isfinite(h["loss"]) for h in hist if "loss" in h)
    assert (final / "config.json").exists() and list(run.glob("run_info.resume-*.json"))


@pytest.mark.slow
def test_grpo_two_cpu_processes_through_accelerate_launch(data, tmp_path):
    """The distributed code path without a GPU: two gloo processes via the shipped accelerate config.

    Run: python -m pytest tests/test_train.py -m slow -k two_cpu -s   (prints the run's output tail)
    """
    from thesisgym.train.recipes import ACCELERATE

    accelerate = shutil.which("accelerate")
    if accelerate is None:
        pytest.skip("the `accelerate` command is not on PATH")
    # 2 per device x 2 processes = one group of num_generations=4 per step; in ONE process the global
    # batch would be 2 and GRPOConfig would refuse it, so the run itself proves both ranks took part
    cfg = build_config({
        "output_dir": str(tmp_path / "run"), "model": {"name_or_path": "tiny", "tiny": TINY},
        "data": {"dataset": str(data["contexts"])}, "max_steps": 2, "per_device_train_batch_size": 2,
        "num_generations": 4, "max_completion_length": 16, "report_to": "none", "save_steps": 1000,
        "rewards": {"funcs": ["structure", "loop"]},
    }, kind="grpo")
    (tmp_path / "run.yaml").write_text(dump_config(cfg))
    cmd = [accelerate, "launch", "--config_file", str(ACCELERATE / "cpu.yaml"),
           "-m", "thesisgym.cli.launch", "grpo", "-c", str(tmp_path / "run.yaml")]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=_subprocess_env(), capture_output=True, text=True, timeout=900, cwd=tmp_path)
    out = r.stdout + r.stderr
    took = time.perf_counter() - t0
    bars = ("it/s]", "s/it]", "examples/s]")  # tqdm redraws; the log lines are what tell the story
    lines = [ln for ln in out.splitlines() if ln.strip() and not any(b in ln for b in bars)]
    print(f"\n$ {' '.join(cmd)}\n[{took:.1f} s, exit {r.returncode}]\n" + "\n".join(lines[-12:]))
    assert r.returncode == 0, out[-5000:]
    run = tmp_path / "run"
    assert json.loads((run / "run_info.json").read_text())["world_size"] == 2
    assert not list(run.glob("run_info.resume-*.json"))  # rank 1 wrote nothing
    hist = _history(run)
    assert hist[-1]["step"] == 2
    losses = [h["loss"] for h in hist if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert (run / "final" / "config.json").exists()


# --- configs fail before training -----------------------------------------------------------------
def test_unknown_key_is_named(tmp_path):
    with pytest.raises(ValueError, match="unknown key `learnig_rate`"):
        build_config({"output_dir": "x", "data": {"dataset": "d"}, "learnig_rate": 1e-3}, kind="sft")
    with pytest.raises(ValueError, match="unknown key `rewards.wieghts`"):
        build_config({"output_dir": "x", "data": {"dataset": "d"}, "rewards": {"wieghts": [1]}}, kind="grpo")
    with pytest.raises(ValueError, match="unknown reward"):
        build_config({"output_dir": "x", "data": {"dataset": "d"}, "rewards": {"funcs": ["vibes"]}}, kind="grpo")


def test_wrong_type_is_named(tmp_path):
    with pytest.raises(ValueError, match="field `max_steps`"):
        build_config({"output_dir": "x", "data": {"dataset": "d"}, "max_steps": "many"}, kind="sft")
    with pytest.raises(ValueError, match="field `num_generations`"):
        build_config({"output_dir": "x", "data": {"dataset": "d"}, "num_generations": 1}, kind="grpo")
    with pytest.raises(ValueError, match="missing required key `data`"):
        build_config({"output_dir": "x"}, kind="sft")


def test_overrides_and_trl_mapping(tmp_path):
    base = {"output_dir": str(tmp_path), "data": {"dataset": "d"}}
    data = apply_overrides(base, ["learning_rate=3e-4", "rewards.funcs=[fsr,structure]", "use_vllm=true",
                                  "trl.top_k=5"])
    cfg = build_config(data, kind="grpo")
    assert cfg.learning_rate == 3e-4 and cfg.rewards.funcs == ["fsr", "structure"]
    args = trl_args(cfg.model_copy(update={"use_vllm": False}), tiny=True)
    assert args.use_cpu and args.bf16 is False and args.gradient_checkpointing is False
    assert args.activation_checkpointing is False
    assert args.top_k == 5 and args.vllm_mode == "colocate"
    with pytest.raises(ValueError, match="unknown GRPOConfig"):
        trl_args(build_config(apply_overrides(base, ["trl.not_a_field=1"]), kind="grpo"))
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(base, ["learning_rate"])


def test_vllm_flags_are_validated_before_training(tmp_path):
    import torch

    base = {"output_dir": str(tmp_path), "data": {"dataset": "d"}}
    with pytest.raises(ValueError, match="only read with use_vllm"):
        build_config({**base, "vllm_server_base_url": "http://localhost:8000"}, kind="grpo")
    with pytest.raises(ValueError, match="needs a GPU"):
        build_config({**base, "use_vllm": True, "device": "cpu"}, kind="grpo")
    server = build_config({**base, "use_vllm": True, "vllm_mode": "server",
                           "vllm_server_base_url": "http://localhost:8000"}, kind="grpo")
    if torch.cuda.is_available():
        args = trl_args(server)
        assert args.use_vllm and args.vllm_mode == "server" and args.vllm_server_base_url == "http://localhost:8000"
    else:  # device auto resolves to cpu here: refused with the reason, not at TRL's first generation
        with pytest.raises(ValueError, match="needs a GPU"):
            trl_args(server)


def test_fsdp_or_deepspeed_launch_on_cpu_is_refused_not_silently_run_as_ddp(tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the refusal is for CPU runs")
    cfg = build_config({"output_dir": str(tmp_path), "data": {"dataset": "d"}}, kind="sft")
    trl_args(cfg)  # a plain CPU run is fine
    for env, what in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
        with monkeypatch.context() as m:
            m.setenv(env, "true")  # what `accelerate launch` sets for an FSDP / DeepSpeed config
            with pytest.raises(ValueError, match=f"{what} needs GPUs.*cpu.yaml"):
                trl_args(cfg)


def test_shipped_recipes_validate():
    from thesisgym.train.curriculum import validate_curriculum
    from thesisgym.train.recipes import ACCELERATE, list_recipes, recipe_path

    names = list_recipes()
    assert {"sft", "fsr", "dsr", "market_only", "trading_r1"} <= set(names)
    for name in names:
        cfg = load_config(recipe_path(name))
        if cfg.kind == "curriculum":
            validate_curriculum(cfg)
            assert [s.name for s in cfg.stages] == ["structure", "evidence", "decision"]
    assert {p.stem for p in ACCELERATE.glob("*.yaml")} == {"cpu", "ddp", "deepspeed_zero3", "fsdp"}


def test_missing_reward_column_fails_before_loading_the_model(data, tmp_path):
    from datasets import DatasetDict

    from thesisgym.train.grpo import run_grpo

    ctx = toy_dataset(4).remove_columns(["fwd_return"])
    DatasetDict({"train": ctx}).save_to_disk(str(tmp_path / "ctx"))
    cfg = build_config({"output_dir": str(tmp_path / "run"), "data": {"dataset": str(tmp_path / "ctx")},
                        "rewards": {"funcs": ["structure", "market"]}}, kind="grpo")
    with pytest.raises(ValueError, match="'fwd_return' is missing but reward 'market'"):
        run_grpo(cfg)
    assert not (tmp_path / "run" / "tiny-base").exists()
    nolabel = toy_dataset(3).map(lambda r, i: {"label": None if i == 1 else r["label"]}, with_indices=True)
    DatasetDict({"train": nolabel}).save_to_disk(str(tmp_path / "ctx2"))
    cfg2 = build_config({"output_dir": str(tmp_path / "run2"), "data": {"dataset": str(tmp_path / "ctx2")},
                         "rewards": {"funcs": ["decision"]}}, kind="grpo")
    with pytest.raises(ValueError, match="row 1 has label=None"):
        run_grpo(cfg2)


def test_sft_on_a_context_split_says_distill_first(data, tmp_path):
    from thesisgym.train.sft import run_sft

    raw = _sft_config(data, tmp_path / "x").model_dump()
    raw["data"]["dataset"] = str(data["contexts"])
    cfg = build_config(raw, kind="sft")
    with pytest.raises(ValueError, match="thesisgym distill"):
        run_sft(cfg)


def test_cli_reports_config_errors(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: sft\noutput_dir: x\ndata: {dataset: d}\nlearnig_rate: 0.1\n")
    r = CliRunner().invoke(app, ["train", "sft", "--config", str(bad)])
    assert r.exit_code == 2 and "learnig_rate" in r.output
    r = CliRunner().invoke(app, ["train", "grpo", "--config", "fsr", "--set", "rewards.funcs=[nope]"])
    assert r.exit_code == 2 and "nope" in r.output
    r = CliRunner().invoke(app, ["train", "recipes"])
    assert r.exit_code == 0 and "trading_r1" in r.output


def test_config_eval_split_is_refused_where_no_trainer_reads_it(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app
    from thesisgym.train.config import CurriculumConfig, build_config

    data = {"dataset": "ds", "eval_split": "val"}
    assert build_config({"output_dir": "x", "data": data}, kind="sft").data.eval_split == "val"
    with pytest.raises(ValueError, match=r"data.eval_split: GRPO does not evaluate .*thesisgym evaluate --model"):
        build_config({"output_dir": "x", "data": data}, kind="grpo")
    with pytest.raises(ValueError, match="data.eval_split: the curriculum does not evaluate"):
        CurriculumConfig.model_validate({"output_dir": "x", "data": data, "stages": [{"name": "s"}]})
    r = CliRunner().invoke(app, ["train", "grpo", "--config", "fsr", "--set", "data.eval_split=val"])
    assert r.exit_code == 2 and "data.eval_split: GRPO does not evaluate" in r.output and "Traceback" not in r.output


def test_curriculum_chains_stages_and_resumes(data, tmp_path):
    from thesisgym.train.config import CurriculumConfig
    from thesisgym.train.curriculum import run_curriculum

    small = {"max_steps": 1, "per_device_train_batch_size": 4, "report_to": "none", "save_steps": 1000}
    cfg = CurriculumConfig.model_validate({
        "output_dir": str(tmp_path / "cur"), "model": {"name_or_path": "tiny", "tiny": TINY},
        "data": {"dataset": str(data["contexts"])},
        "teacher_options": {"bullets": [1, 2]},
        "distill": {"n": 1, "min_grounding": 0.0, "decision_tolerance": 4},
        "sft": {**small, "max_length": 1024, "learning_rate": 1e-3},
        "grpo": {**small, "num_generations": 2, "max_completion_length": 16},
        "stages": [
            {"name": "structure", "grpo": {"rewards": {"funcs": ["structure", "loop"]}},
             "self_distill": {"n": 2, "min_grounding": 0.0, "decision_tolerance": 4, "max_hallucination_rate": 1.0,
                              "max_new_tokens": 16}},
            {"name": "decision", "grpo": {"rewards": {"funcs": ["decision", "evidence"], "weights": [1.0, 0.5]}}},
        ],
    })
    final = run_curriculum(cfg)
    assert final == tmp_path / "cur" / "2-decision" / "grpo" / "final"
    summary = json.loads((tmp_path / "cur" / "curriculum.json").read_text())
    assert [s["stage"] for s in summary["stages"]] == ["structure", "decision"]
    assert "self_distill" in summary["stages"][0]  # the policy's own samples were filtered
    # stage 2 SFT starts from stage 1's GRPO policy
    cfg2 = json.loads(json.dumps(load_config(tmp_path / "cur" / "2-decision" / "sft" / "config.yaml",
                                             kind="sft").model_dump()))
    assert cfg2["model"]["name_or_path"].endswith("1-structure/grpo/final")
    # a second call finds every step done and trains nothing
    mtime = (final / "config.json").stat().st_mtime
    assert run_curriculum(cfg, resume=True) == final
    assert (final / "config.json").stat().st_mtime == mtime


@pytest.mark.slow
def test_grpo_raises_mean_reward_over_sft_start_on_heldout_prompts(tmp_path):
    """Synthetic market: teacher -> SFT (tiny) -> GRPO; held-out mean total reward must go up.

    Run: python -m pytest tests/test_train.py -m slow -k raises -s   (prints the numbers)
    """
    from datasets import DatasetDict

    import thesisgym.data.synth as synth
    import thesisgym.dataset.splits as splits
    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.rewards import score_completion
    from thesisgym.teachers import TemplateTeacher
    from thesisgym.teachers.distill import distill
    from thesisgym.train.curriculum import PolicyTeacher
    from thesisgym.train.grpo import run_grpo
    from thesisgym.train.sft import run_sft

    short = ContextConfig(bars=2, indicators=False, news_buckets=((0, 3, 2), (4, 10, 1), (11, 30, 0)),
                          fundamentals_items=1, insider_items=1, analyst_items=1, macro_items=1)
    store = synth.generate_market(synth.SynthConfig(n_tickers=6, n_days=260, seed=0))
    dd = splits.build_splits(store, splits.SplitConfig(stride=2, context=short), show_progress=False)
    train = dd["train"].filter(lambda r: r["label"] is not None)
    heldout = dd["val"].filter(lambda r: r["label"] is not None).shuffle(seed=0).select(range(16))
    DatasetDict({"train": train}).save_to_disk(str(tmp_path / "ctx"))
    teacher = TemplateTeacher(bullets=(1, 1), think=False).calibrate(train)
    distill(train, teacher, n=1, decision_tolerance=4, min_grounding=0.5).save(tmp_path / "sft_set")

    sft = build_config({"output_dir": str(tmp_path / "sft"), "data": {"dataset": str(tmp_path / "sft_set")},
                        "model": {"name_or_path": "tiny", "tiny": {"vocab_size": 2048, "hidden_size": 64,
                                                                   "layers": 2, "heads": 4, "kv_heads": 2}},
                        "num_train_epochs": 3, "per_device_train_batch_size": 8, "learning_rate": 3e-3,
                        "report_to": "none", "save_steps": 10_000, "max_length": 2048}, kind="sft")
    sft_final = run_sft(sft)

    # Trading-R1 stages I-II rewards; decision is logged (weight 0): a tiny model this short-trained
    # rarely reaches a valid <decision> within the budget, so it would only add a constant -1.5
    weights = {"structure": 0.4, "evidence": 0.6, "loop_penalty": 1.0}

    def mean_reward(model_dir: Path) -> float:
        policy = PolicyTeacher(model_dir, max_new_tokens=320, temperature=1.0)
        totals = []
        for i, row in enumerate(heldout):
            for text in policy.write(row, n=2, seed=i):
                s = score_completion([{"role": "assistant", "content": text}], row)
                totals.append(sum(w * s[k] for k, w in weights.items()))
        return sum(totals) / len(totals)

    before = mean_reward(sft_final)
    grpo = build_config({"output_dir": str(tmp_path / "grpo"), "model": {"name_or_path": str(sft_final)},
                         "data": {"dataset": str(tmp_path / "ctx")}, "max_steps": 40,
                         "per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 320,
                         "learning_rate": 5e-4, "report_to": "none", "save_steps": 10_000,
                         "rewards": {"funcs": ["structure", "evidence", "loop", "decision"],
                                     "weights": [0.4, 0.6, 1.0, 0.0]}}, kind="grpo")
    after = mean_reward(run_grpo(grpo))
    print(f"held-out mean total reward (0.4 structure + 0.6 evidence + loop): SFT {before:.3f} -> GRPO {after:.3f}")
    assert after > before + 0.03


def test_curve_diagnostics_tell_copying_from_a_memorised_thesis():
    from thesisgym.train.curves import score_theses

    def row(body: str) -> dict:
        return {"evidence": [{"id": "N1", "section": "news", "date": "2024-01-02", "source": "wire", "text": body}],
                "sections": ["news"], "label": "BUY"}

    def thesis(quote: str) -> str:
        return (f'<news>\n- The news is a clear positive for the stock over the coming week, because the record '
                f'shows "{quote}" [N1]\n</news>\n<conclusion>News leans bullish.</conclusion>\n<decision>BUY</decision>')

    rows = [row("Acme wins a large defence contract"), row("Globex opens three new plants")]
    copied = score_theses([thesis("Acme wins a large"), thesis("Globex opens three new")], rows)
    assert copied["quotes_in_prompt"] == 1.0 and copied["distinct_quotes"] == 1.0 and copied["grounding"] == 1.0
    # the same memorised thesis for both prompts: right once by luck, never distinct
    recalled = score_theses([thesis("Acme wins a large")] * 2, rows)
    assert recalled["quotes_in_prompt"] == 0.5 and recalled["distinct_quotes"] == 0.5
    assert score_theses([thesis("Acme wins")], rows[:1])["quotes_in_prompt"] == 0.0  # too short to prove copying
    assert math.isnan(score_theses(["no thesis here"], rows[:1])["distinct_quotes"])


def test_compact_head_gives_trls_log_probs_entropy_and_gradients(tmp_path):
    """On CPU the policy scores only labelled tokens (thesisgym.train.cpu_head): the same numbers as TRL's own
    fused head, which projects every position."""
    import copy

    import torch
    from trl.trainer import utils as trl_utils

    if not hasattr(trl_utils, "add_fused_lm_head"):
        pytest.skip("this TRL has no fused LM head to replace (the trainers score the plain way)")
    add_fused_lm_head = trl_utils.add_fused_lm_head
    from thesisgym.train.cpu_head import use_compact_head
    from thesisgym.train.models import build_tiny, load_model

    path = build_tiny(["alpha beta gamma delta " * 5] * 10, tmp_path / "m", vocab_size=300, hidden_size=32,
                      layers=2, heads=2, kv_heads=1)
    ref, _ = load_model(path)
    ours = copy.deepcopy(ref)
    outputs = ("log_probs", "entropy", "is_top1")
    add_fused_lm_head(ref, temperature=0.7, outputs=outputs)
    add_fused_lm_head(ours, temperature=0.7, outputs=outputs)
    assert use_compact_head(ours, temperature=0.7, outputs=outputs)
    torch.manual_seed(0)
    ids = torch.randint(3, ref.config.vocab_size, (2, 24))
    att = torch.ones_like(ids)
    att[1, :4] = 0
    labels = ids.masked_fill(att == 0, -100)
    labels[:, :10] = -100  # a prompt: no loss there
    a = ref(input_ids=ids, attention_mask=att, labels=labels, fused_lm_head=True)
    b = ours(input_ids=ids, attention_mask=att, labels=labels, fused_lm_head=True)
    for k in ("loss", "log_probs", "entropy"):
        assert torch.allclose(getattr(a, k), getattr(b, k), atol=1e-5), k
    assert torch.equal(a.is_top1, b.is_top1) and torch.equal(a.label_mask, b.label_mask)
    a.loss.backward()
    b.loss.backward()
    for pa, pb in zip(ref.parameters(), ours.parameters(), strict=True):
        assert torch.allclose(pa.grad, pb.grad, atol=1e-5)
    # generation (no fused_lm_head) goes through the model's own forward, unchanged
    assert torch.equal(ref.generate(ids[:1, :8], max_new_tokens=4, do_sample=False),
                       ours.generate(ids[:1, :8], max_new_tokens=4, do_sample=False))


def test_compact_head_is_gated_on_what_the_installed_trl_provides(tmp_path, monkeypatch):
    """The fused head is a TRL internal: without TRL's output class (TRL 1.0, the floor), with one that lacks
    a field this head fills, or on a model TRL did not patch, the model is left exactly as it was."""
    import dataclasses

    from trl.trainer import utils as trl_utils

    from thesisgym.train.cpu_head import fused_output_type, use_compact_head
    from thesisgym.train.models import build_tiny, load_model

    path = build_tiny(["alpha beta gamma delta " * 5] * 10, tmp_path / "m", vocab_size=300, hidden_size=32,
                      layers=2, heads=2, kv_heads=1)
    model, _ = load_model(path)
    plain = model.forward
    assert fused_output_type(model) is None and not use_compact_head(model)  # not patched by TRL
    assert model.forward == plain

    def fused_forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None,
                      **kwargs):
        return plain(*args, labels=labels, **kwargs)

    import types

    model.forward = types.MethodType(fused_forward, model)
    patched = model.forward
    if hasattr(trl_utils, "FusedCausalLMOutput"):
        assert fused_output_type(model) is trl_utils.FusedCausalLMOutput

    @dataclasses.dataclass
    class Older:  # an output class without `is_top1`
        loss: object = None
        log_probs: object = None
        entropy: object = None
        label_mask: object = None

    monkeypatch.setattr(trl_utils, "FusedCausalLMOutput", Older, raising=False)
    assert fused_output_type(model) is None and not use_compact_head(model)
    monkeypatch.delattr(trl_utils, "FusedCausalLMOutput", raising=False)  # TRL 1.0: no fused head at all
    assert fused_output_type(model) is None and not use_compact_head(model)
    assert model.forward == patched


def test_an_sft_run_on_cpu_uses_the_compact_head_when_trl_has_a_fused_one(data, tmp_path, monkeypatch):
    """The gate must not switch the head off silently on the TRL it was written for."""
    from trl.trainer import utils as trl_utils

    from thesisgym.train import sft

    engaged = []
    real = sft.compact_heads_on_cpu
    monkeypatch.setattr(sft, "compact_heads_on_cpu", lambda *a, **k: engaged.append(real(*a, **k)))
    sft.run_sft(_sft_config(data, tmp_path / "sft", max_steps=1))
    assert engaged == [hasattr(trl_utils, "add_fused_lm_head")]


def test_cpu_bf16_follows_the_cpu_and_spares_the_tiny_model(tmp_path, monkeypatch):
    from thesisgym.train import config as train_config

    base = {"output_dir": str(tmp_path), "data": {"dataset": "d"}, "device": "cpu"}
    cfg = build_config(base, kind="sft")
    monkeypatch.setattr(train_config, "cpu_has_bf16", lambda: True)
    assert train_config.to_trl_kwargs(cfg)["bf16"] is True
    assert train_config.to_trl_kwargs(cfg, tiny=True)["bf16"] is False
    monkeypatch.setattr(train_config, "cpu_has_bf16", lambda: False)
    assert train_config.to_trl_kwargs(cfg)["bf16"] is False
    with pytest.warns(UserWarning, match="emulation"):  # asked for anyway: allowed, with the reason it is slow
        assert train_config.to_trl_kwargs(build_config({**base, "bf16": True}, kind="sft"))["bf16"] is True


def _accelerate_like_tiny_llama(*, lora: bool = False):
    """A small random Llama whose top-level forward runs under its own bf16 autocast, as accelerate wraps a
    policy; with `lora`, a PEFT model around it (whose generate runs the base model's unwrapped forward)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64))
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
        for name, param in model.named_parameters():  # a trained adapter: B is not zero
            if "lora_B" in name:
                torch.nn.init.normal_(param, std=0.05)
    model.eval()
    model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
    return model


def _weight_casts(model, ids, **gen) -> tuple[float, object, object]:
    """(casts of each weight shaped like the gate projection during one generate call, the output ids,
    the processed scores of every step)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    shape = [48, 32]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), pad_token_id=0, eos_token_id=None,
                             max_new_tokens=8, min_new_tokens=8, output_scores=True, return_dict_in_generate=True,
                             **gen)
    casts = sum(1 for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes and e.input_shapes[0] == shape)
    weights = sum(1 for p in model.parameters() if list(p.shape) == shape)
    return casts / weights, out.sequences, torch.stack(out.scores)


def _fake_trainer(model, *, bf16: bool = True):
    import types

    import torch

    return types.SimpleNamespace(model=model, args=types.SimpleNamespace(device=torch.device("cpu"), bf16=bf16))


def test_a_bf16_cpu_trainer_casts_the_weights_once_per_generate_and_decodes_the_same_tokens():
    import torch

    from thesisgym.train.generation import cast_weights_once_per_generate

    ids = torch.tensor([[3, 4, 5, 6]])
    sampling = dict(do_sample=True, temperature=0.7, top_k=0)
    model = _accelerate_like_tiny_llama()
    per_token, greedy, _ = _weight_casts(model, ids, do_sample=False)
    torch.manual_seed(1)
    _, sampled, scores = _weight_casts(model, ids, **sampling)
    assert cast_weights_once_per_generate(_fake_trainer(model))
    once, greedy_after, _ = _weight_casts(model, ids, do_sample=False)
    torch.manual_seed(1)
    _, sampled_after, scores_after = _weight_casts(model, ids, **sampling)
    assert per_token == 8 and once == 1  # one forward per decoded token; one cast for the whole call
    assert torch.equal(greedy, greedy_after) and torch.equal(sampled, sampled_after)
    assert scores_after.dtype == torch.float32 and torch.equal(scores, scores_after)
    assert not cast_weights_once_per_generate(_fake_trainer(_accelerate_like_tiny_llama(), bf16=False))


def test_holding_the_casts_leaves_a_lora_policy_rolling_out_in_float32():
    """PEFT's generate runs the base model's own forward, outside accelerate's autocast: its rollouts were
    float32, and holding the casts must not turn them into bf16 ones (the scores would change)."""
    import torch

    from thesisgym.train.generation import cast_weights_once_per_generate

    ids = torch.tensor([[3, 4, 5, 6]])
    model = _accelerate_like_tiny_llama(lora=True)
    torch.manual_seed(1)
    casts, sampled, scores = _weight_casts(model, ids, do_sample=True, temperature=0.7, top_k=0)
    assert cast_weights_once_per_generate(_fake_trainer(model))
    torch.manual_seed(1)
    casts_after, sampled_after, scores_after = _weight_casts(model, ids, do_sample=True, temperature=0.7, top_k=0)
    assert casts == casts_after == 0
    assert torch.equal(sampled, sampled_after) and torch.equal(scores, scores_after)


def test_a_bf16_grpo_trainer_on_cpu_holds_the_casts_and_reserves_the_cache_over_its_rollouts(data, sft_model, tmp_path):
    from thesisgym.train.grpo import build_grpo_trainer

    cfg = build_config({
        "output_dir": str(tmp_path / "grpo"), "model": {"name_or_path": str(sft_model)}, "bf16": True,
        "data": {"dataset": str(data["contexts"])}, "max_steps": 1, "per_device_train_batch_size": 2,
        "num_generations": 2, "max_completion_length": 8, "report_to": "none", "save_steps": 1000,
        "rewards": {"funcs": ["structure"]},
    }, kind="grpo")
    trainer, _, _ = build_grpo_trainer(cfg)
    model = trainer.model
    assert trainer.args.bf16 and "generate" in vars(model)  # the instance's own generate, around the class's
    chain, fn = [], vars(model)["generate"]
    while hasattr(fn, "__wrapped__"):
        chain.append(fn.__code__.co_name)
        fn = fn.__wrapped__
    assert chain[:2] == ["generate_with_reserved_cache", "generate_with_cached_casts"]
    assert vars(model)["generate"].__wrapped__.__wrapped__ == type(model).generate.__get__(model)


@pytest.mark.parametrize("reserve", [2, 64])
@pytest.mark.parametrize("lora", [False, True])
def test_the_reserved_kv_cache_decodes_the_tokens_of_the_default_cache(reserve, lora):
    """Generation writes its keys and values into reserved storage instead of concatenating per token: the
    same greedy and sampled tokens and scores, left padding and grouped KV heads included, with a reserve
    too small for the call (the storage regrows) and a large one; through a PEFT model as well."""
    import inspect

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel

    from thesisgym.train.generation import _reserved_cache

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    model.eval()
    ids = torch.tensor([[0, 0, 3, 4, 5], [7, 8, 9, 10, 11]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    for gen in (dict(do_sample=False), dict(do_sample=True, temperature=0.7, top_k=0)):
        runs, reserved = [], _reserved_cache(model, reserve)
        assert list(reserved) == ["cache" if "cache" in inspect.signature(LlamaModel.forward).parameters
                                  else "past_key_values"]
        for extra in ({}, reserved):
            torch.manual_seed(1)
            with torch.no_grad():
                out = model.generate(ids, attention_mask=mask, pad_token_id=0, eos_token_id=None, max_new_tokens=12,
                                     min_new_tokens=12, output_scores=True, return_dict_in_generate=True,
                                     use_cache=True, **gen, **extra)
            runs.append(out)
            if extra:
                (cache,) = extra.values()
                layer = cache.layers[0]
                assert type(layer).__name__ == "ReservedLayer" and layer.keys.shape[-2] == 5 + 11
                assert layer.keys.data_ptr() == layer.store[0].data_ptr()  # a view of the storage, not a copy
        assert torch.equal(runs[0].sequences, runs[1].sequences)
        assert all(torch.equal(a, b) for a, b in zip(runs[0].scores, runs[1].scores, strict=True))


def test_a_cpu_trainer_rolls_out_through_the_reserved_cache_with_the_same_samples(monkeypatch):
    import torch

    from thesisgym.train import generation

    model = _accelerate_like_tiny_llama()
    ids = torch.tensor([[3, 4, 5, 6]] * 2)
    gen = dict(attention_mask=torch.ones_like(ids), pad_token_id=0, eos_token_id=None, max_new_tokens=10,
               min_new_tokens=10, do_sample=True, temperature=0.7, top_k=0)
    torch.manual_seed(1)
    before = model.generate(ids, **gen)
    assert generation.reserve_kv_cache_per_generate(_fake_trainer(model, bf16=False))
    handed = []
    real = generation._reserved_cache
    monkeypatch.setattr(generation, "_reserved_cache", lambda m, n: handed.append(n) or real(m, n))
    torch.manual_seed(1)
    assert torch.equal(model.generate(ids, **gen), before) and handed == [10]
    model.generate(ids, **gen, cache_implementation="dynamic")  # a cache the caller names is left alone
    assert handed == [10]
