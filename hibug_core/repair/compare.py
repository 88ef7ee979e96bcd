"""Before and after a repair, slice by slice on a held-out split: the change, an exact paired test, what got worse."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.slices.search import TagMatrix, describe, slice_id

COLUMNS = ["slice_id", "slice", "n", "before", "after", "change", "p_value", "verdict"]


def mcnemar_p(before: np.ndarray, after: np.ndarray) -> float:
    """Exact two-sided McNemar test on paired right/wrong outcomes (1.0 when nothing changed)."""
    from scipy.stats import binomtest  # here: scipy.stats takes 1-2 s to import, which every command paid

    fixed = int((~before & after).sum())
    broken = int((before & ~after).sum())
    if fixed + broken == 0:
        return 1.0
    return float(binomtest(fixed, fixed + broken, 0.5).pvalue)


def slice_changes(tags: TagMatrix, correct_before: np.ndarray, correct_after: np.ndarray, definitions, *,
                  overall: str, alpha: float = 0.05, poor: dict[str, str] | None = None) -> pd.DataFrame:
    """One row for all rows (id "overall", described as `overall`, e.g. "all held-out images") and one per slice
    definition: the share right (found) before and after, the change, the exact McNemar p-value, and a verdict
    ("better", "worse" or "no significant change" at `alpha`). A slice on an attribute in `poor` (tags too poor to
    trust, as the Tagging page says) is flagged ⚠ in its name, as everywhere slices are listed."""
    poor = poor or {}
    before = np.asarray(correct_before, bool)
    after = np.asarray(correct_after, bool)
    rows = [("overall", overall, np.ones(len(before), bool))]
    for definition in definitions:
        try:
            mask = tags.mask(definition)
        except ValueError:  # a tag the held-out split never has
            mask = np.zeros(len(before), bool)
        flag = "⚠ " if any(attribute in poor for attribute, _ in definition) else ""
        rows.append((slice_id(definition), flag + describe(definition), mask))
    table = []
    for identifier, description, mask in rows:
        n = int(mask.sum())
        b, a = (float(before[mask].mean()), float(after[mask].mean())) if n else (np.nan, np.nan)
        p = mcnemar_p(before[mask], after[mask]) if n else np.nan
        verdict = ("no images" if not n else "no significant change" if p >= alpha
                   else "better" if a > b else "worse")
        table.append((identifier, description, n, b, a, a - b, p, verdict))
    return pd.DataFrame(table, columns=COLUMNS)
