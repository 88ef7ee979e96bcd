"""Ronchi and Perona's keypoint error types on hand-built people: one case per type, the left/right pairs read from
keypoint names, a person's worst type, the mix of a group, and the fix that moves a type's keypoints home."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from hibug_core.objects.keypoint_errors import (
    Skeleton,
    encode,
    fixed_results,
    keypoint_mix,
    keypoint_types,
    mirror_pairs,
    person_type,
    similarity,
    type_people,
)

NAMES = ("nose", "left shoulder", "right shoulder", "left hip", "right hip")
SKELETON = Skeleton.from_names(NAMES, [0.1] * 5, [(1, 2), (1, 3), (2, 4), (3, 4)])
AREA = 10_000.0  # ks = exp(-d^2 / 800): good within 11.4 px, near (jitter) within 23.5 px
# A person facing the camera: their left on the image's right.
TRUTH = np.array([[50, 10, 2], [80, 30, 2], [20, 30, 2], [70, 80, 2], [30, 80, 2]], float)
OTHER = TRUTH + [300, 0, 0]  # a second person, far to the right


def test_names_give_left_right_pairs_in_every_common_spelling():
    names = ["nose", "left_eye", "right_eye", "l_knee", "r_knee", "leftWrist", "rightWrist", "Left Ankle",
             "Right Ankle", "left ear", "rear", "lips"]
    assert mirror_pairs(names) == (0, 2, 1, 4, 3, 6, 5, 8, 7, 9, 10, 11)
    assert SKELETON.mirror == (0, 2, 1, 4, 3)
    with pytest.raises(ValueError, match="5 keypoints needs 5 mirrors and 5 sigmas; got 5 and 4"):
        Skeleton(NAMES, (0, 2, 1, 4, 3), (), (0.1,) * 4)
    with pytest.raises(ValueError, match="limbs: every end is a keypoint index from 0 to 4"):
        Skeleton.from_names(NAMES, [0.1] * 5, [(0, 5)])


def test_similarity_is_cocos():
    assert similarity(np.array([[3.0, 4.0]]), np.array([[0.0, 0.0]]), 100.0, np.array([0.5]))[0] == \
        pytest.approx(np.exp(-25 / (2 * 100 * 1.0)))


@pytest.mark.parametrize("moved, expected", [
    ({}, "ggggg"),
    ({3: (70 + 5, 80)}, "ggggg"),  # 5 px off: similarity 0.969
    ({3: (70 + 15, 80)}, "gggjg"),  # 15 px off: 0.755, jitter
    ({3: (30, 80)}, "gggig"),  # the left hip on the right hip: inversion
    ({1: (20 + 3, 30), 2: (80, 30 - 3)}, "giigg"),  # both shoulders the wrong way round: two inversions
    ({3: (370, 80)}, "gggsg"),  # on the other person's left hip: swap
    ({3: (330, 80)}, "gggsg"),  # on the other person's right hip: swap too
    ({3: (70, 200)}, "gggmg"),  # nowhere near any hip: miss
    ({0: (50, 60)}, "mgggg"),  # the nose has no counterpart, so far off it is a miss
])
def test_each_keypoint_gets_its_type(moved, expected):
    predicted = TRUTH[:, :2].copy()
    for j, point in moved.items():
        predicted[j] = point
    types, values = keypoint_types(predicted, TRUTH, AREA, [(OTHER, AREA)], SKELETON)
    assert encode(types) == expected
    assert values[3] == pytest.approx(np.exp(-((predicted[3] - TRUTH[3, :2]) ** 2).sum() / 800))


def test_an_unlabelled_keypoint_has_no_type_and_cannot_be_an_inversion_target():
    truth = TRUTH.copy()
    truth[4, 2] = 0  # the right hip is not labelled
    predicted = TRUTH[:, :2].copy()
    predicted[3] = (30, 80)  # on the unlabelled right hip
    types, values = keypoint_types(predicted, truth, AREA, [], SKELETON)
    assert encode(types) == "gggm-" and np.isnan(values[4])


def test_a_person_is_named_by_their_commonest_error_ties_to_the_more_severe():
    assert person_type(["good"] * 5) == "good"
    assert person_type(["jitter", "jitter", "miss", "good"]) == "jitter"
    assert person_type(["jitter", "inversion", "good"]) == "inversion"
    assert person_type(["swap", "miss", ""]) == "miss"


def test_a_groups_mix_counts_failed_keypoints():
    mix = keypoint_mix(["ggjji", "gg-mi", None, "ggggg"])
    assert mix.to_dict() == {"jitter": 0.4, "inversion": 0.4, "swap": 0.0, "miss": 0.2}
    assert keypoint_mix(["ggg"]).sum() == 0


def _people_frames():
    annotations = pd.DataFrame({"id": [11, 12], "image_id": [1, 1], "area": [AREA, AREA], "iscrowd": [0, 0],
                                "keypoints": [TRUTH.ravel().tolist(), OTHER.ravel().tolist()]})
    first = TRUTH.copy()
    first[3, :2] = (30, 80)  # inversion
    second = OTHER.copy()
    second[0, :2] = (350 + 15, 10)  # jitter
    records = [{"image_id": 1, "category_id": 1, "score": 0.9, "keypoints": first.ravel().tolist()},
               {"image_id": 1, "category_id": 1, "score": 0.8, "keypoints": second.ravel().tolist()}]
    detections = pd.DataFrame({"keypoints": [r["keypoints"] for r in records]})
    return annotations, records, detections


def test_people_are_typed_against_their_neighbours_and_a_fix_moves_only_its_type():
    annotations, records, detections = _people_frames()
    pairs = pd.Series({11: 0, 12: 1})
    typed = type_people(annotations, detections, pairs, SKELETON)
    assert typed["keypoint_types"].to_dict() == {11: "gggig", 12: "jgggg"}
    assert typed["keypoint_error"].to_dict() == {11: "inversion", 12: "jitter"}
    fixed = fixed_results(records, pairs, typed["keypoint_types"], annotations, "inversion")
    assert fixed[0]["keypoints"] == TRUTH.ravel().tolist() and fixed[1] == records[1]
    assert records[0]["keypoints"] != fixed[0]["keypoints"], "the records given are not changed"


def _coco_people():
    """Three images: a person predicted with one hip inverted (still found), a person predicted with both hips and
    shoulders inverted (OKS below .5: missed, near), a person nobody predicted, and a prediction on an empty image."""
    from hibug_core.objects.coco import parse_ground_truth, parse_results

    category = {"id": 1, "name": "person", "keypoints": list(NAMES), "skeleton": [[2, 3], [2, 4], [3, 5], [4, 5]]}
    images = [{"id": i, "file_name": f"{i}.png", "width": 400, "height": 300} for i in (1, 2, 3, 4)]
    people = [{"id": 10 + i, "image_id": i, "category_id": 1, "bbox": [20, 10, 100, 100], "area": AREA,
               "iscrowd": 0, "keypoints": TRUTH.ravel().tolist()} for i in (1, 2, 3)]
    truth = parse_ground_truth({"images": images, "categories": [category], "annotations": people}, "people.json")
    one_hip = TRUTH.copy()
    one_hip[3, :2] = (30, 80)
    turned = TRUTH[[0, 2, 1, 4, 3]].copy()  # seen from behind: every pair the wrong way round
    results = [{"image_id": 1, "category_id": 1, "score": 0.9, "keypoints": one_hip.ravel().tolist()},
               {"image_id": 2, "category_id": 1, "score": 0.8, "keypoints": turned.ravel().tolist()},
               {"image_id": 4, "category_id": 1, "score": 0.7, "keypoints": TRUTH.ravel().tolist()}]
    return truth, parse_results(results, truth, "results.json", model="m")


def test_matching_people_types_their_keypoints_and_says_the_ap_each_fix_would_give():
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from hibug_core.objects.matching import MatchConfig, match

    truth, results = _coco_people()
    matched = match(truth, results, MatchConfig(keypoint_sigmas=(0.1,) * 5))
    people = matched.objects
    assert people["keypoint_types"].to_dict() == {11: "gggig", 12: "giiii", 13: None}
    assert people["outcome"].tolist() == ["true positive", "missed", "missed"]
    assert people["error_type"].tolist() == ["", "inversion", "missed"]
    fixes = matched.fixes.set_index("error type")
    assert fixes["count"].to_dict() == {"jitter": 0, "inversion": 5, "swap": 0, "miss": 0, "background": 1,
                                        "missed": 1}
    assert fixes.loc["jitter", "AP if fixed"] == matched.summary["AP"]

    # The inversions fixed: what pycocotools says of the results with those keypoints moved home
    fixed = [dict(r) for r in results.records]
    fixed[0]["keypoints"] = fixed[1]["keypoints"] = TRUTH.ravel().tolist()
    coco = COCO()
    coco.dataset = {**truth.dataset}
    coco.createIndex()
    evaluator = COCOeval(coco, coco.loadRes([{**r, "id": i + 1} for i, r in enumerate(fixed)]), "keypoints")
    evaluator.params.kpt_oks_sigmas = np.array([0.1] * 5)
    evaluator.evaluate(), evaluator.accumulate(), evaluator.summarize()
    assert fixes.loc["inversion", "AP if fixed"] == pytest.approx(evaluator.stats[0], abs=1e-9)
    assert fixes.loc["inversion", "AP gain"] > 0 and fixes.loc["missed", "AP gain"] > 0


def test_a_model_that_misses_everyone_or_a_class_with_nobody_is_matched_with_undefined_aps():
    """faster-coco-eval evaluates keypoints only for categories with people in them: a category with none, or the
    'missed' fix of a model that found nobody (no person left), has no AP (NaN) instead of crashing the import."""
    from hibug_core.objects.coco import parse_ground_truth, parse_results
    from hibug_core.objects.matching import MatchConfig, match

    truth, _ = _coco_people()
    dataset = {**truth.dataset, "categories": [*truth.dataset["categories"], {
        "id": 2, "name": "robot", "keypoints": list(NAMES), "skeleton": [[2, 3]]}]}
    truth = parse_ground_truth(dataset, "people.json")
    far = (TRUTH + [250, 150, 0]).ravel().tolist()  # in the empty image's corner, near nobody
    results = parse_results([{"image_id": 4, "category_id": 1, "score": 0.7, "keypoints": far}], truth, "r.json",
                            model="m")
    matched = match(truth, results, MatchConfig(keypoint_sigmas=(0.1,) * 5))
    assert matched.objects["outcome"].tolist() == ["missed"] * 3
    assert matched.per_class.set_index("class")["AP"].isna().to_dict() == {"person": False, "robot": True}
    assert matched.per_class.set_index("class").at["person", "AP"] == 0.0
    fixes = matched.fixes.set_index("error type")
    assert fixes.at["missed", "count"] == 3 and np.isnan(fixes.at["missed", "AP if fixed"])
    assert fixes["AP if fixed"].drop("missed").tolist() == [0.0] * 5 and matched.summary["AP"] == 0.0


def _people_project(folder):
    """The hand-built people imported as a pose project in `folder`/project (its files beside it)."""
    import json

    from PIL import Image

    from hibug_core.objects.matching import MatchConfig
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_coco

    truth, results = _coco_people()
    for i in (1, 2, 3, 4):
        Image.new("RGB", (400, 300), (200, 200, 200)).save(folder / f"{i}.png")
    (folder / "people.json").write_text(json.dumps({**truth.dataset, "categories": [
        {**truth.dataset["categories"][0], "skeleton": [[2, 3], [2, 4], [3, 5], [4, 5]]}]}))
    (folder / "m.json").write_text(json.dumps(results.records))
    manifest = load_coco(folder / "people.json", [folder / "m.json"],
                         match_config=MatchConfig(keypoint_sigmas=(0.1,) * 5))
    assert manifest.task == "pose"
    return Project.create_from_manifest(folder / "project", manifest)


def test_an_imported_pose_model_keeps_its_keypoint_types_skeletons_and_fixes(tmp_path):
    import json

    _, results = _coco_people()
    with _people_project(tmp_path) as project:
        people = project.objects("m")
        people = people[people["object_kind"] == "object"]
        assert people["keypoint_types"].tolist()[:2] == ["gggig", "giiii"] and pd.isna(people["keypoint_types"].iat[2])
        assert people["error_type"].tolist() == ["", "inversion", "missed"]
        assert json.loads(people["pred_keypoints_json"].iat[1]) == results.records[1]["keypoints"]
        similarity = json.loads(people["keypoint_similarity_json"].iat[0])
        assert similarity[:3] == [1.0, 1.0, 1.0] and similarity[3] == pytest.approx(np.exp(-1600 / 800), abs=1e-4)
        fixes = project.object_evaluation("m")["fixes"].set_index("error type")
        assert fixes.loc["inversion", "count"] == 5 and fixes.loc["inversion", "AP gain"] > 0
        measured = project.known_tags().reindex(people.index)  # what the true keypoints say of each person
        assert measured["body orientation"].tolist() == ["upright"] * 3
        assert measured["facing"].tolist() == ["front"] * 3 and measured["visible keypoints"].tolist() == ["all"] * 3


def test_the_per_keypoint_table_counts_types_and_similarity():
    from hibug_core.objects.summary import keypoint_table

    people = pd.DataFrame({"keypoint_types": ["gjim", "g-gg", None],
                           "keypoint_similarity_json": ["[1.0, 0.6, 0.1, 0.0]", "[0.9, null, 0.95, 0.86]", None]})
    table = keypoint_table(people, ["a", "b", "c", "d"]).set_index("keypoint")
    assert table["labelled"].tolist() == [2, 1, 2, 2]
    assert table["mean similarity"].round(3).tolist() == [0.95, 0.6, 0.525, 0.43]
    assert table["similarity ≥ 0.5"].tolist() == [1.0, 1.0, 0.5, 0.5]
    assert table.loc["c", ["good", "inversion"]].tolist() == [0.5, 0.5] and table.loc["b", "jitter"] == 1.0


def test_the_overview_of_a_pose_model_shows_the_ap_each_fix_gives_and_each_keypoint(monkeypatch, tmp_path):
    from page_support import bars, charts, open_page

    _people_project(tmp_path).close()
    at = open_page(monkeypatch, "app.py", tmp_path / "project")
    assert not at.exception
    fixes = next(d.value for d in at.dataframe if "AP if fixed" in d.value.columns).set_index("error type")
    assert fixes["count"].to_dict() == {"jitter": 0, "inversion": 5, "swap": 0, "miss": 0, "background": 1,
                                        "missed": 1}
    keypoints = next(d.value for d in at.dataframe if "mean similarity" in d.value.columns).set_index("keypoint")
    assert keypoints.index.tolist() == list(NAMES)
    assert keypoints.loc["left hip", "inversion"] == 1.0 and keypoints.loc["nose", "good"] == 1.0
    assert any("AP if each error type were fixed** (Ronchi and Perona and TIDE" in m.value for m in at.markdown)
    # Missed people by their keypoint error types and by box error types, each on its own chart and axis; false
    # positives apart
    titles = [m.value for m in at.markdown if " by " in m.value and m.value.startswith("**")]
    assert titles[:3] == ["**Missed people by keypoint error type (Ronchi and Perona)**",
                          "**Missed people by box error type (TIDE)**",
                          "**False positives by error type** (TIDE; measured apart)"]
    assert [bars(figure) for figure in charts(at)[:3]] == [{"inversion": 1}, {"missed": 1},
                                                            {"localization": 1, "background": 1}]


def test_a_persons_keypoints_are_summed_up_in_words():
    from hibug_core.objects.keypoint_errors import keypoint_summary

    assert keypoint_summary("ggi-m") == "2 good, 1 inversion, 1 miss, 1 not labelled"


def test_a_persons_picture_draws_both_skeletons_with_joints_coloured_by_type(tmp_path):
    from PIL import Image

    from hibug_core.objects.crops import KEYPOINT_COLOURS, OUTCOME_COLOURS, TRUE_BOX, picture_of, render_picture

    with _people_project(tmp_path) as project:
        people = project.objects("m")
        limbs = project.object_evaluation("m")["settings"]["limbs"]
        assert project.keypoint_skeleton() == {"names": list(NAMES), "limbs": [(1, 2), (1, 3), (2, 4), (3, 4)]}
    assert limbs == [[1, 2], [1, 3], [2, 4], [3, 4]]
    turned = people.loc[people["keypoint_types"] == "giiii"].iloc[0]
    picture = picture_of(turned, limbs)
    assert picture.types == "giiii" and len(picture.points) == len(picture.pred_points) == 5
    pixels = np.asarray(render_picture(Image.open(tmp_path / "2.png"), picture, size=320)).reshape(-1, 3)
    colours = {tuple(p) for p in pixels}
    assert {TRUE_BOX, OUTCOME_COLOURS["near miss"], KEYPOINT_COLOURS["i"], KEYPOINT_COLOURS["g"]} <= colours
    assert KEYPOINT_COLOURS["m"] not in colours and KEYPOINT_COLOURS["j"] not in colours
    found = people.loc[people["keypoint_types"] == "gggig"].iloc[0]
    pixels = np.asarray(render_picture(Image.open(tmp_path / "1.png"), picture_of(found, limbs))).reshape(-1, 3)
    assert OUTCOME_COLOURS["true positive"] in {tuple(p) for p in pixels}
    box_only = picture_of(found)  # without limbs: joints only
    assert box_only.limbs == () and len(box_only.points) == 5


def test_cocos_own_sigmas_give_pycocotools_keypoint_ap():
    """17 person keypoints and no sigmas given: COCO's (pycocotools' values), the same AP to the last digit."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from hibug_core.objects.coco import parse_ground_truth, parse_results
    from hibug_core.objects.matching import summarize

    from pose_support import NAMES as COCO_NAMES
    from pose_support import STANDING

    rng = np.random.default_rng(0)
    images, people, results = [], [], []
    for image_id in range(1, 21):
        images.append({"id": image_id, "file_name": f"{image_id}.png", "width": 400, "height": 300})
        points = STANDING * [80, 160] + rng.uniform(0, 100, 2)
        people.append({"id": image_id, "image_id": image_id, "category_id": 1, "bbox": [*points.min(0), 80, 160],
                       "area": 80 * 160.0, "iscrowd": 0,
                       "keypoints": np.column_stack([points, np.full(17, 2)]).ravel().tolist()})
        guess = points + rng.normal(0, 2 + image_id / 2, points.shape)
        results.append({"image_id": image_id, "category_id": 1, "score": float(rng.random()),
                        "keypoints": np.column_stack([guess, np.ones(17)]).ravel().tolist()})
    document = {"images": images, "annotations": people,
                "categories": [{"id": 1, "name": "person", "keypoints": COCO_NAMES}]}
    truth = parse_ground_truth(document, "people.json")
    ours = summarize(truth, parse_results(results, truth, "r.json", model="m"))[0]["AP"]
    coco = COCO()
    coco.dataset = json.loads(json.dumps(truth.dataset))
    coco.createIndex()
    evaluator = COCOeval(coco, coco.loadRes(results), "keypoints")
    evaluator.evaluate(), evaluator.accumulate(), evaluator.summarize()
    assert 0.05 < ours < 0.95 and ours == pytest.approx(evaluator.stats[0], abs=1e-12)


