"""COCO ground truth + model results as a validated manifest of objects: every ground-truth object and every false
positive is a sample, with its box, its image, its outcome per model and its measured geometry."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.beside import Beside
from hibug_core.config import IngestConfig
from hibug_core.errors import ManifestError, RowIssue
from hibug_core.ingest.images import inspect_images
from hibug_core.ingest.manifest import ModelOutputs, ValidatedManifest
from hibug_core.objects.coco import (
    BACKGROUND,
    DETECTION_KIND,
    MISSED,
    OBJECT_KIND,
    UNLABELLED,
    CocoGroundTruth,
    CocoResults,
    image_sizes_issues,
    read_ground_truth,
    read_results,
)
from hibug_core.objects.geometry import GeometryConfig, measure_objects
from hibug_core.objects.masks import stored
from hibug_core.objects.matching import (
    FALSE_POSITIVE,
    MatchConfig,
    Matches,
    by_id,
    by_keypoints,
    known_objects,
    match,
)
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.tasks.registry import claiming_coco, task_named


@dataclass
class ObjectEvaluation:
    """One model's matching, written with the samples: outcomes per sample row, COCO's summary, AP per class."""

    outcomes: pd.DataFrame  # row (manifest row), outcome, error_type, iou, predicted_class, pred_x..pred_h, ...
    summary: dict[str, float]
    per_class: pd.DataFrame
    settings: dict
    fixes: pd.DataFrame | None = None  # people: the keypoint AP if each error type were fixed


def model_names(results: list[str | Path] | dict[str, str | Path]) -> dict[str, Path]:
    """Results files by model name: given as {name: path}, or paths named by their file's stem."""
    if isinstance(results, dict):
        return {str(name): Path(path) for name, path in results.items()}
    named: dict[str, Path] = {}
    for path in map(Path, results):
        name = path.stem
        if name in named:
            raise ManifestError(str(path), [RowIssue(None, None, f"another results file is also named '{name}'; give "
                                                                 "each model a name (NAME=results.json)")])
        named[name] = path
    return named


def load_coco(ground_truth: str | Path | CocoGroundTruth, results: list[str | Path] | dict[str, str | Path], *,
              task: str | None = None, images_dir: str | Path | None = None, split: str = "val",
              match_config: MatchConfig = MatchConfig(),
              geometry: GeometryConfig = GeometryConfig(), config: IngestConfig = IngestConfig(),
              labelled: bool = True, progress: ProgressCallback = no_progress) -> ValidatedManifest:
    """Read, check and match a COCO instances file (or one read already) and one results file per model, ready for
    import as samples of the task that claims the files (or of `task`, where it can read them), matched as that task
    matches (hibug_core.tasks.registry.claiming_coco; Task.coco_matching).
    Images are found under `images_dir` (default: the ground truth's folder) by their file_name. labelled=False: the
    images are not annotated yet (a pool to select from): the instances file lists them with no annotations, and every
    detection becomes an unlabelled sample (nothing to match)."""
    # 1. Check the inputs: the split, the files and every record in them.
    if split not in config.allowed_splits:
        raise ManifestError(str(ground_truth), [RowIssue(None, None, f"unknown split '{split}'; use one of "
                                                                     f"{', '.join(config.allowed_splits)}")])
    named = model_names(results)
    progress("reading the ground truth", 0, 1 + len(named))
    truth = ground_truth if isinstance(ground_truth, CocoGroundTruth) else read_ground_truth(ground_truth)
    if not labelled and len(truth.annotations):
        raise ManifestError(truth.source, [RowIssue(0, None, f"an unlabelled split's instances file lists its images "
                                                             f"only, but this one has {len(truth.annotations)}; import "
                                                             "it as labelled, or leave its annotations out",
                                                    unit="annotations")])
    found: list[CocoResults] = []
    for done, (name, path) in enumerate(named.items(), start=1):
        found.append(read_results(path, truth, model=name))
        progress("reading results", done, 1 + len(named))
    claimed = claiming_coco(truth, found, task)
    # 2.-4. The images, the matching and the samples.
    folder = Path(images_dir).resolve() if images_dir else Path(truth.source).parent
    return objects_manifest(truth, found, folder, {iid: split for iid in truth.images.index}, task=claimed.name,
                            match_config=claimed.coco_matching(match_config), geometry=geometry, config=config,
                            labelled=labelled, progress=progress)


