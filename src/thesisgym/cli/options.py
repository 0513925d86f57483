"""Options backed by a pydantic config: the config holds each default and help text, the CLI copies neither.

Why: a command that repeats a config's defaults drifts from it (the CLI says 5 bps, the config 10),
and its help drifts from the field's description. As TRL's `HfArgumentParser` reads a dataclass's
fields, a command made with `config_command(model, fields)` reads its config model's fields: each
option in `fields` (option parameter -> model field) has the default None, meaning "not given", so
the model's default (or a `--config` file's value) holds; `given(params, fields)` picks the options
the user gave, to pass to the model. The help screen shows each such option with its field's
description and default. The model is named as "module:Class" and imported only when the help is
printed: importing every stage's config (EvalConfig pulls in the evaluation stack) would make every
`thesisgym` call slow.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from typer.core import TyperCommand


def load_model(path: str) -> Any:
    """The pydantic model class named by `path` ("package.module:Class")."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def field_default(model: Any, field: str) -> Any:
    """The default of `model.field` (calling its default_factory); PydanticUndefined when required."""
    info = model.model_fields[field]
    if info.default_factory is not None:
        return info.default_factory()
    return info.default


def default_text(value: Any) -> str | None:
    """How the help shows a default: lists comma-joined; None, empty and required ones not at all."""
    from pydantic_core import PydanticUndefined  # here: `thesisgym --help` need not load pydantic

    if value is None or value is PydanticUndefined:
        return None
    if isinstance(value, (list, tuple, dict)) and not value:
        return None
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class ConfigCommand(TyperCommand):
    """A typer command whose options in `config_fields` show their config field's help and default."""

    config_model: str = ""
    config_fields: Mapping[str, str] = {}

    def describe(self) -> None:
        """Fill each config-backed option's help and shown default from the model (see the module docstring)."""
        model = load_model(self.config_model)
        for param in self.params:
            field = self.config_fields.get(param.name or "")
            if field is None or param.required:  # a required option's own help says what the command needs
                continue
            info = model.model_fields[field]
            param.help = info.description or getattr(param, "help", None)  # type: ignore[attr-defined]
            shown = default_text(field_default(model, field))
            param.show_default = shown if shown is not None else False  # type: ignore[attr-defined]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.describe()
        super().format_help(ctx, formatter)


def config_command(model: str, fields: Mapping[str, str]) -> type[ConfigCommand]:
    """A `ConfigCommand` class for `app.command(name, cls=...)`: options `fields` (parameter -> field) of `model`."""
    return type("ConfigCommand", (ConfigCommand,), {"config_model": model, "config_fields": dict(fields)})


def given(params: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """{field: value} of the config-backed options the user gave: not None, and for a repeatable option
    not empty (click hands an unused one over as an empty list, which a command line cannot ask for)."""
    return {field: params[name] for name, field in fields.items() if params.get(name) not in (None, [], ())}
