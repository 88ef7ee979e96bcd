"""Reading COCO ground truth and results files; every bad record is named by file, record index and field."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import MAX_ATTRIBUTES
from hibug_core.errors import Issues, ManifestError, RowIssue
from hibug_core.image_loader import MAX_PIXELS
from hibug_core.metrics import BACKGROUND  # the label of a false positive: no object of any class is there
from hibug_core.objects import masks
from hibug_core.safe_files import TABLE_MAX_BYTES, FileRefused, read_checked
from hibug_core.values import (
    ValueRefused,
    finite_number,
    finite_numbers,
    share_problem,
    shown,
    stored_or_why,
    stored_or_why_often,
)

MISSED = "(missed)"  # the prediction of a ground-truth object no detection found
RESERVED_NAMES = (BACKGROUND, MISSED)
OBJECT_KIND, DETECTION_KIND = "object", "detection"  # a ground-truth object; a detection that found none
UNLABELLED = "unlabelled"  # the outcome of a detection in images nobody has annotated yet (a pool)
MAX_ISSUES = 200


@dataclass
class CocoGroundTruth:
    """A validated COCO instances file: `dataset` is what faster-coco-eval reads (records as given, defaults filled)."""

    source: str
    dataset: dict
    images: pd.DataFrame  # index: image id; file_name, width, height, record
    categories: dict[int, str]  # id -> name
    keypoints: dict[int, list[str]]  # category id -> keypoint names (pose)
    annotations: pd.DataFrame  # id, image_id, category_id, x, y, w, h, area, iscrowd, keypoints, attributes, record
    skeletons: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # category id -> limbs (0-based pairs)
    sigmas: dict[int, tuple[float, ...]] = field(default_factory=dict)  # category id -> its own OKS sigmas

    @property
    def has_keypoints(self) -> bool:
        return bool(self.keypoints) and bool(self.annotations["keypoints"].notna().any())

    def ignored(self, by_keypoints: bool) -> np.ndarray:
        """Per annotation, whether COCO's evaluation ignores it (a detection on it is neither right nor wrong, and it
        is no sample): a crowd region; and where people are scored by OKS, one with no labelled keypoint, which OKS
        cannot score (pycocotools ignores it the same way)."""
        ignored = self.annotations["iscrowd"].to_numpy() == 1
        if by_keypoints:
            ignored |= np.array([not (isinstance(p, list) and any(v > 0 for v in p[2::3]))
                                 for p in self.annotations["keypoints"]], dtype=bool)
        return ignored

    @property
    def has_masks(self) -> bool:
        """Whether its objects are outlined by masks (every non-crowd annotation has a 'segmentation')."""
        return bool(self.dataset["annotations"]) and all(
            "segmentation" in record for record in self.dataset["annotations"] if not record["iscrowd"])

    @cached_property
    def image_sizes(self) -> dict[int, tuple[int, int]]:
        """(width, height) per image id: what a mask's encoding is drawn at; (0, 0) where the file does not say."""
        return {int(i): (int(w), int(h)) if pd.notna(w) and pd.notna(h) and w and h else (0, 0)
                for i, w, h in self.images[["width", "height"]].itertuples()}


@dataclass
class CocoResults:
    """A validated COCO results file of one model: detection i is record i (its COCO id is i + 1)."""

    source: str
    model: str
    records: list[dict]
    detections: pd.DataFrame  # image_id, category_id, x, y, w, h, score, keypoints, record

    @property
    def has_masks(self) -> bool:
        """Whether every detection comes with its mask (a 'segmentation'); a model that found nothing gave no box
        without one either (it is read as a model of masks that found nothing)."""
        return all("segmentation" in record for record in self.records)


