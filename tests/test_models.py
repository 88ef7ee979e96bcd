"""The user's own model in the loop: timm, torchvision, transformers and python models (tiny, randomly initialised,
built from config: nothing is downloaded) adapted, run over a project's images, recorded with their features."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hibug_core.errors import HibugError, ModelLoadError
from hibug_core.models.adapter import classifier_layer
from hibug_core.models.predict import PredictError, default_name, match_classes, model_outputs, predict_project
from hibug_core.models.registry import MODELS, load_model
from hibug_core.store.project import Project
from hibug_core.tasks import task_of

SHAPES = ["circle", "rectangle", "triangle"]
COLOURS = ["blue", "green", "red"]


def save(state, path, classes=None):
    import torch

    torch.save({"state_dict": state, "classes": classes} if classes else state, path)
    return path


@pytest.fixture
def timm_checkpoint(tmp_path):
    import hibug_core  # noqa: F401 (torchvision import hook, needed by timm)

    # isort: split
    import timm
    import torch

    torch.manual_seed(0)
    return save(timm.create_model("test_resnet", pretrained=False, num_classes=3).state_dict(),
                tmp_path / "shapes.pt", SHAPES)


@pytest.fixture
def torchvision_checkpoint(tmp_path):
    import torch
    from torchvision import models

    torch.manual_seed(0)
    path = save(models.get_model("mobilenet_v3_small", weights=None, num_classes=2).state_dict(), tmp_path / "tv.pth")
    (tmp_path / "tv.pth.classes.txt").write_text("Circle\nSquare\n")  # the labels, spelt otherwise
    return path


@pytest.fixture
def transformers_folder(tmp_path):
    import torch
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=37, num_labels=3, id2label=dict(enumerate(COLOURS)),
                       label2id={c: i for i, c in enumerate(COLOURS)})
    folder = tmp_path / "vit-colours"
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def colour_model():
    """A python: spec's function (used as python:test_models:colour_model): a tiny shape classifier."""
    import torch
    from torch import nn
    from torchvision import transforms

    torch.manual_seed(0)
    network = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    return network, transforms.Compose([transforms.Resize((16, 16)), transforms.ToTensor()]), ["circle", "square"]


def test_each_library_loads_with_its_own_preprocessing_and_gives_probabilities_and_features(
        timm_checkpoint, torchvision_checkpoint, transformers_folder, colour_project):
    import torch

    image = colour_project.samples()["image_path"].iat[0]
    from hibug_core.image_loader import open_image

    expected = {f"timm:test_resnet:{timm_checkpoint}": (SHAPES, 160, 96),
                f"torchvision:mobilenet_v3_small:{torchvision_checkpoint}": (["Circle", "Square"], 224, 1024),
                f"transformers:{transformers_folder}": (COLOURS, 32, 32),
                "python:test_models:colour_model": (["circle", "square"], 224, 4)}
    for spec, (classes, size, width) in expected.items():
        adapter = load_model(spec)
        assert adapter.classes == classes and adapter.input_size == size, spec
        batch = torch.stack([adapter.transform(open_image(image))] * 2)
        out = adapter.encode_images(batch)
        assert out["probabilities"].shape == (2, len(classes))
        assert np.allclose(out["probabilities"].sum(axis=1), 1, atol=1e-5)
        assert out["features"].shape == (2, width), spec
        assert np.allclose(np.linalg.norm(out["embedding"], axis=1), 1, atol=1e-4)
        assert load_model(spec) is adapter  # loaded once per process


