"""The planted-bug benchmark for pose: the pose demo's keypoint network (Keypoint R-CNN) with four planted bugs (a pose
rare in training, left/right swapped for figures seen from behind, a shirt colour with a pose left unannotated, small
figures rare); further problems train it on other seeds with another conjunction."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hibug_core.bench.demo_bugs import DemoBugBench, DemoProblem
from hibug_core.demo.figures import POSES, SHIRT_COLOURS
from hibug_core.demo.pose import MODEL_NAME, PoseDemoConfig, build_pose_demo, pose_attribute_schema
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.objects.pose_geometry import pose_attributes

MEASURED = tuple(a.name for a in (*geometry_attributes(), *pose_attributes()))  # from boxes and true keypoints


def pose_problems(count: int) -> list[DemoProblem]:
    """The demo itself first (its shipped model: no training), then problems on other seeds whose conjunction pairs
    another shirt colour with another pose (each trains its own keypoint model)."""
    problems = [DemoProblem("demo", PoseDemoConfig())]
    rng = np.random.default_rng(7)
    for k in range(1, count):
        colour = str(rng.choice([c for c in SHIRT_COLOURS if c != "red"]))
        pose = str(rng.choice([p for p in POSES if p != "lying"]))
        problems.append(DemoProblem(f"p{k}", replace(PoseDemoConfig(), seed=k, pair_colour=colour, pair_pose=pose)))
    return problems


POSE_BENCH = DemoBugBench(
    name="pose", model=MODEL_NAME, build=build_pose_demo, schema=pose_attribute_schema, problems=pose_problems,
    taggers={"truth": ("imported", ["pose", "shirt colour", "background", *MEASURED]),  # the figures' true tags
             "automatic": ("in force", ["dominant colour", *MEASURED])},  # the person's colour measured from its crop
    same_as={("pose", "lying"): {("body orientation", "lying")},
             **{("shirt colour", c): {("dominant colour", c)} for c in SHIRT_COLOURS}})
