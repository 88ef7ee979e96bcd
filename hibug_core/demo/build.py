"""Building the demo project offline: real shape images, known attributes, a CNN trained with planted bugs."""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.demo.attributes import demo_attribute_schema
from hibug_core.demo.easyvqa import ATTRIBUTES, SHAPES, load_shape_world
from hibug_core.errors import ProjectError
from hibug_core.models.predict import predict_project
from hibug_core.models.registry import load_model
from hibug_core.models.zoo.shape_cnn import TrainConfig, load_checkpoint, save_checkpoint, train_shape_cnn
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store.attribute_versions import save_schema
from hibug_core.store.project import DB_FILE, Project
from hibug_core.store.staging import staged_folder
from hibug_core.tasks import load_manifest

logger = logging.getLogger(__name__)

ASSET_CHECKPOINT = Path(__file__).resolve().parents[2] / "assets" / "demo_shape_cnn.pt"
MODEL_NAME = "shape-cnn"
PROJECT_CHECKPOINT = Path("models") / "shape-cnn.pt"  # inside the project: the model repair fine-tunes
MODEL_SPEC = f"shape-cnn:{PROJECT_CHECKPOINT.as_posix()}"  # relative: read under the project folder


@dataclass(frozen=True)
class PlantedBug:
    """A bug put into the demo model on purpose, by thinning one slice of its training split."""

    bug_type: str  # the demo's name for it
    slice: dict[str, str]
    how: str
    diagnosed_as: str = ""  # the bug type hibug's diagnosis should name ("" where hibug has no type for it)


@dataclass(frozen=True)
class DemoConfig:
    seed: int = 0
    pool_size: int = 800
    val_size: int = 800
    spurious_color: str = "blue"
    spurious_shape: str = "circle"
    keep_conflicting: float = 0.01  # share of blue non-circles kept in training
    keep_other_shape: float = 0.6  # share of non-blue circles kept in training
    rare_size: str = "small"
    rare_shape: str = "triangle"
    keep_rare: float = 0.02  # share of small triangles kept in training
    train: TrainConfig = field(default_factory=TrainConfig)

    def planted_bugs(self) -> list[PlantedBug]:
        return [
            PlantedBug("spurious correlation", {"color": self.spurious_color},
                       f"in training, {self.spurious_color} goes with {self.spurious_shape}: only "
                       f"{self.keep_conflicting:.0%} of {self.spurious_color} non-{self.spurious_shape}s kept",
                       "spurious correlation"),
            PlantedBug("rare case", {"size": self.rare_size, "shape": self.rare_shape},
                       f"only {self.keep_rare:.0%} of {self.rare_size} {self.rare_shape}s kept in training",
                       "rare case"),
        ]