def read_json(path: Path) -> object:
    """A JSON file, or ManifestError saying what is wrong with it."""
    path = Path(path)
    try:
        raw = read_checked(path, max_bytes=TABLE_MAX_BYTES, what="a JSON file")
    except FileRefused as error:
        raise ManifestError(str(path), [RowIssue(None, None, str(error))]) from None
    except OSError as error:
        raise ManifestError(str(path), [RowIssue(None, None, f"cannot read the file ({error.strerror})")]) from None
    if not raw.strip():
        raise ManifestError(str(path), [RowIssue(None, None, "the file is empty")])
    try:
        return json.loads(raw)
    except UnicodeDecodeError as error:
        raise ManifestError(str(path), [RowIssue(None, None, f"not UTF-8 text (byte {error.start}); save it as "
                                                             "UTF-8")]) from None
    except json.JSONDecodeError as error:
        raise ManifestError(str(path), [RowIssue(None, None, f"not valid JSON: {error.msg} at line {error.lineno}, "
                                                             f"column {error.colno}")]) from None
    except RecursionError:
        raise ManifestError(str(path), [RowIssue(None, None, "not readable: nested too deeply")]) from None


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_box(record: dict, index: int, unit: str, issues: Issues, *, positive: bool) -> list[float] | None:
    box = record.get("bbox")
    if not isinstance(box, list) or len(box) != 4 or not finite_numbers(box):
        issues.add(index, "bbox", f"must be [x, y, width, height], four numbers in pixels; found {_short(box)}",
                   unit=unit)
        return None
    if (box[2] <= 0 or box[3] <= 0) if positive else (box[2] < 0 or box[3] < 0):
        issues.add(index, "bbox", f"width and height must be {'positive' if positive else '0 or more'}; found "
                                  f"{box[2]:g} x {box[3]:g}", unit=unit)
        return None
    return [float(v) for v in box]


def _check_keypoints(record: dict, index: int, unit: str, names: list[str], issues: Issues, *,
                     visibility: bool) -> list[float] | None:
    points = record.get("keypoints")
    if points is None:
        return None
    expected = 3 * len(names)
    if not isinstance(points, list) or len(points) != expected or not finite_numbers(points):
        issues.add(index, "keypoints", f"must be {expected} numbers (x, y, v for each of {len(names)} keypoints); "
                                       f"found {_short(points)}", unit=unit)
        return None
    if visibility and not set(points[2::3]) <= {0, 1, 2}:
        issues.add(index, "keypoints", "every third number is a visibility flag: 0, 1 or 2", unit=unit)
        return None
    return list(map(float, points))


def far_outside(xs, ys, width: int, height: int) -> tuple[float, float] | None:
    """The first point (x, y) farther than one image size outside an image `width` x `height` (None: none is, or the
    size is unknown): geometry that far away is no object of the image, and drawing it would cost without bound."""
    if not (width and height):
        return None
    for x, y in zip(xs, ys):
        if not (-width <= x <= 2 * width and -height <= y <= 2 * height):
            return float(x), float(y)
    return None


def _far_result(box: list[float], points: list[float] | None, width: int, height: int) -> tuple[str, str] | None:
    """(field, why) when a result's box or keypoints lie far outside its image (far_outside); None when they do not."""
    for field_name, far in (("bbox", far_outside([box[0], box[0] + box[2]], [box[1], box[1] + box[3]], width, height)),
                            ("keypoints", None if points is None else
                             far_outside(points[0::3], points[1::3], width, height))):
        if far is not None:
            return field_name, (f"has a point ({far[0]:.6g}, {far[1]:.6g}) far outside its image ({width} x {height});"
                                " results are in the pixels of the image the ground truth's width and height describe")
    return None


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _records(document: dict, key: str, issues: Issues) -> list:
    records = document.get(key)
    if not isinstance(records, list):
        issues.add(None, None, f"a COCO instances file needs a '{key}' list; found {_short(records)}", unit=key)
        return []
    return records


