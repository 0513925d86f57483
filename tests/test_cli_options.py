"""Every CLI option and every config field does something: the class behind `--assume-timezone` reaching
no feed, `data.eval_split` validated for a trainer that never read it, and tool ranges that ignored the limits.

Three walks, all without training or data:
- every option of every command (introspected from the click app) is read by its command: its parameter
  is used in the callback's body, or reaches a config through the command's option -> field table;
- every option backed by a config (cli/options.py) changes that config's field when given, and shows the
  field's description and default in its help;
- every field of every settings model is read where that config is used (an attribute or a key), every
  field of the SFT and GRPO run configs changes the arguments handed to TRL or is one our own code reads
  (named below with where), and each trainer reads every data field it accepts;
- end to end, with the importer / the evaluation patched to record what they are handed: every option of
  `data import` and of `evaluate` changes that call, or is refused with a message naming it.
Whatever legitimately has no observable effect in this dry setting is in an allow-list with its reason.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer

import thesisgym
from thesisgym.cli import app
from thesisgym.cli.options import ConfigCommand, default_text, field_default, given, load_model

SRC = Path(thesisgym.__file__).parent

# options whose value is consumed outside the callback's own body, or that have no effect to observe
NOT_READ_IN_BODY = {
    "help": "click's own --help",
    "version": "an eager callback (_print_version) prints and exits before the command runs",
}


def _commands() -> list[tuple[str, Any]]:
    """(`thesisgym ...` path, command) for every command of the app, sub-groups walked."""
    out = []

    def walk(cmd: Any, path: str) -> None:
        out.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():  # a group (typer vendors its own click)
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "thesisgym")
    return out


COMMANDS = _commands()
CONFIG_COMMANDS = [(p, c) for p, c in COMMANDS if isinstance(c, ConfigCommand)]


def _names_read(fn) -> set[str]:
    """Names loaded in `fn`'s body, plus the string constants of its module (keys of `ctx.params`/`locals()`
    dicts, option -> field tables)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0]
    names = {n.id for stmt in body.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    module = ast.parse(inspect.getsource(inspect.getmodule(fn)))
    keys = {n.value for n in ast.walk(module) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    wholesale = {"locals", "ctx"} & names  # the callback hands every parameter on at once
    return names | (keys if wholesale else set())


def test_the_walk_sees_every_stage():
    paths = {p for p, _ in COMMANDS}
    for expected in ("thesisgym data import", "thesisgym build", "thesisgym evaluate", "thesisgym train grpo",
                     "thesisgym distill", "thesisgym demo", "thesisgym audit", "thesisgym serve"):
        assert expected in paths
    assert sum(len(c.params) for _, c in COMMANDS) > 150


@pytest.mark.parametrize("path,cmd", [(p, c) for p, c in COMMANDS if c.callback is not None], ids=lambda x: str(x))
def test_every_option_is_read_by_its_command(path, cmd):
    fn = inspect.unwrap(cmd.callback)
    read = _names_read(fn)
    fields = getattr(cmd, "config_fields", {})
    unread = [p.name for p in cmd.params if p.name not in read and p.name not in fields and p.name not in NOT_READ_IN_BODY]
    assert not unread, f"{path}: options never read by {fn.__module__}.{fn.__name__}: {unread}"


# one value per config-backed option that differs from its field's default (the table must cover them all)
CHANGED = {
    "thesisgym evaluate": {"out": "elsewhere", "max_rows": "3", "probes": "anon", "cost_bps": "12.5",
                           "long_only": True, "hold_days": "3", "seed": "7", "judge": "none",
                           "judge_model": "m", "judge_base_url": "http://x/v1", "max_error_rate": "0.5",
                           "bootstrap_reps": "50", "log_nav": True},
    "thesisgym data import": {"prices": "p.csv", "events": "e.csv", "name": "mine", "assume_timezone": "Europe/Paris",
                              "actions": "s.csv", "bars_adjusted_as_of": "2024-01-02",
                              "bars_adjusted_for": "splits+dividends", "fundamentals": "f.json",
                              "submissions": "s.json", "insider": "i.csv", "insider_days": "5", "insider_undated": "drop",
                              "earnings": "e.csv", "analyst": "a.csv", "macro": "m.csv", "feed": "f.xml",
                              "merge_days": "1.5"},
    "thesisgym data synth": {"market": "B", "tickers": "5", "days": "100", "seed": "3"},
    "thesisgym build": {"variations": "3", "stride": "2", "token_budget": "500", "heldout_tickers": "AAA,BBB",
                        "embargo": "20", "seed": "4", "train_end": "0.5", "val_end": "0.9", "label_mode": "paper"},
    "thesisgym distill": {"n": "2", "min_grounding": "0.5", "max_hallucination": "0.2", "decision_tolerance": "1",
                          "keep_per_prompt": "2"},
    "thesisgym demo": {"out": "elsewhere", "seed": "5", "model": "tiny"},
    "thesisgym experiment trade-r1": {"out": "elsewhere", "arms": "fsr,dsr", "seeds": "4,5", "size": "quick",
                                      "preset": "noisy", "grpo_steps": "2", "eval_rows": "8", "seed": "3"},
    "thesisgym experiment tools": {"out": "elsewhere", "grpo_steps": "2", "eval_rows": "8", "seed": "3"},
}
# how the command turns an option's text into the field's value, where it is not the value itself
CONVERT = {("thesisgym build", "heldout_tickers"): lambda v: [t for t in v.split(",")],
           ("thesisgym build", "train_end"): float, ("thesisgym build", "val_end"): float,
           ("thesisgym experiment trade-r1", "arms"): lambda v: v.split(","),
           ("thesisgym experiment trade-r1", "seeds"): lambda v: [int(x) for x in v.split(",")]}


def _args_for(cmd: Any, name: str, value) -> list[str]:
    """Command-line arguments: dummies for the required parameters and `value` for option `name`."""
    args = []
    for p in cmd.params:
        if p.name == name:
            flag = p.opts[0]
            args += [flag] if value is True else [flag, str(value)]
        elif p.required and p.param_type_name == "argument":
            args.append("1")  # "1" parses as every type a required parameter has (path, text, number)
        elif p.required:
            args += [p.opts[0], "1"]
    return args


@pytest.mark.parametrize("path,cmd", CONFIG_COMMANDS, ids=lambda x: str(x))
def test_every_config_backed_option_changes_its_field(path, cmd):
    model = load_model(cmd.config_model)
    assert set(CHANGED[path]) == set(cmd.config_fields), f"{path}: give CHANGED a value for each config option"
    for name, field in cmd.config_fields.items():
        assert field in model.model_fields, f"{path} {name}: {model.__name__} has no field {field!r}"
        ctx = cmd.make_context(path, _args_for(cmd, name, CHANGED[path][name]), resilient_parsing=False)
        picked = given(ctx.params, cmd.config_fields)
        value = picked.get(field)
        value = CONVERT.get((path, name), lambda v: v)(value) if isinstance(value, str) else value
        value = [str(v) for v in value] if isinstance(value, (list, tuple)) else value
        default = field_default(model, field)
        default = [str(v) for v in default] if isinstance(default, (list, tuple)) else default
        assert value is not None and str(value) != str(default), f"{path} {name}: {value!r} vs default {default!r}"
        # nothing else is taken as given: an option left out keeps the config's default
        required = {cmd.config_fields[p.name] for p in cmd.params if p.required and p.name in cmd.config_fields}
        assert set(picked) - {field} <= required, f"{path} {name}: also taken as given: {sorted(set(picked) - {field})}"


@pytest.mark.parametrize("path,cmd", CONFIG_COMMANDS, ids=lambda x: str(x))
def test_config_backed_options_show_the_fields_help_and_default(path, cmd):
    model = load_model(cmd.config_model)
    cmd.describe()
    for p in cmd.params:
        field = cmd.config_fields.get(p.name)
        if field is None or p.required:
            continue
        info = model.model_fields[field]
        if info.description:
            assert p.help == info.description, f"{path} {p.name}"
        shown = default_text(field_default(model, field))
        assert p.show_default == (shown if shown is not None else False), f"{path} {p.name}"
        assert p.default is None, f"{path} {p.name}: a copied default ({p.default!r}) would shadow the config's"


# --- config fields ---------------------------------------------------------------------------------------
# every settings model -> the part of the package that consumes it (a field must be read there)
MODELS = {
    "thesisgym.evaluate.config:EvalConfig": "evaluate",
    "thesisgym.evaluate.config:ReportSection": "evaluate",
    "thesisgym.llm:LLMConfig": "llm.py",
    "thesisgym.data.sources:ImportConfig": "data/sources.py",
    "thesisgym.data.synth:SynthConfig": "data",
    "thesisgym.dataset.splits:SplitConfig": "dataset",
    "thesisgym.dataset.contexts:ContextConfig": "dataset",
    "thesisgym.train.config:TinyConfig": "train",
    "thesisgym.train.config:ModelConfig": "train",
    "thesisgym.train.config:DataConfig": "train",
    "thesisgym.train.config:RunConfig": "train",
    "thesisgym.train.config:SFTRunConfig": "train",
    "thesisgym.train.config:GRPORunConfig": "train",
    "thesisgym.train.config:RewardConfig": "train",
    "thesisgym.train.config:ToolRunConfig": "train",
    "thesisgym.train.config:DistillStageConfig": "train",
    "thesisgym.train.config:CurriculumStage": "train",
    "thesisgym.train.config:CurriculumConfig": "train",
    "thesisgym.experiments.demo:DemoConfig": "experiments",
    "thesisgym.experiments.trade_r1:TradeR1Config": "experiments",
    "thesisgym.experiments.tool_agent:ToolExperimentConfig": "experiments",
}
# fields no code reads by name, with the reason they still act
READ_WHOLESALE = {
    "kind": "the discriminator load_config picks the model by",
    **{f"{s}_{what}": "read per section as getattr(cfg, f'{section}_days' / '_items') in dataset/contexts.py"
       for s in ("fundamentals", "insider", "analyst", "macro") for what in ("days", "items")},
}


def _reads(where: str) -> set[str]:
    """Attribute names read (`x.name`) and string constants (`d["name"]`, `.get("name")`) under `where`."""
    root = SRC / where
    files = [root] if root.suffix == ".py" else sorted(root.rglob("*.py"))
    out: set[str] = set()
    for path in files:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                out.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value)
            elif isinstance(n, ast.keyword) and n.arg:  # `fn(field=...)` built from a model_dump()
                out.add(n.arg)
    return out


def test_every_settings_model_is_walked():
    """A new pydantic settings model (a `...Config` class) must join MODELS."""
    found = set()
    for path in SRC.rglob("*.py"):
        if "integrations" in path.parts:  # the trainer adapters' configs are the host frameworks' (verifiers)
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ClassDef) and n.name.endswith("Config") and not n.name.startswith("_"):
                mod = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
                found.add(f"{mod}:{n.name}")
    assert found - set(MODELS) == set(), "settings models missing from MODELS"