def test_bad_specs_and_checkpoints_say_what_to_fix(tmp_path, timm_checkpoint):
    import torch

    with pytest.raises(ModelLoadError, match="unknown model 'resnet50'; use one of: timm:<architecture>"):
        load_model("resnet50")
    with pytest.raises(ModelLoadError, match="no checkpoint file"):
        load_model(f"timm:test_resnet:{tmp_path / 'missing.pt'}")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ModelLoadError, match="is not a PyTorch checkpoint hibug can read: cut short"):
        load_model(f"timm:test_resnet:{tmp_path / 'junk.pt'}")
    import pickle

    (tmp_path / "objects.pt").write_bytes(pickle.dumps({"state_dict": {"w": {1, 2}}}))  # a set: no tensor, no value
    with pytest.raises(ModelLoadError) as refused:
        load_model(f"timm:test_resnet:{tmp_path / 'objects.pt'}")
    said = str(refused.value)
    assert "one holding Python objects besides tensors and plain values (hibug reads weights only" in said
    assert "weights_only" not in said and "arbitrary code" not in said  # torch's advice to load it unsafely
    torch.save(torch.load(timm_checkpoint)["state_dict"], tmp_path / "plain.pt")
    with pytest.raises(ModelLoadError, match=r"no class names .* plain.pt.classes.txt"):
        load_model(f"timm:test_resnet:{tmp_path / 'plain.pt'}")
    with pytest.raises(ModelLoadError, match="does not fit this architecture"):
        load_model(f"timm:test_vit:{timm_checkpoint}")
    with pytest.raises(ModelLoadError, match="cannot import nothing_here"):
        load_model("python:test_models:nothing_here")
    assert MODELS.names() == [] and [e.name for e in MODELS.families()] == ["timm", "torchvision", "transformers",
                                                                             "shape-cnn", "scene-fcos",
                                                                             "scene-keypoints", "scene-masks",
                                                                             "python"]


def test_classes_are_matched_to_the_labels_or_refused_naming_both_sides():
    assert match_classes(["Red", "green", "BLUE"], ["blue", "green", "red"], "m") == ["red", "green", "blue"]
    assert match_classes(["sea_turtle", "cat", "dog"], ["cat", "sea turtle"], "m") == ["sea turtle", "cat", "dog"]
    with pytest.raises(PredictError, match=r"the project's labels triangle match none of the model's classes "
                                           r"\(unmatched model classes: square\)"):
        match_classes(["circle", "rectangle", "square"], SHAPES, "m")
    assert default_name("timm:resnet50:/models/birds.pth") == "resnet50"
    assert default_name("transformers:/models/vit-birds") == "vit-birds"


@pytest.mark.slow
def test_predict_records_a_model_with_its_features_and_resumes_after_an_interruption(demo_project, tmp_path,
                                                                                     timm_checkpoint):
    folder = tmp_path / "demo"
    shutil.copytree(demo_project, folder)
    spec = f"timm:test_resnet:{timm_checkpoint}"
    with Project.open(folder) as project:
        calls = []

        def interrupt(stage, done, total):
            calls.append(done)
            if done >= 128:
                raise KeyboardInterrupt  # as a cancel or a kill would stop it

        with pytest.raises(KeyboardInterrupt):
            predict_project(project, spec, splits=["val"], progress=interrupt,
                            config=_small_chunks())
        assert "test_resnet" not in project.models()  # nothing recorded half-way
        done = predict_project(project, spec, splits=["val"], config=_small_chunks())
        assert done.model == "test_resnet" and done.samples == 800 and done.computed == 800 - 128
        samples = project.samples("test_resnet")
        val = samples[samples["split"] == "val"]
        assert len(val) == 800 and val["prediction"].isin(SHAPES).all() and val["confidence"].between(0, 1).all()
        assert samples.loc[samples["split"] != "val", "prediction"].isna().all()
        features = model_outputs(project, "test_resnet", sample_ids=val.index)
        assert features.shape == (800, 96)
        assert done.accuracy == pytest.approx(float(val["correct"].astype(float).mean()))
        with pytest.raises(PredictError, match="a model named 'test_resnet' is already in this project"):
            predict_project(project, spec, splits=["val"])
        project.add_predictions("imported", val.index, np.full((800, 3), 1 / 3), SHAPES)  # as a manifest brings them
        with pytest.raises(HibugError, match="'imported' was not run by hibug, so it has no features"):
            model_outputs(project, "imported")
        assert model_outputs(project, "shape-cnn").shape == (3866, 32)  # the demo network is run as yours is
        # its features are an encoder's for maps and linear heads: "model:<name>"
        from hibug_core.embeddings.compute import stored_embeddings
        from hibug_core.embeddings.projection import MapConfig, compute_map

        assert stored_embeddings(project, "model:test_resnet", val.index).embedding.shape == (800, 96)
        layout = compute_map(project, "model:test_resnet", sample_ids=val.index, config=MapConfig(method="pca"))
        assert layout.shape == (800, 2) and layout.notna().all().all()


def _small_chunks():
    from hibug_core.embeddings.compute import EmbedConfig

    return EmbedConfig(batch_size=64, save_every=64, workers=0)


