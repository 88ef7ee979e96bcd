"""Building the detection demo offline: scenes of shapes, a real detector (FCOS) trained here with planted bugs in its
training annotations, and its results imported as COCO files: one sample per object."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import Bins
from hibug_core.attributes.schema import Attribute, AttributeSchema
from hibug_core.demo.build import PlantedBug, new_demo_folder
from hibug_core.demo.scenes import SCENE_COLOURS, SCENE_SHAPES, SceneConfig, render_scenes
from hibug_core.models.zoo.scene_fcos import (
    DetectorConfig,
    detect,
    load_detector,
    save_detector,
    train_detector,
    training_fingerprint,
)
from hibug_core.objects.geometry import GeometryConfig, geometry_attributes
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.repair.generators import COLOURS
from hibug_core.store.attribute_versions import save_schema
from hibug_core.store.project import Project
from hibug_core.store.recorded_models import POOL_LABELS_META, RecordedModel, record_model
from hibug_core.store.staging import staged_folder
from hibug_core.tasks import load_coco

logger = logging.getLogger(__name__)

ASSET_DETECTOR = Path(__file__).resolve().parents[2] / "assets" / "demo_detector.pt"
DETECTOR_NAME = "shape-fcos"
POOL_LABELS = "data/instances_pool.json"  # the pool's annotations, as a labelling team would return them
SIZES = ("small", "medium", "large")
TASK = "detect circles, rectangles and triangles in scenes of several flat shapes"


@dataclass(frozen=True)
class DetectionDemoConfig:
    seed: int = 0
    train_scenes: int = 2400
    val_scenes: int = 600
    test_scenes: int = 600
    pool_scenes: int = 1200  # unlabelled scenes to select from (their annotations are kept aside, as a labelling
    pool_score_floor: float = 0.1  # team would return them); the pool's detections are kept down to this confidence
    small_below: int = 14  # object size (measured, the box's area): small below 14x14 pixels, large from 26x26 (COCO's
    large_from: int = 26  # 32 and 96 would call nearly every object of these 96-pixel scenes small)
    missed_colour: str = "blue"  # bug 1: small objects of this colour are left unannotated in training...
    keep_missed: float = 0.05  # ...but for this share
    truncated_shrink: float = 0.5  # bug 2: a border-cut object's training box covers this share of it (centred)
    pair_colour: str = "green"  # bug 3, a conjunction: objects of this colour and shape are left unannotated...
    pair_shape: str = "triangle"
    keep_pair: float = 0.05  # ...but for this share
    scenes: SceneConfig = field(default_factory=SceneConfig)
    detector: DetectorConfig = field(default_factory=DetectorConfig)

    def object_bugs(self) -> tuple:
        return (ObjectBug("missing", (("color", self.missed_colour), ("object size", "small")), self.keep_missed),
                ObjectBug("bad boxes", (("is truncated", "yes"),), self.truncated_shrink),
                ObjectBug("missing", (("color", self.pair_colour), ("class", self.pair_shape)), self.keep_pair))

    def planted_bugs(self) -> list[PlantedBug]:
        return [
            PlantedBug("missing annotations", {"color": self.missed_colour, "object size": "small"},
                       f"small {self.missed_colour} objects left unannotated in training (but {self.keep_missed:.0%})",
                       "missing annotations"),
            PlantedBug("bad boxes", {"is truncated": "yes"},
                       f"boxes of objects cut by the border annotated at {self.truncated_shrink:.0%} of their size",
                       "bad boxes"),
            PlantedBug("missing annotations (a conjunction)", {"color": self.pair_colour, "class": self.pair_shape},
                       f"{self.pair_colour} {self.pair_shape}s left unannotated in training "
                       f"(but {self.keep_pair:.0%}); "
                       f"other {self.pair_colour} objects and other {self.pair_shape}s are kept",
                       "missing annotations"),
        ]


    def geometry(self) -> GeometryConfig:
        """How the demo's objects are measured: its size bins (the project keeps them for every later import)."""
        return GeometryConfig(size=Bins(SIZES, (float(self.small_below ** 2), float(self.large_from ** 2))))


@dataclass(frozen=True)
class ObjectBug:
    """A bug planted in a detector's training annotations, on the objects with all of `conditions`."""

    kind: str  # "missing": left unannotated; "bad boxes": boxes shrunk around their centre
    conditions: tuple[tuple[str, str], ...]  # (attribute, tag) over color, object size, class, is truncated
    strength: float  # missing: the share still annotated; bad boxes: the share of the box kept

    def describe(self) -> str:
        where = " & ".join(f"{a} = {t}" for a, t in self.conditions)
        if self.kind == "missing":
            return f"{where}: left unannotated ({self.strength:.0%} kept)"
        return f"{where}: boxes annotated at {self.strength:.0%} of their size"


