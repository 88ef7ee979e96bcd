"""faster-coco-eval's evaluation one category at a time, made again cheaply for a copy of the files a TIDE fix changed:
COCO matches and accumulates each category on its own, so evaluating them one by one gives the library's very arrays
while holding one category's per-image evaluations at a time (about 1.5 KB per image, category and area range: 3 GB
for every category of a million objects at once). The overlaps and mask run lengths of the evaluation a fix changes
are reused wherever the fix left them as they were, and the library's preparation indexes every annotation without
looking each one up again."""
from __future__ import annotations

import contextlib
import io
import itertools
from collections import defaultdict
from copy import deepcopy

import numpy as np
from faster_coco_eval import COCO, COCOeval_faster
from faster_coco_eval.core.mask import calculateRleForAllAnnotations


def evaluated(truth, records: list[dict], iou_type: str, sigmas, *, thresholds=None, max_detections: int | None = None,
              earlier=None, changed: set[tuple[int, int]] | None = None, ap_only: bool = False,
              runs: dict[int, dict] | None = None, keep_images: bool = False) -> ByCategory:
    """The library's evaluation of result `records` against `truth` (a CocoGroundTruth), evaluated and accumulated
    (ap_only: what COCO's AP needs alone, the area range "all" at the most detections; thresholds: at these
    overlaps, up to max_detections), a category at a time: the library's view of one category's records is made,
    evaluated and let go before the next. Its matches name detection i of `records` by id i + 1, as the library's
    whole view would.
    earlier: an evaluation of the same files whose records differ from these only in the (image, category) pairs in
    `changed` (what a fix changed) or by detections below some score left out (the operating point's); its overlaps
    (IoU or OKS matrices, a row per detection by score) are reused, their first rows where the weakest detections
    were left out, for every other pair whose detections it covered (an evaluation of more detections per image
    computes the images that have more). (Cutting a changed image's earlier matrix down to what a fix left was slower
    than the library's mask IoU.) Where `earlier` kept its per-image evaluations (keep_images) and this one asks for
    the AP alone (ap_only), only the changed pairs are evaluated again: a category no pair of which changed keeps its
    arrays, and in one with changes the library's evaluations of its changed images replace the earlier ones before
    the library accumulates them all (the arrays of a whole evaluation, bit for bit). runs: the masks' run lengths an
    earlier evaluation made of these very records (its `runs`), reused. keep_images: keep each category's per-image
    evaluations at the area range "all" for later evaluations to splice into."""
    # 1. The categories the library evaluates: every one, or for keypoints those with people in the ground truth.
    truth_of, found_of = defaultdict(list), defaultdict(list)
    for record in truth.dataset["annotations"]:
        truth_of[record["category_id"]].append(record)
    for position, record in enumerate(records):
        found_of[record["category_id"]].append(position)
    whole = _configured(ByCategory(iouType=iou_type, print_function=lambda *a: None), sigmas, thresholds,
                        max_detections, ap_only)
    params = whole.params
    params.imgIds = sorted(truth.images.index)
    params.catIds = sorted(truth_of) if iou_type == "keypoints" else sorted(truth.categories)
    shape = (len(params.iouThrs), len(params.recThrs), len(params.catIds), len(params.areaRng), len(params.maxDets))
    # an empty category is -1 throughout, as the library leaves it
    whole.eval = {"precision": -np.ones(shape), "recall": -np.ones(shape[:1] + shape[2:]), "scores": -np.ones(shape),
                  "matched": {}}
    image_records = {record["id"]: record for record in truth.dataset["images"]}
    category_records = {record["id"]: record for record in truth.dataset["categories"]}
    spliced = _spliceable(earlier, thresholds, max_detections, ap_only)
    changed_of = defaultdict(set)
    for image, category in changed or ():
        changed_of[category].add(image)
    # 2. Each category on its own.
    for k, category in enumerate(params.catIds):
        objects, positions = truth_of[category], np.asarray(found_of[category], dtype=np.int64)
        base = earlier.parts.get(category) if spliced else None
        if base is not None and (base.image_evaluations is None
                                 or not changed_of[category] <= base.image_positions.keys()):
            base = None  # no per-image evaluations to splice into, or a changed image they do not hold
        if base is not None and not changed_of[category]:  # a category the change left as it was: its arrays
            for key in ("precision", "scores"):
                whole.eval[key][:, :, k] = np.asarray(base.eval[key])[:, :, 0, :1, -1:]
            whole.eval["recall"][:, k] = np.asarray(base.eval["recall"])[:, 0, :1, -1:]
            whole.parts[category] = base
            continue
        if base is not None:  # the changed images alone, every one of them (one left empty replaces its evaluation)
            kept = changed_of[category]
            objects = [a for a in objects if a["image_id"] in kept]
            positions = positions[np.fromiter((records[i]["image_id"] in kept for i in positions), bool,
                                              len(positions))]
            images = sorted(kept)
        found = [records[i] for i in positions]
        if base is None:
            images = sorted({a["image_id"] for a in objects} | {a["image_id"] for a in found})
        if not images:
            continue
        gt = COCO({"images": [image_records[i] for i in images], "categories": [category_records[category]],
                   "annotations": _copies(objects, runs)}, print_function=lambda *a: None)
        with contextlib.redirect_stdout(io.StringIO()):
            dt = gt.loadRes(_copies(found, runs)) if found else _no_results(gt)
        part = _configured(Reusing(gt, dt, iou_type, print_function=lambda *a: None, separate_eval=True,
                                   extra_calc=thresholds is not None,
                                   rle_iou_max_workers=1),  # its mask IoU holds the GIL: threads were slower
                           sigmas, thresholds, max_detections, ap_only)
        part.earlier, part.changed, part.positions = earlier, changed or set(), positions
        if base is not None:  # its category even where the changed images hold nothing of it any more
            part.params.catIds = [category]
        with contextlib.redirect_stdout(io.StringIO()):
            part.evaluate()
            if base is not None:
                part.splice_into(base)
            part.accumulate()
        if keep_images:
            part.keep_images()
        del part._evalImgs_cpp  # what made the whole evaluation large; the arrays below are what it was for
        for key in ("precision", "scores"):
            whole.eval[key][:, :, k] = np.asarray(part.eval[key])[:, :, 0]
        whole.eval["recall"][:, k] = np.asarray(part.eval["recall"])[:, 0]
        # the part's ids as ids among `records` (matches are asked for at a threshold, never of a spliced part)
        for pair, value in ((part.eval.get("matched") or {}) if thresholds is not None else {}).items():
            detection, annotation = pair.split("_", 1)
            whole.eval["matched"][f"{positions[int(detection) - 1] + 1}_{annotation}"] = value
        whole.ious.update(part.ious)
        if part.params.compute_rle:  # only masks have run lengths to keep
            whole.runs.update({id(source): copy["rle"] for sources, copies in ((objects, gt.dataset["annotations"]),
                                                                                (found, dt.dataset["annotations"]))
                               for source, copy in zip(sources, copies) if "rle" in copy})
        whole.parts[category] = part
    return whole


