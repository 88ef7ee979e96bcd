"""Whatever a model gives, it is read as what it is: a detector, pose model or mask model that found nothing at all, or
nothing on some images, is a model with AP 0 whose every object (there) is missed, on every page and command."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_objects import _random_case, _write

from hibug_core.cli import main
from hibug_core.store.project import Project

TASKS = {"detection": {}, "pose": {"keypoints": 4}, "segmentation": {"masks": True}}


def _options(task: str) -> list[str]:
    return {"detection": [], "pose": ["--keypoint-sigmas", "0.05,0.05,0.05,0.05"], "segmentation": []}[task]


@pytest.fixture(params=list(TASKS))
def project_with_a_silent_model(request, tmp_path):
    """A small object project of each task: a first model with results, then `nothing` (an empty results file) and
    `partly` (results on the first half of the images only), both added with `hibug import --models-only`."""
    task = request.param
    truth, found = _random_case(5, n_images=12, **TASKS[task])
    half = {image["id"] for image in truth["images"][:6]}
    truth_file, results = _write(tmp_path / "data", truth, {
        "first": found, "nothing": [], "partly": [d for d in found if d["image_id"] in half]})
    assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"first={results['first']}",
                 *_options(task)]) == 0
    for name in ("nothing", "partly"):
        assert main(["import", str(tmp_path / "p"), "--models-only", "--coco", str(truth_file), "--results",
                     f"{name}={results[name]}"]) == 0, name
    return task, tmp_path / "p", truth


def test_a_model_that_found_nothing_has_ap_0_and_every_object_missed(project_with_a_silent_model, capsys):
    task, folder, truth = project_with_a_silent_model
    with Project.open(folder) as project:
        summary = project.object_evaluation("nothing", "val")["summary"]
        assert summary["AP"] == 0.0 and summary["AP50"] == 0.0  # not COCO's -1 (nothing to find)
        assert all(value in (0.0, -1.0) for value in summary.values())
        objects = project.objects("nothing")
        true = objects[objects["object_kind"] == "object"]
        assert (true["outcome"] == "missed").all() and true["pred_x"].isna().all()
        assert true["pred_x"].dtype == float  # numbers, NaN where there is none: never None
        fixes = project.object_evaluation("nothing", "val")["fixes"]
        assert fixes is None or (fixes["AP if fixed"] >= 0).all()
        partly = project.objects("partly")
        images = {i["file_name"] for i in truth["images"][6:]}
        unseen = partly[(partly["object_kind"] == "object") & partly["image_key"].isin(images)]
        assert (unseen["outcome"] == "missed").all()
    capsys.readouterr()
    assert main(["info", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "-1.000" not in out and "AP 0.000" in out
    assert main(["compare", str(folder), "--models", "first,nothing"]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("page", ["app.py", "pages/7_Compare.py", "pages/4_Error_slices.py"])
def test_the_pages_draw_a_model_that_found_nothing(project_with_a_silent_model, monkeypatch, page):
    from page_support import open_page

    _, folder, _ = project_with_a_silent_model
    at = open_page(monkeypatch, page, folder)
    pickers = [box for box in at.selectbox if box.key == "hibug_model"]
    if pickers:  # the model under test (Compare compares them all)
        pickers[0].select("nothing").run()
    assert not at.exception, at.exception
    text = " ".join(str(e.value) for kind in ("markdown", "caption", "metric", "error", "warning", "info")
                    for e in at.get(kind) if hasattr(e, "value"))
    for wrong in ("-1.000", "-10.0%", "AP n/a", "nan%"):
        assert wrong not in text, wrong


def test_an_empty_results_file_is_read_as_no_detections(tmp_path):
    """The docs' recipe for a second model (keep the detections of confidence 0.9 or more) can leave nothing: it is a
    model that finds nothing, not an error."""
    from hibug_core.objects.coco import parse_ground_truth, parse_results
    from hibug_core.objects.matching import MatchConfig, summarize

    truth, found = _random_case(5, n_images=6)
    ground_truth = parse_ground_truth(truth, str(tmp_path / "t.json"))
    kept = [d for d in found if d["score"] >= 2.0]  # nothing passes
    results = parse_results(kept, ground_truth, str(tmp_path / "r.json"), model="strict")
    summary, per_class = summarize(ground_truth, results, MatchConfig())
    assert summary["AP"] == 0.0 and summary["AR100"] == 0.0
    with_objects = per_class["objects"] > 0
    assert (per_class.loc[with_objects, "AP"] == 0.0).all() and per_class.loc[~with_objects, "AP"].isna().all()
    areas = np.array([a["area"] for a in truth["annotations"] if not a["iscrowd"]])
    assert summary["AP large"] == (0.0 if (areas >= 96 ** 2).any() else -1.0)
    json.dumps(summary)


def test_a_results_file_without_masks_is_refused_by_what_it_lacks(tmp_path, capsys):
    truth, found = _random_case(5, n_images=6, masks=True)
    boxes_only = [{key: value for key, value in d.items() if key != "segmentation"} for d in found]
    truth_file, results = _write(tmp_path / "data", truth, {"first": found, "boxes": boxes_only})
    assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"first={results['first']}"]) == 0
    capsys.readouterr()
    assert main(["import", str(tmp_path / "p"), "--models-only", "--coco", str(truth_file), "--results",
                 f"boxes={results['boxes']}"]) == 2
    said = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("error:"))
    assert "mask is not carried by every file" in said and "the detections of 'boxes' each need it" in said
    assert "/" not in said  # no server path


def test_repair_without_pool_images_is_refused_before_it_starts(tmp_path, capsys):
    """The Repair button on a project with no pool images started a job that failed at once; now the refusal comes
    first, in the page (a job is never started) and on the command line."""
    from PIL import Image

    from hibug_core.errors import ProjectError
    from hibug_core.jobs.worker import submit
    from hibug_core.operations import Repair

    data = tmp_path / "data"
    data.mkdir()
    for i in range(6):
        Image.new("RGB", (16, 16), (40 * i, 90, 160)).save(data / f"{i}.png")
    (data / "m.csv").write_text("image,label,prediction,split\n" + "".join(
        f"{i}.png,{'ab'[i % 2]},a,{'val' if i < 4 else 'train'}\n" for i in range(6)))
    assert main(["new", str(tmp_path / "p"), "--manifest", str(data / "m.csv")]) == 0
    capsys.readouterr()
    assert main(["select", str(tmp_path / "p")]) == 2
    assert "this project has no pool images to select from" in capsys.readouterr().err
    with Project.open(tmp_path / "p") as project:
        with pytest.raises(ProjectError, match="no pool images to select from: import unlabelled ones"):
            submit(project, Repair.build(model="model"))
        from hibug_core.jobs.store import jobs

        assert jobs(project) == []  # no job was made to fail


def _unlabelled(annotations: list[dict]) -> None:
    for record in annotations:
        record["keypoints"] = [0 if i % 3 == 2 else value for i, value in enumerate(record["keypoints"])]
        record["num_keypoints"] = 0


SIGMAS = "0.05,0.05,0.05,0.05"


def test_people_without_a_labelled_keypoint_are_ignored_as_coco_ignores_them(tmp_path, capsys):
    """OKS cannot score a person none of whose keypoints is labelled: pycocotools ignores one, and so does hibug (no
    sample; a prediction on one is neither right nor wrong). A file where no person has one is refused in words; its
    boxes are a detection project's."""
    from test_objects import _pycocotools_stats

    truth, found = _random_case(5, keypoints=4)
    _unlabelled(truth["annotations"][::2])
    truth_file, results = _write(tmp_path / "some", truth, {"m": found})
    assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"m={results['m']}",
                 "--keypoint-sigmas", SIGMAS]) == 0
    reference = _pycocotools_stats(truth_file, results["m"], "keypoints", (0.05,) * 4)
    with Project.open(tmp_path / "p") as project:
        summary = project.object_evaluation("m", "val")["summary"]
        assert list(summary.values()) == pytest.approx(reference.tolist(), abs=1e-12)
        people = project.objects("m")
        people = people[people["object_kind"] == "object"]
        labelled = [a for a in truth["annotations"] if a["num_keypoints"] > 0 and not a["iscrowd"]]
        assert len(people) == len(labelled)
    everyone = truth["annotations"]
    _unlabelled(everyone)
    truth_file, results = _write(tmp_path / "none", truth, {"m": found})
    capsys.readouterr()
    assert main(["new", str(tmp_path / "q"), "--coco", str(truth_file), "--results", f"m={results['m']}",
                 "--keypoint-sigmas", SIGMAS]) == 2
    assert ("no person has a labelled keypoint (visibility 1 or 2), so OKS can score none of them (COCO's evaluation "
            "ignores such people): label their keypoints, or import the boxes alone with --task detection"
            ) in capsys.readouterr().err
    assert main(["new", str(tmp_path / "q"), "--coco", str(truth_file), "--results", f"m={results['m']}",
                 "--task", "detection"]) == 0
    with Project.open(tmp_path / "q") as project:  # a detection project matches the boxes, whatever else they carry
        summary = project.object_evaluation("m", "val")["summary"]
    assert list(summary.values()) == pytest.approx(_pycocotools_stats(truth_file, results["m"], "bbox").tolist(),
                                                   abs=1e-12)


