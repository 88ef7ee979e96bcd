"""Matching a model's detections to ground-truth objects with faster-coco-eval (COCO's greedy matching), TIDE's
error type of every miss and false positive, and COCO's AP summary."""
from __future__ import annotations

import contextlib
import dataclasses
import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hibug_core.errors import ConfigError, check_fields
from hibug_core.objects.coco import CocoGroundTruth, CocoResults, boxes, positions_by, row_blocks
from hibug_core.objects.coco_evaluation import evaluated
from hibug_core.objects.keypoint_errors import CODES, KEYPOINT_ERRORS, Skeleton, fixed_results, type_people

TRUE_POSITIVE, FALSE_POSITIVE, MISSED_OUTCOME = "true positive", "false positive", "missed"
IGNORED_CROWD, IGNORED_BEYOND = "ignored (crowd)", "ignored (beyond the detections per image COCO evaluates)"
IGNORED_UNLABELLED = "ignored (a person with no labelled keypoint)"
BELOW_THRESHOLD = "below the confidence threshold"
ERROR_TYPES = ("classification", "localization", "both", "duplicate", "background", "missed")  # TIDE's six
CLASS_ERROR, PLACE_ERROR, MISSED_ERROR = ERROR_TYPES[0], ERROR_TYPES[1], ERROR_TYPES[5]  # those a TIDE fix redraws
# A mask's own failure (matched by masks): the object was found where it is, its box right, but the mask's outline is
# wrong (Boundary IoU below MatchConfig.outline_threshold): told apart from an object placed badly or missed.
OUTLINE_ERROR = "outline"
SUMMARY_NAMES = ("AP", "AP50", "AP75", "AP small", "AP medium", "AP large",
                 "AR1", "AR10", "AR100", "AR small", "AR medium", "AR large")
COCO_PERSON_KEYPOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
                         "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip",
                         "left_knee", "right_knee", "left_ankle", "right_ankle")
COCO_PERSON_SKELETON = ((16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13), (6, 7), (6, 8), (7, 9),
                        (8, 10), (9, 11), (2, 3), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7))  # 1-based, as COCO
# COCO's keypoint sigmas for its 17 person keypoints: pycocotools' defaults (the published values divided by 10).
COCO_PERSON_SIGMAS = tuple(v / 10.0 for v in (.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07, .87,
                                              .87, .89, .89))


@dataclass(frozen=True)
class MatchConfig:
    """How detections are matched to objects and how an object's score is given."""

    iou_threshold: float = 0.5  # a detection of the right class overlapping this much finds its object (IoU or OKS)
    background_iou: float = 0.1  # TIDE's background threshold: below it a detection overlaps nothing
    max_detections: int = 100  # per image and class, the highest-scoring ones (COCO's maxDets)
    confidence_threshold: float = 0.5  # the operating point: weaker detections find nothing and are no false
    # positives (COCO's AP, a summary over every threshold, still uses them all)
    score: str = "iou"  # an object's score: "iou" (its match's IoU or OKS, 0 when missed) or "hit" (1 or 0)
    keypoint_sigmas: tuple[float, ...] | None = None  # OKS sigmas; None: COCO's for 17 person keypoints
    keypoints: bool | None = None  # match by OKS; None: when the ground truth and the results have keypoints
    masks: bool = False  # match by mask IoU (COCO's "segm"): an instance segmentation's objects and detections
    outline_threshold: float = 0.5  # masks: an object found in place whose Boundary IoU is below this is outlined badly

    def __post_init__(self):
        check_fields(self, {
            "iou_threshold": (0 < self.iou_threshold < 1, "between 0 and 1"),
            "background_iou": (0 <= self.background_iou < self.iou_threshold, "0 or more, below iou_threshold"),
            "max_detections": (self.max_detections >= 1, "1 or more"),
            "confidence_threshold": (0 <= self.confidence_threshold < 1, "in [0, 1)"),
            "score": (self.score in ("iou", "hit"), "'iou' or 'hit'"),
            "outline_threshold": (0 < self.outline_threshold <= 1, "in (0, 1]"),
            "keypoint_sigmas": (self.keypoint_sigmas is None or (len(self.keypoint_sigmas) > 0 and all(
                s > 0 for s in self.keypoint_sigmas)), "None, or positive numbers, one per keypoint")})


def stored_match_config(settings: dict, **given) -> MatchConfig:
    """The MatchConfig a stored evaluation's settings record (Matches.settings), with what was `given` (not None)
    instead: a later import of the same ground truth is matched as the first was."""
    kept = {name: settings[name] for name in ("iou_threshold", "background_iou", "max_detections",
                                               "confidence_threshold", "score", "outline_threshold")
            if name in settings}
    if settings.get("keypoint_sigmas"):
        kept["keypoint_sigmas"] = tuple(float(s) for s in settings["keypoint_sigmas"])
    if settings.get("iou_type") == "segm":  # an import matched by masks is matched by masks again
        kept["masks"] = True
    return MatchConfig(**{**kept, **{k: v for k, v in given.items() if v is not None}})


