"""Slices that tell nothing new on their own. Reported slices form families by refinement (a slice and the reported
slices that add conditions to it); each family is shown by one representative: from its root, go down to the
refinement that holds most of the failures while it holds at least `max_overlap` of them (the bug is that narrower
slice), else stop (the failures are spread: the broader slice stands for them); with narrow=False the root stands for
its family. A representative with most of its
failures inside a distinct slice ranked above it (often the same images named by other attributes) repeats it too.
The rest are listed after the distinct slices, each with the slice it belongs to."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.slices.bitsets import count_rows, masked_sum
from hibug_core.slices.search import TagMatrix


def repeated_slices(definitions, tags: TagMatrix, errors: np.ndarray, max_overlap: float, *,
                    narrow: bool = True) -> list[int | None]:
    """For slices in rank order, the position of the slice each belongs to (None: it is distinct)."""
    errors = np.ascontiguousarray(errors, dtype=float)
    conditions = [frozenset(d) for d in definitions]
    rows = tags.bitsets(definitions)  # packed: 300 masks of ten million rows were 3 GB
    failures = [masked_sum(r, errors) for r in rows]
    sizes = [count_rows(r) for r in rows]
    n = len(definitions)
    ancestors = [[j for j in range(n) if j != i and conditions[j] < conditions[i]] for i in range(n)]
    roots = [i for i in range(n) if not ancestors[i]]
    of: list[int | None] = [None] * n
    representatives = []
    for root in roots:
        family = [i for i in range(n) if i == root or root in ancestors[i]]
        chosen = root
        while True:
            # a refinement that holds the very same samples only names them with more words: it never stands for them
            below = [i for i in family if conditions[chosen] < conditions[i] and sizes[i] < sizes[chosen]]
            if not narrow:
                break
            best = max(below, key=lambda i: (failures[i], -i), default=None)
            if best is None or failures[best] < max_overlap * failures[chosen]:
                break
            chosen = best
        representatives.append(chosen)
        for i in family:
            if i != chosen and of[i] is None:
                of[i] = chosen
    distinct: list[int] = []
    for i in sorted(set(representatives)):
        of[i] = None
        holder = next((j for j in distinct if failures[i] > 0 and
                       masked_sum(rows[i] & rows[j], errors) >= max_overlap * failures[i]), None)
        if holder is None:
            distinct.append(i)
        else:
            of[i] = holder
    # a slice folded into a representative that itself repeats another belongs to that one
    for i in range(n):
        while of[i] is not None and of[of[i]] is not None:
            of[i] = of[of[i]]
    return of


def mark_repeats(slices: pd.DataFrame, tags: TagMatrix, errors: np.ndarray, max_overlap: float, *,
                 narrow: bool = True, own_kinds=(), explained: pd.Series | None = None) -> pd.DataFrame:
    """Adds `repeats` (the description of the slice it belongs to, or "") and moves those slices after the distinct
    ones, keeping the order within each group. max_overlap >= 1 turns this off. Slices whose `bug_type` is one of
    `own_kinds` are grouped among themselves, kind by kind: such a bug is never folded into a slice of another kind,
    nor another kind into it. `explained` (per slice, the description of the slice whose bug explains its own, or "")
    folds a slice, and what was folded into it, under that one."""
    if slices.empty or max_overlap >= 1:
        return slices.assign(repeats="")
    kinds = slices["bug_type"].to_numpy(object) if "bug_type" in slices.columns else np.full(len(slices), "")
    groups = np.array([kind if kind in own_kinds else "" for kind in kinds], dtype=object)
    repeats = np.full(len(slices), "", dtype=object)
    descriptions = slices["description"].to_numpy()
    for group in dict.fromkeys(groups):
        rows = np.flatnonzero(groups == group)
        of = repeated_slices([slices["definition"].iat[r] for r in rows], tags, errors, max_overlap, narrow=narrow)
        repeats[rows] = [descriptions[rows[j]] if j is not None else "" for j in of]
    if explained is not None:
        _fold_explained(repeats, descriptions, explained.to_numpy(object))
    flags = repeats != ""
    slices = slices.assign(repeats=repeats)
    return slices.iloc[np.concatenate([np.flatnonzero(~flags), np.flatnonzero(flags)])]


def _fold_explained(repeats: np.ndarray, descriptions: np.ndarray, explained: np.ndarray) -> None:
    """Each explained slice, and the slices it held, under the slice that explains it (which stands on its own if
    it had been folded under the explained one); then every chain ends at a distinct slice."""
    position = {d: k for k, d in enumerate(descriptions)}
    for row in np.flatnonzero(explained != ""):
        by, mine = explained[row], descriptions[row]
        if by not in position:
            continue
        if repeats[position[by]] == mine:
            repeats[position[by]] = ""
        repeats[(repeats == mine) | (np.arange(len(repeats)) == row)] = by
    for row in range(len(repeats)):
        seen = {row}
        while repeats[row] and repeats[position[repeats[row]]] and position[repeats[row]] not in seen:
            seen.add(position[repeats[row]])
            repeats[row] = repeats[position[repeats[row]]]
