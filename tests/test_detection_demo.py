"""The detection demo: scenes of shapes, a real FCOS detector trained with planted bugs, imported as objects."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hibug_core.demo.detection import DETECTOR_NAME, DetectionDemoConfig, training_annotations
from hibug_core.models.zoo.scene_fcos import (DetectorConfig, build_detector, detect, load_detector, save_detector,
                                      train_detector, training_fingerprint)
from hibug_core.demo.scenes import corner_keypoints, render_scenes
from hibug_core.errors import ConfigError
from hibug_core.store.project import Project


def test_scenes_are_seeded_and_boxes_lie_inside_the_images():
    images, objects = render_scenes(50, 3)
    again, same = render_scenes(50, 3)
    assert objects.equals(same) and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(images, again))
    assert (objects["x"] >= 0).all() and (objects["x"] + objects["w"] <= 96).all()
    assert (objects["w"] >= 2).all() and objects.groupby("scene").size().between(1, 5).all()
    assert 0.05 < objects["truncated"].mean() < 0.25
    truncated = objects[objects["truncated"]]  # a cut object touches the border
    assert ((truncated["x"] == 0) | (truncated["y"] == 0) | (truncated["x"] + truncated["w"] == 96)
            | (truncated["y"] + truncated["h"] == 96)).all()
    corners = corner_keypoints(objects.head(1))
    x, y, w, h = objects.iloc[0][["x", "y", "w", "h"]]
    assert corners.tolist() == [[x, y, 2, x + w, y, 2, x + w, y + h, 2, x, y + h, 2]]


def test_planted_bugs_are_put_into_the_training_annotations_only():
    config = DetectionDemoConfig()
    _, objects = render_scenes(400, 0)
    taught = training_annotations(objects, config)
    pairs = (objects["color"] == "green") & (objects["shape"] == "triangle")
    small_blue = (objects["color"] == "blue") & (objects["side"] < config.small_below)
    assert pairs.sum() > 10 and small_blue.sum() > 10
    assert taught.index.isin(objects.index[pairs]).sum() <= 0.2 * pairs.sum()
    assert taught.index.isin(objects.index[small_blue]).sum() <= 0.2 * small_blue.sum()
    cut = taught[taught["truncated"]]
    original = objects.loc[cut.index]
    assert np.allclose(cut["w"], original["w"] * config.truncated_shrink)  # boxes of cut objects halved
    assert np.allclose(cut["x"] + cut["w"] / 2, original["x"] + original["w"] / 2)


def test_a_tiny_detector_trains_detects_and_round_trips_its_checkpoint(tmp_path):
    config = DetectorConfig(epochs=1, batch_size=8, width=8, pyramid_channels=32)
    images, objects = render_scenes(16, 1)
    teach = [(g[["x", "y", "w", "h"]].to_numpy(), g["shape"].tolist()) for _, g in objects.groupby("scene")]
    classes = ["circle", "rectangle", "triangle"]
    steps = []
    model = train_detector(images, teach, classes, config, progress=lambda stage, done, total: steps.append(done))
    assert steps == [1, 2]
    found = detect(model, images[:3], classes)
    assert len(found) == 3 and all(isinstance(f, list) for f in found)
    fingerprint = training_fingerprint(teach, classes, config)
    save_detector(tmp_path / "d.pt", model, classes, config, fingerprint)
    assert load_detector(tmp_path / "d.pt", classes, config, fingerprint) is not None
    assert load_detector(tmp_path / "d.pt", classes, config, "another") is None  # other data: train again
    with pytest.raises(ConfigError, match="pyramid_channels = 48 \\(must be a positive multiple of 32\\)"):
        DetectorConfig(pyramid_channels=48)
    assert build_detector(classes, config).training is True


def test_the_detection_demo_shows_its_planted_bugs(detection_demo):
    project = Project.open(detection_demo)
    try:
        report = json.loads(project.meta()["demo"])
        assert project.task == "detection" and project.models() == [DETECTOR_NAME]
        assert report["val"]["objects"] == 2096 and 0.45 < report["val"]["AP50"] < 0.95
        samples = project.samples(DETECTOR_NAME).join(project.known_tags())
        val = samples[(samples["split"] == "val") & (samples["label"] != "(background)")]
        overall = val["score"].mean()
        planted = {
            "small blue": (val["color"] == "blue") & (val["size"] == "small"),
            "cut by the border": val["is truncated"] == "yes",
            "green triangles": (val["color"] == "green") & (val["label"] == "triangle"),
        }
        for name, members in planted.items():
            assert members.sum() >= 30, name
            assert val.loc[members, "score"].mean() < overall - 0.2, name
        # The conjunction: neither half alone drops as far.
        green, triangles = val["color"] == "green", val["label"] == "triangle"
        pair = val.loc[planted["green triangles"], "score"].mean()
        assert val.loc[green & ~triangles, "score"].mean() > pair + 0.4
        assert val.loc[triangles & ~green, "score"].mean() > pair + 0.4
        evaluation = project.object_evaluation(DETECTOR_NAME, "test")
        assert evaluation["splits"] == ["test"] and evaluation["per_class"]["class"].tolist() == [
            "circle", "rectangle", "triangle"]
    finally:
        project.close()


def test_cli_builds_the_detection_demo(detection_demo_build):
    folder, run = detection_demo_build  # the session's detection demo is built by the command
    assert "demo project ready" in run.stdout and (folder / "hibug.sqlite").exists()
    assert "training the demo detector" not in run.stderr  # the shipped detector was used


def test_the_pose_variant_matches_corners_by_oks_and_equals_pycocotools(tmp_path):
    """Pose: each shape's four box corners are its keypoints; the keypoint model is the shipped detector, whose boxes
    give the corners it predicts. Matching is by OKS with corner sigmas, and the AP equals pycocotools'."""
    import contextlib
    import io

    from hibug_core.demo.detection import ASSET_DETECTOR, DetectionDemoConfig, training_annotations
    from hibug_core.demo.scenes import CORNERS, SCENE_SHAPES
    from hibug_core.tasks import load_coco
    from hibug_core.objects.matching import MatchConfig

    config = DetectionDemoConfig()
    _, train_objects = render_scenes(config.train_scenes, 0, config.scenes)
    taught = training_annotations(train_objects, config)
    grouped = {s: (g[["x", "y", "w", "h"]].to_numpy(), g["shape"].tolist()) for s, g in taught.groupby("scene")}
    teach = [grouped.get(i, (np.zeros((0, 4)), [])) for i in range(config.train_scenes)]
    classes = list(SCENE_SHAPES)
    model = load_detector(ASSET_DETECTOR, classes, config.detector, training_fingerprint(teach, classes,
                                                                                          config.detector))
    assert model is not None, "the shipped detector no longer matches the demo's training annotations"
    images, objects = render_scenes(60, 1, config.scenes)  # the demo's validation scenes, first 60
    objects = objects[objects["scene"] < 60]
    (tmp_path / "images").mkdir()
    records = []
    for k, image in enumerate(images):
        image.save(tmp_path / "images" / f"{k}.png")
        records.append({"id": k + 1, "file_name": f"images/{k}.png", "width": 96, "height": 96})
    corners = corner_keypoints(objects)
    truth = {"images": records, "categories": [{"id": 1, "name": "shape", "keypoints": list(CORNERS)}],
             "annotations": [{"id": j + 1, "image_id": int(r.scene) + 1, "category_id": 1,
                              "bbox": [r.x, r.y, r.w, r.h], "area": r.w * r.h, "iscrowd": 0,
                              "keypoints": corners[j].tolist(), "num_keypoints": 4}
                             for j, r in enumerate(objects.itertuples())]}
    found = detect(model, images, classes)
    results = [{"image_id": k + 1, "category_id": 1, "bbox": d["bbox"], "score": d["score"],
                "keypoints": corner_keypoints(pd.DataFrame([dict(zip("xywh", d["bbox"]))]))[0].tolist()}
               for k, detections in enumerate(found) for d in detections]
    (tmp_path / "pose.json").write_text(json.dumps(truth))
    (tmp_path / "corners.json").write_text(json.dumps(results))
    sigmas = (0.05,) * 4
    manifest = load_coco(tmp_path / "pose.json", {"corners": tmp_path / "corners.json"},
                         match_config=MatchConfig(keypoint_sigmas=sigmas))
    evaluation = manifest.object_evaluations["corners"]
    assert evaluation.settings["iou_type"] == "keypoints" and evaluation.settings["keypoint_sigmas"] == list(sigmas)
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(tmp_path / "pose.json"))
        reference = COCOeval(gt, gt.loadRes(str(tmp_path / "corners.json")), "keypoints")
        reference.params.kpt_oks_sigmas = np.asarray(sigmas)
        reference.evaluate()
        reference.accumulate()
        reference.summarize()
    assert list(evaluation.summary.values()) == pytest.approx(reference.stats.tolist(), abs=1e-12)
    assert evaluation.summary["AP50"] > 0.5  # the detector's corners find most shapes
    project = Project.create_from_manifest(tmp_path / "project", manifest)
    stored = project.objects()
    assert project.task == "pose" and (stored["object_kind"] == "object").sum() == len(objects)
    assert stored["keypoints_json"].notna().all()  # objects' corners, and the false positives' predicted ones
    project.close()