@dataclass
class Matches:
    """One model's detections against the ground truth."""

    model: str
    objects: pd.DataFrame  # per non-crowd ground-truth annotation id: outcome, error_type, iou, detection, ...
    # (people: keypoint_types, a letter per keypoint, and keypoint_similarity, see keypoint_errors)
    detections: pd.DataFrame  # per detection record: outcome, error_type, iou, object, nearest_label
    summary: dict[str, float]  # COCO's 12 numbers (AP at IoU .50:.95, ...), as pycocotools prints them
    per_class: pd.DataFrame  # per class: AP, AP50, objects, detections
    iou_type: str = "bbox"
    settings: dict = field(default_factory=dict)
    fixes: pd.DataFrame | None = None  # per error type, how many and the AP were it fixed


def by_keypoints(ground_truth: CocoGroundTruth, config: MatchConfig) -> bool:
    """Whether people are scored by OKS: asked for, or by default where the ground truth has keypoints (what
    _iou_type decides with a pose task's results, which carry keypoints)."""
    return not config.masks and (ground_truth.has_keypoints if config.keypoints is None else config.keypoints)


def _iou_type(ground_truth: CocoGroundTruth, results: CocoResults, config: MatchConfig) -> str:
    if config.masks:
        missing = [name for name, found in (("ground truth", ground_truth), ("results", results))
                   if not found.has_masks]
        if missing:
            raise ConfigError(f"mask matching was asked for, but the {' and the '.join(missing)} outline no object "
                              "with a mask ('segmentation'): give every object and detection its mask")
        return "segm"
    found_nothing = results.detections.empty  # no detection says it is not a model of people: the truth decides
    has_points = ground_truth.has_keypoints and (found_nothing or bool(results.detections["keypoints"].notna().any()))
    use = has_points if config.keypoints is None else config.keypoints
    if use and not has_points:
        raise ConfigError("keypoint matching was asked for, but the ground truth or the results carry no keypoints")
    return "keypoints" if use else "bbox"


def _sigmas(ground_truth: CocoGroundTruth, config: MatchConfig) -> tuple[float, ...]:
    counts = {len(names) for names in ground_truth.keypoints.values()}
    if len(counts) != 1:
        raise ConfigError(f"the categories name different numbers of keypoints ({sorted(counts)}); match them "
                          "separately")
    count = counts.pop()
    stated = {tuple(v) for v in ground_truth.sigmas.values()}
    if len(stated) > 1:
        raise ConfigError("the categories state different keypoint sigmas; match them separately")
    sigmas = config.keypoint_sigmas or (stated.pop() if stated else COCO_PERSON_SIGMAS if count == 17 else None)
    if sigmas is None:
        raise ConfigError(f"keypoint_sigmas: give one OKS sigma per keypoint ({count}), on the command line or as the "
                          "category's 'sigmas' list; COCO's defaults are for its 17 person keypoints only")
    if len(sigmas) != count:
        raise ConfigError(f"keypoint_sigmas: {len(sigmas)} given, the categories have {count} keypoints")
    return tuple(sigmas)


def summarize(ground_truth: CocoGroundTruth, results: CocoResults, config: MatchConfig = MatchConfig()
              ) -> tuple[dict[str, float], pd.DataFrame]:
    """COCO's summary (the 12 numbers pycocotools prints) and AP per class, for checking against your evaluation."""
    iou_type = _iou_type(ground_truth, results, config)
    sigmas = _sigmas(ground_truth, config) if iou_type == "keypoints" else None
    return _summary(ground_truth, results, iou_type, sigmas)[:2]


def _summary(ground_truth: CocoGroundTruth, results: CocoResults, iou_type: str, sigmas):
    """COCO's summary, AP per class, and the evaluation (None without results), whose overlaps later evaluations of
    the same files reuse."""
    categories = sorted(ground_truth.categories)
    objects = ground_truth.annotations[~ground_truth.ignored(iou_type == "keypoints")]
    per_class = pd.DataFrame({"class": [ground_truth.categories[c] for c in categories],
                              "objects": objects["category_id"].value_counts().reindex(categories, fill_value=0).values,
                              "detections": results.detections["category_id"].value_counts()
                              .reindex(categories, fill_value=0).values})
    if not results.records:  # a model that found nothing: AP and AR 0 wherever there was something to find
        names = _keypoint_names() if iou_type == "keypoints" else SUMMARY_NAMES
        return (_nothing_found(objects, iou_type, names),
                per_class.assign(AP=np.where(per_class["objects"] > 0, 0.0, np.nan),
                                 AP50=np.where(per_class["objects"] > 0, 0.0, np.nan)), None)
    evaluator = evaluated(ground_truth, results.records, iou_type, sigmas, keep_images=True)
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator.summarize()
    names = _keypoint_names() if iou_type == "keypoints" else SUMMARY_NAMES
    summary = {name: float(value) for name, value in zip(names, evaluator.stats)}
    precision = np.asarray(evaluator.eval["precision"])  # [thresholds, recall, classes, areas, max dets]
    ap, ap50 = [], []
    # The library evaluates only the categories with people in them for keypoints (every category for boxes): one
    # with none has no AP, as pycocotools reports it (-1, here NaN).
    order = list(evaluator.params.catIds)
    for category in categories:
        if category not in order:
            ap.append(np.nan)
            ap50.append(np.nan)
            continue
        k = order.index(category)
        values = precision[:, :, k, 0, -1]
        ap.append(float(values[values > -1].mean()) if (values > -1).any() else np.nan)
        first = values[0]
        ap50.append(float(first[first > -1].mean()) if (first > -1).any() else np.nan)
    return summary, per_class.assign(AP=ap, AP50=ap50), evaluator