def object_tags(objects: pd.DataFrame, config: DetectionDemoConfig = DetectionDemoConfig()) -> pd.DataFrame:
    """The scenes' objects' true tags by attribute name, as the project holds them."""
    areas = (objects["w"] * objects["h"]).to_numpy(np.float64)  # as the import measures it: the annotation's area
    return pd.DataFrame({"color": objects["color"].to_numpy(object),
                         "object size": np.asarray(SIZES, dtype=object)[config.geometry().size.tag(areas)],
                         "class": objects["shape"].to_numpy(object),
                         "is truncated": np.where(objects["truncated"].to_numpy(bool), "yes", "no").astype(object)},
                        index=objects.index)


def plant_bugs(objects: pd.DataFrame, bugs, config: DetectionDemoConfig, seed: int) -> pd.DataFrame:
    """What a detector is trained on: the true objects with `bugs` put into their annotations (one seeded draw per
    object decides, for every missing-annotation bug, whether it stays)."""
    draw = np.random.default_rng(seed).random(len(objects))
    tags = object_tags(objects, config)
    has = [np.logical_and.reduce([(tags[a] == t).to_numpy() for a, t in bug.conditions]) for bug in bugs]
    dropped = np.zeros(len(objects), bool)
    for bug, members in zip(bugs, has):
        if bug.kind == "missing":
            dropped |= members & (draw >= bug.strength)
    kept = objects[~dropped].copy()
    for bug, members in zip(bugs, has):
        if bug.kind == "bad boxes":
            shrunk = members[~dropped]
            for axis, length in (("x", "w"), ("y", "h")):
                cut = kept.loc[shrunk, length] * (1 - bug.strength)
                kept.loc[shrunk, axis] += cut / 2
                kept.loc[shrunk, length] -= cut
    return kept


def training_annotations(objects: pd.DataFrame, config: DetectionDemoConfig) -> pd.DataFrame:
    """What the demo's detector is trained on: the true objects with its planted bugs in their annotations."""
    return plant_bugs(objects, config.object_bugs(), config, config.seed + 17)


def write_coco_split(folder: Path, split: str, images: list, objects: pd.DataFrame, detections: list[list[dict]] | None,
                config: DetectionDemoConfig) -> tuple[Path, Path | None]:
    """Write a split's images, its COCO ground truth (with each object's colour as an attribute) and the
    detector's COCO results. The pool's ground truth goes to POOL_LABELS, and its instances file lists the images
    only (nobody has annotated them yet)."""
    (folder / "images" / split).mkdir(parents=True, exist_ok=True)
    for index, image in enumerate(images):
        image.save(folder / f"images/{split}/{index:05d}.png")
    attributes = [{"color": colour} for colour in objects["color"]]
    truth = folder / f"instances_{split}.json"
    truth.write_text(json.dumps(coco_instances(split, images, objects, attributes)))
    if split == "pool":
        truth = folder / "images_pool.json"
        truth.write_text(json.dumps(coco_instances(split, images, objects.iloc[:0])))
    if detections is None:
        return truth, None
    results = folder / f"{DETECTOR_NAME}_{split}.json"
    results.write_text(json.dumps([{"image_id": index + 1, "category_id": SCENE_SHAPES.index(d["category"]) + 1,
                                    "bbox": d["bbox"], "score": d["score"]}
                                   for index, found in enumerate(detections) for d in found]))
    return truth, results


def pool_tags(images: list, manifest) -> dict[str, list]:
    """Each pool detection's colour (the scene colour most of its box's foreground pixels are nearest to): what a
    tagger sees in the crop, with no annotation (its size is measured from its box, as every object's)."""
    objects = manifest.objects
    palette = np.array([COLOURS[c] for c in SCENE_COLOURS], dtype=np.float32)
    scene = manifest.samples["image_path"].map(lambda p: int(Path(p).stem)).to_numpy()
    colours = []
    for index, x, y, w, h in zip(scene, objects["box_x"], objects["box_y"], objects["box_w"], objects["box_h"]):
        pixels = np.asarray(images[index], dtype=np.float32)
        background = np.median(np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]]), axis=0)
        box = pixels[int(y):int(np.ceil(y + h)), int(x):int(np.ceil(x + w))].reshape(-1, 3)
        box = box[np.linalg.norm(box - background, axis=1) > 60]
        nearest = np.linalg.norm(box[:, None] - palette[None], axis=2).argmin(axis=1) if len(box) else []
        colours.append(SCENE_COLOURS[np.bincount(nearest, minlength=len(palette)).argmax()] if len(box) else None)
    return {"color": colours}


