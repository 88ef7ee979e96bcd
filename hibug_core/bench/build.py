"""One planted-bug problem as a hibug project: train the model under test on the biased split, check that the bug
shows, and import the images, predictions and true attributes through the normal manifest path."""
from __future__ import annotations

import csv
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hibug_core.bench.problems import SPURIOUS, PlantedProblem, SplitConfig, ground_truth
from hibug_core.demo.easyvqa import ATTRIBUTES, SHAPES, ShapeWorld
from hibug_core.models.zoo.shape_cnn import TrainConfig, predict_probabilities, train_shape_cnn
from hibug_core.store.project import Project
from hibug_core.tasks import load_manifest

MODEL_NAME = "model-under-test"


@dataclass(frozen=True)
class Realised:
    """How the planted bug turned out in the trained model, on the validation split."""

    train_size: int
    train_count: int  # training images in the bug's failing part (rare: the rare combination)
    val_count: int
    accuracy: float  # overall validation accuracy
    part_accuracy: float  # on the failing part
    reference_accuracy: float  # on the same classes without the tag
    shortcut_share: float  # share of the failing part's failures predicted as the planted class

    @property
    def drop(self) -> float:
        return self.reference_accuracy - self.part_accuracy

    def shows(self, min_drop: float, min_shortcut: float, bug_type: str, min_count: int = 10) -> bool:
        """A bug counts when the model does at least `min_drop` worse on its part than on the reference (and a spurious
        correlation's failures mostly predict the planted class); otherwise the model did not learn it."""
        return (self.val_count >= min_count and self.drop >= min_drop
                and (bug_type != SPURIOUS or self.shortcut_share >= min_shortcut))


def _cache_name(problem: PlantedProblem, split: np.ndarray, train: TrainConfig) -> str:
    fields = asdict(problem)
    if not fields["more"]:  # the models cached before hard cases came keep their names
        del fields["more"]
    digest = hashlib.sha256(json.dumps([fields, asdict(train), split.tolist()]).encode()).hexdigest()
    return f"model-{digest[:20]}.npy"


def model_probabilities(world: ShapeWorld, split: np.ndarray, problem: PlantedProblem, train: TrainConfig,
                        cache_dir: Path | None = None) -> np.ndarray:
    """Train the small CNN on the problem's training split; class probabilities of every image (cached on disk:
    training is seeded, so the same problem and settings give the same model)."""
    cached = cache_dir / _cache_name(problem, split, train) if cache_dir else None
    if cached is not None and cached.exists():
        return np.load(cached)
    chosen = split == "train"
    network = train_shape_cnn(world.pixels[chosen], world.labels()[chosen], len(SHAPES), train)
    probabilities = predict_probabilities(network, world.pixels, train.resolution).astype(np.float32)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, probabilities)
    return probabilities


def realised(world: ShapeWorld, split: np.ndarray, problem: PlantedProblem, probabilities: np.ndarray) -> Realised:
    labels = world.labels()
    predicted = probabilities.argmax(axis=1)
    correct = predicted == labels
    part = problem.failing_part(world.attributes)
    val = split == "val"
    failed = val & part & ~correct
    planted_label = SHAPES.index(problem.label) if problem.label in SHAPES else -1  # a hard case may have no class
    return Realised(
        train_size=int((split == "train").sum()),
        train_count=int((part & (split == "train")).sum()),
        val_count=int((val & part).sum()),
        accuracy=float(correct[val].mean()),
        part_accuracy=float(correct[val & part].mean()) if (val & part).any() else float("nan"),
        reference_accuracy=float(correct[val & problem.reference(world.attributes)].mean()),
        shortcut_share=float((predicted[failed] == planted_label).mean()) if failed.any() else 0.0)


def build_problem_project(folder: Path, world: ShapeWorld, split: np.ndarray, problem: PlantedProblem,
                          probabilities: np.ndarray, outcome: Realised, splits: SplitConfig) -> Project:
    """A fresh project for the problem (an old one in `folder` is replaced): its images by absolute path, the
    model's predictions and probabilities, the true attributes as attr: columns, the planted truth in its meta."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    manifest = folder / "manifest.csv"
    predictions = np.array(SHAPES)[probabilities.argmax(axis=1)]
    attributes = world.attributes
    with open(manifest, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "label", "split", "prediction", *[f"prob:{c}" for c in SHAPES],
                         *[f"attr:{a}" for a in ATTRIBUTES]])
        for i in np.flatnonzero(split != "unused"):
            writer.writerow([world.ids[i], str(world.images[i].path), attributes.iat[i, 0], split[i], predictions[i],
                             *[f"{p:.6f}" for p in probabilities[i]], *attributes.iloc[i].tolist()])
    project = Project.create(folder / "project", name=f"{problem.id}: {problem.describe()}")
    project.import_manifest(load_manifest(manifest, default_model=MODEL_NAME), author="hibug bench")
    project.set_meta("planted", json.dumps({"problem": asdict(problem), "truth": ground_truth(problem),
                                            "realised": asdict(outcome), "splits": asdict(splits)}))
    return project