AREA_RANGES = {"small": (0.0, 32.0 ** 2), "medium": (32.0 ** 2, 96.0 ** 2), "large": (96.0 ** 2, 1e10)}  # COCO's


def _nothing_found(objects: pd.DataFrame, iou_type: str, names: tuple[str, ...]) -> dict[str, float]:
    """COCO's summary of a model with no detections at all: 0 where the ground truth holds objects to find (in that
    area range; `objects`: those COCO does not ignore), -1 where it holds none, as pycocotools reports an empty range.
    (The library reports -1 everywhere, and pycocotools cannot load an empty results file.)"""
    areas = objects["area"].to_numpy(float)
    summary = {}
    for name in names:
        word = name.split()[-1]
        low, high = AREA_RANGES.get(word, (0.0, 1e10))
        summary[name] = 0.0 if ((areas >= low) & (areas <= high)).any() else -1.0
    return summary


def _average_precision(evaluator) -> float:
    """COCO's AP (the summary's first number: every threshold, class and recall, all areas, the most detections) of
    an accumulated evaluation; NaN where nothing was evaluated (no person left to find)."""
    values = np.asarray(evaluator.eval["precision"])[:, :, :, 0, -1]
    values = values[values > -1]
    return float(np.mean(values)) if len(values) else np.nan


def _keypoint_names() -> tuple[str, ...]:
    return ("AP", "AP50", "AP75", "AP medium", "AP large", "AR", "AR50", "AR75", "AR medium", "AR large")


def match(ground_truth: CocoGroundTruth, results: CocoResults, config: MatchConfig = MatchConfig()) -> Matches:
    """Every non-crowd object found or missed and every detection a true or false positive at the IoU threshold
    (COCO's greedy matching by confidence, crowd regions absorbing detections), with TIDE's error types."""
    # 1. COCO's summary (the library's evaluation, a category at a time).
    iou_type = _iou_type(ground_truth, results, config)
    sigmas = _sigmas(ground_truth, config) if iou_type == "keypoints" else None
    summary, per_class, evaluation = _summary(ground_truth, results, iou_type, sigmas)
    runs = evaluation.runs if evaluation is not None else None  # masks: every later evaluation reuses them
    # 2. COCO's matching at the one threshold asked for.
    matched: dict[int, tuple[int, float]] = {}  # detection record -> (annotation id, IoU or OKS)
    kept = np.flatnonzero(results.detections["score"].to_numpy() >= config.confidence_threshold)
    evaluator = None
    if len(kept):
        # the detections at or above a score: the summary's overlaps, their rows of these detections, hold for each
        # image whose detections it evaluated
        evaluator = evaluated(ground_truth, [results.records[i] for i in kept], iou_type, sigmas,
                              thresholds=[config.iou_threshold], max_detections=config.max_detections,
                              earlier=evaluation, runs=runs)
        for pair, value in evaluator.eval["matched"].items():
            detection_id, annotation_id = (int(part) for part in pair.split("_", 1))
            matched[int(kept[detection_id - 1])] = (annotation_id, float(value))
    # 3. Outcomes and TIDE's error types, image by image.
    objects, detections = _outcomes(ground_truth, results, matched, kept, config, iou_type,
                                    evaluator if iou_type == "keypoints" else None)
    # 4. The AP if each error type were fixed: people by Ronchi and Perona's type of every keypoint a prediction gave
    # them; boxes and masks by TIDE's oracles.
    fixes = None
    if iou_type == "keypoints":
        objects = _type_keypoints(ground_truth, results, objects, sigmas)
        fixes = _keypoint_fixes(ground_truth, results, objects, detections, sigmas, summary["AP"], evaluation)
    else:
        if iou_type == "segm":
            objects["boundary_iou"] = _boundary_ious(ground_truth, results, objects)
            objects["error_type"] = _outline_errors(ground_truth, objects, config)
        fixes = tide_fixes(ground_truth, results, objects, detections, iou_type, summary["AP"], evaluation, runs)
    settings = {"iou_threshold": config.iou_threshold, "background_iou": config.background_iou,
                "max_detections": config.max_detections, "confidence_threshold": config.confidence_threshold,
                "score": config.score, "iou_type": iou_type,
                **({"outline_threshold": config.outline_threshold} if iou_type == "segm" else {}),
                **(_skeleton_settings(skeleton_of(ground_truth, sigmas)) if sigmas else {})}
    return Matches(results.model, objects, detections, summary, per_class, iou_type, settings, fixes)