@pytest.mark.parametrize("model_path", sorted(MODELS))
def test_every_config_field_is_read_where_the_config_is_used(model_path):
    model = load_model(model_path)
    reads = _reads(MODELS[model_path])
    unread = [f for f in model.model_fields if f not in reads and f not in READ_WHOLESALE]
    assert not unread, f"{model.__name__}: fields nothing in src/thesisgym/{MODELS[model_path]} reads: {unread}"


# a changed value per field of the SFT and GRPO run configs (several: the first that differs counts)
RUN_CHANGES: dict[str, list] = {
    "output_dir": ["elsewhere"], "seed": [7], "max_steps": [3], "num_train_epochs": [2.0], "learning_rate": [3e-3],
    "lr_scheduler_type": ["cosine"], "warmup_ratio": [0.1], "per_device_train_batch_size": [2],
    "gradient_accumulation_steps": [3], "logging_steps": [5], "save_steps": [9], "save_total_limit": [None],
    "bf16": [True, False], "gradient_checkpointing": [True, False], "report_to": ["all", "none"],
    "max_length": [512], "completion_only_loss": [False], "packing": [True],
    "num_generations": [8], "max_completion_length": [64], "temperature": [0.7], "top_p": [0.9], "beta": [0.04],
    "scale_rewards": ["batch"], "multi_objective_aggregation": ["normalize_then_sum"], "loss_type": ["grpo"],
    "log_completions": [True], "tools": [{"max_calls": 3}], "vllm_mode": ["server"],
    "vllm_gpu_memory_utilization": [0.5], "vllm_tensor_parallel_size": [2],
}
# fields that do not reach TRL's arguments, and where they act instead
OWN_CODE = {
    "kind": "picks SFT or GRPO (load_config)",
    "model": "the model loaded (train/models.py load_model)",
    "data": "the rows trained on (train/common.py load_split; eval_split: train/sft.py)",
    "rewards": "the reward functions (train/rewards.py build_rewards)",
    "trl": "passed through to TRL by trl_args after to_trl_kwargs (test_train checks the passthrough)",
    "device": "resolves to the CPU here whatever is asked ('cuda' needs a GPU); test_train covers resolve_device",
    "use_vllm": "needs a GPU: to_trl_kwargs refuses it on a CPU (test_train)",
    "vllm_server_base_url": "read only with use_vllm and vllm_mode server, which need a GPU",
}