MEASURED_BESIDE_FROM = 10_000  # objects; below, starting a worker process (about 1.5 s) costs more than it saves
MATCHED_BESIDE_FROM = 50_000  # objects; below, sending them to a worker process costs more than matching them
# What matching a model in a worker adds, per object and detection: the worker's copy of the records and its matching
# (5.5 GiB for a million objects and 1.05 million detections) and the caller's own matching meanwhile.
MATCHING_BYTES = 6_000
CHECKED_BESIDE_FROM = 5_000  # images (about 0.3 ms each to check): fewer are checked before matching, in this process


def _no_measures() -> None:
    return None


def objects_manifest(truth: CocoGroundTruth, found: list[CocoResults], folder: Path, splits: dict[int, str], *,
                     task: str, match_config: MatchConfig = MatchConfig(), geometry: GeometryConfig = GeometryConfig(),
                     config: IngestConfig = IngestConfig(), labelled: bool = True,
                     progress: ProgressCallback = no_progress, tags: pd.DataFrame | None = None) -> ValidatedManifest:
    """Checked ground truth and results as a manifest of objects: images under `folder`, `splits` per image id
    (labelled=False: every detection is an unlabelled sample, nothing is matched). `tags`: the objects' own tags
    by annotation id, a column per attribute (a manifest's attr: columns); default: the annotations' attributes."""
    # 1. Something to import.
    used = sorted(set(truth.annotations["image_id"]).union(*(set(r.detections["image_id"]) for r in found)))
    if not used:
        raise ManifestError(truth.source, [RowIssue(None, "annotations", "nothing to import: the file has no "
                                                    "annotations and the results no detections" if labelled else
                                                    "nothing to import: unlabelled images are imported as the "
                                                    "model's detections, and the results have none")])
    # 2. The true shapes' measures, in a worker process while the images are checked and the models matched when
    # there are many (a mask's take 0.25 ms).
    ignored = truth.ignored(by_keypoints(truth, match_config))
    if labelled and len(truth.annotations) and ignored.all() and not (truth.annotations["iscrowd"] == 1).all():
        raise ManifestError(truth.source, [RowIssue(None, "keypoints", (
            "no person has a labelled keypoint (visibility 1 or 2), so OKS can score none of them (COCO's evaluation "
            "ignores such people): label their keypoints, or import the boxes alone with --task detection"),
            unit="annotations")])
    objects = truth.annotations[~ignored].reset_index(drop=True)
    objects["mask"] = (_stored_masks(by_id(truth, objects["id"].to_numpy()), truth.image_sizes)
                       if match_config.masks else None)
    job = task_named(task).truth_measures_job(truth, objects) if labelled else None
    with Beside(job or _no_measures, in_process=job is None or len(objects) < MEASURED_BESIDE_FROM) as measures:
        return _checked_and_matched(truth, found, used, folder, splits, objects, measures, task=task,
                                    match_config=match_config, geometry=geometry, config=config, labelled=labelled,
                                    progress=progress, tags=tags)


def _checked_and_matched(truth: CocoGroundTruth, found: list[CocoResults], used: list, folder: Path,
                         splits: dict[int, str], objects: pd.DataFrame, measures: Beside, *, task: str,
                         match_config: MatchConfig, geometry: GeometryConfig, config: IngestConfig, labelled: bool,
                         progress: ProgressCallback, tags: pd.DataFrame | None) -> ValidatedManifest:
    # 3. The images: each distinct file read, hashed and its size checked once; where there are many and every one
    # is there, in a worker process while the models are matched (a missing file is still said before any matching).
    names = truth.images["file_name"].reindex(used).tolist()
    paths = {iid: Path(folder, name).resolve() for iid, name in zip(used, names)}
    check = functools.partial(inspect_images, list(paths.values()), workers=config.workers,
                              check_size=config.image_check_size, within=config.image_roots)
    beside = labelled and len(paths) >= CHECKED_BESIDE_FROM and all(path.exists() for path in paths.values())
    if not beside:
        infos = _usable_images(truth, paths, *check(progress=progress), config)
    with Beside(check, in_process=not beside) as checking:
        # 4. Matching, model by model.
        matches = _every_match(truth, found if labelled else [], match_config, progress)
        if beside:
            progress("checking images", 0, len(paths))
            infos = _usable_images(truth, paths, *checking.result(), config)
            progress("checking images", len(paths), len(paths))
    if not labelled:
        return _unlabelled_manifest(truth, found, paths, infos, splits, geometry, match_config.confidence_threshold,
                                    task, match_config.masks)
    # 5. The samples: ground-truth objects, then each model's false positives.
    if tags is None:
        tags = pd.DataFrame(list(truth.annotations["attributes"]), index=truth.annotations["id"].to_numpy())
    return _manifest(truth, found, matches, objects, measures, paths, infos, splits, geometry, task, tags,
                     match_config.masks)


