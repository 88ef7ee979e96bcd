"""Models of several capacities trained on a demo's own training data and added to its project, for HiBug2's study
of error slices across model sizes (§5.3) and Chegini and Feizi's failures shared across models (Fig. 4)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hibug_core.errors import HibugError, check_fields
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

AUTHOR = "hibug model study"
STUDY_SPLITS = ("val", "test")  # where each study model is run (an object model; a classifier runs on every split)
CAPACITIES = Registry("model study")  # per demo: its Capacity


@dataclass(frozen=True)
class Capacity:
    """A demo's model study: the shipped network's width, the widths the study trains by default, and how a model of
    one width is trained and added: add(project, width, epochs, progress) -> the model's name."""

    shipped: int
    widths: tuple[int, ...]
    add: Callable[..., str]


def _study(name: str, help: str, shipped: int, widths: tuple[int, ...]):
    def register(add):
        CAPACITIES.add(name, help, lambda: Capacity(shipped, widths, add))
        return add
    return register


class StudyError(HibugError):
    """A study model that cannot be trained or added."""


@dataclass(frozen=True)
class StudyConfig:
    """Which capacities to train: each width (channels of the network's first stage), with the demo's own recipe
    (its epochs unless `epochs` is given)."""

    widths: tuple[int, ...]
    epochs: int | None = None

    def __post_init__(self):
        check_fields(self, {
            "widths": (len(self.widths) > 0 and all(isinstance(w, int) and w >= 4 for w in self.widths),
                       "one or more whole numbers of 4 or more"),
            "epochs": (self.epochs is None or (isinstance(self.epochs, int) and self.epochs >= 1),
                       "None or a count of 1 or more")})


def study_name(base: str, width: int) -> str:
    return f"{base}-w{width}"


def add_study_models(project, demo: str, config: StudyConfig, *, progress: ProgressCallback = no_progress
                     ) -> list[str]:
    """Train one model per width on the demo's training data and add each to `project` (run on its splits, matched
    as the demo's own model); a model already added under its name is kept. Returns their names."""
    # 1. Check inputs: a demo with a study entry.
    entry = CAPACITIES.find(demo)
    if entry is None:
        raise StudyError(f"no model study for the '{demo}' demo; choose one of {', '.join(CAPACITIES.names())}")
    # 2. One model per width, each trained, run and added in turn.
    names = []
    for k, width in enumerate(config.widths):
        progress(f"model {k + 1} of {len(config.widths)} (width {width})", k, len(config.widths))
        names.append(entry.build().add(project, width, config.epochs, progress))
    progress("models added", len(config.widths), len(config.widths))
    return names


@_study("classification", "the shape CNN at other widths, trained as the demo's (60 epochs, Adam)", 8, (4, 16, 32))
def _shape_cnns(project, width: int, epochs: int | None, progress: ProgressCallback) -> str:
    from hibug_core.demo.build import MODEL_NAME, MODEL_SPEC
    from hibug_core.image_loader import open_image
    from hibug_core.models.predict import predict_project
    from hibug_core.models.registry import load_model
    from hibug_core.models.zoo.shape_cnn import TrainConfig, save_checkpoint, train_shape_cnn

    name = study_name(MODEL_NAME, width)
    if name in project.models():
        return name
    shipped = load_model(MODEL_SPEC, root=project.folder)
    recipe = TrainConfig(epochs=epochs or TrainConfig.epochs)
    samples = project.samples()
    train = samples[(samples["split"] == "train") & samples["label"].notna()]
    pixels = np.stack([np.asarray(open_image(p).convert("RGB")) for p in train["image_path"]])
    index = {c: i for i, c in enumerate(shipped.classes)}
    network = train_shape_cnn(pixels, train["label"].map(index).to_numpy(), len(shipped.classes), recipe, progress,
                              width=width)
    relative = Path("models") / f"{name}.pt"
    save_checkpoint(project.folder / relative, network, shipped.classes, recipe, "model study", width=width)
    predict_project(project, load_model(f"shape-cnn:{relative.as_posix()}", root=project.folder), name=name,
                    author=AUTHOR, progress=progress)
    return name


def _object_model(project, base: str, width: int, epochs: int | None, progress: ProgressCallback, train, save
                  ) -> str:
    """A model of objects of the base model's family at `width`, trained from scratch on the base model's training
    annotations with its recipe, recorded (so it can be repaired) and run on the study splits."""
    from hibug_core.image_loader import open_image
    from hibug_core.models.object_models import coco_training_set
    from hibug_core.objects.coco import read_ground_truth
    from hibug_core.store.recorded_models import RecordedModel, record_model
    from hibug_core.tasks.object_repair import object_model, results_file
    from hibug_core.tasks.object_results import add_results, ground_truth_file

    name = study_name(base, width)
    if name in project.models():
        return name
    runner, recorded = object_model(project, base)
    data = coco_training_set(project.folder / recorded.training)
    config = replace(runner.config, width=width, epochs=epochs or runner.config.epochs)
    relative = Path("models") / f"{name}.pt"
    save(runner, train(runner, data, config, progress), project.folder / relative, config)
    record_model(project, RecordedModel(name, f"{recorded.spec.split(':', 1)[0]}:{relative.as_posix()}",
                                        training=recorded.training))
    study, _ = object_model(project, name)
    for split in STUDY_SPLITS:
        truth_path = ground_truth_file(project, base, split)
        truth = read_ground_truth(truth_path)
        images = [open_image(truth_path.parent / n) for n in truth.images["file_name"]]
        results = results_file(study, study.network, truth, images, project.folder / "models" / f"{name}-{split}.json",
                               progress)
        add_results(project, name, results, split, truth=truth, author=AUTHOR,
                    note={"study": "capacity", "width": width, "epochs": config.epochs})
    return name


@_study("detection", "the scene detector (FCOS) at other backbone widths, trained as the demo's", 24, (8, 16, 32))
def _detectors(project, width: int, epochs: int | None, progress: ProgressCallback) -> str:
    from hibug_core.demo.detection import DETECTOR_NAME
    from hibug_core.models.zoo.scene_fcos import save_detector, train_detector

    return _object_model(
        project, DETECTOR_NAME, width, epochs, progress,
        lambda runner, data, config, p: train_detector(data.images, data.objects, runner.classes, config, p),
        lambda runner, network, path, config: save_detector(path, network, runner.classes, config, "model study"))


@_study("pose", "the keypoint model (Keypoint R-CNN) at other backbone widths, trained as the demo's", 16,
        (8, 12, 24))
def _keypoint_models(project, width: int, epochs: int | None, progress: ProgressCallback) -> str:
    from hibug_core.demo.pose import MODEL_NAME
    from hibug_core.models.zoo.scene_keypoints import save_keypoint_model, train_keypoint_model

    return _object_model(
        project, MODEL_NAME, width, epochs, progress,
        lambda runner, data, config, p: train_keypoint_model(data.images, data.people(), runner.classes,
                                                             runner.keypoints, config, p),
        lambda runner, network, path, config: save_keypoint_model(path, network, runner.classes, runner.keypoints,
                                                                  config))
