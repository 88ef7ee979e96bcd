"""What a detector's outcomes add up to: the error-type breakdown (TIDE's, and a pose model's keypoint types), the
object confusion matrix with the objects behind every cell, and OKS per keypoint."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hibug_core.objects.coco import BACKGROUND, MISSED
from hibug_core.objects.keypoint_errors import CODES, KEYPOINT_TYPES, NEAR_SIMILARITY
from hibug_core.objects.matching import ERROR_TYPES

CONFUSED = ("classification", "both")  # a missed object whose detection named another class


def predicted_column(samples: pd.DataFrame) -> pd.Series:
    """Per object sample, the confusion matrix's column: the class a detection gave it (found, or confused with
    another class), else (missed); a false positive's own class."""
    found = samples["outcome"].eq("true positive") | samples["error_type"].isin(CONFUSED)
    column = samples["predicted_class"].where(found, MISSED)
    return column.where(samples["outcome"] != "false positive", samples["prediction"])


# What the confusion matrix reads of each object, and what the per-keypoint table reads of each person: selecting rows
# of a model's whole sample table copies every one of its thirty columns, so rows are selected of these alone.
CONFUSION_COLUMNS = ("label", "prediction", "outcome", "error_type", "predicted_class")
PEOPLE_COLUMNS = ("object_kind", "keypoint_types", "keypoint_similarity_json")


def evaluated_objects(samples: pd.DataFrame, split: str) -> pd.DataFrame:
    """The samples of `split` the model has an outcome on, with the columns these summaries read."""
    read = [c for c in (*CONFUSION_COLUMNS, *PEOPLE_COLUMNS) if c in samples]
    return samples.loc[(samples["split"] == split) & samples["outcome"].notna(), read]


def confusion_members(samples: pd.DataFrame) -> pd.DataFrame:
    """The objects the confusion matrix counts, with their row (`true`) and column (`predicted`): every ground-truth
    object, and in the (background) row every false positive that no object is confused by: on nothing, a duplicate,
    a misplaced box, as every crop of a false positive is captioned "(background) → its class". A false positive
    that names another class on an object (classification, both) is counted once, in that object's row. Only samples
    with an outcome of this model."""
    evaluated = samples.loc[samples["outcome"].notna(), list(CONFUSION_COLUMNS)]
    counted = evaluated[(evaluated["outcome"] != "false positive") | ~evaluated["error_type"].isin(CONFUSED)]
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


def error_breakdown(samples: pd.DataFrame, error_types: tuple[str, ...] = ERROR_TYPES) -> pd.DataFrame:
    """How many missed objects, found objects and false positives have each error type (the task's: TIDE's six for
    boxes; an object found but outlined badly has one too), in its order."""
    evaluated = samples.loc[samples["outcome"].isin(["missed", "true positive", "false positive"]),
                            ["error_type", "outcome"]]
    counts = evaluated.groupby(["error_type", "outcome"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=list(error_types), columns=["missed", "true positive", "false positive"],
                            fill_value=0)
    counts.columns = ["missed objects", "found objects", "false positives"]
    counts.index.name = "error type"
    return counts


def error_mix(error_types) -> str:
    """The TIDE error types of some failures as text, most frequent first: "missed 80%, localization 15%, ...". A
    person's keypoint types are said as such: "keypoints missed" is not the person missed."""
    # counted first, then named: replacing in every failure first took seconds for a slice of millions
    said = {"": "wrong score", **{kind: f"keypoint {kind}" for kind in KEYPOINT_TYPES if kind != "good"}}
    counts = pd.Series(error_types, dtype=object).value_counts()
    counts = counts.groupby([said.get(kind, kind) for kind in counts.index], sort=False).sum().sort_values(
        ascending=False, kind="stable")
    if counts.empty:
        return "no failures"
    shares = counts / counts.sum()
    return ", ".join(f"{kind} {share:.0%}" for kind, share in shares.head(3).items())


def keypoint_table(people: pd.DataFrame, names) -> pd.DataFrame:
    """Per keypoint, over the people a prediction went with: how many are labelled, their mean similarity (OKS's
    per-keypoint term), the share within Ronchi and Perona's near threshold (similarity .5 or more, a PCK) and the
    share of each type."""
    typed = people[people["keypoint_types"].notna()]
    codes = np.array([list(c) for c in typed["keypoint_types"]], dtype=object).reshape(len(typed), len(names))
    similarity = np.array([json.loads(v) for v in typed["keypoint_similarity_json"]], dtype=float).reshape(
        len(typed), len(names)) if len(typed) else np.zeros((0, len(names)))
    labelled = np.isin(codes, list(CODES.values()))
    count = labelled.sum(axis=0)
    total = np.where(labelled, np.nan_to_num(similarity), 0.0).sum(axis=0)
    table = pd.DataFrame({"keypoint": list(names), "labelled": count,
                          "mean similarity": np.where(count > 0, total / np.maximum(count, 1), np.nan),
                          f"similarity ≥ {NEAR_SIMILARITY:g}": ((similarity >= NEAR_SIMILARITY) & labelled).sum(axis=0)
                          / np.maximum(count, 1)})
    for kind in KEYPOINT_TYPES:
        table[kind] = (codes == CODES[kind]).sum(axis=0) / np.maximum(count, 1)
    return table