@pytest.mark.parametrize("kind", ["sft", "grpo"])
def test_every_run_config_field_reaches_trl_or_our_code(kind):
    from thesisgym.train.config import build_config, to_trl_kwargs

    base = {"output_dir": "out", "data": {"dataset": "ds"}, "device": "cpu"}
    before = to_trl_kwargs(build_config(base, kind=kind))
    fields = type(build_config(base, kind=kind)).model_fields
    missing = set(fields) - set(RUN_CHANGES) - set(OWN_CODE)
    assert not missing, f"give RUN_CHANGES a value (or OWN_CODE a reason) for {sorted(missing)}"
    for field in fields:
        if field in OWN_CODE:
            continue
        after = [to_trl_kwargs(build_config({**base, field: v}, kind=kind)) for v in RUN_CHANGES[field]]
        assert any(a != before for a in after), f"{kind} config field {field!r} changes nothing TRL receives"


@pytest.mark.parametrize("trainer", ["sft", "grpo"])
def test_every_data_field_a_trainer_accepts_is_read_by_it(trainer):
    """`data.eval_split` validated for GRPO while only SFT read it: a field a kind accepts, its trainer reads."""
    from thesisgym.train.config import DataConfig, build_config

    reads = _reads(f"train/{trainer}.py")
    for field in DataConfig.model_fields:
        data = {"dataset": "ds", field: "val" if field == "eval_split" else DataConfig.model_fields[field].default}
        if field in ("dataset", "split"):
            data[field] = "x"
        try:
            build_config({"output_dir": "out", "data": data}, kind=trainer)
        except ValueError:
            continue  # refused for this kind (eval_split for GRPO, with a message naming thesisgym evaluate)
        assert field in reads, f"train/{trainer}.py accepts data.{field} but never reads it"