def skeleton_of(ground_truth: CocoGroundTruth, sigmas) -> Skeleton:
    """The keypoints of the ground truth's (one) keypoint category: names, left/right pairs, limbs and sigmas."""
    category = next(iter(ground_truth.keypoints))
    return Skeleton.from_names(ground_truth.keypoints[category], sigmas, ground_truth.skeletons.get(category, ()))


def _skeleton_settings(skeleton: Skeleton) -> dict:
    """What a pose evaluation keeps of its skeleton (to draw and name keypoints): names, limbs, sigmas."""
    return {"keypoint_sigmas": list(skeleton.sigmas), "keypoint_names": list(skeleton.names),
            "limbs": [list(limb) for limb in skeleton.limbs]}


def _type_keypoints(ground_truth: CocoGroundTruth, results: CocoResults, objects: pd.DataFrame,
                    sigmas) -> pd.DataFrame:
    """Every person a prediction went with (found, or missed with a prediction near it) gets the type of each of its
    keypoints (one letter each); a missed person's error type is then its commonest keypoint error, which says what
    TIDE's "localization" was."""
    skeleton = skeleton_of(ground_truth, sigmas)
    annotations = ground_truth.annotations
    people = annotations[~ground_truth.ignored(by_keypoints=True)]
    detection = objects["detection"].reindex(people["id"].to_numpy())
    pairs = detection[detection >= 0].astype(np.int64)
    pairs = pairs[[results.detections["keypoints"].iat[int(r)] is not None for r in pairs]]
    typed = type_people(people, results.detections, pairs, skeleton)
    codes = typed["keypoint_types"].reindex(objects.index).astype(object)
    objects = objects.assign(keypoint_types=codes.where(codes.notna(), None),
                             keypoint_similarity=typed["keypoint_similarity"].reindex(objects.index).astype(object))
    localized = (objects["outcome"] == MISSED_OUTCOME) & (objects["error_type"] == "localization")
    worst = typed["keypoint_error"].reindex(objects.index)
    named = localized & worst.isin(KEYPOINT_ERRORS)
    objects.loc[named, "error_type"] = worst[named]
    return objects


def _keypoint_fixes(ground_truth: CocoGroundTruth, results: CocoResults, objects: pd.DataFrame,
                    detections: pd.DataFrame, sigmas, ap: float, earlier) -> pd.DataFrame:
    """Per error type, how many keypoints (or people, or false positives) have it and the keypoint AP were it fixed:
    a keypoint type by moving those keypoints onto their true place (Ronchi and Perona), background false positives
    by removing them, missed people (no prediction near) by leaving them out of the ground truth (TIDE)."""
    pairs = objects["detection"][objects["keypoint_types"].notna()].astype(np.int64)
    codes = objects["keypoint_types"]
    people = ground_truth.annotations
    letters = pd.Series(list("".join(codes.dropna())), dtype=object)
    image_of_person = people.set_index("id")["image_id"]
    rows = []
    for kind in KEYPOINT_ERRORS:
        count = int((letters == CODES[kind]).sum())
        fixed = fixed_results(results.records, pairs, codes, people, kind) if count else None
        touched = set(image_of_person.reindex(codes.index[codes.str.contains(CODES[kind], na=False)]))
        rows.append((kind, "keypoints", count, fixed, ground_truth, touched))
    background = detections["error_type"].to_numpy() == "background"
    rows.append(("background", "false positives", int(background.sum()),
                 [r for r, drop in zip(results.records, background) if not drop] if background.any() else None,
                 ground_truth, set(results.detections["image_id"].to_numpy()[background])))
    missed_ids = set(objects.index[objects["error_type"] == "missed"])
    kept_truth = None
    if missed_ids:
        dataset = {**ground_truth.dataset,
                   "annotations": [a for a in ground_truth.dataset["annotations"] if a["id"] not in missed_ids]}
        kept_truth = dataclasses.replace(ground_truth, dataset=dataset,
                                         annotations=people[~people["id"].isin(missed_ids)])
    rows.append(("missed", "people", len(missed_ids), results.records if missed_ids else None, kept_truth,
                 set(image_of_person.reindex(list(missed_ids)))))
    table = []
    categories = sorted(ground_truth.categories)
    for kind, unit, count, records, truth, touched in rows:
        fixed_ap = ap
        if records is not None and records:
            changed = {(image, category) for image in touched for category in categories}
            fixed_ap = _average_precision(evaluated(truth, records, "keypoints", sigmas, earlier=earlier,
                                                     changed=changed, ap_only=True))
        table.append({"error type": kind, "unit": unit, "count": count, "AP if fixed": fixed_ap,
                      "AP gain": fixed_ap - ap})
    return pd.DataFrame(table)