def _spliceable(earlier, thresholds, max_detections: int | None, ap_only: bool) -> bool:
    """Whether an evaluation may splice its changed images into `earlier`'s per-image evaluations: the same overlaps
    and detection limit (the library's defaults), at the area range "all" that both hold."""
    return earlier is not None and thresholds is None and max_detections is None and ap_only


def _copies(records: list[dict], runs: dict[int, dict] | None = None) -> list[dict]:
    """Copies the library may add keys to (ids, areas, ignore flags); it sets keys and never changes a list in place,
    so the records' numbers are shared, not copied (a deep copy took most of a large keypoint set's matching).
    runs: the run lengths the library made of these very records' masks in an earlier evaluation, which the copies
    carry so that it does not make them again."""
    if not runs:
        return [dict(record) for record in records]
    return [dict(record, rle=runs[id(record)]) if id(record) in runs else dict(record) for record in records]


def _no_results(gt):
    """The library's view of no detections on gt's images."""
    return COCO({"images": gt.dataset["images"], "categories": gt.dataset["categories"], "annotations": []},
                print_function=lambda *a: None)


def _configured(evaluator, sigmas, thresholds, max_detections, ap_only):
    if sigmas is not None:
        evaluator.params.kpt_oks_sigmas = np.asarray(sigmas, dtype=np.float64)
    if thresholds is not None or ap_only:
        evaluator.params.areaRng, evaluator.params.areaRngLbl = [evaluator.params.areaRng[0]], ["all"]
    if ap_only:  # accumulating at fewer limits is as much faster
        evaluator.params.maxDets = [evaluator.params.maxDets[-1]]
    if thresholds is not None:
        evaluator.params.iouThrs = np.asarray(thresholds, dtype=np.float64)
        evaluator.params.maxDets = [max_detections]
    return evaluator