def test_a_category_may_state_its_own_sigmas_and_a_bad_list_is_named():
    from hibug_core.errors import ManifestError
    from hibug_core.objects.coco import parse_ground_truth
    from hibug_core.objects.matching import MatchConfig, match

    truth, results = _coco_people()
    stated = {**truth.dataset, "categories": [{**truth.dataset["categories"][0], "sigmas": [0.1] * 5}]}
    own = parse_ground_truth(stated, "people.json")
    assert own.sigmas == {1: (0.1,) * 5}
    assert match(own, results).fixes.equals(match(truth, results, MatchConfig(keypoint_sigmas=(0.1,) * 5)).fixes)
    with pytest.raises(ManifestError, match=r"categories\[0\].*sigmas.*must be 5 positive numbers, one OKS sigma per "
                                            r"keypoint; found \[0.1, -1\]"):
        parse_ground_truth({**truth.dataset, "categories": [{**truth.dataset["categories"][0], "sigmas": [0.1, -1]}]},
                           "people.json")
    with pytest.raises(Exception, match="give one OKS sigma per keypoint .5., on the command line or as the "
                                        "category's 'sigmas' list"):
        match(truth, results)


def test_a_persons_details_list_each_keypoints_type_and_similarity(monkeypatch, tmp_path):
    from page_support import open_page

    with _people_project(tmp_path) as project:
        people = project.objects("m")
        turned = int(people.index[people["keypoint_types"] == "giiii"][0])
    at = open_page(monkeypatch, "app.py", tmp_path / "project")
    at.session_state["overview_object_confusion"] = {"selection": {"rows": [], "columns": [],
                                                                   "cells": [[0, "(missed)"]]}}
    at.session_state["detail_open"] = ("overview_confusion", turned)
    at.run()
    assert not at.exception
    assert any(e.label == "Keypoints: 1 good, 4 inversion" for e in at.expander)
    listed = next(d.value for d in at.dataframe if "similarity" in d.value.columns and "type" in d.value.columns)
    assert listed["keypoint"].tolist() == list(NAMES)
    assert listed["type"].tolist() == ["good", "inversion", "inversion", "inversion", "inversion"]
    assert listed["similarity"].iat[0] == 1.0 and listed["similarity"].iat[1] < 0.5
    assert any("the true skeleton in blue" in c.value for c in at.caption)


