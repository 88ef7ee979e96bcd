"""The registry of each task's evidence for the diagnosis, and the evidence of a model of objects (kept apart from the
slice search, so that registering a task loads no more than it needs)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.registry import Registry
from hibug_core.rows import rows_by_id
from hibug_core.slices.diagnosis import ObjectEvidence

# A task whose samples carry evidence beyond image, label and prediction registers how it is read, under the task's
# name: (project, model, evaluation, train) -> (ObjectEvidence or None, each evaluation row's error type or None).
# error_slices asks the project's task's entry; a task without one (classification) has none.
TASK_EVIDENCE = Registry("task's evidence for the diagnosis")


def object_evidence(project, model: str, evaluation: pd.DataFrame, train: pd.DataFrame, *,
                    nouns: str) -> tuple[ObjectEvidence | None, np.ndarray | None]:
    """A model of objects' evidence for the diagnosis (`nouns`: what its samples are, as the reasons say it): which
    training rows are objects, whether each was annotated in the annotations the model records as trained on (and its
    training box's size), and the found predictions' box sizes on the evaluation rows; and each evaluation row's error
    type. (None, None) when the model has no objects stored."""
    from hibug_core.objects.training_evidence import annotation_evidence

    def box_ratio(rows: pd.DataFrame) -> np.ndarray:
        found = (rows["outcome"] == "true positive").to_numpy()
        ratio = (rows["pred_w"] * rows["pred_h"] / (rows["box_w"] * rows["box_h"])).to_numpy(float)
        return np.where(found, ratio, np.nan)

    # only the outcome columns read are joined (every column of ten million objects: seconds)
    objects = project.objects(model, columns=["outcome", "error_type", "pred_w", "pred_h"])
    if not len(objects):
        return None, None
    held = rows_by_id(objects, train.index)
    is_object = (held["object_kind"] == "object").to_numpy()
    annotations = annotation_evidence(project, model, held[is_object].assign(label=train["label"][is_object]))
    annotated = ratio = mirrored = left_out = mask_wrong = None
    if annotations is not None:
        annotated = annotations["annotated"].reindex(train.index, fill_value=False).to_numpy(bool)
        ratio = annotations["box_ratio"].reindex(train.index).to_numpy(float)
        mirrored, left_out, mask_wrong = (annotations[column].reindex(train.index).to_numpy(float)
                                          for column in ("mirrored", "keypoints_missing", "mask_wrong"))
        if not np.isfinite(left_out).any():  # boxes: no keypoints to swap or leave out
            mirrored = left_out = None
        if not np.isfinite(mask_wrong).any():  # no masks to compare
            mask_wrong = None
    measured = rows_by_id(objects[["outcome", "error_type", "pred_w", "pred_h", "box_w", "box_h"]], evaluation.index)
    error_types = measured["error_type"].fillna("").to_numpy(object)
    return ObjectEvidence(is_object, annotated, ratio, box_ratio(measured), mirrored,
                          left_out, nouns, train_mask_wrong=mask_wrong), error_types
