"""What a detector's own training annotations say of the objects in its training images: whether each was annotated,
and how its training box compares with the object (the evidence for missing annotations and bad boxes)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.cache import process_cache
from hibug_core.errors import HibugError
from hibug_core.objects.coco import read_ground_truth
from hibug_core.objects.matching import box_iou
from hibug_core.store.recorded_models import recorded_model

MATCH_IOU = 0.25  # a training box that overlaps the object this much (same class, same image) annotates it: a box
#                   annotated at half the object's size still overlaps it by 0.5, a neighbour's rarely by this much


@process_cache("training annotations", max_items=4)
def _read_training(path: str, modified_ns: int, size: int):
    """A training annotations file, read once while it is unchanged (every error_slices of its model asks for it)."""
    return read_ground_truth(path)


def annotation_evidence(project, model: str, objects: pd.DataFrame) -> pd.DataFrame | None:
    """Per object of the training split (`objects`: rows with image_key, label and box_x/y/w/h; index: sample id), from
    the annotations `model` was recorded as trained on (store.recorded_models): `annotated` (a training box of its
    class overlaps it) and `box_ratio` (that box's area over the object's; NaN when none). None when the model records
    no training annotations or they cannot be read: there is then no such evidence."""
    recorded = recorded_model(project, model)
    if recorded is None or not recorded.training or objects.empty:
        return None
    try:
        path = Path(project.folder) / recorded.training  # as repair reads it
        stat = path.stat()
        training = _read_training(str(path), stat.st_mtime_ns, stat.st_size)
    except (OSError, ValueError, HibugError):  # a missing or broken file is no evidence
        return None
    names = training.images["file_name"]
    annotations = training.annotations.assign(image_key=names.reindex(training.annotations["image_id"]).to_numpy(),
                                              label=training.annotations["category_id"].map(training.categories))
    by_image = dict(iter(annotations.groupby(["image_key", "label"], sort=False)))
    annotated = np.zeros(len(objects), bool)
    ratio = np.full(len(objects), np.nan)
    boxes = objects[["box_x", "box_y", "box_w", "box_h"]].to_numpy(float)
    groups = objects.groupby([objects["image_key"], objects["label"]], sort=False).indices
    for key, rows in groups.items():
        given = by_image.get(key)
        if given is None:
            continue
        overlap = box_iou(boxes[rows], given[["x", "y", "w", "h"]].to_numpy(float))
        best = overlap.argmax(axis=1)
        hit = overlap[np.arange(len(rows)), best] >= MATCH_IOU
        annotated[rows[hit]] = True
        areas = (given["w"] * given["h"]).to_numpy(float)[best[hit]]
        ratio[rows[hit]] = areas / np.maximum(boxes[rows[hit], 2] * boxes[rows[hit], 3], 1e-9)
    return pd.DataFrame({"annotated": annotated, "box_ratio": ratio}, index=objects.index)