def _every_match(truth: CocoGroundTruth, found: list[CocoResults], config: MatchConfig,
                  progress: ProgressCallback) -> list[Matches]:
    """Each model's matching. Of several models with many objects, two at a time: the second in a worker process
    while this one matches the first (each is one core's work; a machine has two at least)."""
    matches: list[Matches] = []
    together = 2 if len(truth.annotations) >= MATCHED_BESIDE_FROM else 1
    for start in range(0, len(found), together):
        first, *other = found[start:start + together]
        records = len(truth.annotations) + (len(other[0].detections) if other else 0)
        with Beside(functools.partial(match, truth, other[0], config) if other else _no_measures,
                    in_process=not other, needs_bytes=MATCHING_BYTES * records) as beside:
            matches.append(match(truth, first, config))
            if other:
                matches.append(beside.result())
        progress("matching detections", len(matches), len(found))
    return matches


def _usable_images(truth: CocoGroundTruth, paths: dict, infos: dict, problems: dict, config: IngestConfig) -> dict:
    """The checked images' infos, or a ManifestError naming each image that cannot be used: unreadable, of another
    size than the file says, or the same file as another image."""
    issues = [RowIssue(int(truth.images.at[iid, "record"]), "file_name",
                       f"{problems[path]}: {truth.images.at[iid, 'file_name']}"
                       + (f" (looked for {path})" if problems[path] == "file not found" else ""), unit="images")
              for iid, path in paths.items() if path in problems]
    issues += image_sizes_issues(truth, {iid: (infos[p].width, infos[p].height) for iid, p in paths.items()
                                         if p in infos})
    first_of: dict[Path, int] = {}
    for iid, path in paths.items():  # one image file is one image, however it is named (a link, "a/../b.png")
        if path in first_of:
            issues.append(RowIssue(int(truth.images.at[iid, "record"]), "file_name", (
                f"'{truth.images.at[iid, 'file_name']}' is the same file as image {first_of[path]}'s "
                f"'{truth.images.at[first_of[path], 'file_name']}'; give each image once"), unit="images"))
        else:
            first_of[path] = iid
    if issues:
        raise ManifestError(truth.source, issues[:config.max_issues])
    return infos


