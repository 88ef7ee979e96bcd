"""The per-row object manifest, for teams with their own format: one row per object (and per unmatched detection),
read into the same COCO matching as COCO files; every bad cell is named by row and column."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import MAX_ATTRIBUTES
from hibug_core.config import IngestConfig
from hibug_core.errors import Issues, ManifestError, RowIssue, rename_hint
from hibug_core.ingest.columns import check_images, model_column, named_models, parse_numbers, read_splits
from hibug_core.ingest.manifest import DEFAULT_MODEL
from hibug_core.ingest.table import explained, normalised_table
from hibug_core.objects.coco import RESERVED_NAMES, parse_ground_truth, parse_results
from hibug_core.objects.geometry import GeometryConfig
from hibug_core.objects.matching import COCO_PERSON_KEYPOINTS, COCO_PERSON_SKELETON, MatchConfig
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.tasks.object_import import objects_manifest
from hibug_core.values import share_problem

_NUMBERS = re.compile(r"[\s,;\[\]()]+")
# The same separators in RE2, Arrow's: Python's \s is every str.isspace character, RE2's only ASCII's less \v.
_ARROW_NUMBERS = r"[\x{09}-\x{0d}\x{1c}-\x{1f}\x{85}\p{Z},;\[\]()]+"


def is_box_column(column: str) -> bool:
    """Whether a manifest column holds boxes ('box', 'pred_box', 'pred_box:<model>')."""
    return column in ("box", "pred_box") or column.startswith("pred_box:")


def _numbers(text: str) -> list[float] | None:
    """A cell of numbers ('1 2 3', '1,2,3' or '[1, 2, 3]') as finite floats; None if it is not that."""
    try:
        values = [float(p) for p in _NUMBERS.split(text.strip()) if p]
    except ValueError:
        return None
    return values if all(math.isfinite(v) for v in values) else None


def _box_cells(cells: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column of box cells ('x y w h', 'x,y,w,h' or '[x, y, w, h]') as an (n, 4) array, and where a cell is four
    finite numbers: the whole column at once by Arrow, as a manifest may hold millions of boxes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.array(cells.astype(str).to_numpy(object), type=pa.string())
    words = pc.utf8_trim_whitespace(pc.replace_substring_regex(text, _ARROW_NUMBERS, " "))
    parts = pc.split_pattern(words, " ")
    four = pc.equal(pc.list_value_length(parts), 4).to_numpy(zero_copy_only=False)
    values = np.full((len(cells), 4), np.nan)
    numbers = pc.list_flatten(parts.filter(pa.array(four)))
    values[four] = parse_numbers(pd.Series(numbers.to_numpy(zero_copy_only=False), dtype=object)).reshape(-1, 4)
    return values, four & np.isfinite(values).all(axis=1)


def _points(text: str) -> list[float] | None:
    """'x y v x y v ...' (or with commas, or a JSON list) as finite numbers, three per keypoint; None if not."""
    values = _numbers(text)
    return values if values and len(values) % 3 == 0 else None


OBJECT_COLUMNS = ("image", "split", "box", "label", "keypoints", "pred_box", "prediction", "confidence",
                  "pred_keypoints")


def _model_columns(columns: list[str], default_model: str, issues: Issues) -> dict[str, dict[str, str | None]]:
    """Per model, its pred_box, prediction and confidence columns (and pred_keypoints, for people)."""
    present = set(columns)
    named = ([(default_model, None)] if "pred_box" in present else []) + \
        [(name, name) for name in named_models(columns, "pred_box")]
    models: dict[str, dict[str, str | None]] = {}
    for name, spelt in named:
        found = {role: model_column(role, spelt) if model_column(role, spelt) in present else None
                 for role in ("pred_box", "prediction", "confidence", "pred_keypoints")}
        models[name] = {"box": found["pred_box"], "prediction": found["prediction"],
                        "confidence": found["confidence"], "keypoints": found["pred_keypoints"]}
        for role in ("prediction", "confidence"):
            if found[role] is None:
                issues.add(None, model_column(role, spelt), f"model '{name}' has a '{found['pred_box']}' column but "
                           f"no '{model_column(role, spelt)}' column")
    return models


def validate_object_manifest(frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str = DEFAULT_MODEL,
                             match_config: MatchConfig = MatchConfig(), geometry: GeometryConfig = GeometryConfig(),
                             config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress,
                             task: str):
    """Check every row and column of an object manifest, match each model's detections by COCO's rules and return
    the validated manifest of objects (image paths relative to `base_dir`). People carry 'keypoints' (x y v per
    keypoint) and per model 'pred_keypoints' (x y score per keypoint): 17 are COCO's person keypoints, with its
    names, limbs and sigmas; another count is named 'keypoint 1', ... and needs its sigmas in match_config."""
    frame, notes = normalised_table(frame.reset_index(drop=True), source, config.max_issues)
    # 1. Structure: which columns play which role.
    issues = Issues(config.max_issues)
    columns = list(frame.columns)
    unnamed = [c for c in columns if c not in OBJECT_COLUMNS and ":" not in c]  # where a mistyped name would be
    if "image" not in columns:
        issues.add(None, "image", "required column is missing" + rename_hint("image", unnamed))
    if "box" in columns and "label" not in columns:
        issues.add(None, "label", "required with 'box': the class of each object" + rename_hint("label", unnamed))
    models = _model_columns(columns, default_model, issues)
    tag_columns = {c.split(":", 1)[1].strip(): c for c in columns if c.startswith("attr:")}
    if "" in tag_columns:
        issues.add(None, tag_columns[""], "an attribute column is named 'attr:<attribute>'; give this one a name")
    if len(tag_columns) > MAX_ATTRIBUTES:  # each is sliced by, with every other
        issues.add(None, None, f"{len(tag_columns):,} attribute columns (attr:*), more than the {MAX_ATTRIBUTES} a "
                               "project holds; keep the ones worth slicing by")
    if "box" not in columns and not models:
        issues.add(None, "box", "an object manifest needs 'box' (x y w h of each object) and per model 'pred_box'"
                   + (rename_hint("box", unnamed) or rename_hint("pred_box", unnamed)))
    if issues.items:
        raise ManifestError(source, issues.items, found=issues)
    # 2. Every cell: images, splits, boxes, classes, confidences.
    n = len(frame)
    has_box = (frame["box"] != "").to_numpy() if "box" in columns else np.zeros(n, bool)
    boxes: dict[int, list[float]] = {}
    classes = frame["label"].to_numpy(object) if "label" in columns else np.full(n, "", dtype=object)
    if has_box.any():
        values, ok = _box_cells(frame["box"])
        ok &= (values[:, 2] > 0) & (values[:, 3] > 0)
        for i in np.flatnonzero(has_box & ~ok):
            issues.add(i, "box", f"'{frame.at[i, 'box']}' is not x y width height in pixels, width and height "
                                 "positive")
        for i in np.flatnonzero(has_box & (classes == "")):
            issues.add(i, "label", "empty label; every object needs its class")
        for i in np.flatnonzero(has_box & np.isin(classes, list(RESERVED_NAMES))):
            issues.add(i, "label", f"{classes[i]} is how hibug names the missing object; rename the class")
        boxes = dict(zip(np.flatnonzero(has_box & ok).tolist(), values[has_box & ok].tolist()))
    check_images(frame, "image", issues)
    split_of_row = read_splits(frame, "split" if "split" in columns else None, config, issues)
    points: dict[tuple[str, int], list[float]] = {}  # (column, row) -> the row's keypoints
    point_columns = [c for c in (["keypoints"] if "keypoints" in columns else []) + [
        plan["keypoints"] for plan in models.values() if plan["keypoints"]]]
    for column in point_columns:
        rows_with = np.flatnonzero((frame[column] != "").to_numpy())
        for i in rows_with:
            values = _points(frame.at[i, column])
            visibility_ok = values is not None and (column != "keypoints" or all(v in (0, 1, 2) for v in values[2::3]))
            if not visibility_ok:
                what = "x y v (v 0, 1 or 2)" if column == "keypoints" else "x y score"
                issues.add(i, column, f"'{str(frame.at[i, column])[:60]}' is not {what} for each keypoint")
            else:
                points[column, int(i)] = values
        if column == "keypoints":
            for i in np.flatnonzero(has_box & (frame[column] == "").to_numpy()):
                issues.add(i, column, "empty; every person needs their keypoints (x y 0 for one not labelled)")
    counts = {len(v) // 3 for v in points.values()}
    if len(counts) == 1 and counts != {len(COCO_PERSON_KEYPOINTS)} and match_config.keypoint_sigmas is None:
        issues.add(None, point_columns[0], (
            f"{next(iter(counts))} keypoints per person: a per-row manifest gives COCO's {len(COCO_PERSON_KEYPOINTS)} "
            "person keypoints (their names, limbs and OKS sigmas are COCO's); for another skeleton import a COCO "
            "keypoints file whose category lists its 'keypoints', 'skeleton' and 'sigmas'"))
    if len(counts) > 1:
        common = pd.Series([len(v) // 3 for v in points.values()]).mode().iat[0]
        for (column, i), values in points.items():
            if len(values) // 3 != common:
                issues.add(i, column, f"{len(values) // 3} keypoints, where other keypoint lists of this file have "
                                      f"{common}; every person's keypoints, true and predicted, list the same ones")
    detections: dict[str, dict[int, tuple[list[float], str, float]]] = {}
    for name, plan in models.items():
        present = (frame[plan["box"]] != "").to_numpy()
        values, ok = _box_cells(frame[plan["box"]])
        ok &= (values[:, 2] >= 0) & (values[:, 3] >= 0)
        predicted = frame[plan["prediction"]].to_numpy(object)
        confidence = pd.to_numeric(frame[plan["confidence"]], errors="coerce").to_numpy(float)
        share = np.isfinite(confidence) & (confidence >= 0) & (confidence <= 1)
        for i in np.flatnonzero(present & ~(ok & (predicted != "") & share)):  # the first problem of each row
            if not ok[i]:
                issues.add(i, plan["box"], f"'{frame.at[i, plan['box']]}' is not x y width height in pixels")
            elif predicted[i] == "":
                issues.add(i, plan["prediction"], "empty prediction for a predicted box")
            else:
                issues.add(i, plan["confidence"], share_problem(frame.at[i, plan["confidence"]],
                                                                "the detection's confidence"))
        good = np.flatnonzero(present & ok & (predicted != "") & share)
        detections[name] = {i: (box, label, score) for i, box, label, score in zip(
            good.tolist(), values[good].tolist(), predicted[good].tolist(), confidence[good].tolist())}
    images = frame["image"]
    split_by_image = pd.DataFrame({"image": images, "split": split_of_row}).groupby("image")["split"].unique()
    for image, found in split_by_image.items():
        if len(found) > 1 and image:
            row = int(np.flatnonzero(((images == image) & (split_of_row != found[0])).to_numpy())[0])
            issues.add(row, "split",
                       f"image '{image}' is given several splits ({', '.join(found)}); an image's objects "
                                     "share one split")
    if issues.items:
        raise ManifestError(source, explained(frame, issues.items), found=issues)
    # 3. The same objects and detections as COCO documents, so one matching serves both formats.
    codes, distinct = pd.factorize(images.to_numpy(object))
    labels = sorted(set(classes[list(boxes)]) | {d[1] for m in detections.values() for d in m.values()})
    category = {label: k + 1 for k, label in enumerate(labels)}
    truth_rows = sorted(boxes)
    skeleton = _skeleton(counts.pop()) if counts else {}
    document = {"images": [{"id": k + 1, "file_name": image} for k, image in enumerate(distinct)],
                "categories": [{"id": k, "name": label, **skeleton} for label, k in category.items()],
                "annotations": [{"id": j + 1, "image_id": int(codes[i]) + 1,
                                 "category_id": category[classes[i]],
                                 "bbox": boxes[i], "iscrowd": 0,
                                 **({"keypoints": points["keypoints", i]} if ("keypoints", i) in points else {})}
                                for j, i in enumerate(truth_rows)]}
    truth = _translated(lambda: parse_ground_truth(document, source), source, {"annotations": truth_rows})
    found = []
    for name, mine in detections.items():
        rows = sorted(mine)
        column = models[name]["keypoints"]
        records = [{"image_id": int(codes[i]) + 1, "category_id": category[mine[i][1]], "bbox": mine[i][0],
                    "score": mine[i][2], **({"keypoints": points[column, i]} if (column, i) in points else {})}
                   for i in rows]
        found.append(_translated(lambda records=records, name=name: parse_results(records, truth, source, model=name),
                                 source, {"results": rows}))
    split_of_image = {k + 1: split_by_image[image][0] for k, image in enumerate(distinct)}
    # 4. Images, matching, samples.
    # the objects' tags a column at a time (a dict of tags per object made most of a large import's time and memory)
    tags = pd.DataFrame({name: _tag_column(frame[column])[truth_rows] for name, column in tag_columns.items()},
                        index=pd.RangeIndex(1, len(truth_rows) + 1))  # by annotation id
    manifest = objects_manifest(truth, found, Path(base_dir), split_of_image, task=task, match_config=match_config,
                                geometry=geometry, config=config, progress=progress, tags=tags)
    manifest.notes[:0] = notes
    return manifest


def _tag_column(cells: pd.Series) -> pd.Categorical:
    """A column of tags in the stored form ('' where there is none) as a categorical, NaN where there is none."""
    values = cells.array if isinstance(cells.dtype, pd.CategoricalDtype) else pd.Categorical(cells.to_numpy(object))
    return values.remove_categories([""]) if "" in values.categories else values


def _skeleton(count: int) -> dict:
    """What a category of people with `count` keypoints says of them: COCO's names and limbs for its 17."""
    if count == len(COCO_PERSON_KEYPOINTS):
        return {"keypoints": list(COCO_PERSON_KEYPOINTS), "skeleton": [list(limb) for limb in COCO_PERSON_SKELETON]}
    return {"keypoints": [f"keypoint {k + 1}" for k in range(count)]}


def _translated(parse, source: str, rows_of: dict[str, list[int]]):
    """Run a COCO parse of records built from manifest rows; its record-level problems are told as row problems."""
    try:
        return parse()
    except ManifestError as error:
        issues = [RowIssue(rows_of[i.unit][i.row] + 1, "box" if i.column == "bbox" else i.column, i.message)
                  if i.unit in rows_of and i.row is not None else i for i in error.issues]
        raise ManifestError(source, issues) from None