def _boundary_ious(ground_truth: CocoGroundTruth, results: CocoResults, objects: pd.DataFrame) -> np.ndarray:
    """Per object a mask went with (found, or come close: TIDE's localization and class errors), the Boundary IoU
    (Cheng et al. 2021) of its mask and that mask, which tells an object outlined badly from one placed badly; NaN for
    an object no mask went with."""
    from hibug_core.objects.masks import paired_boundary_ious

    out = np.full(len(objects), np.nan)
    shown = np.flatnonzero(objects["detection"].to_numpy() >= 0)
    truths = by_id(ground_truth, objects.index.to_numpy()[shown])
    detections = [results.records[int(d)] for d in objects["detection"].to_numpy()[shown]]
    out[shown] = paired_boundary_ious([d["segmentation"] for d in detections], [t["segmentation"] for t in truths],
                                      [t["image_id"] for t in truths], ground_truth.image_sizes)
    return out


def _outline_errors(ground_truth: CocoGroundTruth, objects: pd.DataFrame, config: MatchConfig) -> np.ndarray:
    """Each object's error type, an outline error where a mask of its class went with it (found, or a localization
    error), its box in place (box IoU at the threshold or more) and the outline wrong (Boundary IoU below the
    config's): a mask drawn badly in the right place, not an object placed badly or missed."""
    truth = ground_truth.annotations.set_index("id").loc[objects.index]
    names = ground_truth.categories
    shown = objects["detection"].to_numpy() >= 0
    placed = np.where(shown, _paired_box_iou(np.nan_to_num(objects[["pred_x", "pred_y", "pred_w", "pred_h"]]
                                                           .to_numpy(float)), truth[["x", "y", "w", "h"]]
                                             .to_numpy(float)), 0.0)
    same_class = objects["predicted_class"].to_numpy(object) == np.array([names[c] for c in truth["category_id"]],
                                                                            dtype=object)
    kinds = objects["error_type"].to_numpy(object)
    outlined_badly = (np.isin(kinds, ["", PLACE_ERROR]) & same_class & (placed >= config.iou_threshold)
                      & (objects["boundary_iou"].to_numpy(float) < config.outline_threshold))
    return np.where(outlined_badly, OUTLINE_ERROR, kinds)


