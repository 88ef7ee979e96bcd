"""cleanlab's ObjectLab (`cleanlab.object_detection`) on a detection problem's training annotations, run as its own
library: the boxes it flags (objects the annotations overlooked, boxes badly located, classes swapped), scored per
object against the planted annotation bugs (precision and recall of the flags) and per slice, its flagged objects read
by the tags that describe them best, as the other finders' answers are scored (hibug_core.bench.ranking)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.bench.peers import Found, described, need, package_version

# an ObjectLab issue kind -> the bug type hibug names for such a bug
KINDS = {"overlooked": "missing annotations", "badloc": "bad boxes", "swap": "swapped classes"}
MATCH_IOU = 0.5  # a flagged predicted box stands for the true object it overlaps this much


@dataclass(frozen=True)
class Flags:
    """ObjectLab's decision per box: per image, for each predicted box whether it is an object the annotations
    overlooked; for each annotated box whether it is badly located, or of a swapped class."""

    overlooked: list[np.ndarray]
    badloc: list[np.ndarray]
    swap: list[np.ndarray]

    def images(self) -> np.ndarray:
        """Per image, whether any of its boxes is flagged (what `find_label_issues` returns)."""
        return np.array([bool(o.any() or b.any() or s.any()) for o, b, s in zip(self.overlooked, self.badloc,
                                                                                 self.swap)])


def objectlab_flags(labels: list[dict], predictions: list[np.ndarray]) -> Flags:
    """ObjectLab's per-box decisions, made as `cleanlab.object_detection.filter.find_label_issues` makes them before it
    pools them per image (its own scores, per-class thresholds and factors; cleanlab>=2.9,<3)."""
    need("cleanlab")
    from cleanlab.internal import constants
    from cleanlab.object_detection import filter as objectlab
    from cleanlab.object_detection import rank

    inputs = rank._get_valid_inputs_for_compute_scores(constants.ALPHA, labels, predictions)
    per_class = objectlab._get_per_class_ap(labels, predictions)
    label_classes = [rank._separate_label(label)[1] for label in labels]
    predicted_classes = [rank._separate_prediction(prediction)[1] for prediction in predictions]

    def decided(scores, classes, factor) -> list[np.ndarray]:
        thresholds = objectlab._process_class_list(classes, per_class)
        flags = objectlab._find_label_issues_per_box([np.array(s, float) for s in scores], thresholds, factor)
        return [np.asarray(f, bool)[:len(c)] for f, c in zip(flags, classes)]  # none for an image with no box

    return Flags(
        decided(rank.compute_overlooked_box_scores(alpha=constants.ALPHA,
                                                   high_probability_threshold=constants.HIGH_PROBABILITY_THRESHOLD,
                                                   auxiliary_inputs=inputs),
                predicted_classes, constants.OVERLOOKED_THRESHOLD_FACTOR),
        decided(rank.compute_badloc_box_scores(alpha=constants.ALPHA,
                                               low_probability_threshold=constants.LOW_PROBABILITY_THRESHOLD,
                                               auxiliary_inputs=inputs),
                label_classes, constants.BADLOC_THRESHOLD_FACTOR),
        decided(rank.compute_swap_box_scores(alpha=constants.ALPHA,
                                             high_probability_threshold=constants.HIGH_PROBABILITY_THRESHOLD,
                                             overlapping_label_check=True, auxiliary_inputs=inputs),
                label_classes, constants.SWAP_THRESHOLD_FACTOR))


def _corners(boxes) -> np.ndarray:
    boxes = np.asarray(boxes, float).reshape(-1, 4)
    return np.column_stack([boxes[:, 0], boxes[:, 1], boxes[:, 0] + boxes[:, 2], boxes[:, 1] + boxes[:, 3]])


def objectlab_inputs(annotations: pd.DataFrame, detections: list[list[dict]], classes: list[str]):
    """(labels, predictions, the object id of each label box) in ObjectLab's format from a scene's annotations (one row
    per annotated object: scene, shape, x, y, w, h) and a detector's outputs per scene."""
    grouped = dict(list(annotations.groupby("scene")))
    labels, predictions, ids = [], [], []
    for scene, found in enumerate(detections):
        rows = grouped.get(scene, annotations.iloc[:0])
        labels.append({"bboxes": _corners(rows[["x", "y", "w", "h"]].to_numpy()),
                       "labels": np.array([classes.index(s) for s in rows["shape"]], int)})
        ids.append(rows.index.to_numpy())
        per_class = []
        for name in classes:
            mine = [d for d in found if d["category"] == name]
            per_class.append(np.column_stack([_corners([d["bbox"] for d in mine]), [d["score"] for d in mine]])
                             if mine else np.zeros((0, 5)))
        predictions.append(np.array(per_class, dtype=object))
    return labels, predictions, ids


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every corner box in `a` with every one in `b`."""
    x1, y1 = np.maximum(a[:, None, 0], b[None, :, 0]), np.maximum(a[:, None, 1], b[None, :, 1])
    x2, y2 = np.minimum(a[:, None, 2], b[None, :, 2]), np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda c: (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])  # noqa: E731
    return inter / np.maximum(area(a)[:, None] + area(b)[None, :] - inter, 1e-9)


def flagged_objects(flags: Flags, predictions: list[np.ndarray], label_ids: list[np.ndarray],
                    truth: pd.DataFrame) -> pd.DataFrame:
    """One row per flag: its kind and the true object it stands for (an annotated box's own object; a predicted box's
    best-overlapping true object at IoU 0.5 or more, else none: a flag on nothing)."""
    rows = []
    by_scene = dict(list(truth.groupby("scene")))
    for scene, (overlooked, badloc, swap) in enumerate(zip(flags.overlooked, flags.badloc, flags.swap)):
        for kind, marks in (("badloc", badloc), ("swap", swap)):
            rows += [{"kind": kind, "object": int(label_ids[scene][i])} for i in np.flatnonzero(marks)]
        if overlooked.any():
            boxes = np.concatenate([np.asarray(c, float).reshape(-1, 5) for c in predictions[scene]])[:, :4]
            true = by_scene.get(scene, truth.iloc[:0])
            overlap = _iou(boxes[np.flatnonzero(overlooked)], _corners(true[["x", "y", "w", "h"]].to_numpy())) \
                if len(true) else np.zeros((int(overlooked.sum()), 0))
            for row in overlap:
                best = int(np.argmax(row)) if row.size else -1
                rows.append({"kind": "overlooked",
                             "object": int(true.index[best]) if best >= 0 and row[best] >= MATCH_IOU else None})
    return pd.DataFrame(rows, columns=["kind", "object"])


def per_object(flagged: pd.DataFrame, planted: dict[str, np.ndarray]) -> dict:
    """Precision of the flags (the share that stand for an object of a planted bug) and recall of the planted bugs'
    objects (the share some flag stands for), overall and per planted bug (`planted`: its description -> the ids of
    the objects it changed)."""
    every = set().union(*map(set, planted.values())) if planted else set()
    hits = flagged["object"].dropna().astype(int).isin(every)
    found = set(flagged["object"].dropna().astype(int))
    row = {"flags": len(flagged), "planted objects": len(every),
           "precision": float(hits.mean()) if len(flagged) else np.nan,
           "recall": len(found & every) / len(every) if every else np.nan}
    for kind in KINDS:
        row[f"{kind} flags"] = int((flagged["kind"] == kind).sum())
    for bug, ids in planted.items():
        row[f"recall: {bug}"] = len(found & set(ids)) / len(ids) if len(ids) else np.nan
    return row


TWIN_FLAGS = "bug-free twin: flags"  # flags on the problem's bug-free twin (every one false)


def pooled(rows: pd.DataFrame) -> dict:
    """Per-object figures over many problems (rows of `per_object`): flags and planted objects summed, precision and
    recall over the pooled counts (each problem's share times its count, summed)."""
    flags, planted = rows["flags"].sum(), rows["planted objects"].sum()
    hits = (rows["precision"].fillna(0) * rows["flags"]).sum()
    found = (rows["recall"].fillna(0) * rows["planted objects"]).sum()
    return {"flags": int(flags), "planted objects": int(planted), "precision": hits / flags if flags else np.nan,
            "recall": found / planted if planted else np.nan,
            **{f"{kind} flags": int(rows[f"{kind} flags"].sum()) for kind in KINDS},
            **({TWIN_FLAGS: int(rows[TWIN_FLAGS].sum())} if TWIN_FLAGS in rows else {})}


def per_slice(flagged: pd.DataFrame, tags: pd.DataFrame, *, max_depth: int = 3, min_support: int = 10,
              count: int = 25) -> Found:
    """ObjectLab's flags read as slices: for each issue kind it flags, the conjunctions of tags (of the training
    objects, `tags` indexed by object id) that describe its flagged objects best, by Jaccard, merged best first, each
    typed by its kind; reported: the best of each kind that flags anything."""
    scored = []
    for kind, bug_type in KINDS.items():
        members = tags.index.isin(flagged.loc[flagged["kind"] == kind, "object"].dropna().astype(int))
        if members.any():
            scored += [(definition, jaccard, bug_type) for definition, jaccard in
                       described(tags, members, max_depth, count=count, min_support=min_support) if definition]
    scored.sort(key=lambda item: -item[1])
    seen, definitions, types = set(), [], []
    for definition, _, bug_type in scored:
        if definition not in seen:
            seen.add(definition)
            definitions.append(definition)
            types.append(bug_type)
    reported = sum(flagged["kind"].eq(kind).any() for kind in KINDS)
    return Found(definitions[:count], int(reported), types[:count])


def objectlab_package() -> str:
    return package_version("cleanlab") + " (ObjectLab)"
