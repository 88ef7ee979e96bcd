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
    right = held_out["correct"].astype(bool)
    assert (len(held_out), int(right.sum())) == (1688, 1493)  # 88.4% on val and test together
    blue_non_circles = (held_out["color"] == "blue") & (held_out["shape"] != "circle")
    small_triangles = (held_out["size"] == "small") & (held_out["shape"] == "triangle")
    others = ~(blue_non_circles | small_triangles)
    # the spurious correlation: blue non-circles are mostly called circles (every one of their failures is)
    assert (int(blue_non_circles.sum()), int(right[blue_non_circles].sum())) == (137, 23)
    assert (held_out.loc[blue_non_circles & ~right, "prediction"] == "circle").sum() == 114
    # the rare case: small triangles fail far more often than the rest (76.0% against 96.8%)
    assert (int(small_triangles.sum()), int(right[small_triangles].sum())) == (208, 158)
    assert (int(others.sum()), int(right[others].sum())) == (1368, 1324)
    # both bugs show where hibug searches: on val, small triangles score far below the rest (69.9%)
    val = held_out["split"] == "val"
    assert (int((val & small_triangles).sum()), int(right[val & small_triangles].sum())) == (103, 72)
    train = samples[samples["split"] == "train"].join(tags)
    small_triangles = (train["size"] == "small") & (train["shape"] == "triangle")
    assert small_triangles.sum() == report["planted_bugs"][1]["train_count"]