class ByCategory(COCOeval_faster):
    """An evaluation made a category at a time (evaluated()): the library's `eval` arrays, overlaps (`ious`), masks'
    run lengths by source record (`runs`) and summary over every category; `parts[category]` is the evaluation of one
    (its prepared records and overlaps; `positions`: its detections' places among the records evaluated)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ious: dict = {}
        self.runs: dict[int, dict] = {}
        self.parts: dict[int, Reusing] = {}


class Reusing(COCOeval_faster):
    """The library's evaluation with an `earlier` one's work reused (evaluated())."""

    earlier = None
    changed: frozenset | set = frozenset()
    positions: np.ndarray | None = None
    image_evaluations: list | None = None  # keep_images(): the library's per-image evaluations at the area "all"
    image_positions: dict[int, int] = {}  # an image's place among them

    def keep_images(self) -> None:
        """Keep the per-image evaluations of the area range "all" (the library orders them by category, area range,
        then image: with one category the first len(imgIds)) for later evaluations to splice into."""
        images = list(self.params.imgIds)
        self.image_evaluations = list(self._evalImgs_cpp[:len(images)])
        self.image_positions = {image: i for i, image in enumerate(images)}

    def splice_into(self, base: Reusing) -> None:
        """Make this evaluation of some of `base`'s images (area "all" only) one of all of them: its per-image
        evaluations in place of base's for its images, base's for every other, accumulated over base's images."""
        every = list(base.image_evaluations)
        for image, evaluation in zip(self.params.imgIds, self._evalImgs_cpp):
            every[base.image_positions[image]] = evaluation
        params = deepcopy(self._paramsEval)
        params.imgIds = list(base.params.imgIds)
        self._paramsEval, self._evalImgs_cpp = params, every

    def _prepare(self):
        # The library's own preparation (pycocotools' ignore flags; every annotation indexed by image and class) for
        # every image and class, as hibug evaluates; a mask's run lengths are made only where its record carries none
        # from an earlier evaluation (the library would make them all again, each time).
        params = self.params
        if self.lvis_style or params.compute_boundary or not params.useCats or \
                sorted(params.imgIds) != sorted(self.cocoGt.imgs) or sorted(params.catIds) != sorted(self.cocoGt.cats):
            return super()._prepare()
        gts, dts = list(self.cocoGt.anns.values()), list(self.cocoDt.anns.values())
        if params.compute_rle:
            fresh = [a for a in gts + dts if "rle" not in a]
            sizes = {i: (self.cocoGt.imgs[i]["height"], self.cocoGt.imgs[i]["width"])
                     for i in {a["image_id"] for a in fresh}}
            calculateRleForAllAnnotations(fresh, sizes, True, False, self.boundary_dilation_ratio,
                                          self.boundary_cpu_count)
        self.gt_dataset.clean()
        self.dt_dataset.clean()
        keypoints = "keypoints" in params.iouType
        for gt in gts:
            gt["ignore"] = int(gt.get("iscrowd", 0))
            if keypoints:
                gt["ignore"] = (gt.get("num_keypoints", 0) == 0) or gt["ignore"]
            self.gt_dataset.append_ref(gt["image_id"], gt["category_id"], gt)
        for dt in dts:
            self.dt_dataset.append_ref(dt["image_id"], dt["category_id"], dt)
        self._nonempty_iou_pairs = ({(a["image_id"], a["category_id"]) for a in gts}
                                    & {(a["image_id"], a["category_id"]) for a in dts})

    def _reusable(self, pair) -> bool:
        known = self.earlier.ious if self.earlier is not None else None
        if known is None or pair in self.changed or pair not in known:
            return False
        return len(known[pair]) == 0 or len(known[pair]) >= self._rows(pair)

    def _rows(self, pair) -> int:
        """How many detections of the pair the library evaluates: its strongest, up to the limit."""
        return min(len(self.dt_dataset.get(*pair)), self.params.maxDets[-1])

    def _earlier(self, pair):
        # The overlaps' rows are the detections by score, strongest first: with the weakest left out, the first rows.
        known = self.earlier.ious[pair]
        return known if len(known) == 0 else known[:self._rows(pair)]

    def computeIoU(self, image_id, category_id):  # noqa: N802 - overrides faster-coco-eval's method
        pair = (image_id, category_id)
        return self._earlier(pair) if self._reusable(pair) else super().computeIoU(image_id, category_id)

    def computeOks(self, image_id, category_id):  # noqa: N802 - overrides faster-coco-eval's method
        pair = (image_id, category_id)
        if self._reusable(pair):
            return self._earlier(pair)
        if not hasattr(self, "_computed"):  # the first call: every other pair's OKS at once
            pairs = itertools.product(self.params.imgIds, self.params.catIds if self.params.useCats else [-1])
            self._computed = oks_matrices(self, [p for p in pairs if not self._reusable(p)])
        return self._computed[pair]


