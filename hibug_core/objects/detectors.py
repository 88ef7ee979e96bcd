"""Detectors hibug can run and retrain: a project records a detector's kind, checkpoint and training annotations
(meta "detector:<model>"), and one registry of detector kinds loads, fine-tunes and runs it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.errors import HibugError
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

DETECTOR_META = "detector:"  # project meta key prefix: how to load and retrain a model of objects
POOL_LABELS_META = "pool labels"  # project meta: COCO annotations of the pool images (what labelling returned)
DETECTOR_KINDS = Registry("detector kind")


class DetectorError(HibugError):
    """A detector hibug cannot load, retrain or run."""


@dataclass(frozen=True)
class RecordedDetector:
    """What a project records about a detector it can retrain (paths relative to the project folder)."""

    model: str
    kind: str
    checkpoint: str
    training: str  # COCO instances file of what it was trained on (file names under the file's folder)
    classes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TrainingSet:
    """Images (PIL) and per image (boxes (n, 4) x/y/w/h in pixels, class names)."""

    images: list
    objects: list[tuple[np.ndarray, list[str]]]

    def __add__(self, other: "TrainingSet") -> "TrainingSet":
        return TrainingSet(self.images + other.images, self.objects + other.objects)


def record_detector(project, detector: RecordedDetector) -> None:
    project.set_meta(DETECTOR_META + detector.model, json.dumps({
        "kind": detector.kind, "checkpoint": detector.checkpoint, "training": detector.training,
        "classes": detector.classes}))


def recorded_detector(project, model: str) -> RecordedDetector:
    """The detector behind `model`; DetectorError saying what to do when only its results were imported."""
    raw = project.meta().get(DETECTOR_META + model)
    if raw is None:
        raise DetectorError(f"hibug cannot retrain '{model}': only its results were imported. Record the detector "
                            f"(its kind, checkpoint and training annotations: {DETECTOR_META}<model> in the project's "
                            f"meta; kinds: {DETECTOR_KINDS.help_text()}), or retrain it yourself on the exported "
                            "selection")
    recorded = json.loads(raw)
    if DETECTOR_KINDS.find(recorded.get("kind", "")) is None:
        raise DetectorError(f"'{model}' was recorded as a detector of kind '{recorded.get('kind')}', which this hibug "
                            f"does not know; kinds: {DETECTOR_KINDS.help_text()}")
    return RecordedDetector(model, recorded["kind"], recorded["checkpoint"], recorded["training"],
                            list(recorded.get("classes", [])))


def load_runner(project, model: str):
    """The recorded detector's runner (load, fine_tune, detect) for `model`."""
    recorded = recorded_detector(project, model)
    checkpoint = project.folder / recorded.checkpoint
    if not checkpoint.exists():
        raise DetectorError(f"the checkpoint of '{model}' is gone: {checkpoint}")
    return DETECTOR_KINDS.build(recorded.kind, checkpoint=checkpoint)


def coco_training_set(path: Path, file_names: list[str] | None = None) -> TrainingSet:
    """Images and boxes of a COCO instances file (or of its images `file_names`, in that order), crowd regions left
    out; images are read under the file's folder."""
    from hibug_core.objects.coco import read_ground_truth
    from PIL import Image

    truth = read_ground_truth(path)
    images = truth.images.reset_index()
    if file_names is not None:
        by_name = images.set_index("file_name")
        missing = [name for name in file_names if name not in by_name.index]
        if missing:
            raise DetectorError(f"{len(missing)} of the chosen images have no annotations in {path} (e.g. "
                                f"{missing[0]}): label them and add them to that file")
        images = by_name.loc[file_names].reset_index()
    objects = truth.annotations[truth.annotations["iscrowd"] == 0]
    grouped = {image_id: group for image_id, group in objects.groupby("image_id")}
    empty = pd.DataFrame(columns=["x", "y", "w", "h", "category_id"])
    folder = Path(truth.source).parent
    loaded, targets = [], []
    for image_id, name in zip(images["image_id"], images["file_name"]):
        group = grouped.get(image_id, empty)
        with Image.open(folder / name) as image:
            loaded.append(image.convert("RGB"))
        targets.append((group[["x", "y", "w", "h"]].to_numpy(float),
                        [truth.categories[c] for c in group["category_id"]]))
    return TrainingSet(loaded, targets)


class SceneFcos:
    """The detection demo's FCOS (hibug_core.demo.detector): loaded from its checkpoint, fine-tuned with its own
    one-cycle schedule, run at its own score threshold."""

    def __init__(self, checkpoint: Path):
        from hibug_core.demo.detector import load_checkpoint

        self.network, self.classes, self.config = load_checkpoint(checkpoint)

    def fine_tune(self, data: TrainingSet, new: TrainingSet, *, lam: float | None, epochs: int, learning_rate: float,
                  seed: int, progress: ProgressCallback = no_progress):
        """A copy trained further on `data` and `new`: simply added (lam None), or a batch of each per step with the
        new one's loss weighted by lam."""
        from dataclasses import replace

        from hibug_core.demo.detector import train_detector

        config = replace(self.config, epochs=epochs, learning_rate=learning_rate, seed=seed)
        if lam is None:
            data, new = data + new, TrainingSet([], [])
        return train_detector(data.images, data.objects, self.classes, config, progress, start_from=self.network,
                              new=(new.images, new.objects), lam=lam or 0.0)

    def save(self, network, path: Path) -> Path:
        """The network as a checkpoint this kind loads (the training fingerprint says it was fine-tuned)."""
        from hibug_core.demo.detector import save_detector

        save_detector(path, network, self.classes, self.config, "fine-tuned")
        return path

    def detect(self, network, images: list, progress: ProgressCallback = no_progress) -> list[list[dict]]:
        from hibug_core.demo.detector import detect

        return detect(network, images, self.classes, progress=progress)


DETECTOR_KINDS.add("scene-fcos", "torchvision's FCOS on a small CNN backbone (the detection demo's detector)",
                   SceneFcos)
