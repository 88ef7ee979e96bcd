"""Overall model statistics over a sample table: score per split and per class, confusion matrix. pandas is imported
where used: the store reads BACKGROUND and judged without it (`hibug info` loads no pandas)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

BACKGROUND = "(background)"  # the label of an object model's false positive: no object of any class is there


def judged(labels, scores) -> np.ndarray:
    """True where a sample counts in a model's score: it has a true label and a score. Pool rows without labels drop
    out, and so do an object model's false positives (label BACKGROUND): true objects and people are judged against
    true objects and people, and false positives are counted apart."""
    import pandas as pd

    # A column stays as it is (a categorical is compared by its codes: ten million labels as objects take seconds).
    labels = labels if isinstance(labels, pd.Series) else pd.Series(np.asarray(labels, dtype=object))
    return (labels.notna() & (labels != BACKGROUND)).to_numpy(bool) & ~np.isnan(np.asarray(scores, dtype=float))


def labelled(samples: pd.DataFrame) -> pd.DataFrame:
    """The rows that count in a model's score (judged)."""
    return samples[judged(samples["label"], samples["score"])]


def score_by(samples: pd.DataFrame, column: str) -> pd.DataFrame:
    """Count, mean score and error count per value of a column, largest groups first."""
    import pandas as pd

    # the columns read, before rows are selected: selecting rows of a whole sample table copies every column
    rows = labelled(samples[list(dict.fromkeys([column, "label", "score"]))])
    grouped = rows.groupby(column, observed=True)["score"]
    table = pd.DataFrame({"count": grouped.size(), "score": grouped.mean()})
    table["errors"] = (rows["score"] < 0.5).groupby(rows[column], observed=True).sum().astype(int)
    return table.sort_values("count", ascending=False)


def per_class(samples: pd.DataFrame, split: str | None = None) -> pd.DataFrame:
    """Per true class: count, mean score, recall-style accuracy; optionally within one split."""
    rows = samples if split is None else samples[samples["split"] == split]
    return score_by(rows, "label").sort_index()


def confusion(samples: pd.DataFrame, split: str | None = None) -> pd.DataFrame:
    """Counts of (true label, prediction); rows are labels, columns predictions, both in one class order."""
    import pandas as pd

    rows = labelled(samples if split is None else samples[samples["split"] == split])
    classes = sorted(set(rows["label"].unique()) | set(rows["prediction"].dropna().unique()))
    table = pd.crosstab(rows["label"], rows["prediction"])
    return table.reindex(index=classes, columns=classes, fill_value=0)


OUTCOMES = ("right", "wrong", "no label or prediction")


def outcome(samples: pd.DataFrame) -> pd.Series:
    """Per sample: right, wrong, or no label or prediction (from the 'correct' column)."""
    return samples["correct"].map({True: OUTCOMES[0], False: OUTCOMES[1]}).fillna(OUTCOMES[2]).astype(object)


def share(value: float) -> str:
    """A share as every figure beside it reads it ("38.9%"), small ones to two significant digits ("0.44%", never
    "0.0%" for a share that is not 0); empty when unknown."""
    import pandas as pd

    if pd.isna(value):
        return ""
    if value == 0 or abs(value) >= 0.01:
        return f"{value:.1%}"
    return f"{100 * value:.2g}%"


def points(change: float) -> str:
    """A change of a share, in percentage points ("+2.0 pts"; a share itself reads "38.9%"); empty when unknown."""
    import pandas as pd

    return "" if pd.isna(change) else f"{100 * change:+.1f} pts"
