"""Form widgets built from an operation's fields (hibug_core.operations): the field's default, its allowed
choices, limits and help, so a page's form cannot drift from what the CLI and the job accept."""
from __future__ import annotations

from annotated_types import Ge, Gt, Le, Lt

from hibug_core.errors import HibugError
from hibug_core.operations import Operation


def _limits(info) -> dict:
    limits = {}
    for rule in info.metadata:
        if isinstance(rule, (Ge, Gt)):
            limits["min_value"] = rule.ge if isinstance(rule, Ge) else rule.gt
        elif isinstance(rule, (Le, Lt)):
            limits["max_value"] = rule.le if isinstance(rule, Le) else rule.lt
    return limits


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
        if kind is float:
            limits = {k: float(v) for k, v in limits.items()}
            default = float(default if default is not None else limits.get("min_value", 0.0))
        else:
            default = int(default if default is not None else limits.get("min_value", 0))
        # a value from a link or an old session outside the limits is clamped, not an exception on the page
        default = min(max(default, limits.get("min_value", default)), limits.get("max_value", default))
        return container.number_input(label, value=default, key=key, help=help, **{**limits, **extra})
    return container.text_input(label, value="" if default is None else str(default), key=key, help=help, **extra)


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