def _assign_splits(sources: np.ndarray, shapes: np.ndarray, colors: np.ndarray, sizes: np.ndarray,
                   config: DemoConfig) -> np.ndarray:
    """easy-vqa's train images give pool, validation and a biased train; its test images are the test split.
    Validation is drawn from the same images as train (before thinning), so the planted bugs show where hibug
    searches (on easy-vqa's own test images the model scores small triangles far better than on its train images)."""
    rng = np.random.default_rng(config.seed)
    split = np.full(len(sources), "test", dtype=object)
    from_train = np.flatnonzero(sources == "train")
    rng.shuffle(from_train)
    pool_end = min(config.pool_size, len(from_train) // 4)
    val_end = pool_end + min(config.val_size, len(from_train) // 4)
    split[from_train[:pool_end]] = "pool"
    split[from_train[pool_end:val_end]] = "val"
    candidates = from_train[val_end:]
    draw = rng.random(len(sources))
    conflicting = (colors == config.spurious_color) & (shapes != config.spurious_shape)
    other_shape = (colors != config.spurious_color) & (shapes == config.spurious_shape)
    rare = (sizes == config.rare_size) & (shapes == config.rare_shape)
    dropped = ((conflicting & (draw >= config.keep_conflicting)) | (other_shape & (draw >= config.keep_other_shape))
               | (rare & (draw >= config.keep_rare)))
    split[candidates] = np.where(dropped[candidates], "unused", "train")
    return split


def _fingerprint(ids: list[str], config: DemoConfig) -> str:
    digest = hashlib.sha256(json.dumps([ids, asdict(config.train)]).encode())
    return digest.hexdigest()[:16]


def _slice_accuracy(correct: np.ndarray, mask: np.ndarray) -> dict[str, float | int]:
    return {"n": int(mask.sum()), "accuracy": round(float(correct[mask].mean()), 4) if mask.any() else None}


def _slice_mask(known: list[dict[str, str]], slice_: dict[str, str]) -> np.ndarray:
    return np.array([all(row[a] == t for a, t in slice_.items()) for row in known])


def build_demo(folder: str | Path, config: DemoConfig = DemoConfig(), *, progress: ProgressCallback = no_progress,
               checkpoint: Path | None = ASSET_CHECKPOINT, save_trained_checkpoint: bool = False) -> Project:
    """Build the demo project in `folder` (which must not exist yet); nothing is left behind on failure."""
    folder = new_demo_folder(folder)
    world = load_shape_world(progress)
    images, pixels = world.images, world.pixels
    shapes, colors, sizes = (world.attributes[c].to_numpy() for c in ("shape", "color", "size"))
    split = _assign_splits(world.source_splits, shapes, colors, sizes, config)
    known = world.attributes.to_dict("records")
    ids = list(world.ids)

    classes = list(SHAPES)
    targets = world.labels()
    train = split == "train"
    fingerprint = _fingerprint([i for i, t in zip(ids, train) if t], config)
    network = load_checkpoint(checkpoint, classes, config.train, fingerprint) if checkpoint else None
    if network is None:
        logger.info("training the demo model (%d images)", int(train.sum()))
        network = train_shape_cnn(pixels[train], targets[train], len(classes), config.train, progress)
        if save_trained_checkpoint and checkpoint is not None:
            save_checkpoint(checkpoint, network, classes, config.train, fingerprint)
    kept = split != "unused"

    with staged_folder(folder, "building") as staging:
        data = staging / "data"
        for split_name in ("train", "val", "test", "pool"):
            (data / "images" / split_name).mkdir(parents=True, exist_ok=True)
        manifest = data / "manifest.csv"
        with open(manifest, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "image", "label", "split", *[f"attr:{a}" for a in ATTRIBUTES]])
            for i in np.flatnonzero(kept):
                relative = f"images/{split[i]}/{ids[i]}.png"
                shutil.copyfile(images[i].path, data / relative)
                writer.writerow([ids[i], relative, shapes[i], split[i], *[known[i][a] for a in ATTRIBUTES]])
        project = Project.create(staging, name="easy-vqa shapes demo")
        project.import_manifest(load_manifest(manifest, progress=progress), author="hibug demo")
        # The demo network is run as any adapted model is (hibug predict): predictions, probabilities, features.
        save_checkpoint(staging / PROJECT_CHECKPOINT, network, classes, config.train, fingerprint)
        predict_project(project, load_model(MODEL_SPEC, root=staging), name=MODEL_NAME, author="hibug demo",
                        progress=progress)
        predicted = project.samples(MODEL_NAME)
        by_id = pd.Series(predicted["correct"].to_numpy(bool),
                          index=predicted["image_path"].map(lambda p: Path(p).stem))
        correct = by_id.reindex(ids, fill_value=False).to_numpy(bool)  # unused images are never read below
        evaluated = kept & ((split == "val") | (split == "test"))
        report = {
            "model": MODEL_NAME,
            "classes": classes,
            "config": asdict(config),
            "splits": {s: int((split == s).sum()) for s in ("train", "val", "test", "pool", "unused")},
            "accuracy": {s: _slice_accuracy(correct, kept & (split == s)) for s in ("train", "val", "test", "pool")},
            "planted_bugs": [
                {**asdict(bug), "val_test": _slice_accuracy(correct, evaluated & _slice_mask(known, bug.slice)),
                 "train_count": int((train & _slice_mask(known, bug.slice)).sum())}
                for bug in config.planted_bugs()
            ],
        }
        project.set_meta("demo", json.dumps(report))
        save_schema(project, demo_attribute_schema(), author="hibug demo",
                    note="the shape world's attributes (ground truth imported) and the measured ones")
        project.close()
    logger.info("demo built in %s: %s", folder, report["accuracy"])
    return Project.open(folder)


def ensure_demo(folder: str | Path, config: DemoConfig = DemoConfig(), *,
                progress: ProgressCallback = no_progress) -> Project:
    """Open the demo project in `folder`, building it first if it is not there."""
    return open_or_build(folder, lambda where: build_demo(where, config, progress=progress))


def open_or_build(folder: str | Path, build) -> Project:
    """The project in `folder`, built first by build(folder) if it is not there (every demo's way to open)."""
    folder = Path(folder)
    if (folder / DB_FILE).exists():
        return Project.open(folder)
    return build(folder)


def new_demo_folder(folder: str | Path) -> Path:
    """`folder` resolved; ProjectError if it holds anything (a demo is built only where nothing is lost)."""
    folder = Path(folder).resolve()
    if folder.exists() and any(folder.iterdir()):
        raise ProjectError(f"{folder} exists and is not empty; choose another folder for the demo")
    return folder
