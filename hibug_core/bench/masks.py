"""The planted-bug benchmark for instance segmentation: the segmentation demo's Mask R-CNN with three planted bugs
(thin bars taught by their filled boxes, one colour left out of the training masks, a rare shape), then problems of
shape scenes with three bugs each planted in a mask model's outputs (hibug_core.bench.output_bugs: rare case,
distribution shift, hard case, objects left unannotated, objects outlined by loose boxes; on one to three of the
objects' class, colour and aspect ratio)."""
from __future__ import annotations

import numpy as np

from hibug_core.bench.demo_bugs import DemoBugBench, demo_then_planted
from hibug_core.bench.output_bugs import OutputWorld, Scenes
from hibug_core.demo.mask_scenes import MASK_SHAPES, MaskSceneConfig, render_mask_scenes
from hibug_core.demo.scenes import SCENE_COLOURS
from hibug_core.demo.segmentation import (
    MODEL_NAME,
    SegmentationDemoConfig,
    build_segmentation_demo,
    coco_masks,
    segmentation_attribute_schema,
)
from hibug_core.objects.geometry import GeometryConfig, geometry_attributes
from hibug_core.objects.mask_geometry import mask_attributes
from hibug_core.objects.masks import box, from_pixels
from hibug_core.slices.diagnosis import BAD_MASKS

MEASURED = tuple(a.name for a in (*geometry_attributes(), *mask_attributes()))  # from boxes and true masks


def _shape_scenes(count: int, seed: int) -> Scenes:
    """The scenes with each object's class, and its box's aspect ratio binned as hibug measures it on import."""
    images, objects, masks = render_mask_scenes(count, seed, MaskSceneConfig())
    ratio = GeometryConfig().aspect_ratio
    aspect = np.asarray(ratio.tags, dtype=object)[ratio.tag((objects["w"] / objects["h"].clip(lower=1e-9)).to_numpy())]
    return Scenes(images, objects.assign(**{"class": objects["shape"], "object aspect ratio": aspect}), list(masks))


def _loose_box(mask: np.ndarray) -> np.ndarray:
    """A loose outline: the mask's box grown by half its side on every side and filled (clipped to the image), which
    no shape's own mask overlaps by more than a quarter (a bad mask by the evidence's rule, IoU under 0.5)."""
    rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    filled = np.zeros_like(mask)
    if len(rows):
        grow_y, grow_x = (rows[-1] - rows[0] + 1) // 2, (columns[-1] - columns[0] + 1) // 2
        filled[max(rows[0] - grow_y, 0):rows[-1] + 1 + grow_y, max(columns[0] - grow_x, 0):columns[-1] + 1 + grow_x] \
            = True
    return filled


def _shifted(mask: np.ndarray, row) -> np.ndarray:
    """The mask moved sideways by 60% of its object's width (toward the image's wider side): it outlines the wrong
    place."""
    step = max(1, int(round(0.6 * row["w"])))
    step = step if row["x"] + row["w"] / 2 < mask.shape[1] / 2 else -step
    moved = np.zeros_like(mask)
    if step > 0:
        moved[:, step:] = mask[:, :-step]
    else:
        moved[:, :step] = mask[:, -step:]
    return moved


def _result(row, mask: np.ndarray) -> dict:
    """A COCO result of the object's class with the mask, its box the mask's own (the object's, for an empty one)."""
    encoded = from_pixels(mask[None])[0]
    found = box(encoded, mask.shape[1], mask.shape[0])
    return {"category_id": MASK_SHAPES.index(row["shape"]) + 1, "segmentation": encoded,
            "bbox": found if found[2] > 0 else [row["x"], row["y"], row["w"], row["h"]]}


MASK_WORLD = OutputWorld(
    render=_shape_scenes, attributes=("class", "color", "object aspect ratio"),
    bug_types=("rare case", "distribution shift", "hard case", "missing annotations", BAD_MASKS),
    truth_file=lambda split, images, objects, masks: coco_masks(split, images, objects, masks),
    result=_result, close=lambda row, mask, rng: mask, wrong=lambda row, mask, rng: _shifted(mask, row),
    taught={BAD_MASKS: (lambda row, mask, rng: _loose_box(mask), True)}, max_conditions=3)


# seed 0: the demo first, then problems with their bugs planted in the outputs
mask_problems = demo_then_planted(SegmentationDemoConfig(), MASK_WORLD, MODEL_NAME)


MASK_BENCH = DemoBugBench(
    name="segmentation", model=MODEL_NAME, build=build_segmentation_demo, schema=segmentation_attribute_schema,
    problems=mask_problems,
    taggers={"truth": ("imported", ["color", *MEASURED]),  # the scenes' true colours, the measured geometry
             "automatic": ("in force", ["dominant colour", *MEASURED])},  # the object's colour measured from its crop
    same_as={("color", c): {("dominant colour", c)} for c in SCENE_COLOURS})
