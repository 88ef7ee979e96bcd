"""The name a repaired model's outputs are stored under, and the model it repairs: one spelling, read back to group
repaired models under their parent (the model picker, reports)."""
from __future__ import annotations

SEPARATOR = " · repair "


def repaired_name(parent: str, run_id: int, method: str, seed: int) -> str:
    """'shape-cnn · repair 3 hibug s0': the outputs of `parent` retrained by repair run `run_id` with `method`."""
    return f"{parent}{SEPARATOR}{run_id} {method} s{seed}"


def parent_of(model: str) -> str | None:
    """The model a repaired model repairs; None for a model that is not a repair."""
    return model.split(SEPARATOR, 1)[0] if SEPARATOR in model else None


def repair_label(model: str) -> str | None:
    """'repair 3 hibug s0': how a repaired model reads under its parent; None for a model that is not a repair."""
    return "repair " + model.split(SEPARATOR, 1)[1] if SEPARATOR in model else None


def grouped(models: list[str]) -> list[str]:
    """The models with each one's repaired versions right after it (in their order); a repair whose parent is not
    among them comes last."""
    repairs = [m for m in models if parent_of(m) is not None]
    parents = [m for m in models if parent_of(m) is None]
    ordered = []
    for parent in parents:
        ordered += [parent, *(m for m in repairs if parent_of(m) == parent)]
    return ordered + [m for m in repairs if parent_of(m) not in parents]


def families(models: list[str]) -> dict[str, list[str]]:
    """{model that is not a repair: its repaired versions}, in order; orphan repairs under their parent's name."""
    found: dict[str, list[str]] = {}
    for model in grouped(models):
        found.setdefault(parent_of(model) or model, [])
        if parent_of(model) is not None:
            found[parent_of(model)].append(model)
    return found