def _paired_box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of each pair (a[k], b[k]) of (x, y, w, h) boxes."""
    left, top = np.maximum(a[:, 0], b[:, 0]), np.maximum(a[:, 1], b[:, 1])
    right = np.minimum(a[:, 0] + a[:, 2], b[:, 0] + b[:, 2])
    bottom = np.minimum(a[:, 1] + a[:, 3], b[:, 1] + b[:, 3])
    overlap = np.clip(right - left, 0, None) * np.clip(bottom - top, 0, None)
    union = a[:, 2] * a[:, 3] + b[:, 2] * b[:, 3] - overlap
    return np.where(union > 0, overlap / np.maximum(union, 1e-12), 0.0)


def tide_fixes(ground_truth: CocoGroundTruth, results: CocoResults, objects: pd.DataFrame, detections: pd.DataFrame,
               iou_type: str, ap: float, earlier=None, runs: dict[int, dict] | None = None
               ) -> pd.DataFrame:
    """TIDE's oracles (Bolya et al. 2020), per error type: how many objects or detections have it and the AP were
    every one fixed. A classification error takes its object's class, a localization error its object's box (and
    mask); both, duplicate and background errors are removed; missed objects are left out of the ground truth; masks:
    the mask that went with an object outlined badly takes its object's mask.
    Detections below the operating point have no type and stay as they are. `earlier`: the evaluation being fixed,
    whose overlaps are reused for every image a fix leaves as it was (coco_evaluation.evaluated); `runs`: its masks'
    run lengths, reused for every record a fix keeps."""
    from hibug_core.objects.masks import compressed

    record_of = {record["id"]: record for record in ground_truth.dataset["annotations"]}
    kinds, targets = detections["error_type"].to_numpy(), detections["object"].to_numpy()

    def took_its_object(i: int, record: dict, kind: str) -> dict:
        wanted = record_of[int(targets[i])]
        if kind == CLASS_ERROR:
            return {**record, "category_id": wanted["category_id"]}
        fixed = {**record, "bbox": list(wanted["bbox"])}
        if "segmentation" in record:
            fixed["segmentation"] = compressed(wanted["segmentation"], *ground_truth.image_sizes[record["image_id"]])
        return fixed

    table = []
    outlined = objects["detection"].to_numpy()[(objects["error_type"] == OUTLINE_ERROR).to_numpy()]
    image_of, category_of = (results.detections[c].to_numpy() for c in ("image_id", "category_id"))
    object_category = ground_truth.annotations.set_index("id")["category_id"]
    for kind in (*ERROR_TYPES, *((OUTLINE_ERROR,) if iou_type == "segm" else ())):
        truth, records = ground_truth, results.records
        if kind == OUTLINE_ERROR:  # the masks of objects outlined badly redrawn as their objects' own
            chosen = np.isin(np.arange(len(records)), outlined)
            count = int(chosen.sum())
            records = [took_its_object(i, r, PLACE_ERROR) if chosen[i] else r for i, r in enumerate(records)]
            touched = _pairs(image_of[chosen], category_of[chosen])
        elif kind == MISSED_ERROR:
            missed = set(objects.index[objects["error_type"] == MISSED_ERROR])
            count = len(missed)
            gone = ground_truth.annotations[ground_truth.annotations["id"].isin(missed)]
            touched = _pairs(gone["image_id"].to_numpy(), gone["category_id"].to_numpy())
            if missed:
                dataset = {**ground_truth.dataset, "annotations": [a for a in ground_truth.dataset["annotations"]
                                                                   if a["id"] not in missed]}
                truth = dataclasses.replace(ground_truth, dataset=dataset, annotations=ground_truth.annotations[
                    ~ground_truth.annotations["id"].isin(missed)])
        else:
            chosen = kinds == kind
            count = int(chosen.sum())
            touched = _pairs(image_of[chosen], category_of[chosen])
            if kind == CLASS_ERROR:  # and the class each takes
                taken = object_category.reindex(targets[chosen].astype(np.int64)).to_numpy()
                touched |= _pairs(image_of[chosen], taken)
            if kind in (CLASS_ERROR, PLACE_ERROR):
                records = [took_its_object(i, r, kind) if chosen[i] else r for i, r in enumerate(results.records)]
            else:
                records = [r for r, drop in zip(results.records, chosen) if not drop]
        fixed_ap = ap
        if count and records:
            fixed_ap = _average_precision(evaluated(truth, records, iou_type, None, ap_only=True,
                                                     earlier=earlier, changed=touched, runs=runs))
        unit = "objects" if kind in (MISSED_ERROR, OUTLINE_ERROR) else "detections"
        table.append({"error type": kind, "unit": unit, "count": count, "AP if fixed": fixed_ap,
                      "AP gain": fixed_ap - ap})
    return pd.DataFrame(table)


def _pairs(images: np.ndarray, categories: np.ndarray) -> set[tuple[int, int]]:
    """The (image, category) pairs of these rows: what a fix changed, for coco_evaluation.evaluated."""
    return set(zip(np.asarray(images, dtype=np.int64).tolist(), np.asarray(categories, dtype=np.int64).tolist()))


def _beyond_limit(detections: pd.DataFrame, limit: int) -> np.ndarray:
    """Detections COCO does not evaluate: below the `limit` highest-scoring of their image and class (stable order)."""
    order = detections.sort_values("score", ascending=False, kind="mergesort")
    rank = order.groupby(["image_id", "category_id"], sort=False).cumcount()
    return (rank >= limit).reindex(detections.index).to_numpy(bool)


def by_id(ground_truth: CocoGroundTruth, ids: np.ndarray) -> list[dict]:
    """The ground truth's annotation records of these ids, in their order."""
    record_of = {record["id"]: record for record in ground_truth.dataset["annotations"]}
    return [record_of[int(i)] for i in ids]


def _mask_overlaps(ground_truth: CocoGroundTruth, results: CocoResults, object_masks: list, records: np.ndarray,
                   members: np.ndarray, image_id: int) -> np.ndarray:
    """Mask IoU of detections `records` (rows) against the objects at positions `members` (columns) of one image."""
    from hibug_core.objects.masks import mask_iou

    image = ground_truth.images.loc[image_id]
    return mask_iou([results.records[int(r)]["segmentation"] for r in records], [object_masks[m] for m in members],
                    int(image["width"]), int(image["height"]))


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in a (n, 4) against b (m, 4), xywh, by the library's own routine."""
    from faster_coco_eval.core import mask

    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    return np.asarray(mask.iou(a.tolist(), b.tolist(), [0] * len(b)), dtype=np.float64).reshape(len(a), len(b))