def _people_rows(folder) -> pd.DataFrame:
    """The hand-built people as a per-row object manifest: a row per person and per prediction on nobody."""
    truth, results = _coco_people()
    files = {1: "1.png", 2: "2.png", 3: "3.png", 4: "4.png"}
    rows = []
    predicted = {r["image_id"]: r for r in results.records}
    for person in truth.dataset["annotations"]:
        guess = predicted.pop(person["image_id"], None)
        rows.append({"image": files[person["image_id"]], "label": "person", "box": "20 10 100 100",
                     "keypoints": " ".join(f"{v:g}" for v in person["keypoints"]),
                     "pred_box": "20 10 100 100" if guess else "", "prediction": "person" if guess else "",
                     "confidence": str(guess["score"]) if guess else "",
                     "pred_keypoints": " ".join(f"{v:g}" for v in guess["keypoints"]) if guess else ""})
    for image_id, guess in predicted.items():
        rows.append({"image": files[image_id], "label": "", "box": "", "keypoints": "", "pred_box": "20 10 100 100",
                     "prediction": "person", "confidence": str(guess["score"]),
                     "pred_keypoints": " ".join(f"{v:g}" for v in guess["keypoints"])})
    return pd.DataFrame(rows)


def test_a_per_row_manifest_of_people_types_them_as_their_coco_file_does(tmp_path):
    from hibug_core.errors import ManifestError
    from hibug_core.objects.matching import MatchConfig
    from hibug_core.tasks.importing import validate_table
    from hibug_core.tasks.object_manifest import validate_object_manifest

    _people_project(tmp_path).close()  # the images, and the same people imported from COCO files
    frame = _people_rows(tmp_path)
    manifest = validate_object_manifest(frame, source="people.csv", base_dir=tmp_path, task="pose",
                                        match_config=MatchConfig(keypoint_sigmas=(0.1,) * 5))
    assert manifest.task == "pose"
    outcomes = manifest.object_evaluations["model"].outcomes
    # Five keypoints in a manifest are named 'keypoint 1', ...: no sides, so what a COCO file calls an inversion
    # is a miss here
    assert outcomes["keypoint_types"].dropna().tolist() == ["gggmg", "gmmmm"]
    assert outcomes["error_type"].tolist()[:3] == ["", "miss", "missed"]
    with pytest.raises(ManifestError) as refused:  # five keypoints and no sigmas: said what to do
        validate_table(frame, source="people.csv", base_dir=tmp_path)
    assert "5 keypoints per person: a per-row manifest gives COCO's 17 person keypoints" in str(refused.value)
    broken = frame.copy()
    broken.loc[0, "keypoints"] = "1 2 3 4"
    broken.loc[1, "pred_keypoints"] = "50 10 1 80 30 1"
    with pytest.raises(ManifestError) as refused:
        validate_table(broken, source="people.csv", base_dir=tmp_path)
    message = str(refused.value)
    assert "'1 2 3 4' is not x y v (v 0, 1 or 2) for each keypoint" in message
    assert "2 keypoints, where other keypoint lists of this file have 5; every person's keypoints" in message
    one_row = frame.iloc[[0]].copy()  # one row: its true and predicted keypoints disagree, there is no other row
    one_row.loc[0, "pred_keypoints"] = "50 10 1 80 30 1"
    with pytest.raises(ManifestError) as refused:
        validate_table(one_row, source="people.csv", base_dir=tmp_path)
    assert "other rows" not in str(refused.value) and "keypoints, where other keypoint lists" in str(refused.value)