# --- end to end: every option of `data import` changes the call that imports --------------------------
class _Captured(Exception):
    """Raised by the patched importers: the call is recorded and nothing is read."""


IMPORT_CHANGES = {  # option -> its command-line arguments (flag and value)
    "--events": ["e.csv"], "--name": ["mine"], "--unknown-tickers": ["drop"], "--duplicates": ["drop"],
    "--assume-timezone": ["America/New_York"], "--no-ticker-map": [], "--splits": ["s.csv"],
    "--prices-adjusted-as-of": ["2024-04-02"], "--prices-adjusted-for": ["splits+dividends"],
    "--fundamentals": ["f.json"], "--submissions": ["s.json"], "--insider": ["i.csv"],
    "--insider-availability-days": ["5"], "--insider-undated": ["drop"], "--earnings": ["e.csv"], "--trust-pre-market": [], "--analyst": ["a.csv"],
    "--macro": ["m.csv"], "--feed": ["f.xml"], "--merge-days": ["1"], "--keep-content-suspects": [],
}
YFINANCE_CHANGES = {"--yfinance": ["BBB"], "--start": ["2020-01-03"], "--end": ["2020-03-01"], "--name": ["mine"]}
# options of `data import` that act after the import call
AFTER_THE_IMPORT = {"--out": "where the store is saved", "--verbose": "the summary printed (test_data checks it)",
                    "--prices": "the base of every call below", "--help": "click's own"}


