"""The planted-bug benchmark for objects: a real detector (the detection demo's FCOS) trained per problem with bugs
planted in its training annotations (missed objects, bad boxes; single attributes and conjunctions), every slice finder
run on its validation errors with true and automatic tags (scored by hibug_core.bench.ranking)."""
from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import COLOUR_NAMES, measured_attributes
from hibug_core.attributes.schema import AttributeSchema
from hibug_core.bench.contest import contest, embeddings_of, task_of_report
from hibug_core.bench.ranking import PlantedBug
from hibug_core.bench.scoring import attribute_matches
from hibug_core.demo.detection import (
    DETECTOR_NAME,
    SIZES,
    DetectionDemoConfig,
    ObjectBug,
    coco_instances,
    object_tags,
    plant_bugs,
    write_coco_split,
)
from hibug_core.demo.scenes import SCENE_COLOURS, SCENE_SHAPES, render_scenes
from hibug_core.errors import HibugError, check_fields
from hibug_core.models.zoo.fitting import save_weights, stored_weights, with_weights
from hibug_core.models.zoo.scene_fcos import (
    DetectorConfig,
    build_detector,
    detect,
    save_detector,
    train_detector,
    training_fingerprint,
)
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.report import error_slices
from hibug_core.slices.search import CLASS
from hibug_core.store.attribute_versions import save_schema
from hibug_core.store.project import Project
from hibug_core.store.recorded_models import RecordedModel, record_model
from hibug_core.tagging.run import tag_project
from hibug_core.tasks import load_coco, task_of

logger = logging.getLogger(__name__)

GEOMETRY = ("object size", "object aspect ratio", "is truncated", "occlusion", "crowding", "horizontal position",
            "vertical position")
# tagger -> (the tag source it reads, the attributes it slices by)
TAGGERS = {"truth": ("imported", ["color", *GEOMETRY]),  # the scenes' true colours, the measured geometry
           "automatic": ("in force", ["dominant colour", *GEOMETRY])}  # the object's colour measured from its crop
VOCABULARY = {"color": list(SCENE_COLOURS), "dominant colour": list(COLOUR_NAMES), "object size": list(SIZES),
              "is truncated": ["yes", "no"], CLASS: list(SCENE_SHAPES)}


@dataclass(frozen=True)
class ObjectProblem:
    id: str
    bugs: tuple[ObjectBug, ...]
    seed: int


@dataclass(frozen=True)
class ObjectBenchConfig:
    problems: int = 6
    train_scenes: int = 1600
    val_scenes: int = 600
    top_n: int = 10  # Find Attr / Find Tag / Precision at this many reported slices
    encoder: str = "conse"  # embeds the objects' crops for the slice finders that cluster (cleanlab)
    detector: DetectorConfig = field(default_factory=lambda: DetectorConfig(epochs=6))
    seed: int = 0
    objectlab: bool = True  # with the slice finders: cleanlab's ObjectLab on the training annotations
    objectlab_folds: int = 0  # its predictions out of sample, by this many folds (0: the problem's detector, in sample;
    #                           3 folds measured no better, docs/results.md, at four times the training)
    objectlab_twin: bool = True  # ... and on a bug-free twin: the training images annotated correctly, a detector
    #                              trained on them (its flags are all false findings)
    min_ap50: float = 0.05  # a detector under this AP50 on val learnt nothing: its problem is drawn again...
    redraws: int = 2  # ... at most this many times, on other training scenes

    def __post_init__(self):
        check_fields(self, {"problems": (self.problems >= 1, "1 or more"), "redraws": (self.redraws >= 0, "0 or more"),
                            "min_ap50": (0 <= self.min_ap50 < 1, "a share in [0, 1)")})
        if self.objectlab_folds == 1 or self.objectlab_folds < 0:
            raise HibugError(f"objectlab_folds = {self.objectlab_folds}: give 2 or more folds, or 0 for the problem's "
                             "own detector (in sample)")


def object_problems(count: int, seed: int = 0) -> list[ObjectProblem]:
    """Problems of three planted bugs each, on distinct colours: a missing-annotation bug on one colour, a missing-
    annotation bug on a conjunction (a colour and a class), bad boxes on a conjunction (a class and large size)."""
    rng = np.random.default_rng(seed)
    problems = []
    for k in range(count):
        single, pair = rng.choice(SCENE_COLOURS, 2, replace=False)
        shape, boxed = rng.choice(SCENE_SHAPES, 2, replace=False)
        keep = float(rng.choice([0.0, 0.1]))
        bugs = (ObjectBug("missing", (("color", str(single)),), keep),
                ObjectBug("missing", (("color", str(pair)), ("class", str(shape))), keep),
                ObjectBug("bad boxes", (("class", str(boxed)), ("object size", "large")),
                          float(rng.choice([0.5, 0.6]))))
        problems.append(ObjectProblem(f"p{k}", bugs, seed * 100 + k))
    return problems