def test_a_per_row_manifest_of_cocos_17_keypoints_has_their_names_limbs_and_sigmas(tmp_path):
    from PIL import Image

    from hibug_core.objects.matching import COCO_PERSON_SKELETON
    from hibug_core.store.project import Project
    from hibug_core.tasks.importing import validate_table

    from pose_support import STANDING

    Image.new("RGB", (200, 200), (200, 200, 200)).save(tmp_path / "a.png")
    truth = STANDING * [80, 160] + [40, 20]
    behind = truth[[0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]]  # left and right the wrong way round
    frame = pd.DataFrame([{"image": "a.png", "label": "person", "box": "40 20 80 160",
                           "keypoints": " ".join(f"{x:.2f} {y:.2f} 2" for x, y in truth), "pred_box": "40 20 80 160",
                           "prediction": "person", "confidence": "0.9",
                           "pred_keypoints": " ".join(f"{x:.2f} {y:.2f} 1" for x, y in behind)}])
    manifest = validate_table(frame, source="people.csv", base_dir=tmp_path)
    assert manifest.task == "pose"
    codes = manifest.object_evaluations["model"].outcomes["keypoint_types"].iat[0]
    # The nose stays; the head and arms land on their counterparts (inversion); hips, knees and ankles, 19 px from
    # theirs with COCO's wide hip and leg sigmas, are still within jitter of their own place (jitter comes first)
    assert codes == "g" + "i" * 10 + "j" * 6
    with Project.create_from_manifest(tmp_path / "project", manifest) as project:
        skeleton = project.keypoint_skeleton()
        assert skeleton["names"][:3] == ["nose", "left_eye", "right_eye"]
        assert skeleton["limbs"] == [(a - 1, b - 1) for a, b in COCO_PERSON_SKELETON]
        assert project.known_tags()["facing"].dropna().tolist() == ["front"]