def oks_matrices(evaluator, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray | list]:
    """COCO's OKS matrix (detections by score, at most maxDets, x ground-truth people) of every (image, category) in
    `pairs`, computed at once for all of them: the library's computeOks per image, bit for bit (the same operations in
    the same order; each row's sum over its labelled keypoints is a row sum of an array of that width, which numpy
    adds as it adds one row), without its Python loop per person. [] where a pair has no person or no detection."""
    params = evaluator.params
    variances = (np.asarray(params.kpt_oks_sigmas, dtype=np.float64) * 2) ** 2
    k, limit = len(variances), params.maxDets[-1]
    out: dict[tuple[int, int], np.ndarray | list] = {}
    # 1. Every (detection, person) of a pair, as rows: the detections sorted by score as the library sorts them.
    blocks, detections, people = [], [], []
    for pair in pairs:
        truth, found = evaluator.gt_dataset.get(*pair), evaluator.dt_dataset.get(*pair)
        order = np.argsort([-d["score"] for d in found], kind="mergesort")[:limit]
        if len(truth) == 0 or len(order) == 0:
            out[pair] = []
            continue
        blocks.append((pair, len(order), len(truth)))
        detections.extend(found[i]["keypoints"] for i in order)
        people.extend(truth)
    if not blocks:
        return out
    shapes = np.array([(d, g) for _, d, g in blocks], dtype=np.int64)
    det_start = np.r_[0, np.cumsum(shapes[:, 0])[:-1]]
    gt_start = np.r_[0, np.cumsum(shapes[:, 1])[:-1]]
    sizes = shapes[:, 0] * shapes[:, 1]
    block = np.repeat(np.arange(len(blocks)), sizes)
    within = np.arange(sizes.sum()) - np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes)
    det = det_start[block] + within // shapes[block, 1]
    person = gt_start[block] + within % shapes[block, 1]
    predicted = np.asarray(detections, dtype=np.float64).reshape(-1, k, 3)[det]
    truth = np.asarray([p["keypoints"] for p in people], dtype=np.float64).reshape(-1, k, 3)[person]
    boxes = np.asarray([p["bbox"] for p in people], dtype=np.float64)[person]
    if evaluator.use_area:
        areas = np.asarray([p["area"] for p in people], dtype=np.float64)[person]
    else:
        areas = boxes[:, 3] * boxes[:, 2] * 0.53
    # 2. The library's distances: to the labelled keypoints, or outside twice the box for a person with none.
    xd, yd, xg, yg = predicted[:, :, 0], predicted[:, :, 1], truth[:, :, 0], truth[:, :, 1]
    labelled = truth[:, :, 2] > 0
    counted = labelled.sum(axis=1)
    x0, x1 = boxes[:, 0] - boxes[:, 2], boxes[:, 0] + boxes[:, 2] * 2
    y0, y1 = boxes[:, 1] - boxes[:, 3], boxes[:, 1] + boxes[:, 3] * 2
    outside_x = np.maximum(0, x0[:, None] - xd) + np.maximum(0, xd - x1[:, None])
    outside_y = np.maximum(0, y0[:, None] - yd) + np.maximum(0, yd - y1[:, None])
    none = (counted == 0)[:, None]
    dx, dy = np.where(none, outside_x, xd - xg), np.where(none, outside_y, yd - yg)
    similarity = np.exp(-((dx ** 2 + dy ** 2) / variances / (areas + np.spacing(1))[:, None] / 2))
    # 3. The mean over the keypoints counted, rows of one width at a time.
    used = labelled | none
    width = used.sum(axis=1)
    oks = np.empty(len(width))
    for n in np.unique(width):
        rows = np.flatnonzero(width == n)
        oks[rows] = similarity[rows][used[rows]].reshape(len(rows), n).sum(axis=1) / n
    # 4. Back into one matrix per pair.
    for (pair, d, g), start, size in zip(blocks, np.r_[0, np.cumsum(sizes)[:-1]], sizes):
        out[pair] = oks[start:start + size].reshape(d, g)
    return out