def test_predict_runs_as_a_job_and_from_the_command_line(colour_project, torchvision_checkpoint, capsys):
    from hibug_core.cli import main
    from hibug_core.jobs.kinds import run_kind

    result = run_kind(colour_project, "predict", {"model": f"torchvision:mobilenet_v3_small:{torchvision_checkpoint}",
                                                  "name": "mobile"}, lambda *_: None, author="ana")
    # 12 samples, 6 distinct images: each content runs once
    assert result["model"] == "mobile" and result["samples"] == 12 and result["computed"] == 6
    assert result["summary"].startswith("mobile: predictions for 12 images (6 run now); accuracy ")
    assert main(["predict", str(colour_project.folder), "--model", "python:test_models:colour_model"]) == 0
    assert capsys.readouterr().out.startswith("colour_model: predictions for 12 images (6 run now)")
    assert {"mobile", "colour_model"} <= set(colour_project.models())


def test_the_classifier_layer_is_found_in_each_library(transformers_folder):
    from torch import nn
    from torchvision import models
    from transformers import AutoModelForImageClassification

    assert classifier_layer(models.get_model("resnet18", weights=None, num_classes=5)).out_features == 5
    assert classifier_layer(models.get_model("mobilenet_v3_small", weights=None, num_classes=5)).in_features == 1024
    assert classifier_layer(AutoModelForImageClassification.from_pretrained(transformers_folder)).in_features == 32
    with pytest.raises(ModelLoadError, match="no linear classifier layer"):
        classifier_layer(nn.Sequential(nn.Conv2d(3, 3, 1)))


@pytest.mark.slow
def test_the_overview_runs_your_model_as_a_background_job(monkeypatch, colour_project):
    import os
    from pathlib import Path

    from hibug_core.jobs.store import jobs

    from page_support import open_page
    from waiting import wait_until

    tests = str(Path(__file__).resolve().parent)  # the worker process imports the spec's module from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    at = open_page(monkeypatch, "app.py", colour_project.folder, user="ana", timeout=60)
    assert not at.exception
    at.text_input(key="predict_model").set_value("python:test_models:colour_model")
    at.text_input(key="predict_name").set_value("my net")
    at.button(key="predict_submit").click().run()
    assert not at.exception
    job = wait_until(lambda: (lambda j: j if not j.live else None)(jobs(colour_project, "predict")[0]), 120,
                     what="the predict job")
    assert job.status == "done", job.error
    assert job.params["model"] == "python:test_models:colour_model" and job.author == "ana"
    assert "my net" in colour_project.models()
    at.run()
    panel = next(e for e in at.expander if e.label == "Run your own model on these images")
    assert panel.proto.expanded  # the project has a model now, but the run's result is not folded away
    assert any("my net: predictions for 12 images (6 run now)" in s.value.replace("\\", "") for s in panel.success)


def shape_model():
    """python:test_models:shape_model: a tiny random CNN over the demo's three shapes."""
    import torch
    from torch import nn
    from torchvision import transforms

    torch.manual_seed(0)
    network = nn.Sequential(nn.Conv2d(3, 32, 5, stride=2), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2), nn.ReLU(),
                            nn.AdaptiveMaxPool2d(2), nn.Flatten(), nn.Linear(256, 3))
    return network, transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()]), SHAPES


def _assert_recounted(report) -> None:
    """The model's error slices are its own: the worst is worse than the whole, and each slice's count and failures
    are those of its rows recounted with a boolean mask."""
    errors = report.evaluation["error"].to_numpy()
    assert report.overall_score == pytest.approx(1 - errors.mean())
    assert len(report.slices) > 0 and report.slices["score"].iloc[0] < report.overall_score
    for definition, count, failures in report.slices[["definition", "count", "failures"]].head(5).itertuples(
            index=False):
        rows = report.tags.mask(definition)
        assert (count, failures) == (rows.sum(), pytest.approx(errors[rows].sum()))


