"""Command-line options generated from an operation's fields (hibug_core.operations), and the operation read back."""
from __future__ import annotations

import argparse

from hibug_core.cli.help_text import literal_help
from hibug_core.operations import Cli, LLMSettings, OneOf, Operation
from hibug_core.registry import Registry


def _cli(info) -> Cli:
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


def _comma_list(kind):
    def parse(text: str):
        return [kind(part.strip()) for part in text.split(",") if part.strip()]
    return parse


def option_names(op: type[Operation]) -> dict[str, str]:
    """field -> its option as typed ('--batch-size', or the field name for a positional one); skipped fields omitted."""
    names = {}
    shared_last = sorted(op.model_fields, key=lambda name: name in LLMSettings.model_fields)  # --llm-* at the end
    for name in shared_last:
        info = op.model_fields[name]
        cli = _cli(info)
        if not cli.skip:
            names[name] = name if cli.positional else (cli.flag or "--" + name.replace("_", "-"))
    return names


def add_operation_options(parser: argparse.ArgumentParser, op: type[Operation]) -> None:
    """One argparse option per field of `op`: its type, default, choices and help come from the field."""
    for name, flag in option_names(op).items():
        info = op.model_fields[name]
        cli, rule = _cli(info), op.rule(name)
        kind, is_list = op.field_type(name)
        default = op.default(name) if not info.is_required() else None
        help_text = literal_help(info.description or "")
        if kind is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=default,
                                help=f"{help_text} (default: {'on' if default else 'off'})")
            continue
        shown_default = literal_help(f" (default: {default})") if default not in (None, [], "") else ""
        options: dict = {"help": help_text + shown_default}
        if rule is not None and not _has_families(rule):
            options["choices"] = rule.names() + ([] if default in rule.names() or default is None else [default])
        if is_list:
            if cli.comma:
                options["type"] = _comma_list(kind)
            elif cli.repeat:
                options.update(action="append", type=kind)
            else:
                options.update(nargs="+", type=kind)
        elif cli.parse is not None:
            options["type"] = cli.parse
        elif kind in (int, float):
            options["type"] = kind
        if cli.positional:
            parser.add_argument(name, **options)
        else:
            if info.is_required():
                options["required"] = True
            parser.add_argument(flag, dest=name, default=None if cli.repeat else default, **options)


def _has_families(rule: OneOf) -> bool:
    """Whether a rule also allows what a menu cannot list (typed specs, test-only entries)."""
    return isinstance(rule.choices, Registry) and (bool(rule.choices.families()) or
                                                   any(e.hidden for e in rule.choices))


def operation_from_args(op: type[Operation], args: argparse.Namespace, **more):
    """The operation from parsed options (validated: a bad value names its field)."""
    values = {name: getattr(args, name) for name in option_names(op)}
    return op.build({k: v for k, v in values.items() if v is not None}, **more)