def read_ground_truth(path: str | Path) -> CocoGroundTruth:
    """Read and check a COCO instances file (images, categories, annotations with boxes, optional keypoints and
    iscrowd); raise ManifestError naming every bad record."""
    path = Path(path).resolve()
    return parse_ground_truth(read_json(path), str(path))


def parse_ground_truth(document, source: str) -> CocoGroundTruth:
    """read_ground_truth of a document already read; `source` names it in messages and resolves its images."""
    # 1. Structure: an object with the three lists.
    path = Path(source)
    if not isinstance(document, dict):
        raise ManifestError(str(path), [RowIssue(None, None, "a COCO instances file is a JSON object with 'images', "
                                                             "'annotations' and 'categories'")])
    issues = Issues(MAX_ISSUES)
    images_in, categories_in, annotations_in = (_records(document, key, issues)
                                                for key in ("images", "categories", "annotations"))
    # 2. The categories: names, keypoint names, skeletons and sigmas.
    categories: dict[int, str] = {}
    keypoints: dict[int, list[str]] = {}
    skeletons: dict[int, list[tuple[int, int]]] = {}
    sigmas: dict[int, tuple[float, ...]] = {}
    category_records = []
    for i, record in enumerate(categories_in):
        if not isinstance(record, dict):
            issues.add(i, None, "must be an object with 'id' and 'name'", unit="categories")
            continue
        cid, name = record.get("id"), record.get("name")
        stored = stored_or_why(name) if isinstance(name, str) else None
        if not _integer(cid):
            issues.add(i, "id", f"must be an integer; found {_short(cid)}", unit="categories")
        elif cid in categories:
            issues.add(i, "id", f"{cid} is given twice", unit="categories")
        elif stored is None:
            issues.add(i, "name", f"must be a non-empty text; found {_short(name)}", unit="categories")
        elif isinstance(stored, ValueRefused):
            issues.add(i, "name", f"{shown(name)} {stored}", unit="categories")
        elif (name := stored) in RESERVED_NAMES:
            issues.add(i, "name", f"{name} is how hibug names the missing object; rename the category",
                       unit="categories")
        elif name in categories.values():
            issues.add(i, "name", f"'{name}' is the name of another category too", unit="categories")
        else:
            categories[cid] = name
            names = record.get("keypoints")
            if names is not None:
                stored_names = [stored_or_why(n) for n in names] if isinstance(names, list) else []
                if not stored_names or not all(isinstance(n, str) for n in stored_names):
                    issues.add(i, "keypoints", "must be a list of keypoint names (non-empty texts, one line each)",
                               unit="categories")
                else:
                    names = stored_names
                    keypoints[cid] = names
                    limbs = _skeleton(record.get("skeleton"), len(names), i, issues)
                    if limbs:
                        skeletons[cid] = limbs
                    stated = _sigmas(record.get("sigmas"), len(names), i, issues)
                    if stated:
                        sigmas[cid] = stated
            category_records.append({"id": cid, "name": name, **({"keypoints": names} if names else {})})

    # 3. The images: ids, file names and sizes.
    image_rows, image_records = {}, []
    for i, record in enumerate(images_in):
        if not isinstance(record, dict):
            issues.add(i, None, "must be an object with 'id' and 'file_name'", unit="images")
            continue
        iid, file_name = record.get("id"), record.get("file_name")
        width, height = record.get("width"), record.get("height")
        if not _integer(iid):
            issues.add(i, "id", f"must be an integer; found {_short(iid)}", unit="images")
        elif iid in image_rows:
            issues.add(i, "id", f"{iid} is given twice (also images[{image_rows[iid]['record']}])", unit="images")
        elif not isinstance(file_name, str) or not file_name.strip():
            issues.add(i, "file_name", f"must be a non-empty path; found {_short(file_name)}", unit="images")
        elif any(v is not None and not (_integer(v) and v > 0) for v in (width, height)):
            issues.add(i, "width" if not (_integer(width) and width > 0) else "height",
                       "must be a positive whole number of pixels", unit="images")
        elif width and height and width * height > MAX_PIXELS:
            issues.add(i, "width", f"{width} x {height} is more than the {MAX_PIXELS:,} pixels hibug reads in one "
                                   "image; downscale it", unit="images")
        else:
            image_rows[iid] = {"file_name": file_name, "width": width, "height": height, "record": i}
            image_records.append({"id": iid, "file_name": file_name, "width": width, "height": height})

    # 4. The annotations: ids, their image and category, boxes in pixels, keypoints, attributes.
    rows, annotation_records, seen_ids = [], [], {}
    for i, record in enumerate(annotations_in):
        if not isinstance(record, dict):
            issues.add(i, None, "must be an object with 'id', 'image_id', 'category_id' and 'bbox'", unit="annotations")
            continue
        aid, iid, cid = record.get("id"), record.get("image_id"), record.get("category_id")
        crowd = record.get("iscrowd", 0)
        if not _integer(aid):
            issues.add(i, "id", f"must be an integer; found {_short(aid)}", unit="annotations")
            continue
        if aid in seen_ids:
            issues.add(i, "id", f"{aid} is given twice (also annotations[{seen_ids[aid]}])", unit="annotations")
            continue
        seen_ids[aid] = i
        if not _integer(iid) or iid not in image_rows:  # true == 1 in Python: a yes/no is no id
            issues.add(i, "image_id", f"{_short(iid)} is not the id of an image in 'images'", unit="annotations")
            continue
        if not _integer(cid) or cid not in categories:
            issues.add(i, "category_id", f"{_short(cid)} is not the id of a category in 'categories'",
                       unit="annotations")
            continue
        if not _integer(crowd) or crowd not in (0, 1):
            issues.add(i, "iscrowd", f"must be 0 or 1; found {_short(crowd)}", unit="annotations")
            continue
        box = _check_box(record, i, "annotations", issues, positive=True)
        if box is None:
            continue
        image = image_rows[iid]
        segmentation = record.get("segmentation")
        if segmentation is not None and segmentation != []:
            problem = masks.segmentation_problem(segmentation, image["width"], image["height"])
            if problem:
                issues.add(i, "segmentation", problem, unit="annotations")
                continue
            # converted once (polygons merged, as pycocotools does): every evaluation reads it as it is
            segmentation = masks.compressed(segmentation, image["width"], image["height"])
        else:
            segmentation = None
        area = record.get("area")  # where the file leaves it out, as pycocotools counts it (only then: it costs)
        if area is None:
            area = box[2] * box[3] if segmentation is None else masks.area(segmentation, image["width"],
                                                                           image["height"])
        if not finite_number(area) or area < 0:
            issues.add(i, "area", f"must be a number of square pixels, 0 or more; found {_short(area)}",
                       unit="annotations")
            continue
        if image["width"] and (box[0] >= image["width"] or box[1] >= image["height"] or box[0] + box[2] <= 0
                               or box[1] + box[3] <= 0):
            issues.add(i, "bbox", f"{_short(record['bbox'])} lies outside its image ({image['width']} x "
                                  f"{image['height']}); boxes are [x, y, width, height] in pixels", unit="annotations")
            continue
        points = None
        if cid in keypoints and "keypoints" in record:
            points = _check_keypoints(record, i, "annotations", keypoints[cid], issues, visibility=True)
            if points is None:
                continue
            labelled = [k for k in range(0, len(points), 3) if points[k + 2] > 0]
            far = far_outside([points[k] for k in labelled], [points[k + 1] for k in labelled], image["width"] or 0,
                              image["height"] or 0)
            if far is not None:
                issues.add(i, "keypoints", f"has a point ({far[0]:.6g}, {far[1]:.6g}) far outside its image "
                                           f"({image['width']} x {image['height']})", unit="annotations")
                continue
        elif "keypoints" in record and record["keypoints"]:
            issues.add(i, "keypoints", f"category {categories[cid]!r} names no keypoints; add its 'keypoints' list",
                       unit="annotations")
            continue
        tags = _tag_texts(record.get("attributes") or {})
        if tags is None:
            issues.add(i, "attributes", "must map attribute names to tags (text, yes/no or whole numbers, one line "
                                        f"each); found {_short(record.get('attributes'))}", unit="annotations")
            continue
        clean = {"id": aid, "image_id": iid, "category_id": cid, "bbox": box, "area": float(area),
                 "iscrowd": int(crowd), **({"segmentation": segmentation} if segmentation is not None else {})}
        if points is not None:
            clean["keypoints"] = points
            clean["num_keypoints"] = int(sum(1 for v in points[2::3] if v > 0))
        annotation_records.append(clean)
        rows.append((aid, iid, cid, *box, float(area), int(crowd), points, tags, i))
    # 5. Across the file (boxes in pixels, not shares of the image; objects per image bounded; masks for every
    # object or none); every problem raised at once; the tables.
    if not issues.items and rows and image_rows:
        _check_not_normalised(rows, image_rows, issues)
        _check_crowded([r[1] for r in rows], "annotations", issues)
        named = set().union(*(r[-2] for r in rows))  # the annotations' own attributes: each one is sliced by
        if len(named) > MAX_ATTRIBUTES:
            issues.add(None, "attributes", f"{len(named):,} attribute names, more than the {MAX_ATTRIBUTES} a project "
                                           "holds; keep the ones worth slicing by", unit="annotations")
        _check_masks_everywhere(annotation_records, [r[-1] for r in rows], issues)
    if issues.items:
        raise ManifestError(str(path), issues.items, found=issues)
    if not image_rows:
        raise ManifestError(str(path), [RowIssue(None, None, "no images", unit="images")])
    annotations = pd.DataFrame(rows, columns=["id", "image_id", "category_id", "x", "y", "w", "h", "area", "iscrowd",
                                              "keypoints", "attributes", "record"])
    images = pd.DataFrame.from_dict(image_rows, orient="index")
    images.index.name = "image_id"
    dataset = {"images": image_records, "categories": category_records, "annotations": annotation_records}
    return CocoGroundTruth(str(path), dataset, images, categories, keypoints, annotations, skeletons, sigmas)


