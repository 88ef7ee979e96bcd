"""An object model's repair round: pool images chosen by the objects in them that fall in error slices (any selection
method, ranking the model's detections), their annotations added to what it was trained on, the model fine-tuned,
and every held-out object found or not after."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.errors import ModelLoadError
from hibug_core.image_loader import open_image
from hibug_core.models.object_models import (
    OBJECT_FAMILIES,
    DetectorError,
    ObjectModelAdapter,
    TrainingSet,
    coco_training_set,
)
from hibug_core.models.registry import MODELS, load_model
from hibug_core.objects.coco import OBJECT_KIND, read_ground_truth, read_results
from hibug_core.objects.matching import TRUE_POSITIVE, MatchConfig, known_objects, match, stored_match_config
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry
from hibug_core.repair.expected_failures import slice_failures, slice_rates
from hibug_core.repair.loop import CONTROL, RepairError, RepairRound, RoundResult
from hibug_core.repair.names import repaired_name
from hibug_core.repair.selection import (
    SELECTION_METHODS,
    SelectionConfig,
    SelectionError,
    frame,
    pool_masks,
    resolve_budget,
    taken_slices,
)
from hibug_core.safe_files import folder_within
from hibug_core.slices.search import TagMatrix
from hibug_core.store.recorded_models import POOL_LABELS_META, recorded_model
from hibug_core.tasks.object_results import add_results, ground_truth_file

FINE_TUNE_RATE = 5e-4  # the peak of the fine-tuning schedule when none is given (a quarter of the demo's training)
FINE_TUNE_EPOCHS = 3


def object_model(project, model: str):
    """The adapter of a recorded model of objects that hibug can fine-tune and run (hibug_core.store.recorded_models),
    with the annotations it was trained on; DetectorError saying what to do when only its results were imported."""
    recorded = recorded_model(project, model)
    if recorded is None or recorded.training is None:
        families = "; ".join(f"{e.spelling}: {e.help}" for e in MODELS if e.name in OBJECT_FAMILIES)
        raise DetectorError(f"hibug cannot retrain '{model}': only its results were imported. Record its network "
                            f"and the annotations it was trained on: `hibug record {project.folder} '{model}' --spec "
                            f"FAMILY:CHECKPOINT --training TRAIN.json` ({families}), or retrain it yourself on the "
                            "exported selection")
    try:
        adapter = load_model(recorded.spec, root=project.folder)
    except ModelLoadError as error:
        raise DetectorError(f"the recorded model '{model}' cannot be loaded: {error}") from None
    if not isinstance(adapter, ObjectModelAdapter):
        raise DetectorError(f"'{model}' was recorded as {recorded.spec}, which is not a model of objects")
    return adapter, recorded


def training_images(samples: pd.DataFrame, objects: pd.DataFrame) -> int:
    """What an object model learnt from: the distinct images of the training split's objects."""
    train = objects.index.intersection(samples.index[samples["split"] == "train"])
    return int(objects.loc[train, "image_key"].nunique())


def pool_detections(report, objects: pd.DataFrame, model: str, pool_split: str) -> pd.DataFrame:
    """The model's detections in the pool's (unlabelled) images, as selection rows, with their image and box
    (`objects`: the project's); a detection that repeats a stronger one (IoU 0.5 or more) is the same object and
    left out."""
    samples = report.samples.join(objects, how="inner")
    pool = samples[(samples["split"] == pool_split) & (samples["owner"] == model)]
    if len(pool):
        boxes = pd.DataFrame({"image_id": pool["image_key"].to_numpy(), "score": pool["confidence"].to_numpy(),
                              "x": pool["box_x"].to_numpy(), "y": pool["box_y"].to_numpy(),
                              "w": pool["box_w"].to_numpy(), "h": pool["box_h"].to_numpy()})
        _, same = known_objects(boxes, reported=0.0)
        pool = pool[same == np.arange(len(pool))]
    if pool.empty:
        raise SelectionError(f"'{model}' has no detections in '{pool_split}' images; import the pool's images with the "
                             f"model's results as unlabelled (`hibug import PROJECT --coco images.json --results "
                             f"{model}=results.json --split {pool_split} --unlabelled`)")
    return pool


def select_pool_images(report, config: SelectionConfig | None = None, *, project, model: str | None = None
                       ) -> pd.DataFrame:
    """Pool images to label for a detector, one row each (index: the sample id of its first chosen detection): the
    selection method ranks the model's detections, and an image is taken when the first of its detections is;
    expected failures ranks images by the likeliest failure among their objects (object_failure_chance). The budget
    counts images: a count, or a share of the training images."""
    # 1. Check inputs: the pool's detections and the budget in images.
    config = config or SelectionConfig()
    model = model or report.model
    samples, objects = report.samples, project.objects()
    pool = pool_detections(report, objects, model, config.pool_split)
    images = min(resolve_budget(config.budget, training_images(samples, objects)), int(pool["image_key"].nunique()))
    by_image = IMAGE_SELECTIONS.find(config.method)
    if by_image is not None:  # a method with its own rule for images of objects
        return by_image.build(report=report, pool=pool, images=images, config=config, project=project)
    # 2. Rank detections with the method, asking for more until enough distinct images are chosen.
    asked = images
    while True:
        chosen = SELECTION_METHODS.build(config.method, report=report, pool=pool, budget=min(asked, len(pool)),
                                         config=config, project=project)
        keys = pool.loc[chosen.index, "image_key"]
        if keys.nunique() >= images or asked >= len(pool):
            break
        asked *= 2
    # 3. One row per image, in the order its first detection was chosen.
    first = ~keys.duplicated()
    table = chosen[first.to_numpy()].head(images).copy()
    table.insert(0, "image_key", keys[first].head(images).to_numpy())
    table["detections"] = keys.value_counts().reindex(table["image_key"]).to_numpy()
    table["order"] = np.arange(len(table))
    table.attrs.update(budget=images, unspent=images - len(table))
    return table


