"""Overall model statistics over a sample table: score per split and per class, confusion matrix."""
from __future__ import annotations

import pandas as pd


def labelled(samples: pd.DataFrame) -> pd.DataFrame:
    """Rows with a label and a score (pool rows without labels drop out)."""
    return samples[samples["label"].notna() & samples["score"].notna()]


def score_by(samples: pd.DataFrame, column: str) -> pd.DataFrame:
    """Count, mean score and error count per value of a column, largest groups first."""
    rows = labelled(samples)
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
    rows = labelled(samples if split is None else samples[samples["split"] == split])
    classes = sorted(set(rows["label"].unique()) | set(rows["prediction"].dropna().unique()))
    table = pd.crosstab(rows["label"], rows["prediction"])
    return table.reindex(index=classes, columns=classes, fill_value=0)


OUTCOMES = ("right", "wrong", "no label or prediction")


def outcome(samples: pd.DataFrame) -> pd.Series:
    """Per sample: right, wrong, or no label or prediction (from the 'correct' column)."""
    return samples["correct"].map({True: OUTCOMES[0], False: OUTCOMES[1]}).fillna(OUTCOMES[2]).astype(object)


def points(change: float) -> str:
    """A change of a share, in percentage points ("+2.0 pts"; a share itself reads "38.9%"); empty when unknown."""
    return "" if pd.isna(change) else f"{100 * change:+.1f} pts"
