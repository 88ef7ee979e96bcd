"""Repairing a detector on the detection demo: pool images chosen by the objects in them, fine-tuning the shipped
FCOS, held-out objects compared before and after; generation prompts for objects; what cannot be done is refused."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hibug_core.models.finetune import TuneConfig
from hibug_core.models.object_models import DetectorError
from hibug_core.repair.loop import RepairConfig, RepairError, run_repair
from hibug_core.repair.prompts import slice_prompt
from hibug_core.repair.retrain import RetrainConfig
from hibug_core.repair.selection import SelectionConfig
from hibug_core.slices.report import error_slices
from hibug_core.store.project import Project
from hibug_core.store.recorded_models import LEGACY_DETECTOR_META, MODEL_META, recorded_model
from hibug_core.tasks import task_of
from hibug_core.tasks.object_repair import found_after, held_out, object_model

MODEL = "shape-fcos"


@pytest.fixture
def demo_copy(detection_demo, tmp_path):
    """A copy of the session's detection demo that a test may change."""
    folder = tmp_path / "demo"
    shutil.copytree(detection_demo, folder)
    project = Project.open(folder)
    yield project
    project.close()


def _planted_objects_in(folder, image_keys) -> int:
    """How many of the planted bugs' objects (small blue; green triangles) the pool's annotations hold in the images."""
    labels = json.loads((folder / "data" / "instances_pool.json").read_text())
    names = {image["id"]: image["file_name"] for image in labels["images"]}
    chosen = set(image_keys)
    return sum(1 for a in labels["annotations"] if names[a["image_id"]] in chosen and (
        (a["attributes"]["color"] == "blue" and a["bbox"][2] * a["bbox"][3] < 14 ** 2)
        or (a["attributes"]["color"] == "green" and a["category_id"] == 3)))


@pytest.mark.slow
def test_pool_images_are_chosen_by_the_failures_expected_among_their_objects(detection_demo):
    with Project.open(detection_demo) as project:
        report = error_slices(project, MODEL)
        samples = project.samples(MODEL)
        task = task_of(project)
        chosen = {method: task.select_pool(report, SelectionConfig(method=method, budget=100), project=project)
                  for method in ("expected failures", "random", "hibug")}
    for table in chosen.values():
        assert len(table) == 100 and table["image_key"].is_unique and table.attrs["unspent"] == 0
        assert (samples.loc[table.index, "split"] == "pool").all()  # each row stands for an image by a detection
        assert table["image_key"].str.startswith("images/pool/").all()
    assert chosen["expected failures"]["reason"].str.startswith("expected failures: its likeliest failure").all()
    # Seeded: the same images every time; the planted bugs' objects are what the expected failures find most of.
    planted = {m: _planted_objects_in(detection_demo, t["image_key"]) for m, t in chosen.items()}
    assert planted == {"expected failures": 48, "random": 38, "hibug": 39}


def test_the_recorded_detector_run_again_finds_exactly_the_imported_outcomes(detection_demo, tmp_path):
    from PIL import Image

    from hibug_core.objects.coco import read_ground_truth

    with Project.open(detection_demo) as project:
        runner, _ = object_model(project, MODEL)
        held, config, path = held_out(project, MODEL, "test")
    truth = read_ground_truth(path)
    images = [Image.open(path.parent / name).convert("RGB") for name in truth.images["file_name"]]
    found, summary = found_after(runner, runner.network, truth, images, held, config, tmp_path, "again",
                                 lambda *a: None)
    assert len(held) == 2071 and config.iou_threshold == 0.5 and config.confidence_threshold == 0.5
    assert np.array_equal(found, (held["outcome"] == "true positive").to_numpy())
    assert summary["AP"] == pytest.approx(0.565416712014102)