def coco_instances(split: str, images: list, objects: pd.DataFrame, attributes: list[dict] | None = None) -> dict:
    """A COCO instances file's content for a split's scenes (file names images/<split>/00000.png, ...) and objects
    (with per-object attributes where given)."""
    records = [{"id": i + 1, "file_name": f"images/{split}/{i:05d}.png", "width": image.width, "height": image.height}
               for i, image in enumerate(images)]
    annotations = [{"id": k + 1, "image_id": int(row.scene) + 1, "category_id": SCENE_SHAPES.index(row.kind) + 1,
                    "bbox": [row.x, row.y, row.w, row.h], "area": row.w * row.h, "iscrowd": 0,
                    **({"attributes": attributes[k]} if attributes else {})}
                   for k, row in enumerate(objects.rename(columns={"shape": "kind"}).itertuples())]
    return {"images": records, "categories": [{"id": i + 1, "name": s} for i, s in enumerate(SCENE_SHAPES)],
            "annotations": annotations}


def detection_attribute_schema(config: DetectionDemoConfig = DetectionDemoConfig()) -> AttributeSchema:
    shape_world = [
        Attribute(name="color", tags=SCENE_COLOURS, templates=("a {tag} {label}", "a {tag} shape")),
    ]
    return AttributeSchema(attributes=(*shape_world, *geometry_attributes(config.geometry())), task=TASK)


def build_detection_demo(folder: str | Path, config: DetectionDemoConfig = DetectionDemoConfig(), *,
                         progress: ProgressCallback = no_progress, checkpoint: Path | None = ASSET_DETECTOR,
                         save_trained_checkpoint: bool = False) -> Project:
    """Build the detection demo project in `folder` (which must not exist yet); nothing is left behind on failure."""
    # 1. Check the folder.
    folder = new_demo_folder(folder)
    # 2. The scenes of every split (seeded), and the annotations the detector learns from.
    counts = {"train": config.train_scenes, "val": config.val_scenes, "test": config.test_scenes,
              "pool": config.pool_scenes}
    scenes = {split: render_scenes(n, config.seed * 10 + k, config.scenes)
              for k, (split, n) in enumerate(counts.items())}
    taught = training_annotations(scenes["train"][1], config)
    grouped = {scene: (group[["x", "y", "w", "h"]].to_numpy(), group["shape"].tolist())
               for scene, group in taught.groupby("scene")}
    teach = [grouped.get(i, (np.zeros((0, 4)), [])) for i in range(config.train_scenes)]
    classes = list(SCENE_SHAPES)
    # 3. The detector: the stored one if it was trained on exactly these annotations, else trained now.
    fingerprint = training_fingerprint(teach, classes, config.detector)
    model = load_detector(checkpoint, classes, config.detector, fingerprint) if checkpoint else None
    if model is None:
        logger.info("training the demo detector (%d scenes)", config.train_scenes)
        model = train_detector(scenes["train"][0], teach, classes, config.detector, progress)
        if save_trained_checkpoint and checkpoint is not None:
            save_detector(checkpoint, model, classes, config.detector, fingerprint)
    # 4. Its detections, the COCO files and the project, built in a staging folder.
    with staged_folder(folder, "building") as staging:
        data = staging / "data"
        project = Project.create(staging, name="shape scenes detection demo")
        report = {"model": DETECTOR_NAME, "config": asdict(config), "planted_bugs": [asdict(b) for b in
                                                                                   config.planted_bugs()]}
        for split, (images, objects) in scenes.items():
            pool = split == "pool"
            found = detect(model, images, classes, progress=progress,
                           score_floor=config.pool_score_floor if pool else None)
            truth, results = write_coco_split(data, split, images, objects, found, config)
            manifest = load_coco(truth, {DETECTOR_NAME: results}, split=split, labelled=not pool,
                                 geometry=config.geometry(), progress=progress)
            if pool:  # what a tagger reads off each detection's crop: its colour (as val's tags are named)
                manifest.known_tags.update(pool_tags(images, manifest))
            project.import_manifest(manifest, author="hibug demo", kind="coco")
            report[split] = {"scenes": len(images), "objects": len(objects)}
            if not pool:
                report[split].update({name: manifest.object_evaluations[DETECTOR_NAME].summary[name]
                                      for name in ("AP", "AP50")})
        # what the detector was trained on (file names as the train split's): retraining starts from it
        (data / "train_annotations.json").write_text(json.dumps(coco_instances("train", scenes["train"][0], taught)))
        save_detector(staging / "models" / f"{DETECTOR_NAME}.pt", model, classes, config.detector, fingerprint)
        record_model(project, RecordedModel(DETECTOR_NAME, f"scene-fcos:models/{DETECTOR_NAME}.pt",
                                            training="data/train_annotations.json"))
        project.set_meta(POOL_LABELS_META, POOL_LABELS)
        project.set_meta("demo", json.dumps(report))
        save_schema(project, detection_attribute_schema(config), author="hibug demo",
                    note="the scenes' attributes (imported with the objects) and the measured geometry")
        project.close()
    logger.info("detection demo built in %s: %s", folder, {s: report[s] for s in counts})
    return Project.open(folder)