def _library_oks(evaluator, image_id: int, category_id: int, kept: np.ndarray, records: np.ndarray,
                 annotation_ids: np.ndarray) -> np.ndarray:
    """OKS of the detections `records` of one image and class (rows) against its objects `annotation_ids` (columns),
    as the evaluator computes them for its matching; 0 for a pair it did not evaluate (beyond its maxDets)."""
    out = np.zeros((len(records), len(annotation_ids)))
    evaluator = evaluator.parts.get(category_id)  # the evaluation of this class
    if evaluator is None:
        return out
    values = np.asarray(evaluator.computeOks(image_id, category_id), dtype=np.float64)
    if values.size == 0:
        return out
    objects = evaluator.gt_dataset.get(image_id, category_id)
    found = evaluator.dt_dataset.get(image_id, category_id)
    order = np.argsort([-d["score"] for d in found], kind="mergesort")[:evaluator.params.maxDets[-1]]
    values = np.nan_to_num(values.reshape(len(order), len(objects)), nan=0.0)
    row_of = {int(kept[evaluator.positions[found[i]["id"] - 1]]): r for r, i in enumerate(order)}
    column_of = {o["id"]: c for c, o in enumerate(objects)}
    rows = np.array([row_of.get(int(r), -1) for r in records], dtype=np.int64)
    columns = np.array([column_of.get(a, -1) for a in annotation_ids.tolist()], dtype=np.int64)
    known = (rows[:, None] >= 0) & (columns[None, :] >= 0)
    out[known] = values[np.ix_(np.maximum(rows, 0), np.maximum(columns, 0))][known]
    return out