def _check_crowded(image_ids: list, unit: str, issues: Issues) -> None:
    """An image holding more objects (or results) than hibug measures on one image is refused, named."""
    image, count = Counter(image_ids).most_common(1)[0]
    if count > masks.MAX_OBJECTS_PER_IMAGE:
        issues.add(None, "image_id", f"image {image} has {count:,} {unit}, more than the "
                                     f"{masks.MAX_OBJECTS_PER_IMAGE:,} hibug measures on one image", unit=unit)


def _check_masks_everywhere(records: list[dict], indices: list[int], issues: Issues) -> None:
    """A ground truth whose objects have masks needs a mask on every object (a mask set where some objects have none
    would be matched by masks without them); the first few without one are named by their record."""
    without = [index for record, index in zip(records, indices)
               if "segmentation" not in record and not record["iscrowd"]]  # a crowd region may go without
    outlined = sum("segmentation" in record for record in records)
    if not without or not outlined:
        return
    for index in without[:5]:
        issues.add(index, "segmentation", f"has no mask, while {outlined:,} other objects have "
                                          "one; give every object its mask (a polygon list or a run-length "
                                          "encoding), or none for a box project", unit="annotations")


def _skeleton(edges, count: int, index: int, issues: Issues) -> list[tuple[int, int]]:
    """A category's 'skeleton' (COCO's limbs: pairs of 1-based keypoint numbers) as 0-based pairs; none when absent."""
    if edges is None:
        return []
    if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 and all(
            _integer(v) and 1 <= v <= count for v in e) for e in edges):
        issues.add(index, "skeleton", f"must be a list of [a, b] pairs of keypoint numbers from 1 to {count}; found "
                                      f"{_short(edges)}", unit="categories")
        return []
    return [(a - 1, b - 1) for a, b in edges]