@pytest.mark.parametrize("use_area, max_detections", [(True, 20), (True, 2), (False, 20)])
def test_every_oks_matrix_at_once_equals_the_librarys_bit_for_bit(use_area, max_detections):
    """Seeded people with some keypoints unlabelled, one with none labelled (OKS outside twice its box), images with
    more detections than maxDets, one with no detection and one with no person."""
    import contextlib
    import io
    import itertools

    from faster_coco_eval import COCO, COCOeval_faster

    from hibug_core.objects.coco_evaluation import oks_matrices

    rng = np.random.default_rng(5)
    k = 5
    images = [{"id": i, "width": 200, "height": 200, "file_name": f"{i}.png"} for i in range(1, 7)]
    people, found = [], []
    for image in range(1, 6):
        for _ in range(int(rng.integers(1, 4))):
            x, y, w, h = (float(v) for v in rng.uniform(10, 80, 4))
            points = np.column_stack([rng.uniform(x, x + w, k), rng.uniform(y, y + h, k),
                                      rng.choice([0, 1, 2], k, p=[0.2, 0.3, 0.5])])
            if len(people) == 2:
                points[:, 2] = 0
            points[points[:, 2] == 0, :2] = 0
            people.append({"id": len(people) + 1, "image_id": image, "category_id": 1, "bbox": [x, y, w, h],
                           "area": w * h, "iscrowd": 0, "num_keypoints": int((points[:, 2] > 0).sum()),
                           "keypoints": points.ravel().round(2).tolist()})
    for image in (1, 2, 3, 4, 6):
        for _ in range(int(rng.integers(1, 5))):
            points = np.column_stack([rng.uniform(0, 120, k), rng.uniform(0, 120, k), np.ones(k)])
            found.append({"image_id": image, "category_id": 1, "score": float(rng.choice([0.5, 0.7, 0.9])),
                          "keypoints": points.ravel().round(2).tolist()})
    dataset = {"images": images, "annotations": people,
               "categories": [{"id": 1, "name": "person", "keypoints": [f"p{i}" for i in range(k)]}]}
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(dataset, print_function=lambda *a: None)
        evaluator = COCOeval_faster(truth, truth.loadRes(found), "keypoints", print_function=lambda *a: None,
                                    use_area=use_area)
    evaluator.params.kpt_oks_sigmas = np.full(k, 0.08)
    evaluator.params.maxDets = [max_detections]
    evaluator._prepare()
    pairs = list(itertools.product(evaluator.params.imgIds, evaluator.params.catIds))
    ours = oks_matrices(evaluator, pairs)
    for pair in pairs:
        theirs = evaluator.computeOks(*pair)
        assert np.asarray(ours[pair]).shape == np.asarray(theirs).shape
        assert np.array_equal(ours[pair], theirs)
    assert ours[(5, 1)] == [] and ours[(6, 1)] == []
    for image in (1, 2, 3, 4):  # detections by score, at most maxDets, against every person of the image
        shown = min(sum(d["image_id"] == image for d in found), max_detections)
        assert ours[(image, 1)].shape == (shown, sum(p["image_id"] == image for p in people))