def object_failure_chance(report, pool: pd.DataFrame, slices: pd.DataFrame, operating_point: float
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(each pool object's chance of being a failure, the slice that says most about it). Below the operating point
    an object the model sees is missed if it is really there, so its confidence stands for that chance; above it,
    the detection is a failure if it is wrong, 1 - confidence. Either is scaled by how often the model fails on
    validation objects like it: the shrunk failure rate of the worst taken error slice its tags put it in."""
    _, _, failures, counts, overall = slice_failures(report, slices)
    rate, owner = slice_rates(pool_masks(report, slices, pool), failures, counts, overall, overall)
    confidence = pool["confidence"].to_numpy(float)
    return rate * np.where(confidence < operating_point, confidence, 1 - confidence), owner


# Selection methods (SELECTION_METHODS names) that choose images of objects by a rule of their own, instead of ranking
# detections and taking each image at its first; each: (report, pool, images, config, project) -> the table.
IMAGE_SELECTIONS = Registry("selection of images of objects")


@IMAGE_SELECTIONS.register("expected failures", "images ranked by the likeliest failure among their objects")
def _by_expected_failures(report, pool: pd.DataFrame, images: int, config: SelectionConfig, project) -> pd.DataFrame:
    """The images whose likeliest failure among their objects is likeliest (HiBug's taken slices,
    object_failure_chance); the max, not the sum: a sum favours crowded images over failing ones."""
    slices = taken_slices(report, config.beta)
    settings = project.object_evaluation(report.model, report.split)
    operating_point = (settings or {}).get("settings", {}).get("confidence_threshold", MatchConfig.confidence_threshold)
    chance, owner = object_failure_chance(report, pool, slices, operating_point)
    expected = pd.Series(chance).groupby(pool["image_key"].to_numpy()).max()
    tie = np.random.default_rng(config.seed).random(len(expected))
    ranked = expected.index[np.lexsort((tie, -expected.to_numpy()))][:images]
    best = pd.Series(chance, index=np.arange(len(pool))).groupby(pool["image_key"].to_numpy()).idxmax()
    rows = best.loc[ranked].to_numpy()  # each image's likeliest failure stands for it
    table = frame(pool, rows, [slices.iloc[owner[r]] if owner[r] >= 0 else None for r in rows],
                  [f"expected failures: its likeliest failure {expected[k]:.2f} (of {n} objects seen)" for k, n in
                   zip(ranked, pool["image_key"].value_counts().reindex(ranked))], images, poor=report.poor)
    table.insert(0, "image_key", np.asarray(ranked, dtype=object))
    table["detections"] = pool["image_key"].value_counts().reindex(ranked).to_numpy()
    return table


def held_out(project, model: str, split: str) -> tuple[pd.DataFrame, object, Path]:
    """The split's ground-truth objects (index: sample id, with their COCO annotation id), the model's stored outcome
    on them, and the ground truth file they were imported from."""
    path = ground_truth_file(project, model, split)
    evaluation = project.object_evaluation(model, split)
    objects = project.objects(model)
    samples = project.samples(model)
    rows = samples[(samples["split"] == split)].join(objects[["object_kind", "outcome"]], how="inner")
    rows = rows[rows["object_kind"] == OBJECT_KIND].copy()
    rows["annotation"] = rows["sample_key"].str.rsplit("#object-", n=1).str[1].astype(np.int64)
    return rows, stored_match_config(evaluation["settings"]), path


def results_file(runner, network, truth, images: list, path: Path, progress: ProgressCallback) -> Path:
    """Run `network` on the ground truth's images (opened, in its order) and write its detections as a COCO results
    file at `path`."""
    detections = runner.predict(images, network=network, progress=progress)
    ids = truth.images.index.to_numpy()
    index = {c: k for k, c in truth.categories.items()}
    # each detection as the model gave it (its box, score, and keypoints or mask where it has them), in COCO's words
    records = [{"image_id": int(ids[i]), "category_id": index[d["category"]],
                **{key: value for key, value in d.items() if key != "category"}}
               for i, found in enumerate(detections) for d in found]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records))
    return path


def found_after(runner, network, truth, eval_images: list, held: pd.DataFrame, config: MatchConfig, folder: Path,
                name: str, progress: ProgressCallback) -> tuple[np.ndarray, dict]:
    """Run `network` on the held-out images, match with the same settings; (each held-out object found, COCO's
    summary)."""
    path = results_file(runner, network, truth, eval_images, folder / f"{name}.json", progress)
    matched = match(truth, read_results(path, truth, model=name), config)
    outcome = matched.objects["outcome"].reindex(held["annotation"].to_numpy())
    return (outcome == TRUE_POSITIVE).to_numpy(), matched.summary


class ObjectRepairRound(RepairRound):
    """An object model's round: held-out objects found or not before; pool images chosen by the objects in them,
    their annotations added to what it was trained on; the model fine-tuned; the held-out objects found after."""

    def __init__(self, project, report, config, *, training_count: int, nouns,
                 progress: ProgressCallback = no_progress, author: str | None = None):
        # 1. Check inputs (its data and retraining were checked against the task by run_repair): a retrainable model
        # and the pool's labels.
        model = report.model
        self.runner, recorded = object_model(project, model)
        labels = config.labels or project.meta().get(POOL_LABELS_META)
        if not labels:
            raise RepairError("the selected pool images need their annotations: export the selection, label it, and "
                              "give the COCO file (labels)")
        self.labels = project.folder / labels
        held, self.match_config, truth_path = held_out(project, model, config.eval_split)
        self.truth = read_ground_truth(truth_path)
        # 2. What it was trained on, the held-out images and objects.
        progress("reading the training images", 0, 1)
        self.trained = coco_training_set(project.folder / recorded.training)
        self.eval_images = []
        for name in self.truth.images["file_name"]:
            self.eval_images.append(open_image(truth_path.parent / name))
        self.project, self.report, self.config, self.progress = project, report, config, progress
        self.author = author
        self._opened: dict[str, tuple] = {}  # split -> (ground truth, images): the recorded splits' other than eval
        self.measure, self.samples = nouns.measure, nouns.samples  # the task's words: "people found", "people"
        self.held = held
        # coded from the frame the report's rows were coded from: its categories are theirs
        self.held_tags = self.planted_tags = TagMatrix.from_frame(report.all_tags, held.index)
        self.before = (held["outcome"] == TRUE_POSITIVE).to_numpy()
        self.training_count = training_count
        self.ap_before = project.object_evaluation(model, config.eval_split)["summary"]["AP"]
        tune = config.retrain.fine_tune
        self.epochs, self.rate = tune.epochs or FINE_TUNE_EPOCHS, tune.learning_rate or FINE_TUNE_RATE

    def _split_images(self, split: str) -> tuple:
        """(the split's ground truth, its images opened), read once per round however many models are recorded."""
        if split not in self._opened:
            truth_path = ground_truth_file(self.project, self.report.model, split)
            truth = read_ground_truth(truth_path)
            self._opened[split] = truth, [open_image(truth_path.parent / n) for n in truth.images["file_name"]]
        return self._opened[split]

    def _record(self, network, name: str, folder: Path, stem: str, note: dict) -> None:
        """Store the repaired model's outputs on the slices' split and the held-out one, matched as the model's own
        were (a second model of the project, to compare with hibug compare or the Compare page)."""
        for split in dict.fromkeys((self.config.eval_split, self.config.slice_split)):
            if split == self.config.eval_split:
                truth, path = self.truth, folder / f"{stem}.json"  # run on the held-out images already
            else:
                truth, images = self._split_images(split)
                path = results_file(self.runner, network, truth, images, folder / f"{stem}-{split}.json",
                                    self.progress)
            add_results(self.project, name, path, split, truth=truth, author=self.author, note=note)

    def new_data(self, method: str, seed: int, budget: int):
        if method == CONTROL:
            return TrainingSet([], []), None, 0
        chosen = select_pool_images(self.report, replace(self.config.selection, method=method, seed=seed,
                                                         budget=budget), project=self.project, model=self.report.model)
        new = coco_training_set(self.labels, list(chosen["image_key"]))
        return new, chosen, len(new.images)

    def retrain(self, method: str, seed: int, data, run_id: int) -> RoundResult:
        tune = replace(self.config.retrain.fine_tune, epochs=self.epochs, learning_rate=self.rate, seed=seed)
        network = self.runner.fine_tune(self.trained, data, lam=self.config.retrain.lam, tune=tune,
                                        progress=self.progress)
        folder = folder_within(self.project.folder, self.project.folder / "models" / "tuning" / f"repair-{run_id}")
        stem = f"{method.replace(' ', '-')}-s{seed}"
        checkpoint = self.runner.save(network, folder / f"{stem}.pt")
        after, summary = found_after(self.runner, network, self.truth, self.eval_images, self.held,
                                     self.match_config, folder, stem, self.progress)
        if self.config.record_models:
            self._record(network, repaired_name(self.report.model, run_id, method, seed), folder, stem,
                         {"repair_run": run_id, "method": method, "seed": seed, "checkpoint": str(checkpoint)})
        return RoundResult(after, len(data.images), {"AP before": self.ap_before, "AP after": summary["AP"],
                                                     "checkpoint": str(checkpoint)})