def _names(attribute: str, truth_name: str) -> bool:
    """Whether a reported attribute stands for a planted one (the class; the same name, or half its tags)."""
    if truth_name == "class":
        return attribute == CLASS
    return attribute_matches(attribute, VOCABULARY.get(attribute, []), truth_name, VOCABULARY.get(truth_name, []))


def _finds(definition, bug: ObjectBug) -> tuple[bool, bool]:
    """(the slice names every planted attribute, the slice names every planted condition: attribute and tag)."""
    has_attribute = all(any(_names(a, name) for a, _ in definition) for name, _ in bug.conditions)
    has_tag = all(any(_names(a, name) and t.lower() == tag.lower() for a, t in definition)
                  for name, tag in bug.conditions)
    return has_attribute, has_tag


BUG_TYPES = {"missing": "missing annotations", "bad boxes": "bad boxes"}  # an ObjectBug's kind as hibug types it
OBJECTLAB_SCORE_FLOOR = 0.05  # ObjectLab reads the detector's low-confidence outputs too (cleanlab's advice)


def planted_bugs(problem: ObjectProblem) -> list[PlantedBug]:
    return [PlantedBug(bug.conditions, BUG_TYPES[bug.kind]) for bug in problem.bugs]


def run_problem(folder: Path, problem: ObjectProblem, config: ObjectBenchConfig, contests: list,
                progress: ProgressCallback = no_progress, objectlab: list | None = None) -> dict:
    """Train the problem's detector (drawn again, on other training scenes, when it learns nothing), import its
    validation results as objects, and run every slice finder on each tag source's default report (to `contests`),
    and ObjectLab on the training annotations (its per-object figures to `objectlab`); what the problem was."""
    demo = DetectionDemoConfig(seed=config.seed, detector=config.detector)
    for attempt in range(config.redraws + 1):
        seed = problem.seed + 1000 * attempt
        train_images, train_objects = render_scenes(config.train_scenes, seed, demo.scenes)
        taught = plant_bugs(train_objects, problem.bugs, demo, seed + 17)
        teach = _teaching(taught, config.train_scenes)
        model, trained_s = stored_or_trained(folder / "detectors" / f"attempt-{attempt}.pt", train_images, teach,
                                             config, progress)
        images, objects = render_scenes(config.val_scenes, config.seed * 100 + 99, demo.scenes)  # one validation set
        truth, results = write_coco_split(folder / "data", "val", images, objects,
                                          detect(model, images, list(SCENE_SHAPES)), demo)
        manifest = load_coco(truth, {DETECTOR_NAME: results}, geometry=demo.geometry())
        ap50 = manifest.object_evaluations[DETECTOR_NAME].summary["AP50"]
        if ap50 >= config.min_ap50 or attempt == config.redraws:
            break
        logger.warning("%s: its detector learnt nothing (AP50 %.3f on val): drawn again on other training scenes",
                       problem.id, ap50)
    if config.objectlab:
        _objectlab(folder, problem, model, train_images, train_objects, taught, teach, demo, config, contests,
                   objectlab, progress)
    shutil.rmtree(folder / "project", ignore_errors=True)  # an earlier run's (the benchmark's own folder)
    project = Project.create_from_manifest(folder / "project", manifest)
    try:
        _training_side(project, folder, model, train_images, train_objects, taught, demo, teach, progress)
        schema = AttributeSchema(attributes=(*measured_attributes(), *geometry_attributes(demo.geometry())),
                                 task="detect shapes")
        save_schema(project, schema, author="benchmark")
        tag_project(project, views=task_of(project).views, attributes=["dominant colour"],
                    progress=progress)  # measured on each object's crop
        for tagger, (source, attributes) in TAGGERS.items():
            report = error_slices(project, DETECTOR_NAME, split="val", attributes=attributes, tags=source,
                                  check_tags=False)
            task = task_of_report(report, embeddings_of(project, report, config.encoder))
            contests.append(contest(task, planted_bugs(problem), same=_names, seed=problem.seed,
                                    labels={"problem": problem.id, "tags": tagger}))
        return {"problem": problem.id, "bugs": "; ".join(b.describe() for b in problem.bugs),
                "AP50": round(ap50, 3), "redrawn": attempt, "train_s": round(trained_s, 1)}
    finally:
        project.close()