def test_training_keypoints_with_left_and_right_swapped_or_left_out_are_told_from_right_ones():
    from hibug_core.objects.keypoint_errors import mirror_pairs
    from hibug_core.objects.training_evidence import _keypoints, _left_out, _mirrored

    from pose_support import NAMES as PERSON
    from pose_support import STANDING

    mirror = np.array(mirror_pairs(PERSON))
    truth = np.column_stack([STANDING * 100, np.full(17, 2.0)])
    given = truth + [1.5, -1.0, 0]  # a careful annotator, a pixel or two off

    def read(annotated, true) -> tuple:
        return _keypoints(annotated.ravel().tolist(), json.dumps(true.ravel().tolist()))

    assert _mirrored(*read(given, truth), mirror) == 0.0 and _left_out(*read(given, truth)) == 0.0
    assert _mirrored(*read(given[mirror], truth), mirror) == 1.0
    only_nose = truth.copy()
    only_nose[1:, 2] = 0  # no sided keypoint labelled: nothing to tell
    assert np.isnan(_mirrored(*read(given, only_nose), mirror))
    assert _keypoints(None, json.dumps(truth.ravel().tolist())) == (None, None)
    assert _keypoints(given[:5].ravel().tolist(), json.dumps(truth.ravel().tolist())) == (None, None)
    sparse = given.copy()
    sparse[:8, 2] = 0  # 8 of 17 left out: fewer than half
    assert _left_out(*read(sparse, truth)) == 0.0
    sparse[8, 2] = 0  # 9 of 17
    assert _left_out(*read(sparse, truth)) == 1.0
    assert _left_out(*read(sparse, only_nose)) == 1.0  # the one labelled keypoint left out
    assert np.isnan(_left_out(*read(given, np.zeros_like(truth))))  # the truth labels none