def test_every_data_import_option_changes_the_import_call(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import thesisgym.data.importers as importers
    import thesisgym.data.sources as sources

    calls = []

    def recorder(name):
        def record(*args, **kwargs):
            calls.append((name, repr(args), repr(sorted(kwargs.items()))))
            raise _Captured

        return record

    monkeypatch.setattr(sources, "import_sources", recorder("import_sources"))
    monkeypatch.setattr(importers, "import_store", recorder("import_store"))
    monkeypatch.setattr(importers, "fetch_yfinance", recorder("fetch_yfinance"))
    cmd = dict(COMMANDS)["thesisgym data import"]
    flags = {p.opts[0] for p in cmd.params} | {"--help"}
    assert flags == set(IMPORT_CHANGES) | set(YFINANCE_CHANGES) | set(AFTER_THE_IMPORT)

    def call(base, flag, value):
        args = ["data", "import", *base, "--out", str(tmp_path / "s")]
        if flag is not None:
            if flag in args:  # the changed option replaces the base's value of that option
                args[args.index(flag) + 1] = value[0]
            else:
                args += [flag, *value]
        result = CliRunner().invoke(app, args)
        if result.exit_code == 2:  # refused, naming the option: not ignored either
            assert flag in result.output and "Traceback" not in result.output, (flag, result.output)
            return "refused"
        assert isinstance(result.exception, _Captured), (flag, result.output)
        return calls[-1]

    for base, changes in ((["--prices", "p.csv"], IMPORT_CHANGES),
                          (["--prices", "p.csv", "--insider", "i0.csv", "--earnings", "e0.csv"], IMPORT_CHANGES),
                          (["--yfinance", "AAA", "--start", "2020-01-02", "--end", "2020-02-01"], YFINANCE_CHANGES)):
        before = call(base, None, None)
        for flag, value in changes.items():
            if flag == "--unknown-tickers" and "--insider" in base:  # families always drop and count (its help)
                assert call(base, flag, ["error"]) == "refused"
                continue
            assert call(base, flag, value) != before, f"data import {flag} changed nothing the importer receives"
    # an option that acts on a family reaches the importer when the family is there
    assert call(["--prices", "p.csv", "--insider", "i.csv"], "--insider-availability-days", ["5"]) != "refused"
    assert call(["--prices", "p.csv", "--insider", "i.csv"], "--insider-undated", ["drop"]) != "refused"
    assert call(["--prices", "p.csv", "--earnings", "e.csv"], "--trust-pre-market", []) != "refused"


# --- end to end: every option of `evaluate` changes what the evaluation is handed ----------------------
EVAL_BASES = {"hf": ["--model", "m"], "openai": ["--openai-model", "x", "--base-url", "http://a/v1"],
              "judge": ["--baselines-only", "--judge", "llm", "--judge-model", "jm"], "plain": ["--baselines-only"]}
EVAL_CHANGES = {  # option -> (base, its arguments)
    "--dataset": ("plain", ["d2"]), "--out": ("plain", ["o2"]), "--split": ("plain", ["val"]),
    "--store": ("plain", ["st"]), "--config": ("plain", ["cfg.yaml"]), "--model": ("hf", ["m2"]),
    "--completions": ("plain", None), "--openai-model": ("openai", ["y"]), "--baselines-only": ("hf", None),
    "--teacher-completions": ("plain", ["t.jsonl"]), "--base-url": ("openai", ["http://b/v1"]),
    "--api-key-env": ("openai", ["MY_KEY"]), "--concurrency": ("openai", ["2"]), "--timeout": ("judge", ["9"]),
    "--retries": ("judge", ["1"]), "--cache": ("judge", [""]), "--max-error-rate": ("plain", ["0.5"]),
    "--judge": ("plain", ["none"]), "--judge-model": ("judge", ["jm2"]), "--judge-base-url": ("judge", ["http://j"]),
    "--probes": ("plain", ["anon"]), "--max-rows": ("plain", ["3"]), "--cost-bps": ("plain", ["9"]),
    "--long-only": ("plain", []), "--hold-days": ("plain", ["3"]), "--heldout": ("plain", None),
    "--log-nav": ("plain", []), "--bootstrap-reps": ("plain", ["20"]), "--max-new-tokens": ("hf", ["7"]),
    "--batch-size": ("hf", ["3"]), "--temperature": ("openai", ["0.5"]), "--seed": ("hf", ["9"]),
    "--threads": ("hf", ["2"]),
}
SWAPS = {"--completions": ["--completions", "c.jsonl"], "--baselines-only": ["--baselines-only"],
         "--heldout": ["--no-heldout"]}  # a policy source replaces the base's; --heldout is on by default


def test_every_evaluate_option_changes_what_the_evaluation_gets(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import thesisgym.cli.evaluate as ev
    import thesisgym.evaluate as evaluate_pkg

    (tmp_path / "cfg.yaml").write_text("cost_bps: 20\n")
    seen: list = []

    def policy(name):
        return lambda *a, **kw: (name, a, sorted(kw.items()))

    for name in ("HFPolicy", "OpenAIPolicy", "JsonlPolicy"):
        monkeypatch.setattr(evaluate_pkg, name, policy(name))
    monkeypatch.setattr(ev, "quiet_libraries", lambda: None)
    monkeypatch.setattr(ev, "set_threads", lambda n, model: seen.append(("threads", n, model)))
    monkeypatch.setattr(ev, "load_splits", lambda d, s, heldout: seen.append(("splits", str(d), s, heldout)) or (1, 2, 3))

    def run(o, cfg, dataset, store, data, held, train):
        teacher = o["teacher_completions"]
        seen.append(("run", ev.build_policy(o), cfg.model_dump_json(), str(store), str(teacher)))
        raise _Captured

    monkeypatch.setattr(ev, "run", run)
    cmd = dict(COMMANDS)["thesisgym evaluate"]
    assert {p.opts[0] for p in cmd.params} - {"--help"} == set(EVAL_CHANGES)

    def call(base: str, extra: list[str]) -> list:
        seen.clear()
        args = ["evaluate", "--dataset", "d", "--out", "o", *EVAL_BASES[base]]
        for flag in {"--dataset", "--out"} & set(extra):
            i = args.index(flag)
            del args[i:i + 2]
        if extra[:1] in (["--completions"], ["--baselines-only"]):  # exactly one policy source
            args = ["evaluate", "--dataset", "d", "--out", "o"]
        result = CliRunner().invoke(app, [*args, *extra], catch_exceptions=True)
        assert isinstance(result.exception, _Captured), (extra, result.output)
        return list(seen)

    for flag, (base, value) in EVAL_CHANGES.items():
        if flag == "--config":
            value = [str(tmp_path / "cfg.yaml")]
        extra = SWAPS[flag] if value is None else [flag, *value]
        assert call(base, extra) != call(base, []), f"evaluate {flag} changed nothing the evaluation receives"