def stored_or_trained(path: Path, images: list, teach: list, config: ObjectBenchConfig,
                      progress: ProgressCallback = no_progress) -> tuple[object, float]:
    """(the detector trained on these annotations, the seconds its training took): the one an earlier run stored at
    `path` if it was trained on exactly them (a run resumed after an interruption), else trained now and stored there
    in full precision, so that a resumed run measures what an uninterrupted one does."""
    classes = list(SCENE_SHAPES)
    about = {"classes": classes, "config": asdict(config.detector),
             "training_fingerprint": training_fingerprint(teach, classes, config.detector)}
    stored = stored_weights(path, **about)
    if stored is not None:
        return with_weights(build_detector(classes, config.detector), stored), float(stored["train_s"])
    start = time.perf_counter()
    model = train_detector(images, teach, classes, config.detector, progress)
    seconds = time.perf_counter() - start
    save_weights(path, model, **about, train_s=seconds)
    return model, seconds


def _training_side(project, folder: Path, model, images: list, objects: pd.DataFrame, taught: pd.DataFrame,
                   demo: DetectionDemoConfig, teach: list, progress: ProgressCallback) -> None:
    """What a user brings beside the validation split, as the detection demo does: the training images with their true
    objects and the detector's outputs on them, and the detector recorded with the annotations it was trained on (the
    evidence that types annotation bugs: objects.training_evidence)."""
    classes = list(SCENE_SHAPES)
    truth, results = write_coco_split(folder / "data", "train", images, objects, detect(model, images, classes), demo)
    project.import_manifest(load_coco(truth, {DETECTOR_NAME: results}, split="train", geometry=demo.geometry(),
                                      progress=progress), author="benchmark", kind="coco")
    kept = Path(project.folder)
    (kept / "data").mkdir(exist_ok=True)
    (kept / "data" / "train_annotations.json").write_text(json.dumps(coco_instances("train", images, taught)))
    save_detector(kept / "models" / f"{DETECTOR_NAME}.pt", model, classes, demo.detector,
                  training_fingerprint(teach, classes, demo.detector))
    record_model(project, RecordedModel(DETECTOR_NAME, f"scene-fcos:models/{DETECTOR_NAME}.pt",
                                        training="data/train_annotations.json"), author="benchmark")


def run_object_benchmark(folder: str | Path, config: ObjectBenchConfig = ObjectBenchConfig(), *,
                         contests: list, progress: ProgressCallback = no_progress,
                         objectlab: list | None = None) -> pd.DataFrame:
    """Every problem, one detector each: every slice finder's (bugs, problems) rows per problem and tag source added
    to `contests`, ObjectLab's per-object figures per problem to `objectlab`; one row per problem (its bugs, its
    detector's AP50)."""
    folder = Path(folder)
    rows = []
    for problem in object_problems(config.problems, config.seed):
        logger.info("object benchmark: %s: %s", problem.id, "; ".join(b.describe() for b in problem.bugs))
        rows.append(run_problem(folder / problem.id, problem, config, contests, progress, objectlab))
    return pd.DataFrame(rows)


def planted_objects(problem: ObjectProblem, objects: pd.DataFrame, taught: pd.DataFrame,
                    demo: DetectionDemoConfig) -> dict[str, np.ndarray]:
    """Per planted bug, the ids of the training objects it changed: those it left unannotated, or whose boxes it
    shrank."""
    tags = object_tags(objects, demo)
    annotated = objects.index.isin(taught.index)
    changed = {}
    for bug in problem.bugs:
        members = np.logical_and.reduce([(tags[a] == t).to_numpy() for a, t in bug.conditions])
        changed[bug.describe()] = objects.index[members & (~annotated if bug.kind == "missing" else annotated)]
    return changed


def out_of_sample_detections(images: list, teach: list, config: ObjectBenchConfig, folds: int, seed: int,
                             progress: ProgressCallback = no_progress, store: Path | None = None) -> list[list[dict]]:
    """Each training image's detections by a detector trained without it (`folds`-fold cross-validation over the
    images, seeded), down to OBJECTLAB_SCORE_FLOOR: the out-of-sample predictions cleanlab asks ObjectLab to be given
    "for the most accurate results"."""
    classes = list(SCENE_SHAPES)
    fold_of = np.random.default_rng(seed).permutation(len(images)) % folds
    found: list[list[dict]] = [[] for _ in images]
    for fold in range(folds):
        inside, outside = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
        chosen_images, chosen_teach = [images[i] for i in inside], [teach[i] for i in inside]
        model = (stored_or_trained(store / f"fold-{fold}.pt", chosen_images, chosen_teach, config, progress)[0]
                 if store is not None else train_detector(chosen_images, chosen_teach, classes, config.detector,
                                                          progress))
        for i, detections in zip(outside, detect(model, [images[i] for i in outside], classes,
                                                 score_floor=OBJECTLAB_SCORE_FLOOR, progress=progress)):
            found[i] = detections
    return found


