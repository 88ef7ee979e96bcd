"""Building the segmentation demo offline: scenes of flat shapes with exact masks, a real mask model (Mask R-CNN)
trained here with planted bugs in its training annotations, and its masks imported as COCO files: one sample per
object, matched by mask IoU."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import Attribute, AttributeSchema
from hibug_core.demo.build import PlantedBug, new_demo_folder
from hibug_core.demo.detection import pool_tags
from hibug_core.demo.mask_scenes import MASK_SHAPES, MaskSceneConfig, render_mask_scenes
from hibug_core.demo.scenes import SCENE_COLOURS
from hibug_core.errors import check_fields
from hibug_core.models.zoo.scene_masks import (
    MaskModelConfig,
    load_trained_mask_model,
    save_mask_model,
    segment,
    train_mask_model,
    training_fingerprint,
)
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.objects.mask_geometry import mask_attributes
from hibug_core.objects.masks import from_pixels
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.diagnosis import BAD_MASKS
from hibug_core.store.attribute_versions import save_schema
from hibug_core.store.project import Project
from hibug_core.store.recorded_models import POOL_LABELS_META, RecordedModel, record_model
from hibug_core.store.staging import staged_folder
from hibug_core.tasks import load_coco

logger = logging.getLogger(__name__)

ASSET_MODEL = Path(__file__).resolve().parents[2] / "assets" / "demo_masks.pt"
MODEL_NAME = "shape-masks"
POOL_LABELS = "data/instances_pool.json"  # the pool's annotations, as a labelling team would return them
TASK = "outline every circle, rectangle, triangle, bar and ring (instance segmentation) in scenes of flat shapes"


@dataclass(frozen=True)
class SegmentationDemoConfig:
    seed: int = 0
    train_scenes: int = 1200
    val_scenes: int = 500
    test_scenes: int = 500
    pool_scenes: int = 800  # unlabelled scenes to select from (their annotations are kept aside)
    pool_score_floor: float = 0.1  # the pool's objects are kept down to this confidence
    boxed_shape: str = "bar"  # bug 1, thin shapes outlined badly: their training masks are their filled boxes...
    keep_boxed: float = 0.0  # ...but for this share
    missed_colour: str = "blue"  # bug 2, one colour left out of the training masks: its objects are unannotated...
    keep_missed: float = 0.05  # ...but for this share
    rare_shape: str = "ring"  # bug 3, a rare shape: its share of training objects (elsewhere the scenes' own)
    train_rare: float = 0.004
    scenes: MaskSceneConfig = field(default_factory=MaskSceneConfig)
    model: MaskModelConfig = field(default_factory=lambda: MaskModelConfig(epochs=8, batch_size=16,
                                                                          learning_rate=4e-3, score_threshold=0.3))

    def __post_init__(self):
        check_fields(self, {
            **{name: (getattr(self, name) >= 1, "1 or more") for name in
               ("train_scenes", "val_scenes", "test_scenes", "pool_scenes")},
            **{name: (0 <= getattr(self, name) <= 1, "a share in [0, 1]") for name in
               ("pool_score_floor", "keep_boxed", "keep_missed", "train_rare")},
            "boxed_shape": (self.boxed_shape in MASK_SHAPES, f"one of {', '.join(MASK_SHAPES)}"),
            "rare_shape": (self.rare_shape in MASK_SHAPES, f"one of {', '.join(MASK_SHAPES)}"),
            "missed_colour": (self.missed_colour in SCENE_COLOURS, f"one of {', '.join(SCENE_COLOURS)}"),
            "model": (self.model.image_size == self.scenes.size, "a model for the scenes' image size")})

    def training_shares(self) -> tuple[float, ...]:
        """The training split's shape shares: the rare shape at train_rare (bug 3), the others as elsewhere."""
        shares = np.asarray(self.scenes.shape_shares, float)
        rare = MASK_SHAPES.index(self.rare_shape)
        rest = np.delete(shares, rare)
        return tuple(float(s) for s in np.insert(rest / rest.sum() * (1 - self.train_rare), rare, self.train_rare))

    def planted_bugs(self) -> list[PlantedBug]:
        return [
            PlantedBug("outlined badly", {"class": self.boxed_shape},
                       f"{self.boxed_shape}s (thin shapes) annotated in training with their filled box as the mask "
                       f"(but {self.keep_boxed:.0%})", BAD_MASKS),
            PlantedBug("missing annotations", {"color": self.missed_colour},
                       f"{self.missed_colour} objects left out of the training masks (but {self.keep_missed:.0%})",
                       "missing annotations"),
            PlantedBug("rare case", {"class": self.rare_shape},
                       f"{self.rare_shape}s are {self.train_rare:.1%} of training objects (elsewhere "
                       f"{self.scenes.shape_shares[MASK_SHAPES.index(self.rare_shape)]:.0%})", "rare case"),
        ]