def _sigmas(values, count: int, index: int, issues: Issues) -> tuple[float, ...]:
    """A category's own OKS sigmas (one positive number per keypoint), where it states them."""
    if values is None:
        return ()
    if not isinstance(values, list) or len(values) != count or not all(finite_number(v) and v > 0 for v in values):
        issues.add(index, "sigmas", f"must be {count} positive numbers, one OKS sigma per keypoint; found "
                                    f"{_short(values)}", unit="categories")
        return ()
    return tuple(float(v) for v in values)


def _tag_texts(tags) -> dict[str, str] | None:
    """An annotation's own attributes (CVAT writes them into COCO) as tags in the stored form (yes/no for
    true/false), a missing tag left out; None when they are not a map of names to text, yes/no or whole numbers."""
    if not isinstance(tags, dict):
        return None
    stored = {}
    for name, value in tags.items():
        key, tag = stored_or_why_often(name), stored_or_why_often(value, "tag")
        if not isinstance(name, str) or not isinstance(key, str) or not isinstance(value, (str, bool, int)) or \
                isinstance(tag, ValueRefused):
            return None
        if tag is not None:
            stored[key] = tag
    return stored


def _check_not_normalised(rows: list, image_rows: dict, issues: Issues) -> None:
    """Boxes given as fractions of the image (YOLO's habit) instead of pixels: every box within 1 x 1."""
    sizes = [(image_rows[r[1]]["width"] or 0) for r in rows]  # r: the annotation row tuple built above
    if max(r[3] + r[5] for r in rows) <= 1.0 and max(r[4] + r[6] for r in rows) <= 1.0 and max(sizes) > 2:
        issues.add(None, "bbox", "every box lies within 1 x 1: they look like fractions of the image; COCO boxes are "
                                 "[x, y, width, height] in pixels", unit="annotations")


