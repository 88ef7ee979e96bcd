"""How far a slice's tags can be trusted: the share of its images whose true tags (known or audited) match them all."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.stats import wilson_interval

KNOWN_PREFIX = "known: "  # an attribute named "known: size" is the imported attr:size column itself


def slice_tag_precision(definitions, tags: pd.DataFrame, truth: pd.DataFrame | None, *, skip: set[str] = frozenset(),
                        z: float = 1.96) -> pd.DataFrame:
    """Per slice definition: over every sample (any split) that the tags in force put in the slice and whose true tag
    is known for each checked attribute, how many have all the slice's tags right; with a Wilson interval.
    Attributes in `skip` (the label) and attributes without any truth are not checked; `tag_checked_attributes`
    lists the ones that were. No truth at all (or truth=None): NaN precision, nothing checked."""
    truth = pd.DataFrame(index=tags.index) if truth is None else truth.reindex(tags.index)
    codes, agree, known = {}, {}, {}
    for attribute in tags.columns:
        column = attribute.removeprefix(KNOWN_PREFIX)
        codes[attribute] = tags[attribute].cat.codes.to_numpy()
        if attribute in skip or column not in truth.columns:
            continue
        true = truth[column].to_numpy(object)
        known[attribute] = pd.notna(true)
        agree[attribute] = known[attribute] & (tags[attribute].to_numpy(object) == true)
    rows = []
    for definition in definitions if known else ():
        inside = np.ones(len(tags), dtype=bool)
        checked, right, names = inside.copy(), inside.copy(), []
        for attribute, tag in definition:
            categories = list(tags[attribute].cat.categories)
            inside &= codes[attribute] == (categories.index(tag) if tag in categories else -2)
            if attribute in known:
                checked &= known[attribute]
                right &= agree[attribute]
                names.append(attribute)
        n = int((inside & checked).sum()) if names else 0
        rows.append({"tag_checked": n, "tag_right": int((inside & checked & right).sum()) if n else 0,
                     "tag_checked_attributes": ", ".join(names)})
    if not known:  # nothing to check against
        rows = [{"tag_checked": 0, "tag_right": 0, "tag_checked_attributes": ""} for _ in definitions]
    frame = pd.DataFrame(rows, columns=["tag_checked", "tag_right", "tag_checked_attributes"])
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["tag_precision"] = np.where(frame["tag_checked"] > 0, frame["tag_right"] / frame["tag_checked"], np.nan)
    low, high = wilson_interval(frame["tag_right"].to_numpy(float), frame["tag_checked"].to_numpy(float), z)
    unchecked = frame["tag_checked"].to_numpy() == 0
    frame["tag_precision_low"] = np.where(unchecked, np.nan, low)
    frame["tag_precision_high"] = np.where(unchecked, np.nan, high)
    return frame