def _manifest(truth: CocoGroundTruth, found: list[CocoResults], matches: list[Matches], objects: pd.DataFrame,
              measures: Beside, paths: dict, infos: dict, splits: dict[int, str], geometry: GeometryConfig, task: str,
              tags: pd.DataFrame, masks: bool = False) -> ValidatedManifest:
    names = truth.categories
    sizes = truth.image_sizes if masks else {}
    parts = [pd.DataFrame({
        "image_id": objects["image_id"].to_numpy(), "kind": OBJECT_KIND, "owner": None,
        "source_id": objects["id"].to_numpy(), "label": [names[c] for c in objects["category_id"]],
        "x": objects["x"].to_numpy(), "y": objects["y"].to_numpy(), "w": objects["w"].to_numpy(),
        "h": objects["h"].to_numpy(), "area": objects["area"].to_numpy(), "keypoints": objects["keypoints"].to_numpy(),
        "mask": objects["mask"].to_numpy(object),
    })]
    for result, matched in zip(found, matches):
        false = np.flatnonzero(matched.detections["outcome"].to_numpy() == FALSE_POSITIVE)
        detections = result.detections.iloc[false]
        parts.append(pd.DataFrame({
            "image_id": detections["image_id"].to_numpy(), "kind": DETECTION_KIND, "owner": result.model,
            "source_id": false, "label": BACKGROUND, "x": detections["x"].to_numpy(),
            "y": detections["y"].to_numpy(), "w": detections["w"].to_numpy(), "h": detections["h"].to_numpy(),
            "area": (detections["w"] * detections["h"]).to_numpy(), "keypoints": detections["keypoints"].to_numpy(),
            "mask": _stored_masks([result.records[i] for i in false], sizes) if masks else None}))
    rows = pd.concat(parts, ignore_index=True)
    n = len(rows)
    samples, object_columns = _sample_columns(truth, rows, paths, infos, splits)
    models, evaluations = {}, {}
    is_object = (rows["kind"] == OBJECT_KIND).to_numpy()
    object_rows = np.flatnonzero(is_object)
    goes_with = np.where(is_object, rows["source_id"], -1)  # per row, the object that does not occlude it: itself
    for result, matched in zip(found, matches):
        prediction = np.full(n, None, dtype=object)
        confidence, score = np.full(n, np.nan), np.full(n, np.nan)
        outcome = matched.objects.reindex(rows.loc[is_object, "source_id"].to_numpy())
        prediction[object_rows] = np.where(outcome["outcome"] == "true positive", outcome["predicted_class"], MISSED)
        confidence[object_rows] = np.where(outcome["outcome"] == "true positive", outcome["confidence"], np.nan)
        score[object_rows] = outcome["score"].to_numpy()
        mine = np.flatnonzero((rows["kind"] == DETECTION_KIND).to_numpy() & (rows["owner"] == result.model).to_numpy())
        records = rows["source_id"].to_numpy()[mine]
        detections = result.detections.iloc[records]
        prediction[mine] = [names[c] for c in detections["category_id"]]
        confidence[mine] = detections["score"].to_numpy()
        score[mine] = 0.0
        models[result.model] = ModelOutputs(prediction.tolist(), confidence, score)
        detail = matched.detections.iloc[records]
        goes_with[mine] = detail["object"].to_numpy()  # the object a false positive duplicates or misplaces
        outcomes = pd.concat([
            pd.DataFrame({"row": object_rows, "outcome": outcome["outcome"].to_numpy(object),
                          "error_type": outcome["error_type"].to_numpy(object), "iou": outcome["iou"].to_numpy(),
                          "predicted_class": outcome["predicted_class"].to_numpy(object),
                          "pred_x": outcome["pred_x"].to_numpy(), "pred_y": outcome["pred_y"].to_numpy(),
                          "pred_w": outcome["pred_w"].to_numpy(), "pred_h": outcome["pred_h"].to_numpy(),
                          "nearest_label": None, **_predicted_skeletons(outcome, result),
                          **_predicted_masks(outcome, result, sizes, masks)}),
            pd.DataFrame({"row": mine, "outcome": FALSE_POSITIVE, "error_type": detail["error_type"].to_numpy(object),
                          "iou": detail["iou"].to_numpy(), "predicted_class": prediction[mine],
                          "pred_x": detections["x"].to_numpy(), "pred_y": detections["y"].to_numpy(),
                          "pred_w": detections["w"].to_numpy(), "pred_h": detections["h"].to_numpy(),
                          "nearest_label": detail["nearest_label"].replace("", None).to_numpy(object),
                          **NO_SKELETONS, **NO_MASKS}),
        ], ignore_index=True)
        evaluations[result.model] = ObjectEvaluation(outcomes, matched.summary, matched.per_class, matched.settings,
                                                     matched.fixes)
    measured = measure_objects(rows[["x", "y", "w", "h"]].to_numpy(), rows["area"].to_numpy(),
                               rows["image_id"].to_numpy(), samples[["width", "height"]].to_numpy(),
                               goes_with, objects[["id", "image_id", "x", "y", "w", "h"]],
                               geometry)
    shapes = measures.result()  # what the true shapes say (skeletons, masks), per object
    if shapes is not None:
        shapes = shapes.set_axis(object_rows).reindex(rows.index)
        measured = pd.concat([measured, shapes], axis=1).astype(object)
        measured = measured.where(measured.notna(), None)  # a false positive has no true shape to measure
    known_tags = {name: measured[name].tolist() for name in measured.columns}
    annotation_ids = objects["id"].to_numpy()
    for name in tags.columns:  # the objects' own tags (CVAT's attributes, a manifest's attr: columns); a false
        if name in known_tags:  # positive has none
            raise ManifestError(truth.source, [RowIssue(None, "attributes", f"'{name}' is also a measured attribute; "
                                                                            "rename it", unit="annotations")])
        given = pd.Categorical(tags[name]).take(tags.index.get_indexer(annotation_ids), allow_fill=True)
        codes = np.full(n, -1, dtype=given.codes.dtype)
        codes[object_rows] = given.codes
        known_tags[name] = pd.Categorical.from_codes(codes, given.categories)
    return ValidatedManifest(truth.source, samples, models, known_tags, [], "image", object_columns, evaluations,
                             task=task, measured_with=geometry.to_json(),
                             crowd_regions=crowd_regions(truth, sorted(set(rows["image_id"])),
                                                         ~truth.annotations["id"].isin(objects["id"]).to_numpy()))


