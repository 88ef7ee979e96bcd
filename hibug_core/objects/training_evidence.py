"""What a detector's, keypoint model's or mask model's own training annotations say of the objects in its training
images: whether each was annotated, how its training box compares with the object, for a person whether its keypoints
were annotated with left and right swapped or mostly left out, and for an object outlined by a mask whether its
training mask outlines it (the evidence for missing annotations, bad boxes, swapped sides, missing keypoints and bad
masks)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.cache import process_cache
from hibug_core.errors import HibugError
from hibug_core.objects.coco import read_ground_truth
from hibug_core.objects.keypoint_errors import mirror_pairs
from hibug_core.objects.masks import mask_iou
from hibug_core.objects.matching import box_iou, by_id
from hibug_core.store.recorded_models import recorded_model

MATCH_IOU = 0.25  # a training box that overlaps the object this much (same class, same image) annotates it: a box
#                   annotated at half the object's size still overlaps it by 0.5, a neighbour's rarely by this much
MOSTLY_LEFT_OUT = 0.5  # a person's keypoints are missing from its annotation when at least this share of the ones
#                        its true annotation labels are unlabelled there
OUTLINED = 0.5  # a training mask outlines its object when their mask IoU is at least this (a hit's own threshold)


@process_cache("training annotations", max_items=4)
def _read_training(path: str, modified_ns: int, size: int):
    """A training annotations file, read once while it is unchanged (every error_slices of its model asks for it)."""
    return read_ground_truth(path)


def annotation_evidence(project, model: str, objects: pd.DataFrame) -> pd.DataFrame | None:
    """Per object of the training split (`objects`: rows with image_key, label, box_x/y/w/h and keypoints_json; index:
    sample id), from the annotations `model` was recorded as trained on (store.recorded_models): `annotated` (a
    training box of its class overlaps it), `box_ratio` (that box's area over the object's; NaN when none) and
    `mirrored` (1.0 when that annotation's keypoints lie nearer the object's true keypoints with left and right
    exchanged than as they are, 0.0 when not; NaN without keypoints to compare), `keypoints_missing` (1.0 when
    that annotation leaves out at least MOSTLY_LEFT_OUT of the keypoints the true annotation labels, 0.0 when not; NaN
    without keypoints) and `mask_wrong` (1.0 when that annotation's mask and the object's true mask (`mask_json`)
    overlap by less than OUTLINED, 0.0 when not; NaN without masks). None when the model records no training
    annotations or they cannot be read: there is then no such evidence."""
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
    ratio, mirrored, left_out, mask_wrong = (np.full(len(objects), np.nan) for _ in range(4))
    mirror = np.array(mirror_pairs(next(iter(training.keypoints.values())))) if training.keypoints else None
    true_points = objects["keypoints_json"].to_numpy(object) if "keypoints_json" in objects else None
    true_masks = objects["mask_json"].to_numpy(object) if "mask_json" in objects and training.has_masks else None
    boxes = objects[["box_x", "box_y", "box_w", "box_h"]].to_numpy(float)
    groups = objects.groupby([objects["image_key"], objects["label"]], sort=False).indices
    for key, rows in groups.items():
        given = by_image.get(key)
        if given is None:
            continue
        overlap = box_iou(boxes[rows], given[["x", "y", "w", "h"]].to_numpy(float))
        given_ids = given["id"].to_numpy()
        best = overlap.argmax(axis=1)
        hit = overlap[np.arange(len(rows)), best] >= MATCH_IOU
        annotated[rows[hit]] = True
        areas = (given["w"] * given["h"]).to_numpy(float)[best[hit]]
        ratio[rows[hit]] = areas / np.maximum(boxes[rows[hit], 2] * boxes[rows[hit], 3], 1e-9)
        if mirror is not None and true_points is not None:
            points = given["keypoints"].to_numpy(object)
            for row, at in zip(rows[hit], best[hit]):
                given, truth = _keypoints(points[at], true_points[row])
                if given is not None:
                    mirrored[row] = _mirrored(given, truth, mirror)
                    left_out[row] = _left_out(given, truth)
        if true_masks is not None:
            records = by_id(training, given_ids)
            for row, at in zip(rows[hit], best[hit]):
                mask_wrong[row] = _mask_wrong(records[at].get("segmentation"), true_masks[row])
    return pd.DataFrame({"annotated": annotated, "box_ratio": ratio, "mirrored": mirrored,
                         "keypoints_missing": left_out, "mask_wrong": mask_wrong}, index=objects.index)


def _mask_wrong(annotated, truth_json) -> float:
    """1.0 when a training mask and the object's true mask (as stored) overlap by less than OUTLINED, 0.0 when not;
    NaN where either is absent."""
    if annotated is None or not isinstance(truth_json, str):
        return np.nan
    truth = json.loads(truth_json)
    height, width = truth["size"]
    return float(mask_iou([annotated], [truth], width, height)[0, 0] < OUTLINED)


def _keypoints(annotated, truth_json) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """(annotated, true) keypoints as (k, 3) arrays; (None, None) where either is absent or they differ in length."""
    if annotated is None or not isinstance(truth_json, str):
        return None, None
    given = np.asarray(annotated, dtype=float).reshape(-1, 3)
    truth = np.asarray(json.loads(truth_json), dtype=float).reshape(-1, 3)
    return (given, truth) if given.shape == truth.shape else (None, None)


def _left_out(given: np.ndarray, truth: np.ndarray) -> float:
    """1.0 when the annotation leaves unlabelled at least MOSTLY_LEFT_OUT of the keypoints the truth labels, 0.0 when
    not; NaN when the truth labels none."""
    labelled = truth[:, 2] > 0
    if not labelled.any():
        return np.nan
    return float((given[labelled, 2] <= 0).mean() >= MOSTLY_LEFT_OUT)


def _mirrored(given: np.ndarray, truth: np.ndarray, mirror: np.ndarray) -> float:
    """1.0 when the annotated keypoints lie nearer the true ones with left and right exchanged than as they are, 0.0
    when not; NaN with fewer than two sided keypoints labelled in both."""
    if len(mirror) != len(truth):
        return np.nan
    sided = (mirror != np.arange(len(mirror))) & (given[:, 2] > 0) & (truth[:, 2] > 0) & (truth[mirror, 2] > 0)
    if sided.sum() < 2:
        return np.nan
    straight = np.linalg.norm(given[sided, :2] - truth[sided, :2], axis=1).sum()
    exchanged = np.linalg.norm(given[sided, :2] - truth[mirror[sided], :2], axis=1).sum()
    return float(exchanged < straight)