def test_a_slice_taught_with_swapped_sides_gets_its_annotation_bug_only_when_significant():
    from hibug_core.slices.diagnosis import SWAPPED, ObjectEvidence, diagnose

    n_train, n_eval = 200, 100
    back = np.zeros(n_train, bool)
    back[:20] = True  # 20 training people seen from behind, 18 annotated with their sides swapped
    mirrored = np.zeros(n_train)
    mirrored[:18] = 1.0
    mirrored[20:26] = 1.0  # and a few others (3% of the rest)
    few = np.zeros(n_train, bool)
    few[100:110] = True  # 10 others, 1 of them swapped: no bug
    mirrored[100] = 1.0
    evidence = ObjectEvidence(np.ones(n_train, bool), np.ones(n_train, bool), np.ones(n_train),
                              np.full(n_eval, np.nan), mirrored, np.zeros(n_train), "people")
    eval_back, eval_few = np.zeros(n_eval, bool), np.zeros(n_eval, bool)
    eval_back[:15], eval_few[50:60] = True, True
    errors = np.where(eval_back | eval_few, 1.0, 0.0)
    labels = np.full(n_eval, "person", dtype=object)
    table = diagnose([eval_back, eval_few], [back, few], labels, labels.copy(), errors, objects=evidence,
                     train_labels=np.full(n_train, "person", dtype=object))
    assert table["bug_type"].tolist()[0] == SWAPPED
    assert table["reason"].iat[0] == ("20 in training, 90% of them annotated with left and right swapped in the "
                                      "training annotations (12% of all people): the model learnt their sides the "
                                      "wrong way round")
    assert table["bug_type"].iat[1] != SWAPPED