def crowd_regions(truth: CocoGroundTruth, image_ids: list, ignored: np.ndarray) -> dict[str, str]:
    """Each image's regions COCO ignores (class, box, mask as stored: crowds, and people with no labelled keypoint
    where OKS scores them), by image key (its file name), as one JSON text: they are no samples, yet a detection on
    one is ignored, so a model added later must be matched against the same. ignored: CocoGroundTruth.ignored."""
    crowd = truth.annotations[ignored]
    records = {record["id"]: record for record in truth.dataset["annotations"]}
    regions: dict[int, list] = {int(i): [] for i in image_ids}
    for aid, iid, cid, x, y, w, h in crowd[["id", "image_id", "category_id", "x", "y", "w", "h"]].itertuples(
            index=False):
        if int(iid) in regions:
            regions[int(iid)].append([truth.categories[cid], [x, y, w, h], records[aid].get("segmentation")])
    names = truth.images["file_name"]
    return {names.at[iid]: json.dumps(sorted(found, key=json.dumps)) for iid, found in regions.items()}


NO_SKELETONS = {"keypoint_types": None, "keypoint_similarity_json": None, "pred_keypoints_json": None}
NO_MASKS = {"pred_mask_json": None, "boundary_iou": np.nan}


def _stored_masks(records: list[dict], sizes: dict[int, tuple[int, int]]) -> list[str | None]:
    """Each record's mask as the store keeps it (a compressed run-length encoding); None where it has none."""
    return [stored(r["segmentation"], *sizes[int(r["image_id"])]) if r.get("segmentation") is not None else None
            for r in records]


def _predicted_masks(outcome: pd.DataFrame, result: CocoResults, sizes: dict, masks: bool) -> dict[str, np.ndarray]:
    """Matched by masks: the mask that went with each object (found, or near when missed), as stored, and the
    Boundary IoU of the two; None and NaN where there is none."""
    if not masks:
        return NO_MASKS
    shown = outcome["detection"].to_numpy()
    near = np.flatnonzero(shown >= 0)
    kept = np.full(len(shown), None, dtype=object)
    kept[near] = _stored_masks([result.records[int(d)] for d in shown[near]], sizes)
    return {"pred_mask_json": kept, "boundary_iou": outcome["boundary_iou"].to_numpy(float)}


def _predicted_skeletons(outcome: pd.DataFrame, result: CocoResults) -> dict[str, np.ndarray]:
    """A person's keypoint types, each keypoint's similarity, and the keypoints of the prediction that went with them
    (found, or near when missed), as stored; None where there is none (and for boxes)."""
    if "keypoint_types" not in outcome:
        return NO_SKELETONS
    shown = outcome["detection"].to_numpy()
    points = result.detections["keypoints"].to_numpy(object)
    # rounded as Python rounds (to the nearest 4-decimal float); an unlabelled keypoint's NaN is JSON's null
    similarity = [None if not isinstance(v, np.ndarray) else
                  json.dumps([round(x, 4) for x in v.tolist()]).replace("NaN", "null")
                  for v in outcome["keypoint_similarity"]]
    return {"keypoint_types": outcome["keypoint_types"].to_numpy(object),
            "keypoint_similarity_json": np.array(similarity, dtype=object),
            "pred_keypoints_json": np.array([json.dumps(points[d]) if d >= 0 and points[d] is not None else None
                                             for d in shown], dtype=object)}


