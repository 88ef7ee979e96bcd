"""HiBug2's question "are error slices distinct bugs?" (its Table 3): the evaluation data of one error slice, of the
error slices that share a tag with it, and of those that share none."""
from __future__ import annotations

import numpy as np

GROUPS = ("match", "overlap", "non-overlap")


def slice_groups(report, definition) -> dict[str, np.ndarray]:
    """Masks over the report's evaluation rows: "match", the rows of the slice `definition`; "overlap", the rows of the
    other reported error slices that share an (attribute = tag) condition with it (HiBug2: "(object color: white,
    xxx), (xxx, object pose: sitting)"); "non-overlap", the rows of the reported error slices that share none. The
    three are kept apart: a row goes to the first group it is in, in that order."""
    conditions = set(definition)
    match = report.tags.mask(definition)
    overlap = np.zeros(len(match), bool)
    other = np.zeros(len(match), bool)
    for row in report.slices["definition"]:
        if set(row) == conditions:
            continue
        if conditions & set(row):
            overlap |= report.tags.mask(row)
        else:
            other |= report.tags.mask(row)
    overlap &= ~match
    other &= ~match & ~overlap
    return {"match": match, "overlap": overlap, "non-overlap": other}