@pytest.mark.slow
def test_a_detector_repair_fine_tunes_and_compares_every_held_out_object(demo_copy, monkeypatch):
    config = RepairConfig(selection=SelectionConfig(method="expected failures", budget=24), baseline=None,
                          control=False, seeds=(0,), retrain=RetrainConfig(lam=1.0, fine_tune=TuneConfig(epochs=1)))
    result = run_repair(demo_copy, config, task=task_of(demo_copy))
    assert result.measure == "objects found" and result.runs["new_images"].tolist() == [24]
    overall = result.changes[result.changes["slice_id"] == "overall"].iloc[0]
    assert overall["n"] == 2071 and overall["before"] == pytest.approx(0.6450989860)
    assert overall["slice"] == "all held-out objects"  # in the task's words
    planted = result.changes[result.changes["planted"]]
    assert planted["slice"].tolist() == ["color = blue & object size = small", "is truncated = yes",
                                         "color = green & class = triangle"]
    assert planted["n"].tolist() == [76, 437, 87]
    assert result.verdict().startswith("Held-out objects found 64.5% before; after, expected failures")
    assert 0 < result.runs["AP after"].iat[0] < 1 and result.runs["AP before"].iat[0] == pytest.approx(0.56541671)
    recorded = recorded_model(demo_copy, MODEL)  # recorded as any model under test is: its registry spec
    assert (recorded.spec, recorded.training) == ("scene-fcos:models/shape-fcos.pt", "data/train_annotations.json")
    from hibug_core.models.zoo.scene_fcos import load_checkpoint

    repaired, classes, _ = load_checkpoint(result.runs["checkpoint"].iat[0])  # the repaired detector, kept
    assert classes == ["circle", "rectangle", "triangle"] and repaired is not None
    chosen = result.selections[("expected failures", 0)]
    assert len(chosen) == 24 and chosen["image_key"].is_unique
    # The repaired detector is recorded on val and test, matched as the first was: Compare reaches it.
    name = result.runs["model"].iat[0]
    assert demo_copy.models() == [MODEL, name]
    assert demo_copy.object_evaluation(name, "test")["summary"]["AP"] == pytest.approx(result.runs["AP after"].iat[0])
    assert demo_copy.object_evaluation(name, "val")["settings"] == demo_copy.object_evaluation(MODEL, "val")["settings"]
    from hibug_core.slices.compare import compare_models

    compared = compare_models(demo_copy, [MODEL, name])
    assert compared.models == [MODEL, name] and len(compared.against(name)) > 0
    # The Repair page shows the stored run in objects found, with the repaired detector to download.
    from page_support import open_page

    at = open_page(monkeypatch, "pages/5_Repair.py", demo_copy.folder, user="ana")
    assert not at.exception
    assert any("Held-out objects found 64.5% before" in block.value for block in [*at.success, *at.info])
    assert any("the detector's kind loads it" in m.value for m in at.markdown)
    assert {b.label for b in at.get("download_button")} >= {"Download the expected failures checkpoint (seed 0)"}


def test_what_a_detector_repair_cannot_do_is_refused_with_what_to_do(demo_copy, tmp_path):
    # the task's own refusals, said by the loop as by the operation
    with pytest.raises(RepairError, match="hibug cannot repair with generated images for a project of objects: "
                                          "generated images come without boxes"):
        run_repair(demo_copy, RepairConfig(data="generated", seeds=(0,)), task=task_of(demo_copy))
    with pytest.raises(RepairError, match="hibug cannot retrain the model of a project of objects with 'linear head': "
                                          "choose 'fine-tune'"):
        run_repair(demo_copy, RepairConfig(retrain=RetrainConfig(method="linear head"), seeds=(0,)),
                   task=task_of(demo_copy))
    with pytest.raises(DetectorError, match="the recorded model 'shape-fcos' cannot be loaded: .*no checkpoint file"):
        (demo_copy.folder / "models" / f"{MODEL}.pt").unlink()
        run_repair(demo_copy, RepairConfig(seeds=(0,)), task=task_of(demo_copy))
    from sqlalchemy import text

    from hibug_core.store.db import write_transaction

    with write_transaction(demo_copy.engine) as connection:  # as if only the detector's results had been imported
        connection.execute(text("DELETE FROM project_meta WHERE key = :k"), {"k": MODEL_META + MODEL})
    with pytest.raises(DetectorError, match=f"only its results were imported. Record its network and the "
                       f"annotations it was trained on: `hibug record {demo_copy.folder} '{MODEL}' --spec "):
        run_repair(demo_copy, RepairConfig(seeds=(0,)), task=task_of(demo_copy))
    from hibug_core.jobs.kinds import run_kind
    from hibug_core.tasks import TaskError

    with pytest.raises(TaskError, match="generated images come without boxes"):  # the job refuses before any work
        run_kind(demo_copy, "generate", {}, lambda *a: None)


def test_generation_prompts_describe_the_object_and_its_context(detection_demo):
    from hibug_core.repair.prompts import hibug_prompts
    from hibug_core.store.attribute_versions import load_schema

    with Project.open(detection_demo) as project:
        schema = load_schema(project)
        report = error_slices(project, MODEL)
    assert slice_prompt((("color", "blue"), ("object size", "small"), ("is truncated", "yes")), "circle", schema) == \
        "A photo of a blue small circle cut off by the picture's border"
    assert slice_prompt((("occlusion", "heavy"), ("crowding", "many"), ("class", "triangle")), "triangle", schema) == \
        "A photo of a triangle mostly hidden behind another object among many other objects"
    prompts = hibug_prompts(report, schema, top=8)
    assert not prompts["label"].isin(["(background)", "(missed)"]).any()
    assert set(prompts["label"]) <= {"circle", "rectangle", "triangle"}


