"""The detection demo: scenes of shapes, a real FCOS detector trained with planted bugs, imported as objects."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hibug_core.demo.detection import DETECTOR_NAME, DetectionDemoConfig, training_annotations
from hibug_core.demo.scenes import render_scenes
from hibug_core.errors import ConfigError
from hibug_core.models.zoo.scene_fcos import (
    DetectorConfig,
    build_detector,
    detect,
    load_detector,
    save_detector,
    train_detector,
    training_fingerprint,
)
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


def test_planted_bugs_are_put_into_the_training_annotations_only():
    config = DetectionDemoConfig()
    _, objects = render_scenes(400, 0)
    taught = training_annotations(objects, config)
    pairs = (objects["color"] == "green") & (objects["shape"] == "triangle")
    small_blue = (objects["color"] == "blue") & (objects["w"] * objects["h"] < config.small_below ** 2)
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
    loaded = load_detector(tmp_path / "d.pt", classes, config, fingerprint)
    assert detect(loaded, images[:3], classes) == found  # the same weights find exactly the same boxes
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
            "small blue": (val["color"] == "blue") & (val["object size"] == "small"),
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