def read_results(path: str | Path, ground_truth: CocoGroundTruth, *, model: str | None = None) -> CocoResults:
    """Read and check a COCO results file (a list of {image_id, category_id, bbox, score[, keypoints]}) against its
    ground truth; raise ManifestError naming every bad record."""
    path = Path(path).resolve()
    return parse_results(read_json(path), ground_truth, str(path), model=model or path.stem)


def parse_results(document, ground_truth: CocoGroundTruth, source: str, *, model: str) -> CocoResults:
    """read_results of a document already read."""
    path = Path(source)
    if isinstance(document, dict) and isinstance(document.get("annotations"), list):
        document = document["annotations"]
    if not isinstance(document, list):
        raise ManifestError(str(path), [RowIssue(None, None, "a COCO results file is a JSON list of detections "
                                                             "{image_id, category_id, bbox, score}")])
    issues = Issues(MAX_ISSUES)
    images, sizes = ground_truth.images, ground_truth.image_sizes
    rows, records = [], []
    for i, record in enumerate(document):
        if not isinstance(record, dict):
            issues.add(i, None, "must be an object with 'image_id', 'category_id', 'bbox' and 'score'", unit="results")
            continue
        iid, cid, score = record.get("image_id"), record.get("category_id"), record.get("score")
        if iid not in images.index or isinstance(iid, bool):
            issues.add(i, "image_id", f"{_short(iid)} is not the id of an image in {Path(ground_truth.source).name}",
                       unit="results")
            continue
        if cid not in ground_truth.categories or isinstance(cid, bool):
            issues.add(i, "category_id", f"{_short(cid)} is not the id of a category in "
                                         f"{Path(ground_truth.source).name}", unit="results")
            continue
        if not finite_number(score) or share_problem(score) is not None:
            issues.add(i, "score", f"must be a number from 0 to 1 (the detection's confidence); found "
                       f"{_short(score)}", unit="results")
            continue
        names = ground_truth.keypoints.get(cid)
        points = None
        if names and "keypoints" in record:
            points = _check_keypoints(record, i, "results", names, issues, visibility=False)
            if points is None:
                continue
        segmentation = record.get("segmentation")
        if segmentation is not None:
            width, height = sizes[int(iid)]
            problem = masks.segmentation_problem(segmentation, width, height)
            if problem:
                issues.add(i, "segmentation", problem, unit="results")
                continue
            segmentation = masks.compressed(segmentation, width, height)  # converted once, as for the truth
        has_shape = points is not None or segmentation is not None
        box = _check_box(record, i, "results", issues, positive=False) if "bbox" in record or not has_shape else None
        if box is None and not has_shape:
            continue
        if box is None and segmentation is not None:  # a mask without a box: the mask's, as pycocotools computes it
            box = masks.box(segmentation, width, height)
        elif box is None:  # a pose result without a box: the keypoints' extent, as pycocotools computes it
            xs, ys = points[0::3], points[1::3]
            box = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
        far = _far_result(box, points, *sizes[int(iid)])
        if far is not None:
            issues.add(i, *far, unit="results")
            continue
        clean = {"image_id": iid, "category_id": cid, "bbox": box, "score": float(score)}
        if points is not None:
            clean["keypoints"] = points
        if segmentation is not None:
            clean["segmentation"] = segmentation
        records.append(clean)
        rows.append((iid, cid, *box, float(score), points, i))
    if rows and not issues.items:
        _check_crowded([r[0] for r in rows], "results", issues)
    if issues.items:
        raise ManifestError(str(path), issues.items, found=issues)
    detections = pd.DataFrame(rows, columns=["image_id", "category_id", "x", "y", "w", "h", "score", "keypoints",
                                             "record"])
    return CocoResults(str(path), model, records, detections)


