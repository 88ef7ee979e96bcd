"""What a detector's outcomes add up to: TIDE's error-type breakdown and the object confusion matrix, with the
objects behind every cell."""
from __future__ import annotations

import pandas as pd

from hibug_core.objects.coco import BACKGROUND, MISSED
from hibug_core.objects.matching import ERROR_TYPES

CONFUSED = ("classification", "both")  # a missed object whose detection named another class


def predicted_column(samples: pd.DataFrame) -> pd.Series:
    """Per object sample, the confusion matrix's column: the class a detection gave it (found, or confused with
    another class), else (missed); a false positive's own class."""
    found = samples["outcome"].eq("true positive") | samples["error_type"].isin(CONFUSED)
    column = samples["predicted_class"].where(found, MISSED)
    return column.where(samples["outcome"] != "false positive", samples["prediction"])


def confusion_members(samples: pd.DataFrame) -> pd.DataFrame:
    """The objects the confusion matrix counts, with their row (`true`) and column (`predicted`): every ground-truth
    object, and the false positives on background (a confused or misplaced false positive is counted on the object
    it overlaps). Only samples with an outcome of this model."""
    evaluated = samples[samples["outcome"].notna()]
    counted = evaluated[(evaluated["outcome"] != "false positive") | (evaluated["error_type"] == "background")]
    return pd.DataFrame({"true": counted["label"].where(counted["outcome"] != "false positive", BACKGROUND),
                         "predicted": predicted_column(counted)}, index=counted.index)


def object_confusion(samples: pd.DataFrame) -> pd.DataFrame:
    """Counts of confusion_members: rows the true class (and (background)), columns the predicted class (and
    (missed)), classes in name order with the two special ones last."""
    members = confusion_members(samples)
    if members.empty:
        return pd.DataFrame()
    table = pd.crosstab(members["true"], members["predicted"])
    classes = sorted((set(table.index) | set(table.columns)) - {BACKGROUND, MISSED})
    return table.reindex(index=[*classes, BACKGROUND], columns=[*classes, MISSED], fill_value=0)


def error_breakdown(samples: pd.DataFrame) -> pd.DataFrame:
    """TIDE's six error types: how many missed objects and false positives of each, in TIDE's order."""
    evaluated = samples[samples["outcome"].isin(["missed", "false positive"])]
    counts = evaluated.groupby(["error_type", "outcome"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=list(ERROR_TYPES), columns=["missed", "false positive"], fill_value=0)
    counts.columns = ["missed objects", "false positives"]
    counts.index.name = "error type"
    return counts


def error_mix(error_types) -> str:
    """The TIDE error types of some failures as text, most frequent first: "missed 80%, localization 15%, ..."."""
    counts = pd.Series(error_types, dtype=object).replace("", "wrong score").value_counts()
    if counts.empty:
        return "no failures"
    shares = counts / counts.sum()
    return ", ".join(f"{kind} {share:.0%}" for kind, share in shares.head(3).items())
