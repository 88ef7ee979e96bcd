"""The planted-bug benchmark for instance segmentation: the segmentation demo's Mask R-CNN with three planted bugs
(thin bars taught by their filled boxes, one colour left out of the training masks, a rare shape); further problems
train it on other seeds with another colour left out and another rare shape."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hibug_core.bench.demo_bugs import DemoBugBench, DemoProblem
from hibug_core.demo.mask_scenes import MASK_SHAPES
from hibug_core.demo.scenes import SCENE_COLOURS
from hibug_core.demo.segmentation import (
    MODEL_NAME,
    SegmentationDemoConfig,
    build_segmentation_demo,
    segmentation_attribute_schema,
)
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.objects.mask_geometry import mask_attributes

MEASURED = tuple(a.name for a in (*geometry_attributes(), *mask_attributes()))  # from boxes and true masks


def mask_problems(count: int) -> list[DemoProblem]:
    """The demo itself first (its shipped model: no training), then problems on other seeds, each leaving another
    colour out of the training masks and making another shape rare (each trains its own mask model)."""
    demo = SegmentationDemoConfig()
    problems = [DemoProblem("demo", demo)]
    rng = np.random.default_rng(7)
    for k in range(1, count):
        colour = str(rng.choice([c for c in SCENE_COLOURS if c != demo.missed_colour]))
        shape = str(rng.choice([s for s in MASK_SHAPES if s not in (demo.boxed_shape, demo.rare_shape)]))
        problems.append(DemoProblem(f"p{k}", replace(demo, seed=k, missed_colour=colour, rare_shape=shape)))
    return problems


MASK_BENCH = DemoBugBench(
    name="segmentation", model=MODEL_NAME, build=build_segmentation_demo, schema=segmentation_attribute_schema,
    problems=mask_problems,
    taggers={"truth": ("imported", ["color", *MEASURED]),  # the scenes' true colours, the measured geometry
             "automatic": ("in force", ["dominant colour", *MEASURED])},  # the object's colour measured from its crop
    same_as={("color", c): {("dominant colour", c)} for c in SCENE_COLOURS})
