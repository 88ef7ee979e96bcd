"""The demo: ground truth parsed from easy-vqa's questions, geometry measured from pixels, real planted bugs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hibug_core.demo.easyvqa import facts_from_questions, measure_geometry
from hibug_core.store.project import Project


def test_questions_decide_shape_and_colour():
    texts = ["what shape is present?", "is no yellow shape present?", "is there not a brown shape?",
             "does the image not contain a circle?", "does the image contain a triangle?",
             "what color is the shape?"]
    answers = ["rectangle", "yes", "yes", "yes", "no", "teal"]
    assert facts_from_questions(texts, answers, [7] * 6) == {7: {"shape": "rectangle", "color": "teal"}}
    # elimination: two shapes ruled out leaves the third; one colour ruled out decides nothing
    texts = ["is there a circle?", "does the image contain a rectangle?", "is there a red shape?"]
    assert facts_from_questions(texts, ["no", "no", "no"], [1, 1, 1]) == {1: {"shape": "triangle"}}


def test_geometry_from_pixels():
    image = np.full((64, 64, 3), 240, dtype=np.uint8)
    image[2:12, 50:60] = (0, 0, 255)  # 10 px square, top right
    assert measure_geometry(image) == {"size": "small", "horizontal position": "right", "vertical position": "top"}
    image = np.full((64, 64, 3), 240, dtype=np.uint8)
    image[10:50, 12:52] = (200, 0, 0)  # 40 px, centred
    assert measure_geometry(image) == {"size": "large", "horizontal position": "center", "vertical position": "middle"}


@pytest.mark.slow
def test_demo_project_has_real_known_bugs(demo_project):
    project = Project.open(demo_project)
    report = json.loads(project.meta()["demo"])
    assert report["splits"] == {"train": 1378, "val": 800, "test": 888, "pool": 800, "unused": 600}
    samples = project.samples("shape-cnn")
    tags = project.known_tags()
    assert set(tags.columns) == {"shape", "color", "size", "horizontal position", "vertical position"}
    assert (tags.loc[samples.index, "shape"] == samples["label"]).all()
    held_out = samples[samples["split"].isin(["val", "test"])].join(tags)
    accuracy = held_out["correct"].astype(float).mean()
    assert 0.85 <= accuracy <= 0.93
    blue_non_circles = held_out[(held_out["color"] == "blue") & (held_out["shape"] != "circle")]
    small_triangles = held_out[(held_out["size"] == "small") & (held_out["shape"] == "triangle")]
    others = held_out.drop(blue_non_circles.index.union(small_triangles.index))
    # the spurious correlation: blue non-circles are mostly called circles
    assert blue_non_circles["correct"].astype(float).mean() < 0.3
    assert (blue_non_circles.loc[~blue_non_circles["correct"].astype(bool), "prediction"] == "circle").mean() > 0.9
    # the rare case: small triangles fail far more often than the rest
    assert small_triangles["correct"].astype(float).mean() < 0.85
    assert others["correct"].astype(float).mean() > 0.95
    # both bugs show where hibug searches: on val, small triangles score far below the rest
    val = held_out[held_out["split"] == "val"]
    val_small_triangles = val.index.intersection(small_triangles.index)
    assert len(val_small_triangles) == 103 and val.loc[val_small_triangles, "correct"].astype(float).mean() < 0.72
    train = samples[samples["split"] == "train"].join(tags)
    assert ((train["size"] == "small") & (train["shape"] == "triangle")).sum() == report["planted_bugs"][1]["train_count"]