def _teaching(annotations: pd.DataFrame, scenes: int) -> list:
    """Per scene, the detector's training pair: its boxes (x, y, w, h) and their classes."""
    grouped = {s: (g[["x", "y", "w", "h"]].to_numpy(), g["shape"].tolist()) for s, g in annotations.groupby("scene")}
    return [grouped.get(i, (np.zeros((0, 4)), [])) for i in range(scenes)]


def _objectlab(problem_folder: Path, problem: ObjectProblem, model, images: list, objects: pd.DataFrame,
               taught: pd.DataFrame, teach: list, demo: DetectionDemoConfig, config: ObjectBenchConfig, contests: list,
               objectlab: list | None, progress: ProgressCallback) -> None:
    """ObjectLab on the problem's training annotations and a detector's outputs on the training images (down to a
    score of OBJECTLAB_SCORE_FLOOR): out of sample, by cross-validation over the training images, as cleanlab advises
    (`config.objectlab_folds`; 0: the problem's own detector, in sample); its flags per object, and read as slices of
    the true tags."""
    from hibug_core.bench.objectlab import (
        TWIN_FLAGS,
        flagged_objects,
        objectlab_flags,
        objectlab_inputs,
        objectlab_package,
        per_object,
        per_slice,
    )
    from hibug_core.bench.ranking import score_answer

    def flags(model, annotations: pd.DataFrame, teach: list, name: str) -> pd.DataFrame:
        found = (out_of_sample_detections(images, teach, config, config.objectlab_folds, problem.seed + 29, progress,
                                          store=problem_folder / "detectors" / f"{name}-folds")
                 if config.objectlab_folds else detect(model, images, classes, score_floor=OBJECTLAB_SCORE_FLOOR,
                                                       progress=progress))
        labels, predictions, ids = objectlab_inputs(annotations, found, classes)
        return flagged_objects(objectlab_flags(labels, predictions), predictions, ids, objects)

    # 1. The problem: its planted annotations, the detector trained on them.
    start = time.perf_counter()
    classes = list(SCENE_SHAPES)
    flagged = flags(model, taught, teach, "problem")
    tags = object_tags(objects, demo).rename(columns={"class": CLASS})
    scored, summary = score_answer(per_slice(flagged, tags, max_depth=3, min_support=10), planted_bugs(problem),
                                   same=_names, top=config.top_n)
    labels_of = {"problem": problem.id, "tags": "truth", "method": "objectlab", "package": objectlab_package()}
    contests.append((pd.DataFrame([{**labels_of, **row} for row in scored]).drop(columns="package"),
                     pd.DataFrame([{**labels_of, "bug_free": False, "planted": len(problem.bugs), "failed": False,
                                    "seconds": round(time.perf_counter() - start, 3), **summary}])))
    read = {"problem": problem.id, **per_object(flagged, planted_objects(problem, objects, taught, demo))}
    # 2. Its bug-free twin: the same images annotated correctly, a detector trained on them; every flag is false.
    if config.objectlab_twin:
        start = time.perf_counter()
        clean = _teaching(objects, len(images))
        twin = None if config.objectlab_folds else stored_or_trained(problem_folder / "detectors" / "twin.pt", images,
                                                                     clean, config, progress)[0]
        flagged = flags(twin, objects, clean, "twin")
        _, summary = score_answer(per_slice(flagged, tags, max_depth=3, min_support=10), [], same=_names,
                                  top=config.top_n)
        contests.append((pd.DataFrame(), pd.DataFrame([{**labels_of, "bug_free": True, "planted": 0,
                                                         "failed": False, **summary,
                                                         "seconds": round(time.perf_counter() - start, 3)}])))
        read[TWIN_FLAGS] = len(flagged)
    if objectlab is not None:
        objectlab.append(read)


def quick(config: ObjectBenchConfig) -> ObjectBenchConfig:
    """A small run for tests: two problems, few scenes, one epoch."""
    return replace(config, problems=2, train_scenes=64, val_scenes=40, objectlab_folds=2,
                   detector=replace(config.detector, epochs=1, batch_size=16))
