"""Slices that tell nothing new on their own: refinements of a reported slice (its conditions plus more), and slices
whose failures are mostly the failures of one slice ranked above them (often the same images named by other
attributes). They are listed after the distinct slices, each with the slice it repeats."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.slices.search import TagMatrix


def repeated_slices(definitions, tags: TagMatrix, errors: np.ndarray, max_overlap: float) -> list[int | None]:
    """For slices in rank order, the position of the slice each repeats (None: it is distinct). A slice repeats a
    reported ancestor (a slice whose conditions are a subset of its own; the nearest one, best ranked), else the first
    distinct slice above it that holds at least `max_overlap` of its errors."""
    errors = np.asarray(errors, dtype=float)
    conditions = [frozenset(d) for d in definitions]
    of: list[int | None] = [None] * len(definitions)
    for i, mine in enumerate(conditions):
        ancestors = [j for j, other in enumerate(conditions) if j != i and other < mine]
        if ancestors:
            of[i] = max(ancestors, key=lambda j: (len(conditions[j]), -j))
    distinct: list[tuple[int, np.ndarray]] = []
    for i, definition in enumerate(definitions):
        if of[i] is not None:
            continue
        inside = tags.mask(definition)
        weight = errors[inside].sum()
        for j, other in distinct:
            if weight > 0 and errors[inside & other].sum() >= max_overlap * weight:
                of[i] = j
                break
        else:
            distinct.append((i, inside))
    return of


def mark_repeats(slices: pd.DataFrame, tags: TagMatrix, errors: np.ndarray, max_overlap: float) -> pd.DataFrame:
    """Adds `repeats` (the description of the slice it repeats, or "") and moves those slices after the distinct
    ones, keeping the order within each group. max_overlap >= 1 turns this off."""
    if slices.empty or max_overlap >= 1:
        return slices.assign(repeats="")
    of = repeated_slices(list(slices["definition"]), tags, errors, max_overlap)
    descriptions = slices["description"].to_numpy()
    flags = np.array([j is not None for j in of])
    slices = slices.assign(repeats=[descriptions[j] if j is not None else "" for j in of])
    return slices.iloc[np.concatenate([np.flatnonzero(~flags), np.flatnonzero(flags)])]
