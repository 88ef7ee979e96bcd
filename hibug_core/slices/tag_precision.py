"""How far a slice's tags can be trusted: the share of its images whose true tags (known or audited) match them all."""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit, prange

from hibug_core.slices.search import codes_among
from hibug_core.stats import wilson_interval

KNOWN_PREFIX = "known: "  # an attribute named "known: size" is the imported attr:size column itself
KNOWN, RIGHT = 1, 2  # a row's truth for an attribute: known, and the tag in force agrees with it


def slice_tag_precision(definitions, tags: pd.DataFrame, truth: pd.DataFrame | None, *, skip: set[str] = frozenset(),
                        z: float = 1.96) -> pd.DataFrame:
    """Per slice definition: over every sample (any split) that the tags in force put in the slice and whose true tag
    is known for each checked attribute, how many have all the slice's tags right; with a Wilson interval.
    Attributes in `skip` (the label) and attributes without any truth are not checked; `tag_checked_attributes`
    lists the ones that were. No truth at all (or truth=None): NaN precision, nothing checked."""
    definitions = list(definitions)
    truth = pd.DataFrame(index=tags.index[:0]) if truth is None else truth
    checkable = {a for a in tags.columns if a not in skip and a.removeprefix(KNOWN_PREFIX) in truth.columns}
    # 1. Only the attributes the slices name, as codes and truth states (categorical codes: nothing compared as text).
    used = list(dict.fromkeys(a for definition in definitions for a, _ in definition))
    codes = np.full((len(used), len(tags)), -1, dtype=np.int16)
    states = np.zeros((len(used), len(tags)), dtype=np.uint8)
    for i, attribute in enumerate(used):
        codes[i] = tags[attribute].cat.codes.to_numpy()
        if attribute in checkable:
            true = truth[attribute.removeprefix(KNOWN_PREFIX)]
            true = true if true.index.equals(tags.index) else true.reindex(tags.index)
            names = list(map(str, tags[attribute].cat.categories))
            true_codes = codes_among(true, names)
            states[i] = np.where(true.notna().to_numpy(), KNOWN, 0) | np.where(
                (true_codes >= 0) & (true_codes == codes[i]), RIGHT, 0)
    # 2. Each slice's conditions as (attribute row, tag code, checked), counted in one pass over the rows per slice.
    width = max((len(d) for d in definitions), default=0)
    rows = np.zeros((len(definitions), max(width, 1)), dtype=np.int64)
    wanted = np.full((len(definitions), max(width, 1)), -2, dtype=np.int64)
    checked = np.zeros((len(definitions), max(width, 1)), dtype=np.bool_)
    lengths = np.zeros(len(definitions), dtype=np.int64)
    names_checked = []
    for d, definition in enumerate(definitions):
        lengths[d] = len(definition)
        for c, (attribute, tag) in enumerate(definition):
            categories = list(map(str, tags[attribute].cat.categories))
            rows[d, c] = used.index(attribute)
            wanted[d, c] = categories.index(str(tag)) if str(tag) in categories else -2
            checked[d, c] = attribute in checkable
        names_checked.append(", ".join(a for a, _ in definition if a in checkable) if checkable else "")
    counts = np.zeros((len(definitions), 2), dtype=np.int64)
    if checkable and len(definitions):
        _checked_counts(codes, states, rows, wanted, checked, lengths, counts)
    frame = pd.DataFrame({"tag_checked": counts[:, 0], "tag_right": counts[:, 1],
                          "tag_checked_attributes": names_checked})
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["tag_precision"] = np.where(frame["tag_checked"] > 0, frame["tag_right"] / frame["tag_checked"], np.nan)
    low, high = wilson_interval(frame["tag_right"].to_numpy(float), frame["tag_checked"].to_numpy(float), z)
    unchecked = frame["tag_checked"].to_numpy() == 0
    frame["tag_precision_low"] = np.where(unchecked, np.nan, low)
    frame["tag_precision_high"] = np.where(unchecked, np.nan, high)
    return frame


@njit(parallel=True, cache=True)
def _checked_counts(codes, states, rows, wanted, checked, lengths, out):
    """out[d] = (rows in slice d whose truth is known for each checked condition, those with every checked tag right);
    (0, 0) for a slice with no checked condition. A row leaves at its first unmet condition."""
    for d in prange(len(lengths)):
        any_checked = False
        for c in range(lengths[d]):
            any_checked = any_checked or checked[d, c]
        if not any_checked:
            continue
        known = 0
        right = 0
        for i in range(codes.shape[1]):
            inside = True
            state = KNOWN | RIGHT
            for c in range(lengths[d]):
                if codes[rows[d, c], i] != wanted[d, c]:
                    inside = False
                    break
                if checked[d, c]:
                    state &= states[rows[d, c], i]
            if inside and state & KNOWN:
                known += 1
                if state & RIGHT:
                    right += 1
        out[d, 0] = known
        out[d, 1] = right