@pytest.mark.parametrize("case", ["equal scores", "one class"])
def test_equal_scores_and_a_single_class_are_scored_as_pycocotools_scores_them(tmp_path, case, capsys):
    from test_objects import _pycocotools_stats

    truth, found = _random_case(3)
    if case == "equal scores":  # ties are broken by the order of the file, as pycocotools' stable sort does
        for detection in found:
            detection["score"] = 0.5
    else:
        truth["categories"] = truth["categories"][:1]
        for record in [*truth["annotations"], *found]:
            record["category_id"] = truth["categories"][0]["id"]
    truth_file, results = _write(tmp_path / "data", truth, {"m": found})
    assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"m={results['m']}"]) == 0
    with Project.open(tmp_path / "p") as project:
        summary = project.object_evaluation("m", "val")["summary"]
    assert list(summary.values()) == pytest.approx(_pycocotools_stats(truth_file, results["m"], "bbox").tolist(),
                                                   abs=1e-12)
    capsys.readouterr()
    assert main(["slices", str(tmp_path / "p")]) == 0
    assert "mean IoU" in capsys.readouterr().out


def test_a_sample_is_named_in_the_tasks_words():
    from hibug_core.tasks import task_named

    assert task_named("pose").nouns.sample_name("a/b.png#object-4") == "a/b.png · person 4"
    assert task_named("detection").nouns.sample_name("x#y.png#object-12") == "x#y.png · object 12"
    assert task_named("segmentation").nouns.sample_name("b.png#strict-v2-detection-7") == \
        "b.png · strict-v2's detection 7"
    assert task_named("classification").nouns.sample_name("photos/#1.png") == "photos/#1.png"
