"""The segmentation demo: scenes of shapes with exact masks, a real Mask R-CNN trained with planted bugs, imported as
objects matched by their masks; its mask AP is pycocotools' on its own files."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from hibug_core.demo.mask_scenes import MASK_SHAPES, render_mask_scenes
from hibug_core.demo.segmentation import MODEL_NAME, SegmentationDemoConfig, training_annotations
from hibug_core.errors import ConfigError
from hibug_core.models.zoo.scene_masks import (
    MaskModelConfig,
    load_trained_mask_model,
    save_mask_model,
    segment,
    train_mask_model,
    training_fingerprint,
)
from hibug_core.objects.masks import pixels
from hibug_core.store.project import Project


def test_scenes_are_seeded_and_each_mask_is_exactly_what_is_seen_of_its_object():
    images, objects, masks = render_mask_scenes(40, 3)
    again, same, same_masks = render_mask_scenes(40, 3)
    assert objects.equals(same) and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(images, again))
    assert all(np.array_equal(a, b) for a, b in zip(masks, same_masks))
    assert set(objects["shape"]) == set(MASK_SHAPES)
    for scene, group in objects.groupby("scene"):
        members = [masks[i] for i in group.index]
        assert not np.logical_and.reduce([np.sum(members, axis=0) > 1]).any()  # no pixel is two objects'
        image = np.asarray(images[scene])
        background = image[~np.any(members, axis=0)]
        for i, mask in zip(group.index, members):  # each mask: its box, its area, and only its colour under it
            ys, xs = np.nonzero(mask)
            row = objects.loc[i]
            assert [row.x, row.y, row.w, row.h] == [xs.min(), ys.min(), np.ptp(xs) + 1, np.ptp(ys) + 1]
            assert row.area == mask.sum() and len(np.unique(image[mask], axis=0)) == 1
        assert len(np.unique(background, axis=0)) <= 1
    from hibug_core.objects.mask_geometry import measure_mask

    whole_rings = objects.index[(objects["shape"] == "ring") & ~objects["truncated"]]
    # most show their hole; a small or flat ring's hole closes at 96 pixels, or another shape covers it
    assert np.mean([measure_mask(masks[i]).holes >= 1 for i in whole_rings]) > 0.6
    assert np.mean([measure_mask(masks[i]).elongation > 2 for i in objects.index[objects["shape"] == "bar"]]) > 0.9


def test_planted_bugs_are_put_into_the_training_annotations_only():
    config = SegmentationDemoConfig()
    _, objects, masks = render_mask_scenes(300, 0, config.scenes, config.training_shares())
    taught, taught_masks = training_annotations(objects, masks, config, 17)
    assert (objects["shape"] == "ring").mean() < 0.03  # bug 3: rings rare in training
    blue = objects["color"] == "blue"
    assert (taught["color"] == "blue").sum() <= 0.15 * blue.sum()  # bug 2: blue objects left out
    bars = np.flatnonzero((taught["shape"] == "bar").to_numpy())
    for i in bars:  # bug 1: a bar's training mask is its filled box
        row = taught.iloc[i]
        assert taught_masks[i].sum() == row.w * row.h
    others = np.flatnonzero((taught["shape"] != "bar").to_numpy())
    kept = taught.index.to_numpy()
    original = objects.reset_index(drop=True)
    assert all(np.array_equal(taught_masks[i], masks[original.index[(original["scene"] == taught.iloc[i].scene)
                                                                    & (original["order"] == taught.iloc[i].order)][0]])
               for i in others[:50])
    assert len(kept) == len(taught)


def test_a_tiny_mask_model_trains_segments_and_round_trips_its_checkpoint(tmp_path):
    config = MaskModelConfig(epochs=1, batch_size=8, width=8, pyramid_channels=16, head_channels=16,
                             score_threshold=0.0)
    images, objects, masks = render_mask_scenes(16, 1)
    teach = [(g[["x", "y", "w", "h"]].to_numpy(), g["shape"].tolist()) for _, g in objects.groupby("scene")]
    stacks = [np.stack([masks[i] for i in g.index]) for _, g in objects.groupby("scene")]
    classes = list(MASK_SHAPES)
    steps = []
    model = train_mask_model(images, teach, stacks, classes, config,
                             progress=lambda stage, done, total: steps.append(done))
    assert steps == [1, 2]
    found = segment(model, images[:3], classes)
    assert len(found) == 3 and all("segmentation" in d for f in found for d in f)
    assert all(pixels(d["segmentation"], 96, 96).shape == (96, 96) for f in found for d in f)
    fingerprint = training_fingerprint(teach, stacks, classes, config)
    save_mask_model(tmp_path / "m.pt", model, classes, config, fingerprint)
    loaded = load_trained_mask_model(tmp_path / "m.pt", classes, config, fingerprint)
    assert segment(loaded, images[:3], classes) == found  # the same weights find exactly the same masks
    assert load_trained_mask_model(tmp_path / "m.pt", classes, config, "another") is None
    with pytest.raises(ConfigError, match="mask_threshold = 1.5 \\(must be in \\(0, 1\\)\\)"):
        MaskModelConfig(mask_threshold=1.5)


def test_the_segmentation_demo_shows_its_planted_bugs_and_its_ap_is_pycocotools(segmentation_demo):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    project = Project.open(segmentation_demo)
    try:
        report = json.loads(project.meta()["demo"])
        assert project.task == "segmentation" and project.models() == [MODEL_NAME]
        assert report["val"]["objects"] == 1759 and 0.3 < report["val"]["AP"] < 0.5
        samples = project.samples(MODEL_NAME).join(project.known_tags()).join(
            project.objects(MODEL_NAME)[["error_type", "boundary_iou"]])
        val = samples[(samples["split"] == "val") & (samples["label"] != "(background)")]
        overall = val["score"].mean()
        for name, members, drop in (("bars", val["label"] == "bar", 0.35), ("blue", val["color"] == "blue", 0.35),
                                     ("rings", val["label"] == "ring", 0.35)):
            assert members.sum() >= 200, name
            assert val.loc[members, "score"].mean() < overall - drop, name
        bars = val[val["label"] == "bar"]
        assert (bars["error_type"] == "outline").mean() > 0.3  # found in place, outlined as their boxes
        assert (val.loc[val["color"] == "blue", "error_type"] == "missed").mean() > 0.5
        # The mask AP shown is pycocotools' on the demo's own files.
        data = segmentation_demo / "data"
        with contextlib.redirect_stdout(io.StringIO()):
            truth = COCO(str(data / "instances_val.json"))
            evaluation = COCOeval(truth, truth.loadRes(str(data / f"{MODEL_NAME}_val.json")), "segm")
            evaluation.evaluate()
            evaluation.accumulate()
            evaluation.summarize()
        stored = project.object_evaluation(MODEL_NAME, "val")["summary"]
        assert list(stored.values()) == pytest.approx(evaluation.stats.tolist(), abs=1e-9)
        assert report["val"]["AP"] == pytest.approx(evaluation.stats[0], abs=1e-12)
    finally:
        project.close()


def test_cli_builds_the_segmentation_demo(segmentation_demo_build):
    folder, run = segmentation_demo_build  # the session's segmentation demo is built by the command
    assert "demo project ready" in run.stdout and (folder / "hibug.sqlite").exists()
    assert "training the demo mask model" not in run.stderr  # the shipped model was used


def test_the_mask_benchmark_names_a_planted_bug_by_what_any_tag_source_calls_it():
    """The planted-bug benchmark scores the segmentation demo's slices: the bars' bug named with another condition
    (rank 1), the colour left out by the colour measured from the crops (rank 2), a wrong colour naming no bug, the
    rare shape at rank 4; the benchmark's first problem of seed 0 is the demo itself."""
    from hibug_core.bench.demo_bugs import DemoProblem, planted_bugs, same_attribute
    from hibug_core.bench.masks import MASK_BENCH, mask_problems
    from hibug_core.bench.peers import Found
    from hibug_core.bench.ranking import score_answer

    definitions = [(("mask fill", "sparse"), ("class", "bar")), (("dominant colour", "blue"),), (("color", "red"),),
                   (("class", "ring"),)]
    rows, scores = score_answer(Found(definitions, 4), planted_bugs(DemoProblem("demo", SegmentationDemoConfig())),
                                same=same_attribute(MASK_BENCH.same_as))
    assert {row["bug"]: (row["find_attr"], row["find_tag"], row["rank"]) for row in rows} == {
        "class = bar": (True, True, 1), "color = blue": (True, True, 2), "class = ring": (True, True, 4)}
    assert scores["P@10"] == 0.75
    problems = mask_problems(1)
    assert [p.id for p in problems] == ["demo"] and problems[0].demo == SegmentationDemoConfig()