def _sample_columns(truth: CocoGroundTruth, rows: pd.DataFrame, paths: dict, infos: dict, splits: dict[int, str]
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The samples' image columns and their object columns (image key, kind, owner, box, keypoints)."""
    image_ids, at = np.unique(rows["image_id"].to_numpy(), return_inverse=True)  # each image's columns once
    info = [infos[paths[i]] for i in image_ids.tolist()]
    file_names = truth.images["file_name"].reindex(image_ids).to_numpy(object)[at]
    is_object = (rows["kind"] == OBJECT_KIND).to_numpy()
    source, owner = rows["source_id"].to_numpy(), rows["owner"].to_numpy(object)
    keys = np.empty(len(rows), dtype=object)
    keys[is_object] = [f"{f}#object-{s}" for f, s in zip(file_names[is_object], source[is_object].tolist())]
    keys[~is_object] = [f"{f}#{o}-detection-{s}" for f, o, s in zip(file_names[~is_object], owner[~is_object],
                                                                    source[~is_object].tolist())]
    samples = pd.DataFrame({
        "sample_key": keys, "image_path": np.array([str(paths[i]) for i in image_ids.tolist()], dtype=object)[at],
        "label": rows["label"].to_numpy(object), "split": rows["image_id"].map(splits).to_numpy(object),
        "content_hash": np.array([i.content_hash for i in info], dtype=object)[at],
        "width": np.array([i.width for i in info], dtype=np.int64)[at],
        "height": np.array([i.height for i in info], dtype=np.int64)[at],
    })
    object_columns = pd.DataFrame({
        "image_key": file_names, "object_kind": rows["kind"].to_numpy(object), "owner": rows["owner"].to_numpy(object),
        "box_x": rows["x"].to_numpy(float), "box_y": rows["y"].to_numpy(float), "box_w": rows["w"].to_numpy(float),
        "box_h": rows["h"].to_numpy(float),
        "keypoints_json": [None if p is None else json.dumps(p) for p in rows["keypoints"]],
        "mask_json": rows["mask"].to_numpy(object) if "mask" in rows else None,
    })
    return samples, object_columns


def _unlabelled_manifest(truth: CocoGroundTruth, found: list[CocoResults], paths: dict, infos: dict,
                         splits: dict[int, str], geometry: GeometryConfig, reported: float,
                         task: str, masks: bool = False) -> ValidatedManifest:
    """Every detection of every model as an unlabelled sample; its occlusion and crowding measured against the
    objects its model reports (confidence from `reported`, the operating point; known_objects): the only objects
    known in an image nobody has annotated, as the ground-truth objects are in a labelled one."""
    names = truth.categories
    rows = pd.concat([pd.DataFrame({
        "image_id": r.detections["image_id"].to_numpy(), "kind": DETECTION_KIND, "owner": r.model,
        "source_id": np.arange(len(r.detections)), "label": None, "score": r.detections["score"].to_numpy(),
        "x": r.detections["x"].to_numpy(),
        "y": r.detections["y"].to_numpy(), "w": r.detections["w"].to_numpy(), "h": r.detections["h"].to_numpy(),
        "keypoints": r.detections["keypoints"].to_numpy(),
        "mask": _stored_masks(r.records, truth.image_sizes) if masks else None}) for r in found], ignore_index=True)
    samples, object_columns = _sample_columns(truth, rows, paths, infos, splits)
    n = len(rows)
    models, evaluations = {}, {}
    for result in found:
        mine = np.flatnonzero((rows["owner"] == result.model).to_numpy())
        detections = result.detections.iloc[rows["source_id"].to_numpy()[mine]]
        prediction = np.full(n, None, dtype=object)
        confidence = np.full(n, np.nan)
        prediction[mine] = [names[c] for c in detections["category_id"]]
        confidence[mine] = detections["score"].to_numpy()
        models[result.model] = ModelOutputs(prediction.tolist(), confidence, np.full(n, np.nan))
        outcomes = pd.DataFrame({
            "row": mine, "outcome": UNLABELLED, "error_type": None, "iou": np.nan, "predicted_class": prediction[mine],
            "pred_x": detections["x"].to_numpy(), "pred_y": detections["y"].to_numpy(),
            "pred_w": detections["w"].to_numpy(), "pred_h": detections["h"].to_numpy(), "nearest_label": None,
            **NO_SKELETONS, **NO_MASKS})
        evaluations[result.model] = ObjectEvaluation(outcomes, {}, pd.DataFrame(), {"labelled": False})
    measured = []
    for result in found:  # each model's detections against the objects that model reports, not another's
        mine = rows.index[rows["owner"] == result.model]
        own = rows.loc[mine].reset_index(drop=True)
        objects, same = known_objects(own, reported)
        measured.append(measure_objects(own[["x", "y", "w", "h"]].to_numpy(), (own["w"] * own["h"]).to_numpy(),
                                        own["image_id"].to_numpy(), samples.loc[mine, ["width", "height"]].to_numpy(),
                                        same, objects, geometry).set_axis(mine))
    measured = pd.concat(measured).sort_index()
    known_tags = {name: measured[name].tolist() for name in measured.columns}
    return ValidatedManifest(truth.source, samples, models, known_tags, [], "image", object_columns, evaluations,
                             task=task, measured_with=geometry.to_json())