def test_a_slice_taught_with_its_keypoints_left_out_gets_its_annotation_bug_only_when_significant():
    from hibug_core.slices.diagnosis import KEYPOINTS_MISSING, ObjectEvidence, diagnose

    n_train, n_eval = 200, 100
    crouching = np.zeros(n_train, bool)
    crouching[:30] = True  # 30 training people crouching, 21 annotated with most keypoints left out
    left_out = np.zeros(n_train)
    left_out[:21] = 1.0
    left_out[150:160] = 1.0  # and 10 others (6% of the rest)
    near = np.zeros(n_train, bool)
    near[140:160] = True  # 20 others, half of them left out: at the share, significant at 0.05 only
    evidence = ObjectEvidence(np.ones(n_train, bool), np.ones(n_train, bool), np.ones(n_train),
                              np.full(n_eval, np.nan), np.zeros(n_train), left_out, "people")
    eval_crouching, eval_near = np.zeros(n_eval, bool), np.zeros(n_eval, bool)
    eval_crouching[:15], eval_near[50:60] = True, True
    errors = np.where(eval_crouching | eval_near, 1.0, 0.0)
    labels = np.full(n_eval, "person", dtype=object)
    diagnosed = {alpha: diagnose([eval_crouching, eval_near], [crouching, near], labels, labels.copy(), errors,
                                 objects=evidence, train_labels=np.full(n_train, "person", dtype=object), alpha=alpha)
                 for alpha in (0.05, 1e-6)}
    table = diagnosed[0.05]
    assert table["bug_type"].tolist() == [KEYPOINTS_MISSING, KEYPOINTS_MISSING]
    assert table["reason"].iat[0] == ("30 in training, 70% of them annotated with most of their keypoints left out in "
                                      "the training annotations (16% of all people): the model was seldom shown "
                                      "where their keypoints are")
    # 10 of 20 where 15.5% are: binom.sf(9, 20, 0.155) is 3e-4, not below 1e-6; 21 of 30 (3e-11) is
    assert diagnosed[1e-6]["bug_type"].tolist()[0] == KEYPOINTS_MISSING
    assert diagnosed[1e-6]["bug_type"].iat[1] != KEYPOINTS_MISSING
