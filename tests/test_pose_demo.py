"""The pose demo: scenes of drawn figures, a real keypoint network (Keypoint R-CNN) trained with planted bugs, imported
as people; its keypoint AP equals pycocotools'."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from hibug_core.demo.figures import FIGURE_KEYPOINTS, FigureSceneConfig, render_figures
from hibug_core.demo.pose import MODEL_NAME, PoseDemoConfig, training_annotations
from hibug_core.errors import ConfigError
from hibug_core.store.project import Project


def _points(row) -> np.ndarray:
    return np.asarray(row, float).reshape(len(FIGURE_KEYPOINTS), 3)


def test_figures_are_seeded_with_keypoints_inside_and_visibility_that_means_what_it_says():
    images, people = render_figures(80, 3)
    again, same = render_figures(80, 3)
    assert people.equals(same) and all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(images, again))
    points = np.stack([_points(k) for k in people["keypoints"]])
    labelled = points[:, :, 2] > 0
    assert ((points[labelled][:, :2] >= 0) & (points[labelled][:, :2] < 128)).all()
    assert (points[~labelled][:, :2] == 0).all()  # COCO writes an unlabelled keypoint as 0, 0, 0
    assert (people["truncated"] == (~labelled).any(axis=1)).all()  # a cut figure lost keypoints, and only it
    hidden = points[:, :, 2] == 1  # under a figure drawn later in the same scene
    later = people.groupby("scene")["order"].transform("max") > people["order"]
    assert hidden.any() and not hidden[~later.to_numpy()].any()
    assert set(people["pose"]) == {"standing", "arms raised", "sitting", "lying"}
    assert people.groupby("scene").size().between(1, 3).all()


def test_a_figure_seen_from_the_front_has_its_left_on_the_images_right_and_from_behind_on_its_left():
    config = FigureSceneConfig(pose_shares=(1.0, 0.0, 0.0, 0.0), truncated_share=0.0, back_share=0.5)
    _, people = render_figures(60, 5, config)
    shoulders = np.stack([_points(k)[[1, 2], 0] for k in people["keypoints"]])  # left, right shoulder x
    front = (people["facing"] == "front").to_numpy()
    assert front.sum() > 10 and (~front).sum() > 10
    assert (shoulders[front, 0] > shoulders[front, 1]).all()
    assert (shoulders[~front, 0] < shoulders[~front, 1]).all()


def test_bugs_go_into_the_training_data_only_and_the_config_names_a_bad_field():
    config = PoseDemoConfig()
    _, people = render_figures(600, 0)
    taught = training_annotations(people, config)
    pair = (people["shirt colour"] == "black") & (people["pose"] == "arms raised")
    assert pair.sum() > 20 and taught.index.isin(people.index[pair]).sum() <= 0.15 * pair.sum()
    assert len(taught) == len(people) - pair.sum() + taught.index.isin(people.index[pair]).sum()
    back = taught["facing"] == "back"
    mirrored = [(_points(t)[1, 0] != _points(p)[1, 0]) for t, p in
                zip(taught["keypoints"], people.loc[taught.index, "keypoints"])]
    mirrored = np.asarray(mirrored)
    assert 0.8 < mirrored[back.to_numpy()].mean() <= 1.0 and not mirrored[~back.to_numpy()].any()
    first = np.flatnonzero(mirrored)[0]
    swapped, true = _points(taught["keypoints"].iloc[first]), _points(people.loc[taught.index[first], "keypoints"])
    assert np.array_equal(swapped[1], true[2]) and np.array_equal(swapped[0], true[0])  # shoulders swap, head stays
    lowered = replace(config, pair_bug="arms lowered", keep_pair=0.0)
    taught = training_annotations(people, lowered)
    assert len(taught) == len(people)  # nobody dropped: the pair's arms are annotated hanging down instead
    first = people.index[pair & ~people["truncated"]][0]
    true, wrong = _points(people.at[first, "keypoints"]), _points(taught.at[first, "keypoints"])
    line = true[[1, 2], 1].mean()
    assert np.allclose(wrong[3:7, 1], 2 * line - true[3:7, 1]) and np.array_equal(wrong[7:], true[7:])
    assert (wrong[3:7, 1] > line).all() and (true[3:7, 1] < line).all()  # raised above the shoulders, annotated below
    swapped = training_annotations(people, replace(config, pair_bug="left and right swapped", keep_pair=0.0))
    turned = np.asarray([_points(t)[1, 0] != _points(p)[1, 0] for t, p in zip(swapped["keypoints"],
                                                                               people["keypoints"])])
    assert len(swapped) == len(people) and turned[pair.to_numpy()].all()  # swapped once, whichever way they face
    others = people.index[~pair]  # everyone else is swapped exactly as with the pair left out
    default = training_annotations(people, config)
    assert np.array_equal(turned[~pair.to_numpy()], [_points(t)[1, 0] != _points(p)[1, 0] for t, p in zip(
        default.loc[others, "keypoints"], people.loc[others, "keypoints"])])
    _, trained_on = render_figures(1500, 0, config.training_scenes())
    assert (trained_on["pose"] == "lying").mean() < 0.04 and trained_on["small"].mean() < 0.07
    with pytest.raises(ConfigError, match="pair_colour = 'pink'"):
        PoseDemoConfig(pair_colour="pink")
    with pytest.raises(ConfigError, match="pose_shares"):
        FigureSceneConfig(pose_shares=(0.5, 0.5, 0.5, 0.5))


@pytest.mark.slow
def test_a_tiny_keypoint_model_trains_on_images_with_and_without_people_and_round_trips_its_checkpoint(tmp_path):
    import torch

    from hibug_core.demo.pose import CLASSES, _people_by_image, training_fingerprint
    from hibug_core.models.zoo.scene_keypoints import (
        KeypointModelConfig,
        detect_people,
        load_trained_keypoint_model,
        save_keypoint_model,
        train_keypoint_model,
    )

    config = KeypointModelConfig(image_size=128, width=8, pyramid_channels=16, head_channels=16, epochs=1,
                                 batch_size=4)
    images, people = render_figures(8, 2)
    teach = _people_by_image(people[people["scene"] != 3], 8)  # scene 3 has nobody annotated
    assert teach[3][2].shape == (0, 13, 3)
    steps = []
    model = train_keypoint_model(images, teach, CLASSES, 13, config, lambda stage, done, total: steps.append(done))
    assert steps == [1, 2]
    found = detect_people(model, images[:2], CLASSES)
    assert len(found) == 2 and all(len(d["keypoints"]) == 39 for f in found for d in f)
    fingerprint = training_fingerprint(images, teach, config)
    assert training_fingerprint(images[::-1], teach, config) != fingerprint  # other pixels: train again
    save_keypoint_model(tmp_path / "k.pt", model, CLASSES, 13, config, fingerprint, half=True)
    loaded = load_trained_keypoint_model(tmp_path / "k.pt", CLASSES, 13, config, fingerprint).state_dict()
    kept = {k: v.half().float() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    assert loaded.keys() == kept.keys() and all(torch.equal(loaded[k], kept[k]) for k in kept)  # stored as float16
    assert load_trained_keypoint_model(tmp_path / "k.pt", CLASSES, 13, config, "other data") is None
    assert load_trained_keypoint_model(tmp_path / "missing.pt", CLASSES, 13, config, fingerprint) is None


def _planted(val):
    return {
        "lying": val["pose"] == "lying",
        "seen from behind": val["facing"] == "back",
        "black with arms raised": (val["shirt colour"] == "black") & (val["pose"] == "arms raised"),
        "small": val["object size"] == "small",
    }


@pytest.mark.slow
def test_the_pose_demo_shows_its_planted_bugs_with_their_error_types(pose_demo):
    with Project.open(pose_demo, read_only=True) as project:
        report = json.loads(project.meta()["demo"])
        assert project.task == "pose" and project.models() == [MODEL_NAME]
        samples = project.samples(MODEL_NAME).join(project.known_tags())
        errors = project.objects(MODEL_NAME)
    assert report["val"]["people"] == 810 and 0.3 < report["val"]["AP"] < 0.5
    for split in ("val", "test"):
        people = samples[(samples["split"] == split) & (samples["label"] != "(background)")]
        overall = people["score"].mean()
        shown = _planted(people)
        for name in ("lying", "seen from behind", "small"):
            assert shown[name].sum() >= 100, (split, name)
            assert people.loc[shown[name], "score"].mean() < overall - 0.1, (split, name)
        # The conjunction is planted (a test above) but this small network does not learn it: black figures with
        # their arms raised score as other raised arms do (the README says so).
        black, raised = people["shirt colour"] == "black", people["pose"] == "arms raised"
        pair = people.loc[shown["black with arms raised"], "score"].mean()
        assert shown["black with arms raised"].sum() >= 25
        assert abs(pair - people.loc[raised & ~black, "score"].mean()) < 0.1
    val = samples[(samples["split"] == "val") & (samples["label"] != "(background)")]
    planted = _planted(val)
    failed = errors["error_type"].reindex(val.index)[val["score"] < 0.5]
    assert failed[planted["seen from behind"]].value_counts().index[0] == "inversion"  # left for right
    assert failed[planted["lying"]].value_counts().index[0] == "miss"  # keypoints far from any true one
    assert failed[planted["small"]].value_counts().index[0] == "missed"  # no prediction near


@pytest.mark.slow
def test_the_pose_demos_planted_bugs_lead_its_error_slices_with_their_types(pose_demo):
    """The swap is an annotation bug (the training annotations against the true keypoints), the rare poses and small
    figures are rarer in training than in val; false positives are measured apart, not in the people's baseline, so
    that the small figures (41% against 56%) are not hidden by them."""
    from hibug_core.slices.report import error_slices, false_positives, one_row_per_bug

    with Project.open(pose_demo, read_only=True) as project:
        report = error_slices(project)
    top = one_row_per_bug(report.slices).head(5)
    types = dict(zip(top["description"], top["bug_type"]))
    assert types["facing = back"] == "left and right swapped" and top["description"].iat[0] == "facing = back"
    assert types["pose = lying"] == "distribution shift" and types["object size = small"] == "distribution shift"
    assert top["reason"].iat[0].startswith("535 in training, 90% of them annotated with left and right swapped in the "
                                           "training annotations (23% of all people)")
    assert len(report.evaluation) == 810 and (report.evaluation["label"] != "(background)").all()
    assert false_positives(report.samples, "val") == 339  # measured apart
    assert (report.slices["q_value"] < report.config.alpha).all()  # every reported slice is significant
    # The unlearnt conjunction is not reported as a bug of its own: it fails as every figure seen from behind does.
    assert not any({("shirt colour", "black"), ("pose", "arms raised")} <= set(d) for d in report.slices["definition"])


def test_hibug_info_prints_the_keypoint_ap_pycocotools_gives_on_the_same_files(pose_demo):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from hibug_core.demo.figures import FIGURE_SIGMAS

    run = subprocess.run([sys.executable, "-m", "hibug_core.cli", "info", str(pose_demo), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    summaries = json.loads(run.stdout)["coco"]
    printed = subprocess.run([sys.executable, "-m", "hibug_core.cli", "info", str(pose_demo)], capture_output=True,
                             text=True, timeout=300).stdout
    data = pose_demo / "data"
    for split in ("val", "test"):
        with contextlib.redirect_stdout(io.StringIO()):
            truth = COCO(str(data / f"people_{split}.json"))
            reference = COCOeval(truth, truth.loadRes(str(data / f"{MODEL_NAME}_{split}.json")), "keypoints")
            reference.params.kpt_oks_sigmas = np.asarray(FIGURE_SIGMAS)
            reference.evaluate()
            reference.accumulate()
            reference.summarize()
        ours = summaries[f"{MODEL_NAME} ({split})"]
        assert list(ours.values()) == pytest.approx(reference.stats.tolist(), abs=1e-12), split
        assert f"AP {reference.stats[0]:.3f}" in printed


def test_cli_builds_the_pose_demo_from_the_shipped_model(pose_demo_build):
    folder, run = pose_demo_build
    assert "demo project ready" in run.stdout and (folder / "hibug.sqlite").exists()
    assert "training the demo keypoint model" not in run.stderr  # the shipped model was used


def test_the_pose_benchmark_scores_a_slice_by_what_any_tag_source_calls_a_planted_condition():
    from hibug_core.bench.demo_bugs import DemoProblem, planted_bugs, same_attribute
    from hibug_core.bench.peers import Found
    from hibug_core.bench.pose import POSE_BENCH
    from hibug_core.bench.ranking import score_answer

    definitions = [(("facing", "back"),), (("dominant colour", "black"), ("pose", "arms raised")),
                   (("body orientation", "lying"),), (("object size", "medium"),)]
    rows, scores = score_answer(Found(definitions, 4), planted_bugs(DemoProblem("demo", PoseDemoConfig())),
                                same=same_attribute(POSE_BENCH.same_as))
    found = {row["bug"]: (row["find_attr"], row["find_tag"], row["rank"]) for row in rows}
    assert found == {"pose = lying": (True, True, 3), "facing = back": (True, True, 1),
                     "shirt colour = black & pose = arms raised": (True, True, 2),
                     "object size = small": (True, False, None)}
    assert scores["P@10"] == 0.75 and scores["recall"] == 0.75