def training_annotations(objects: pd.DataFrame, masks: list, config: SegmentationDemoConfig, seed: int
                         ) -> tuple[pd.DataFrame, list]:
    """What the demo's mask model is trained on: the true objects and masks with bugs 1 and 2 put in (one seeded draw
    per object decides whether it keeps its own)."""
    draw = np.random.default_rng(seed).random(len(objects))
    dropped = (objects["color"] == config.missed_colour).to_numpy() & (draw >= config.keep_missed)
    boxed = (objects["shape"] == config.boxed_shape).to_numpy() & (draw >= config.keep_boxed)
    taught = []
    for mask, row, fill in zip(masks, objects.itertuples(), boxed):
        if fill:
            mask = np.zeros_like(mask)
            mask[int(row.y):int(row.y + row.h), int(row.x):int(row.x + row.w)] = True
        taught.append(mask)
    kept = np.flatnonzero(~dropped)
    return objects.iloc[kept].reset_index(drop=True), [taught[i] for i in kept]


def _per_image(objects: pd.DataFrame, masks: list, scenes: int, size: int) -> tuple[list, list]:
    """Per scene, (boxes (n, 4) x/y/w/h, class names) and its masks (n, size, size)."""
    boxes, stacks = [], []
    by_scene = {scene: group.index.to_numpy() for scene, group in objects.groupby("scene")}
    for scene in range(scenes):
        rows = by_scene.get(scene, np.zeros(0, np.int64))
        boxes.append((objects.loc[rows, ["x", "y", "w", "h"]].to_numpy(float).reshape(-1, 4),
                      objects.loc[rows, "shape"].tolist()))
        stacks.append(np.stack([masks[i] for i in rows]) if len(rows) else np.zeros((0, size, size), bool))
    return boxes, stacks


def coco_masks(split: str, images: list, objects: pd.DataFrame, masks: list, *, with_attributes: bool = True) -> dict:
    """A COCO instances file's content for a split's scenes (file names images/<split>/00000.png, ...): each object
    with its box, its mask (a compressed run-length encoding), its area (the mask's) and its colour."""
    records = [{"id": i + 1, "file_name": f"images/{split}/{i:05d}.png", "width": image.width, "height": image.height}
               for i, image in enumerate(images)]
    encodings = from_pixels(np.stack(masks)) if len(masks) else []
    annotations = [{"id": k + 1, "image_id": int(row.scene) + 1, "category_id": MASK_SHAPES.index(row.shape) + 1,
                    "bbox": [row.x, row.y, row.w, row.h], "area": float(mask.sum()), "segmentation": rle,
                    "iscrowd": 0, **({"attributes": {"color": row.color}} if with_attributes else {})}
                   for k, (row, mask, rle) in enumerate(zip(objects.itertuples(), masks, encodings))]
    return {"images": records, "categories": [{"id": i + 1, "name": s} for i, s in enumerate(MASK_SHAPES)],
            "annotations": annotations}


def segmentation_attribute_schema() -> AttributeSchema:
    shapes = [Attribute(name="color", tags=SCENE_COLOURS, templates=("a {tag} {label}", "a {tag} shape"))]
    return AttributeSchema(attributes=(*shapes, *geometry_attributes(), *mask_attributes()), task=TASK)