def _outcomes(ground_truth: CocoGroundTruth, results: CocoResults, matched: dict[int, tuple[int, float]],
              kept: np.ndarray, config: MatchConfig, iou_type: str = "bbox",
              keypoint_evaluator=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per object and per detection: outcome, TIDE error type, overlap (the boxes', or the masks' when matched by
    masks), the detection or object it goes with. keypoint_evaluator: the matching evaluator of a keypoint task
    (same-class overlap is then its OKS)."""
    annotations = ground_truth.annotations
    ignored = ground_truth.ignored(iou_type == "keypoints")
    crowd_ids = set(annotations.loc[annotations["iscrowd"] == 1, "id"].tolist())
    unlabelled_ids = set(annotations.loc[ignored, "id"].tolist()) - crowd_ids
    objects = annotations[~ignored]
    detections = results.detections
    n_det = len(detections)
    det_outcome = np.full(n_det, FALSE_POSITIVE, dtype=object)
    det_error = np.full(n_det, "", dtype=object)
    det_object = np.full(n_det, -1, dtype=np.int64)
    det_iou = np.zeros(n_det)
    nearest_label = np.full(n_det, "", dtype=object)
    det_outcome[:] = BELOW_THRESHOLD
    det_outcome[kept] = FALSE_POSITIVE
    beyond = np.zeros(n_det, bool)
    beyond[kept] = _beyond_limit(detections.iloc[kept], config.max_detections) if len(kept) else []
    det_outcome[beyond] = IGNORED_BEYOND
    for record, (annotation_id, value) in matched.items():
        if annotation_id in crowd_ids:
            det_outcome[record] = IGNORED_CROWD
        elif annotation_id in unlabelled_ids:
            det_outcome[record] = IGNORED_UNLABELLED
        else:
            det_outcome[record], det_object[record], det_iou[record] = TRUE_POSITIVE, annotation_id, value

    obj_index = {aid: i for i, aid in enumerate(objects["id"].tolist())}
    n_obj = len(objects)
    obj_detection = np.full(n_obj, -1, dtype=np.int64)
    obj_iou = np.zeros(n_obj)
    obj_error = np.full(n_obj, "", dtype=object)
    for record in np.flatnonzero(det_outcome == TRUE_POSITIVE):
        i = obj_index[int(det_object[record])]
        obj_detection[i], obj_iou[i] = record, det_iou[record]

    names = ground_truth.categories
    t, t_b = config.iou_threshold, config.background_iou
    obj_boxes, det_boxes = boxes(objects), boxes(detections)
    obj_class = objects["category_id"].to_numpy()
    det_class = detections["category_id"].to_numpy()
    det_score = detections["score"].to_numpy()
    obj_by_image = positions_by(objects["image_id"].to_numpy())
    unmatched = det_outcome == FALSE_POSITIVE
    fp_positions = np.flatnonzero(unmatched)
    fp_by_image = {image: fp_positions[rows] for image, rows in
                   positions_by(detections["image_id"].to_numpy()[unmatched]).items()}
    explained_by = np.full(n_obj, -1, dtype=np.int64)  # TIDE: a miss covered by a classification/localization error
    object_masks = ([record.get("segmentation") for record in by_id(ground_truth, objects["id"].to_numpy())]
                    if iou_type == "segm" else None)  # by position among the objects
    for image_id, image_fps in fp_by_image.items():
        image_fps = image_fps[np.argsort(-det_score[image_fps], kind="mergesort")]
        members = obj_by_image.get(image_id, np.zeros(0, np.int64))
        if len(members) == 0:
            det_error[image_fps] = "background"
            continue
        for block in row_blocks(len(image_fps), len(members)):  # in score order: the first error covers a miss
            fps = image_fps[block]
            overlap = (_mask_overlaps(ground_truth, results, object_masks, fps, members, int(image_id))
                       if object_masks is not None else box_iou(det_boxes[fps], obj_boxes[members]))
            same_class = det_class[fps][:, None] == obj_class[members][None, :]
            same_overlap = overlap
            if keypoint_evaluator is not None:
                same_overlap = np.zeros_like(overlap)
                member_ids = objects["id"].to_numpy()[members]
                for category in np.unique(det_class[fps]):
                    same_overlap += _library_oks(keypoint_evaluator, int(image_id), int(category), kept, fps,
                                                 member_ids)
            same = np.where(same_class, same_overlap, 0.0)
            other = np.where(same_class, 0.0, overlap)
            for row, record in enumerate(fps):
                best_same, best_other = same[row].max(), other[row].max()
                target = None
                if best_same >= t:
                    det_error[record], target = "duplicate", int(same[row].argmax())
                elif best_other >= t:
                    det_error[record], target = "classification", int(other[row].argmax())
                elif best_same >= t_b:
                    det_error[record], target = "localization", int(same[row].argmax())
                elif best_other >= t_b:
                    det_error[record], target = "both", int(other[row].argmax())
                else:
                    det_error[record] = "background"
                nearest = int(overlap[row].argmax())
                nearest_label[record] = names[int(obj_class[members[nearest]])]
                det_iou[record] = overlap[row, nearest] if target is None else (
                    same[row, target] if det_error[record] in ("duplicate", "localization") else other[row, target])
                if target is not None:
                    det_object[record] = int(objects["id"].iat[members[target]])
                    i = members[target]
                    if det_error[record] != "duplicate" and obj_detection[i] < 0 and explained_by[i] < 0:
                        explained_by[i] = record  # the highest-scoring error that covers the missed object
    found = obj_detection >= 0
    obj_error[~found] = "missed"
    explained = ~found & (explained_by >= 0)
    obj_error[explained] = det_error[explained_by[explained]]
    shown_detection = np.where(found, obj_detection, explained_by)
    obj_iou[explained] = det_iou[explained_by[explained]]
    # A box equal to its object's reaches an IoU of 1 + 2e-16 in floating point: the scores are shares in [0, 1]
    np.clip(det_iou, 0.0, 1.0, out=det_iou)
    np.clip(obj_iou, 0.0, 1.0, out=obj_iou)
    score = np.where(found, obj_iou if config.score == "iou" else 1.0, 0.0)

    def detection_column(values, empty):
        out = np.full(n_obj, empty, dtype=object)
        out[shown_detection >= 0] = values[shown_detection[shown_detection >= 0]]
        return out

    objects_out = pd.DataFrame({
        "outcome": np.where(found, TRUE_POSITIVE, MISSED_OUTCOME), "error_type": obj_error, "iou": obj_iou,
        "score": score, "detection": shown_detection,
        "predicted_class": detection_column(np.array([names[int(c)] for c in det_class], dtype=object), None),
        "confidence": detection_column(det_score.astype(object), None).astype(float),
    }, index=pd.Index(objects["id"].to_numpy(), name="annotation_id"))
    for column, k in zip(("pred_x", "pred_y", "pred_w", "pred_h"), range(4)):
        objects_out[column] = detection_column(det_boxes[:, k].astype(object), None).astype(float)
    detections_out = pd.DataFrame({"outcome": det_outcome, "error_type": det_error, "iou": det_iou,
                                   "object": det_object, "nearest_label": nearest_label},
                                  index=pd.Index(np.arange(n_det), name="record"))
    return objects_out, detections_out


def known_objects(rows: pd.DataFrame, reported: float, overlap: float = 0.5) -> tuple[pd.DataFrame, np.ndarray]:
    """The objects a model reports in an unlabelled image, and per detection the one it is: detections at or above
    the `reported` confidence, merged greedily by score where they overlap at IoU `overlap` or more (class-agnostic,
    as a duplicate in a labelled image goes with the object it duplicates); each detection goes with the object it
    overlaps most at `overlap` or more, else stands alone."""
    same = np.arange(len(rows))
    boxes = rows[["x", "y", "w", "h"]].to_numpy(float)
    scores = rows["score"].to_numpy(float)
    kept = []
    for _, members in pd.Series(np.arange(len(rows))).groupby(rows["image_id"].to_numpy()):
        members = members.to_numpy()
        confident = members[scores[members] >= reported]
        confident = confident[np.argsort(-scores[confident], kind="stable")]
        heads: list[int] = []
        for row in confident:  # greedy by score: a head unless it repeats a stronger one
            if not heads or box_iou(boxes[[row]], boxes[heads]).max() < overlap:
                heads.append(int(row))
        if not heads:
            continue
        kept += heads
        overlaps = box_iou(boxes[members], boxes[heads])
        best = overlaps.argmax(axis=1)
        found = overlaps[np.arange(len(members)), best] >= overlap
        same[members[found]] = np.asarray(heads)[best[found]]
    objects = rows.iloc[sorted(kept)].assign(id=sorted(kept))[["id", "image_id", "x", "y", "w", "h"]]
    return objects, same