@pytest.mark.slow
def test_your_model_goes_through_slices_selection_retraining_and_before_after(demo_project, tmp_path):
    """predict -> error slices -> selection -> a linear head on the model's own features -> before/after per slice."""
    from hibug_core.repair.loop import RepairConfig, run_repair
    from hibug_core.repair.retrain import RetrainConfig
    from hibug_core.repair.selection import SelectionConfig
    from hibug_core.slices.report import error_slices

    folder = tmp_path / "demo"
    shutil.copytree(demo_project, folder)
    with Project.open(folder) as project:
        done = predict_project(project, "python:test_models:shape_model", name="mine")
        assert (done.samples, done.computed) == (3866, 3866)
        report = error_slices(project, "mine")
        assert report.model == "mine" and len(report.evaluation) == 800
        _assert_recounted(report)
        result = run_repair(project, RepairConfig(model="mine", selection=SelectionConfig(budget=40), seeds=(0,),
                                                  retrain=RetrainConfig(method="linear head")), task=task_of(project))
        assert result.runs["method"].tolist() == [SelectionConfig().method, "random", "no new data"]
        assert result.runs["new_images"].tolist() == [40, 40, 0]
        overall = result.summary[result.summary["slice"] == "all held-out images"].set_index("method")
        assert (overall["n"] == 888).all()
        # a linear head on the random network's own features learns the shapes better than the network guesses
        # (35% before; about 50% after, for every method, on this seed)
        assert (overall["before"] < 0.4).all() and (overall["after"] > overall["before"] + 0.1).all()
        assert {f"mine · repair {result.run_id} {SelectionConfig().method} s0"} <= set(project.models())


def test_fine_tuning_an_adapted_network_resumes_to_exactly_the_uninterrupted_result(tmp_path, demo_project):
    import torch

    from hibug_core.models.finetune import TuneConfig, fine_tune

    adapter = load_model("python:test_models:shape_model")
    before = {k: v.clone() for k, v in adapter.network.state_dict().items()}
    with Project.open(demo_project) as project:
        samples = project.samples()
    index = {c: i for i, c in enumerate(SHAPES)}

    def part(split, n):
        rows = samples[samples["split"] == split].head(n)
        return list(rows["image_path"]), rows["label"].map(index).to_numpy()

    (paths, labels), (new_paths, new_labels), (val_paths, val_labels) = part("train", 96), part("pool", 32), \
        part("val", 64)
    config = TuneConfig(epochs=3, batch_size=32, learning_rate=1e-3, patience=0)
    whole = fine_tune(adapter, paths, labels, new_paths, new_labels, 0.5, folder=tmp_path / "a", val_paths=val_paths,
                      val_labels=val_labels, config=config)

    def stop_after_the_first_epoch(stage, done, total):
        if done == 1:
            raise KeyboardInterrupt  # as a kill would, after the epoch's checkpoint

    with pytest.raises(KeyboardInterrupt):
        fine_tune(adapter, paths, labels, new_paths, new_labels, 0.5, folder=tmp_path / "b", val_paths=val_paths,
                  val_labels=val_labels, config=config, progress=stop_after_the_first_epoch)
    resumed = fine_tune(adapter, paths, labels, new_paths, new_labels, 0.5, folder=tmp_path / "b",
                        val_paths=val_paths, val_labels=val_labels, config=config)
    assert resumed.val_accuracy == whole.val_accuracy and len(whole.val_accuracy) == 3
    assert (resumed.epochs_run, resumed.best_epoch) == (whole.epochs_run, whole.best_epoch)
    for name, value in whole.network.state_dict().items():
        assert torch.equal(value, resumed.network.state_dict()[name]), name
    assert all(torch.equal(v, adapter.network.state_dict()[k]) for k, v in before.items())  # the original is kept
    saved = torch.load(whole.checkpoint, weights_only=True)
    assert saved["classes"] == SHAPES and saved["spec"] == "python:test_models:shape_model"
    assert saved["best_epoch"] == whole.best_epoch == 1 + int(np.argmax(whole.val_accuracy))


@pytest.mark.slow
def test_repair_fine_tunes_a_predicted_network_and_keeps_its_checkpoint(demo_project, tmp_path):
    import torch

    from hibug_core.models.finetune import TuneConfig
    from hibug_core.repair.loop import RepairConfig, run_repair
    from hibug_core.repair.retrain import RetrainConfig
    from hibug_core.repair.selection import SelectionConfig

    folder = tmp_path / "demo"
    shutil.copytree(demo_project, folder)
    with Project.open(folder) as project:
        predict_project(project, "python:test_models:shape_model", name="mine")
        result = run_repair(project, RepairConfig(
            model="mine", selection=SelectionConfig(budget=40), seeds=(0,), baseline=None, control=False,
            retrain=RetrainConfig(fine_tune=TuneConfig(epochs=1, batch_size=64))), task=task_of(project))
        run = result.runs.iloc[0]
        assert (run["method"], run["new_images"]) == (SelectionConfig().method, 40)
        checkpoint = torch.load(run["checkpoint"], weights_only=True)
        assert checkpoint["classes"] == SHAPES and checkpoint["best_epoch"] == 1
        repaired = project.samples(run["model"])
        assert repaired["prediction"].isin(SHAPES).all() and len(repaired) == 3866