def test_a_detector_recorded_the_old_way_is_still_found(demo_copy):
    from sqlalchemy import text

    from hibug_core.store.db import write_transaction

    with write_transaction(demo_copy.engine) as connection:  # a detection demo built before one record for all models
        connection.execute(text("DELETE FROM project_meta WHERE key = :k"), {"k": MODEL_META + MODEL})
        connection.execute(text("INSERT INTO project_meta (key, value) VALUES (:k, :v)"), {
            "k": LEGACY_DETECTOR_META + MODEL, "v": json.dumps({
                "kind": "scene-fcos", "checkpoint": f"models/{MODEL}.pt", "training": "data/train_annotations.json",
                "classes": ["circle", "rectangle", "triangle"]})})
    adapter, recorded = object_model(demo_copy, MODEL)
    assert recorded.spec == f"scene-fcos:models/{MODEL}.pt" and recorded.training == "data/train_annotations.json"
    assert adapter.classes == ["circle", "rectangle", "triangle"]


def test_an_imported_detector_is_recorded_by_the_command_and_each_bad_input_is_named(demo_copy, tmp_path, capsys):
    """`hibug record`: a detector whose results alone were imported gets its checkpoint and training annotations, and
    a repair then loads it; what does not fit is refused before anything is stored."""
    from sqlalchemy import text

    from hibug_core.cli import main
    from hibug_core.store.db import write_transaction

    folder = demo_copy.folder
    elsewhere = tmp_path / "mine"  # the user's own files, outside the project
    shutil.copytree(folder / "data", elsewhere)
    shutil.copy(folder / "models" / f"{MODEL}.pt", elsewhere / "fcos.pt")
    with write_transaction(demo_copy.engine) as connection:  # only the detector's results imported
        connection.execute(text("DELETE FROM project_meta WHERE key = :k"), {"k": MODEL_META + MODEL})
    demo_copy.close()
    spec, training = f"scene-fcos:{elsewhere / 'fcos.pt'}", str(elsewhere / "train_annotations.json")
    junk = tmp_path / "junk.json"
    junk.write_text('{"images": 3}')
    wrong_classes = tmp_path / "other" / "train.json"
    wrong_classes.parent.mkdir()
    document = json.loads(Path(training).read_text())
    document["categories"] = [dict(c, name=f"not-{c['name']}") for c in document["categories"]]
    wrong_classes.write_text(json.dumps(document))
    for arguments, said in (
            (["nobody", "--spec", spec, "--training", training], "no model 'nobody' in this project"),
            ([MODEL, "--spec", "scene-fcos:/no/such.pt", "--training", training], "does not load"),
            ([MODEL, "--spec", spec], "is a model of objects: give the COCO file of the annotations it was trained"),
            ([MODEL, "--spec", spec, "--training", str(junk)], "images"),
            ([MODEL, "--spec", spec, "--training", str(wrong_classes)], "has no category for the model's classes"),
            ([MODEL, "--spec", spec, "--training", str(wrong_classes.parent / "missing.json")], "missing.json")):
        assert main(["record", str(folder), *arguments]) == 2, arguments
        assert said in capsys.readouterr().err, arguments
    with Project.open(folder, read_only=True) as project:
        assert recorded_model(project, MODEL) is None  # nothing stored by a refusal
    document["categories"] = json.loads(Path(training).read_text())["categories"]
    classifier = f"shape-cnn:{Path(__file__).resolve().parents[1] / 'assets' / 'demo_shape_cnn.pt'}"
    assert main(["record", str(folder), MODEL, "--spec", classifier, "--training", training]) == 2
    assert ("judges whole images, but this project's objects need a model that draws box (detection)"
            in capsys.readouterr().err)
    escaping = json.loads(json.dumps(document))
    escaping["images"][0]["file_name"] = "../../../../../../../../etc/passwd"
    (elsewhere / "escaping.json").write_text(json.dumps(escaping))
    assert main(["record", str(folder), MODEL, "--spec", spec, "--training", str(elsewhere / "escaping.json")]) == 2
    assert "1 of the images escaping.json names lie outside its folder (e.g. '../../../" in capsys.readouterr().err
    (wrong_classes.parent / "train.json").write_text(json.dumps(document))  # right classes, but no images beside it
    assert main(["record", str(folder), MODEL, "--spec", spec, "--training", str(wrong_classes)]) == 2
    assert "of the images train.json names are not beside it" in capsys.readouterr().err

    assert main(["record", str(folder), MODEL, "--spec", spec, "--training", training]) == 0
    out = capsys.readouterr().out
    images = len(json.loads(Path(training).read_text())["images"])
    assert f"trained on {training}: {images} images, {images} of them in the project's training split" in out
    with Project.open(folder) as project:
        recorded = recorded_model(project, MODEL)
        assert (recorded.spec, recorded.training) == (spec, training)
        adapter, _ = object_model(project, MODEL)  # what a repair loads
        assert adapter.classes == ["circle", "rectangle", "triangle"]
