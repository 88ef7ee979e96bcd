"""cleanlab's ObjectLab as a peer on detection problems (hibug_core.bench.objectlab): its per-box decisions are the
library's own (pooled, they equal `find_label_issues`), its flags are scored per object against the planted
annotations and per slice by the one ranking, on a seeded scene set with a planted missing-annotation bug."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from cleanlab.object_detection.filter import find_label_issues

from hibug_core.bench.objectlab import (
    flagged_objects,
    objectlab_flags,
    objectlab_inputs,
    per_object,
    per_slice,
    pooled,
)
from hibug_core.bench.ranking import PlantedBug, score_answer

CLASSES = ["circle", "square"]


@pytest.fixture(scope="module")
def scenes():
    """60 scenes of three objects each (seeded), a detector that finds every one (boxes jittered half a pixel,
    confident), and annotations that leave out the first 25 green circles."""
    rng = np.random.default_rng(0)
    rows, detections = [], []
    for scene in range(60):
        found = []
        for k in range(3):
            x, y = rng.uniform(0, 80, 2)
            side = rng.uniform(10, 20)
            shape, color = CLASSES[k % 2], ["red", "green"][rng.integers(2)]
            rows.append({"scene": scene, "shape": shape, "color": color, "x": x, "y": y, "w": side, "h": side})
            found.append({"category": shape, "bbox": [x + rng.normal(0, 0.5), y, side, side],
                          "score": float(rng.uniform(0.7, 0.99))})
        detections.append(found)
    truth = pd.DataFrame(rows)
    missing = truth.index[(truth["color"] == "green") & (truth["shape"] == "circle")][:25]
    return truth, truth.drop(missing), detections, missing


def test_objectlab_flags_boxes_as_its_library_flags_images(scenes):
    truth, annotations, detections, missing = scenes
    labels, predictions, ids = objectlab_inputs(annotations, detections, CLASSES)
    assert [len(label["bboxes"]) for label in labels] == annotations.groupby("scene").size().reindex(
        range(60), fill_value=0).tolist()
    assert all(len(p) == len(CLASSES) for p in predictions)
    flags = objectlab_flags(labels, predictions)
    assert (flags.images() == find_label_issues(labels, predictions)).all() and flags.images().sum() == 5
    flagged = flagged_objects(flags, predictions, ids, truth)
    # six overlooked objects, each a green circle the annotations left out (and found by its predicted box)
    assert flagged["kind"].tolist() == ["overlooked"] * 6 and flagged["object"].isin(missing).all()
    figures = per_object(flagged, {"green circles left out": missing.to_numpy()})
    assert (figures["flags"], figures["precision"], figures["recall"]) == (6, 1.0, 6 / 25)
    assert figures["recall: green circles left out"] == 6 / 25 and figures["badloc flags"] == 0
    # pooled over problems: the counts summed, the shares over the pooled counts
    other = {**figures, "flags": 4, "precision": 0.5, "planted objects": 5, "recall": 0.2}
    together = pooled(pd.DataFrame([figures, other]))
    assert (together["flags"], together["planted objects"]) == (10, 30)
    assert together["precision"] == pytest.approx(8 / 10) and together["recall"] == pytest.approx(7 / 30)


def test_objectlabs_flags_read_as_slices_are_scored_like_every_finder(scenes):
    truth, annotations, detections, _ = scenes
    labels, predictions, ids = objectlab_inputs(annotations, detections, CLASSES)
    flagged = flagged_objects(objectlab_flags(labels, predictions), predictions, ids, truth)
    tags = truth[["color", "shape"]].rename(columns={"shape": "class"})
    found = per_slice(flagged, tags, max_depth=2, min_support=5)
    assert found.definitions[:3] == [(("class", "circle"), ("color", "green")), (("color", "green"),),
                                     (("class", "circle"),)]
    assert found.reported == 1 and set(found.bug_types) == {"missing annotations"}
    planted = [PlantedBug((("color", "green"), ("class", "circle")), "missing annotations")]
    bugs, problem = score_answer(found, planted)
    assert bugs == [{"bug": "color = green & class = circle", "bug_type": "missing annotations", "rank": 1,
                     "find_attr": True, "find_tag": True, "type_right": True}]
    assert problem["P@10"] == 1 / len(found.definitions[:10]) and problem["recall"] == 1.0
    # nothing flagged: no slice, nothing reported
    empty = per_slice(flagged.iloc[:0], tags)
    assert (empty.definitions, empty.reported) == ([], 0)