@pytest.fixture(scope="module")
def small_demo(demo_project, tmp_path_factory):
    """48 images of each split of the demo (seeded), brought as a team would: a manifest without predictions, the
    attribute schema saved; a fresh copy per use."""
    import pandas as pd

    from hibug_core.demo.attributes import demo_attribute_schema
    from hibug_core.store.attribute_versions import save_schema
    from hibug_core.tasks import load_manifest

    data = demo_project / "data"
    rows = pd.read_csv(data / "manifest.csv").groupby("split").sample(48, random_state=0)
    rows["image"] = [str(data / p) for p in rows["image"]]
    root = tmp_path_factory.mktemp("small-demo")
    rows.to_csv(root / "manifest.csv", index=False)
    with Project.create_from_manifest(root / "project", load_manifest(root / "manifest.csv")) as project:
        save_schema(project, demo_attribute_schema(), author="ana")
    return root / "project"


def _shape_checkpoint(library: str, folder):
    import torch

    torch.manual_seed(0)
    if library == "timm":
        import timm

        weights = timm.create_model("test_resnet", num_classes=3).state_dict()
        return f"timm:test_resnet:{save(weights, folder / 'r.pt', SHAPES)}"
    if library == "torchvision":
        from torchvision import models

        state = models.get_model("mobilenet_v3_small", weights=None, num_classes=3).state_dict()
        return f"torchvision:mobilenet_v3_small:{save(state, folder / 'm.pt', SHAPES)}"
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=37, num_labels=3, id2label=dict(enumerate(SHAPES)),
                       label2id={c: i for i, c in enumerate(SHAPES)})
    ViTForImageClassification(config).save_pretrained(folder / "vit")
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder / "vit")
    return f"transformers:{folder / 'vit'}"


@pytest.mark.slow
@pytest.mark.parametrize("library, features", [("timm", 96), ("torchvision", 1024), ("transformers", 32)])
def test_each_library_goes_from_predict_to_a_reproducible_fine_tuned_repair(library, features, small_demo,
                                                                           tmp_path):
    """predict -> error slices -> selection -> fine-tune (lambda-weighted, early stopping on val) -> before/after
    per slice, for a random timm, torchvision and transformers network; the same seed gives the same network."""
    from hibug_core.models.finetune import TuneConfig
    from hibug_core.repair.loop import RepairConfig, run_repair
    from hibug_core.repair.retrain import RetrainConfig
    from hibug_core.repair.selection import SelectionConfig
    from hibug_core.slices.report import error_slices

    shutil.copytree(small_demo, tmp_path / "project")
    spec = _shape_checkpoint(library, tmp_path)
    with Project.open(tmp_path / "project") as project:
        done = predict_project(project, spec, name="mine")
        assert (done.samples, done.computed) == (192, 192)
        assert model_outputs(project, "mine").shape == (192, features)
        report = error_slices(project, "mine")
        assert len(report.evaluation) == 48
        _assert_recounted(report)
        config = RepairConfig(model="mine", selection=SelectionConfig(budget=8), seeds=(0,), control=False,
                              retrain=RetrainConfig(fine_tune=TuneConfig(epochs=2, batch_size=16, patience=1)))
        first = run_repair(project, config, task=task_of(project))
        assert first.runs["method"].tolist() == [SelectionConfig().method, "random"]
        assert first.runs["new_images"].tolist() == [8, 8]
        overall = first.summary[first.summary["slice"] == "all held-out images"]
        assert (overall["n"] == 48).all()
        checkpoints = [Path(p) for p in first.runs["checkpoint"]]
        assert all(p.is_file() and p.parent.parent.name == "tuning" for p in checkpoints)
        shutil.rmtree(project.folder / "models" / "tuning")  # nothing to resume: trained again from the start
        second = run_repair(project, config, task=task_of(project))
        assert second.runs["after"].tolist() == first.runs["after"].tolist()
        for one, two in zip(first.runs["model"], second.runs["model"]):
            assert project.samples(one)["confidence"].equals(project.samples(two)["confidence"])
