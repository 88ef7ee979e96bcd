"""Form widgets built from an operation's fields (hibug_core.operations): the field's default, its allowed
choices, limits and help, so a page's form cannot drift from what the CLI and the job accept."""
from __future__ import annotations

import math

from annotated_types import Ge, Gt, Le, Lt

from hibug_core.errors import HibugError
from hibug_core.operations import Operation

MAX_SAFE_INTEGER = 2**53 - 1  # the largest whole number a browser's number input holds exactly


def _limits(info) -> dict:
    limits = {}
    for rule in info.metadata:
        if isinstance(rule, (Ge, Gt)):
            limits["min_value"] = rule.ge if isinstance(rule, Ge) else rule.gt
        elif isinstance(rule, (Le, Lt)):
            limits["max_value"] = rule.le if isinstance(rule, Le) else rule.lt
    return limits


def within_limits(value, default, kind: type, limits: dict):
    """A number from a link or an old session as the widget can take it: not a number (text, NaN) gives the field's
    default, and one outside the field's limits (or, where it has none, outside the whole numbers a browser holds
    exactly) is clamped to the nearest limit, never an exception on the page."""
    try:
        number = float(value if value is not None else default if default is not None else limits.get("min_value", 0))
    except (TypeError, ValueError, OverflowError):
        number = float("nan")
    if math.isnan(number):
        number = float(default if default is not None else limits.get("min_value", 0))
    low, high = limits.get("min_value", -MAX_SAFE_INTEGER), limits.get("max_value", MAX_SAFE_INTEGER)
    number = min(max(number, low), high)
    return int(number) if kind is int else float(number)


def field_input(container, op: type[Operation], name: str, label: str, *, key: str, value=None, options=None,
                format_func=None, help: str | None = None, **extra):
    """The widget for `op.name`: a selectbox over its choices (or `options`, which must be among them), a number
    input within its limits, a checkbox, or a text input; `value` overrides the field's default."""
    info = op.model_fields[name]
    default = op.default(name) if value is None else value
    help = help if help is not None else info.description
    if op.rule(name) is not None or options is not None:
        choices = list(options) if options is not None else op.choices(name)
        index = choices.index(default) if default in choices else 0
        return container.selectbox(label, choices, index=index, key=key, help=help,
                                   **({"format_func": format_func} if format_func else {}), **extra)
    kind, _ = op.field_type(name)
    if kind is bool:
        return container.checkbox(label, value=bool(default), key=key, help=help, **extra)
    if kind in (int, float):
        limits = _limits(info)
        return container.number_input(label, value=within_limits(default, op.default(name), kind, limits), key=key,
                                      help=help, **{**({k: kind(v) for k, v in limits.items()}), **extra})
    return container.text_input(label, value="" if default is None else str(default), key=key, help=help, **extra)


def in_words(name: str) -> str:
    """A registry name as a person reads it ("confident_gap" -> "confident gap"): a module-level function, so the
    widgets that show it keep a session state that can be saved."""
    return str(name).replace("_", " ")


def chosen_or_typed(chosen: str, typed: str, other: str, what: str) -> str:
    """The value of a choice with a field to type another into: what is typed wins, whatever the box says (typing it
    is the plainer act); `other` chosen with nothing typed is said on the page, and "" returned (nothing to run)."""
    import streamlit as st

    if typed.strip():
        if chosen != other:
            st.toast(f"Using the {what} typed, {typed.strip()}, rather than {chosen}", icon=":material/info:")
        return typed.strip()
    if chosen == other:
        st.error(f"Type the {what} to use in 'Other {what}', or choose one in the list; nothing was started.")
        return ""
    return chosen


def budget_input(container, op: type[Operation], *, key: str, training: int, images: str = "images"):
    """The budget of `op` typed as a count ("40") or a share ("0.1", "10%"), with both readings shown under it
    against the `training` count the task states; None (with the reason shown) while what is typed is not one."""
    from hibug_core.repair.selection import describe_budget, parse_budget

    default = op.default("budget")
    typed = container.text_input("Budget", value=str(default), key=key, help=op.help("budget"))
    try:
        budget = parse_budget(typed)
        container.caption(f"= {describe_budget(budget, training, images)}")
        return budget
    except (ValueError, HibugError) as error:
        container.caption(f"⚠ {error}")
        return None