def build_segmentation_demo(folder: str | Path, config: SegmentationDemoConfig = SegmentationDemoConfig(), *,
                            progress: ProgressCallback = no_progress, checkpoint: Path | None = ASSET_MODEL,
                            save_trained_checkpoint: bool = False) -> Project:
    """Build the segmentation demo project in `folder` (which must not exist yet); nothing is left behind on
    failure."""
    # 1. Check the folder.
    folder = new_demo_folder(folder)
    # 2. The scenes of every split (seeded; training's with its rare shape), and what the model learns from.
    counts = {"train": config.train_scenes, "val": config.val_scenes, "test": config.test_scenes,
              "pool": config.pool_scenes}
    scenes = {split: render_mask_scenes(n, config.seed * 10 + k, config.scenes,
                                        config.training_shares() if split == "train" else None)
              for k, (split, n) in enumerate(counts.items())}
    taught, taught_masks = training_annotations(scenes["train"][1], scenes["train"][2], config, config.seed + 17)
    teach, teach_masks = _per_image(taught, taught_masks, config.train_scenes, config.scenes.size)
    classes = list(MASK_SHAPES)
    # 3. The mask model: the stored one if it was trained on exactly these annotations, else trained now.
    fingerprint = training_fingerprint(teach, teach_masks, classes, config.model)
    model = load_trained_mask_model(checkpoint, classes, config.model, fingerprint) if checkpoint else None
    if model is None:
        logger.info("training the demo mask model (%d scenes)", config.train_scenes)
        model = train_mask_model(scenes["train"][0], teach, teach_masks, classes, config.model, progress)
        if save_trained_checkpoint and checkpoint is not None:
            save_mask_model(checkpoint, model, classes, config.model, fingerprint, half=True)
    # 4. Its masks, the COCO files and the project, built in a staging folder.
    with staged_folder(folder, "building") as staging:
        data = staging / "data"
        project = Project.create(staging, name="shape scenes segmentation demo")
        report = {"model": MODEL_NAME, "config": asdict(config),
                  "planted_bugs": [asdict(b) for b in config.planted_bugs()]}
        for split, (images, objects, masks) in scenes.items():
            pool = split == "pool"
            truth, results = _write_split(data, split, images, objects, masks, model, config, progress)
            manifest = load_coco(truth, {MODEL_NAME: results}, split=split, labelled=not pool, progress=progress)
            if pool:  # what a tagger reads off each detection's crop: its colour (as val's tags are named)
                manifest.known_tags.update(pool_tags(images, manifest))
            project.import_manifest(manifest, author="hibug demo", kind="coco")
            report[split] = {"scenes": len(images), "objects": len(objects)}
            if not pool:
                report[split].update({name: manifest.object_evaluations[MODEL_NAME].summary[name]
                                      for name in ("AP", "AP50")})
        # what the model was trained on (file names as the train split's): retraining starts from it
        (data / "train_annotations.json").write_text(json.dumps(coco_masks("train", scenes["train"][0], taught,
                                                                           taught_masks)))
        save_mask_model(staging / "models" / f"{MODEL_NAME}.pt", model, classes, config.model, fingerprint)
        record_model(project, RecordedModel(MODEL_NAME, f"scene-masks:models/{MODEL_NAME}.pt",
                                            training="data/train_annotations.json"))
        project.set_meta(POOL_LABELS_META, POOL_LABELS)
        project.set_meta("demo", json.dumps(report, default=str))
        save_schema(project, segmentation_attribute_schema(), author="hibug demo",
                    note="the shapes' colour (imported with the objects), the measured geometry and masks")
        project.close()
    logger.info("segmentation demo built in %s: %s", folder, {s: report[s] for s in counts})
    return Project.open(folder)


def _write_split(folder: Path, split: str, images: list, objects: pd.DataFrame, masks: list, model,
                 config: SegmentationDemoConfig, progress: ProgressCallback) -> tuple[Path, Path]:
    """A split's images, its COCO ground truth with masks (the pool's to POOL_LABELS, its instances file listing the
    images only) and the model's COCO results with masks."""
    (folder / "images" / split).mkdir(parents=True, exist_ok=True)
    for index, image in enumerate(images):
        image.save(folder / f"images/{split}/{index:05d}.png")
    truth = folder / f"instances_{split}.json"
    truth.write_text(json.dumps(coco_masks(split, images, objects, masks)))
    if split == "pool":
        truth = folder / "images_pool.json"
        truth.write_text(json.dumps(coco_masks(split, images, objects.iloc[:0], [])))
    found = segment(model, images, list(MASK_SHAPES), progress=progress,
                    score_floor=config.pool_score_floor if split == "pool" else None)
    results = folder / f"{MODEL_NAME}_{split}.json"
    results.write_text(json.dumps([{"image_id": index + 1, "category_id": MASK_SHAPES.index(d["category"]) + 1,
                                    "bbox": d["bbox"], "score": d["score"], "segmentation": d["segmentation"]}
                                   for index, found_here in enumerate(found) for d in found_here]))
    return truth, results