def image_sizes_issues(ground_truth: CocoGroundTruth, measured: dict[int, tuple[int, int]]) -> list[RowIssue]:
    """Images whose file is not the size the ground truth says (boxes are in the recorded size's pixels)."""
    issues = []
    for iid, (width, height) in measured.items():
        row = ground_truth.images.loc[iid]
        recorded = (int(row["width"]), int(row["height"])) if row["width"] else None
        if recorded and recorded != (width, height):
            turned = (" as seen (where its EXIF orientation turns it a quarter turn, boxes are drawn on the turned "
                      "image, as viewers and hibug show it)") if recorded == (height, width) else ""
            issues.append(RowIssue(int(row["record"]), "width", f"the file {row['file_name']} is {width} x {height} "
                                   f"pixels{turned}, the record says {recorded[0]} x {recorded[1]}", unit="images"))
    return issues


def boxes(frame: pd.DataFrame) -> np.ndarray:
    """The [x, y, w, h] columns of an annotations or detections frame as an (n, 4) float array."""
    return frame[["x", "y", "w", "h"]].to_numpy(np.float64)


def positions_by(keys) -> dict:
    """{key: the positions holding it, ascending} of an array of keys (an image id per object): one sort, where a
    pandas group-by with apply cost a Python call per group."""
    keys = np.asarray(keys)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(keys) else np.zeros(0, np.int64)
    return dict(zip(ordered[starts].tolist(), np.split(order, starts[1:])))


PAIR_BLOCK = 1 << 20  # pairs of objects compared at once on one image: dense pair arrays stay ~8 MB each


def row_blocks(rows: int, columns: int, budget: int = PAIR_BLOCK) -> list[slice]:
    """Consecutive blocks of `rows` whose pairs with `columns` stay within `budget`: per-image pair work (overlaps of
    every object with every other) in bounded memory however many objects an image holds."""
    step = max(1, budget // max(columns, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]
