"""The planted-bug benchmark for pose: the pose demo's keypoint network (Keypoint R-CNN) with four planted bugs (a pose
rare in training, left/right swapped for figures seen from behind, a shirt colour with a pose left unannotated, small
figures rare), then problems of drawn figures with three bugs each planted in a keypoint model's outputs
(hibug_core.bench.output_bugs: rare case, distribution shift, hard case, people left unannotated, sides swapped,
keypoints left out; on one to three of the figures' attributes)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.bench.demo_bugs import DemoBugBench, demo_then_planted
from hibug_core.bench.output_bugs import OutputWorld, Scenes
from hibug_core.demo.figures import SHIRT_COLOURS, FigureSceneConfig, render_figures
from hibug_core.demo.pose import (
    MODEL_NAME,
    PoseDemoConfig,
    build_pose_demo,
    coco_people,
    pose_attribute_schema,
    sides_swapped,
)
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.objects.pose_geometry import pose_attributes
from hibug_core.slices.diagnosis import KEYPOINTS_MISSING, SWAPPED

MEASURED = tuple(a.name for a in (*geometry_attributes(), *pose_attributes()))  # from boxes and true keypoints


def _figures(count: int, seed: int) -> Scenes:
    images, people = render_figures(count, seed, FigureSceneConfig())
    return Scenes(images, people.drop(columns="keypoints"), list(people["keypoints"]))


def _moved(keypoints, spread: float, rng: np.random.Generator) -> list:
    """Keypoints each moved by a normal draw of `spread` pixels (the labelled ones; flags kept)."""
    points = np.asarray(keypoints, float).reshape(-1, 3).copy()
    labelled = points[:, 2] > 0
    points[labelled, :2] += rng.normal(0, spread, (int(labelled.sum()), 2))
    return np.round(points, 2).ravel().tolist()


def _left_out(keypoints, rng: np.random.Generator) -> list:
    """An annotation with 70% of its labelled keypoints left out (unlabelled, at 0, 0)."""
    points = np.asarray(keypoints, float).reshape(-1, 3).copy()
    labelled = np.flatnonzero(points[:, 2] > 0)
    points[rng.choice(labelled, int(np.ceil(0.7 * len(labelled))), replace=False)] = 0
    return points.ravel().tolist()


def _coco_truth(split: str, images: list, people: pd.DataFrame, keypoints: list) -> dict:
    return coco_people(split, images, people.assign(keypoints=keypoints))


POSE_WORLD = OutputWorld(
    render=_figures, attributes=("pose", "shirt colour", "background", "facing"),
    bug_types=("rare case", "distribution shift", "hard case", "missing annotations", SWAPPED, KEYPOINTS_MISSING),
    truth_file=_coco_truth,
    result=lambda row, points: {"category_id": 1, "bbox": [row["x"], row["y"], row["w"], row["h"]],
                                "keypoints": points},
    close=lambda row, points, rng: _moved(points, 0.02 * row["h"], rng),
    wrong=lambda row, points, rng: _moved(points, 0.35 * row["h"], rng),
    taught={SWAPPED: (lambda row, points, rng: sides_swapped(points), True),
            KEYPOINTS_MISSING: (lambda row, points, rng: _left_out(points, rng), False)},
    max_conditions=3)


# seed 0: the demo first, then problems with their bugs planted in the outputs
pose_problems = demo_then_planted(PoseDemoConfig(), POSE_WORLD, MODEL_NAME)


POSE_BENCH = DemoBugBench(
    name="pose", model=MODEL_NAME, build=build_pose_demo, schema=pose_attribute_schema, problems=pose_problems,
    taggers={"truth": ("imported", ["pose", "shirt colour", "background", *MEASURED]),  # the figures' true tags
             "automatic": ("in force", ["dominant colour", *MEASURED])},  # the person's colour measured from its crop
    same_as={("pose", "lying"): {("body orientation", "lying")},
             **{("shirt colour", c): {("dominant colour", c)} for c in SHIRT_COLOURS}})
