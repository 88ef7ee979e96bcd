"""Instance masks in COCO files (issue 56's first step): polygons and run-length encodings are checked against their
image, the objects are matched by mask IoU with faster-coco-eval, and the mask AP equals pycocotools' own on the same
files."""
from __future__ import annotations

import contextlib
import copy
import io
import json

import numpy as np
import pytest

from hibug_core.errors import ConfigError, ManifestError
from hibug_core.objects.coco import parse_ground_truth, parse_results
from hibug_core.objects.matching import MatchConfig, match, summarize

W, H = 64, 48


def _disc(cx: float, cy: float, r: float) -> np.ndarray:
    ys, xs = np.mgrid[:H, :W]
    return (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r


def _rle(pixels: np.ndarray) -> dict:
    """An uncompressed COCO run-length encoding (column-major runs, starting with a run of 0s)."""
    flat = pixels.astype(np.uint8).flatten(order="F")
    changes = np.flatnonzero(np.diff(np.r_[0, flat, 1 - flat[-1]])) if len(flat) else []
    runs = np.diff(np.r_[0, changes[changes <= len(flat)], len(flat)]).tolist()
    runs = [r for r in runs if r > 0] if runs[0] != 0 else runs
    if flat[0] == 1:
        runs = [0, *runs]
    assert sum(runs) == len(flat)
    return {"size": list(pixels.shape), "counts": runs}


def _compressed(pixels: np.ndarray) -> dict:
    """A compressed COCO run-length encoding, as a model's results file holds it."""
    from pycocotools import mask

    encoded = mask.encode(np.asfortranarray(pixels.astype(np.uint8)))
    return {"size": [int(v) for v in encoded["size"]], "counts": encoded["counts"].decode()}


def _polygon(cx: float, cy: float, r: float, sides: int = 12) -> list[float]:
    angles = np.linspace(0, 2 * np.pi, sides, endpoint=False)
    return np.round(np.c_[cx + r * np.cos(angles), cy + r * np.sin(angles)].ravel(), 2).tolist()


def _files(seed: int = 3):
    """Twelve images of one or two discs each (a polygon or an RLE per object, one crowd region), and a model's masks:
    some close, some shifted, some of the wrong class, some on nothing."""
    rng = np.random.default_rng(seed)
    images, annotations, results = [], [], []
    for image_id in range(1, 13):
        images.append({"id": image_id, "file_name": f"{image_id}.png", "width": W, "height": H})
        for k in range(1 + image_id % 2):
            cx, cy, r = rng.uniform(14, W - 14), rng.uniform(12, H - 12), rng.uniform(5, 10)
            category = 1 + (image_id + k) % 2
            shape = _disc(cx, cy, r)
            segmentation = [_polygon(cx, cy, r)] if k == 0 else _rle(shape)
            ys, xs = np.nonzero(shape)
            box = [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                                "bbox": box, "segmentation": segmentation, "iscrowd": 0})
            shift = rng.choice([0.0, 1.0, 4.0, 9.0])
            found = _disc(cx + shift, cy, r * rng.uniform(0.8, 1.2))
            wrong = rng.random() < 0.15
            results.append({"image_id": image_id, "category_id": 3 - category if wrong else category,
                            "segmentation": _compressed(found), "score": round(float(rng.uniform(0.3, 1.0)), 3)})
        if image_id % 5 == 0:
            results.append({"image_id": image_id, "category_id": 1, "segmentation": _compressed(_disc(8, 8, 4)),
                            "score": 0.4})
    crowd = _disc(W - 10, H - 10, 6)
    annotations.append({"id": len(annotations) + 1, "image_id": 3, "category_id": 1, "bbox": [W - 16, H - 16, 13, 13],
                        "segmentation": _rle(crowd), "iscrowd": 1})
    truth = {"images": images, "categories": [{"id": 1, "name": "disc"}, {"id": 2, "name": "blob"}],
             "annotations": annotations}
    return truth, results


def test_the_mask_ap_equals_pycocotools_on_the_same_files(tmp_path):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth, results = _files()
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    assert ground_truth.has_masks and found.has_masks
    summary, per_class = summarize(ground_truth, found, MatchConfig(masks=True))
    # COCO files state each object's area; where one does not, hibug takes the mask's (pycocotools needs it given)
    areas = dict(zip(ground_truth.annotations["id"], ground_truth.annotations["area"]))
    encoded = truth["annotations"][1]  # an uncompressed RLE: its area is the sum of its runs of 1s
    assert areas[encoded["id"]] == sum(encoded["segmentation"]["counts"][1::2])
    for annotation in truth["annotations"]:
        annotation["area"] = areas[annotation["id"]]
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(tmp_path / "truth.json"))
        evaluation = COCOeval(gt, gt.loadRes(results), "segm")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    assert list(summary.values()) == pytest.approx(evaluation.stats.tolist(), abs=1e-9)
    assert 0 < summary["AP"] < 1
    # the box AP of the same detections differs: the masks are what is scored
    box_summary, _ = summarize(ground_truth, found, MatchConfig())
    assert box_summary["AP"] != pytest.approx(summary["AP"], abs=1e-6)


def test_objects_are_matched_by_mask_iou_and_the_settings_remember_it(tmp_path):
    truth, results = _files()
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    matches = match(ground_truth, found, MatchConfig(masks=True, confidence_threshold=0.0))
    assert matches.iou_type == "segm" and matches.settings["iou_type"] == "segm"
    hits = matches.objects[matches.objects["outcome"] == "true positive"]
    assert len(hits) > 0 and (hits["iou"] >= 0.5).all()
    # a hit's IoU is its masks': computed here from the pixels, it is the same
    first = hits.iloc[0]
    detection = found.records[int(matches.detections.index[matches.detections["object"] == hits.index[0]][0])]
    annotation = next(a for a in truth["annotations"] if a["id"] == hits.index[0])
    from hibug_core.objects import masks

    truth_pixels = masks.pixels(annotation["segmentation"], W, H)
    found_pixels = masks.pixels(detection["segmentation"], W, H)
    iou = (truth_pixels & found_pixels).sum() / (truth_pixels | found_pixels).sum()
    assert first["iou"] == pytest.approx(iou, abs=1e-9)
    from hibug_core.objects.matching import stored_match_config

    assert stored_match_config(matches.settings).masks


@pytest.mark.parametrize("segmentation, problem", [
    ([[1, 2, 3, 4]], "each polygon is a flat list [x1, y1, x2, y2, ...] of three points or more"),
    ([[1, 2, 3, 4, 5, float("nan")]], "a polygon's coordinates must be finite numbers"),
    ([[1, 2, 3, 4, 5, 10 ** 400]], "a polygon's coordinates must be finite numbers"),  # no float holds it
    ([[1, 2, 3, 4, 5, True]], "a polygon's coordinates must be finite numbers"),
    ({"size": [10, 10], "counts": [100]}, "its size [10, 10] is not its image's [height, width] = [48, 64]"),
    ({"size": [H, W], "counts": [5, 6]}, f"its counts cover 11 pixels, not the image's {H * W:,}"),
    ({"size": [H, W]}, "a run-length encoding needs 'counts'"),
    ("a disc", "must be a list of polygons"),
    # geometry bounded by its image before anything is drawn (a far point made the library allocate gigabytes)
    ([[0, 0, 10, 0, 3e7, 10]], "has a point (3e+07, 10) far outside its image (64 x 48)"),
    ([[0, 0, 10, 0, 1e308, 10]], "has a point (1e+308, 10) far outside its image (64 x 48)"),
    ([[0, 0, 10, 0, 10, -49]], "has a point (10, -49) far outside its image"),
    ([[float(v % 7) for v in range(100_002)]], "has more than 50,000 polygon points; simplify the outline"),
    ([[-64, -48, 128, 96] * 12_000], "its outline is 4,632,000 pixels long, more than the 2,000,000"),
    ({"size": [H, W], "counts": "zz"}, "its compressed 'counts' cover 20 pixels, not the image's 3,072"),
    ({"size": [H, W], "counts": "abc"}, "its compressed 'counts' are not a COCO run-length encoding"),
    ({"size": [True, W], "counts": [H * W]}, "a run-length encoding needs 'size': [height, width]"),
])
def test_a_bad_mask_is_named_by_file_record_and_field(tmp_path, segmentation, problem):
    truth, results = _files()
    truth["annotations"][2]["segmentation"] = segmentation
    with pytest.raises(ManifestError) as raised:
        parse_ground_truth(truth, str(tmp_path / "truth.json"))
    assert "annotations[2]" in str(raised.value) and "segmentation" in str(raised.value)
    assert problem in str(raised.value)
    truth, results = _files()
    results[4]["segmentation"] = segmentation
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    with pytest.raises(ManifestError, match=r"results\[4\]"):
        parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")


def test_a_results_mask_on_an_image_of_unknown_size_is_named_not_a_crash(tmp_path):
    truth, results = _files()
    for annotation in truth["annotations"]:  # boxes only, so the images' sizes may go unsaid
        annotation.pop("segmentation", None)
    for image in truth["images"]:
        image.pop("width"), image.pop("height")
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    with pytest.raises(ManifestError) as raised:
        parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    assert "results[0], field 'segmentation': its image needs its 'width' and 'height' in 'images'" in str(raised.value)


def test_mask_matching_without_masks_says_what_is_missing(tmp_path):
    truth, results = _files()
    for record in results:
        record.pop("segmentation")
        record["bbox"] = [1.0, 1.0, 5.0, 5.0]
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    with pytest.raises(ConfigError, match="but the results outline no object with a mask"):
        summarize(ground_truth, found, MatchConfig(masks=True))


def test_tides_error_types_are_told_by_the_masks_when_matched_by_masks(tmp_path):
    """A detection whose box covers an object's box exactly but whose mask is the box's corners, outside the object:
    by boxes a duplicate of the found object, by masks a detection on the background."""
    disc = _disc(30, 24, 10)
    ys, xs = np.nonzero(disc)
    box = [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]
    corners = np.zeros_like(disc)
    corners[ys.min():ys.max() + 1, xs.min():xs.max() + 1] = True
    corners &= ~disc
    truth = {"images": [{"id": 1, "file_name": "1.png", "width": W, "height": H}],
             "categories": [{"id": 1, "name": "disc"}],
             "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": box, "segmentation": _rle(disc),
                              "iscrowd": 0}]}
    results = [{"image_id": 1, "category_id": 1, "bbox": box, "segmentation": _compressed(disc), "score": 0.9},
               {"image_id": 1, "category_id": 1, "bbox": box, "segmentation": _compressed(corners), "score": 0.8}]
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    by_masks = match(ground_truth, found, MatchConfig(masks=True)).detections
    by_boxes = match(ground_truth, found, MatchConfig()).detections
    assert by_masks["outcome"].tolist() == ["true positive", "false positive"]
    assert by_masks["error_type"].iat[1] == "background" and by_masks["iou"].iat[1] == 0
    assert by_boxes["error_type"].iat[1] == "duplicate" and by_boxes["iou"].iat[1] == 1


def _library_boundary_iou(found: dict, truth: dict) -> float:
    """The reference: the library's own Boundary IoU (faster-coco-eval's boundary regions of both whole masks, then
    their IoU)."""
    from faster_coco_eval.core import mask

    from hibug_core.objects import masks

    regions = [mask.rleToBoundary(masks.encoded(value, *value["size"][::-1]), 0.02) for value in (found, truth)]
    return float(np.asarray(mask.iou([regions[0]], [regions[1]], [0])).reshape(-1)[0])


def test_boundary_iou_is_the_iou_of_the_masks_boundary_regions():
    """Cheng et al.'s boundary region of a 30 x 40 rectangle on a 64 x 48 image is its 2-pixel rim (d = 0.02 of the
    80-pixel diagonal, rounded): 1,200 - 26 x 36 = 264 pixels, so a rectangle one pixel narrower (rim 260) shares 234
    rim pixels with it. A mask outlined raggedly keeps most of its mask IoU and loses most of its boundary IoU."""
    from hibug_core.objects import masks

    def compressed(pixels: np.ndarray) -> dict:
        return masks.compressed(_rle(pixels), W, H)

    rectangle = np.zeros((H, W), bool)
    rectangle[10:40, 10:50] = True
    narrower = rectangle.copy()
    narrower[:, 49] = False
    ragged = rectangle.copy()
    ragged[10:40:2, 10] = False  # every other pixel of its left and right edges left out
    ragged[10:40:2, 49] = False
    found = [compressed(m) for m in (rectangle, narrower, ragged, _disc(15, 15, 6))]
    truth = [compressed(m) for m in (rectangle, rectangle, rectangle, _disc(45, 30, 6))]
    ious = masks.paired_boundary_ious(found, truth, [1] * 4, {1: (W, H)})
    assert ious[0] == 1.0 and ious[1] == pytest.approx(234 / (264 + 260 - 234)) and ious[3] == 0.0
    mask_iou = masks.mask_iou([_rle(ragged)], [_rle(rectangle)], W, H)[0, 0]
    assert mask_iou == pytest.approx(1 - 30 / 1200) and ious[2] < mask_iou - 0.05
    assert ious.tolist() == pytest.approx([_library_boundary_iou(f, t) for f, t in zip(found, truth)], abs=1e-12)


def test_mask_attributes_are_measured_exactly_from_the_pixels():
    """A 30 x 40 rectangle fills its box, is compact (sides 4:3) and smooth: its rim of 136 pixels gives
    136^2 / (4 pi 1200) = 1.23. A 2 x 40 bar is thin (20:1), a ring has a hole, two squares are in pieces, a comb's
    outline is ragged, and a square half covered by another object's mask is heavily occluded. Yes/no attributes are
    named "is ...", as the schema wants."""
    from hibug_core.objects.mask_geometry import mask_attributes, measure_mask, measure_masks

    def canvas() -> np.ndarray:
        return np.zeros((H, W), bool)

    rectangle = canvas()
    rectangle[5:35, 10:50] = True
    measured = measure_mask(rectangle)
    assert (measured.fill, measured.holes, measured.pieces) == (1.0, 0, 1)
    assert measured.elongation == pytest.approx(40 / 30, rel=1e-3)
    assert measured.outline == pytest.approx(136 ** 2 / (4 * np.pi * 1200))
    bar = canvas()
    bar[10:12, 5:45] = True
    ring = _disc(30, 24, 10) & ~_disc(30, 24, 4)
    squares = canvas()
    squares[5:15, 5:15] = squares[30:40, 40:50] = True
    comb = canvas()
    comb[5:10, 5:60] = True
    comb[10:40, 5:60:3] = True
    occluded, cover = canvas(), canvas()
    occluded[20:30, 20:30] = True
    cover[20:30, 25:40] = True
    table = measure_masks([rectangle, bar, ring, squares, comb, occluded, cover], np.array([1, 2, 3, 4, 5, 6, 6]))
    assert table["mask fill"].tolist() == ["solid", "solid", "partial", "sparse", "partial", "solid", "solid"]
    assert table["mask elongation"].tolist()[:2] == ["compact", "thin"]
    assert table["is holed"].tolist() == ["no", "no", "yes", "no", "no", "no", "no"]
    assert table["is in pieces"].tolist() == ["no", "no", "no", "yes", "no", "no", "no"]
    assert table["outline"].iat[0] == "smooth" and table["outline"].iat[4] == "ragged"
    assert table["mask occlusion"].tolist() == ["none"] * 5 + ["heavy", "partial"]  # 50 of 100; 50 of 150
    assert [a.name for a in mask_attributes()] == list(table.columns)


def _pycocotools_segm_ap(truth: dict, results: list[dict], folder) -> float:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    path = folder / "pycocotools-truth.json"
    path.write_text(json.dumps(truth))
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(path))
        evaluation = COCOeval(gt, gt.loadRes(copy.deepcopy(results)), "segm")  # loadRes writes into its records
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return float(evaluation.stats[0])


def test_tides_ap_if_fixed_table_for_masks_equals_pycocotools_on_the_fixed_files(tmp_path):
    """Three errors: a badly placed mask (localization), a confident mask on nothing (background) and an object no
    mask found (missed). Each fix's AP equals pycocotools' AP on the files fixed by hand the same way."""
    one, two, three = _disc(20, 20, 8), _disc(45, 20, 8), _disc(30, 30, 9)

    def annotation(k, image, pixels):
        ys, xs = np.nonzero(pixels)
        return {"id": k, "image_id": image, "category_id": 1, "segmentation": _rle(pixels), "iscrowd": 0,
                "area": float(pixels.sum()), "bbox": [float(xs.min()), float(ys.min()), float(np.ptp(xs) + 1),
                                                      float(np.ptp(ys) + 1)]}

    truth = {"images": [{"id": i, "file_name": f"{i}.png", "width": W, "height": H} for i in (1, 2)],
             "categories": [{"id": 1, "name": "disc"}],
             "annotations": [annotation(1, 1, one), annotation(2, 1, two), annotation(3, 2, three)]}
    results = [{"image_id": 1, "category_id": 1, "segmentation": _compressed(one), "score": 0.9},
               {"image_id": 1, "category_id": 1, "segmentation": _compressed(_disc(51, 20, 8)), "score": 0.8},
               {"image_id": 1, "category_id": 1, "segmentation": _compressed(_disc(8, 40, 5)), "score": 0.95}]
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    matches = match(ground_truth, found, MatchConfig(masks=True))
    assert matches.detections["error_type"].tolist() == ["", "localization", "background"]
    table = matches.fixes.set_index("error type")
    assert table["count"].to_dict() == {"classification": 0, "localization": 1, "both": 0, "duplicate": 0,
                                        "background": 1, "missed": 1, "outline": 0}
    base = _pycocotools_segm_ap(truth, results, tmp_path)
    assert matches.summary["AP"] == pytest.approx(base, abs=1e-9)
    placed = [results[0], {**results[1], "segmentation": _compressed(two)}, results[2]]
    assert table.at["localization", "AP if fixed"] == pytest.approx(_pycocotools_segm_ap(truth, placed, tmp_path))
    assert table.at["background", "AP if fixed"] == pytest.approx(_pycocotools_segm_ap(truth, results[:2], tmp_path))
    found_all = {**truth, "annotations": truth["annotations"][:2]}
    assert table.at["missed", "AP if fixed"] == pytest.approx(_pycocotools_segm_ap(found_all, results, tmp_path))
    assert (table.loc[["localization", "background", "missed"], "AP gain"] > 0).all()
    assert table.at["classification", "AP gain"] == 0


def test_a_found_object_carries_its_boundary_iou_which_tells_a_ragged_outline_from_a_good_one(tmp_path):
    rectangle = np.zeros((H, W), bool)
    rectangle[10:40, 10:50] = True
    ragged = rectangle.copy()
    ragged[10:40:2, 10] = ragged[10:40:2, 49] = False
    other = np.zeros((H, W), bool)
    other[5:25, 5:25] = True
    truth = {"images": [{"id": i, "file_name": f"{i}.png", "width": W, "height": H} for i in (1, 2, 3)],
             "categories": [{"id": 1, "name": "box"}],
             "annotations": [{"id": i, "image_id": i, "category_id": 1, "segmentation": _rle(m), "iscrowd": 0,
                              "bbox": b} for i, m, b in ((1, rectangle, [10, 10, 40, 30]),
                                                          (2, rectangle, [10, 10, 40, 30]),
                                                          (3, other, [5, 5, 20, 20]))]}
    results = [{"image_id": 1, "category_id": 1, "segmentation": _compressed(rectangle), "score": 0.9},
               {"image_id": 2, "category_id": 1, "segmentation": _compressed(ragged), "score": 0.9}]
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    found = parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    objects = match(ground_truth, found, MatchConfig(masks=True)).objects
    assert objects["iou"].tolist()[:2] == [1.0, pytest.approx(1 - 30 / 1200)]
    assert objects["boundary_iou"].iat[0] == 1.0 and objects["boundary_iou"].iat[1] < objects["iou"].iat[1] - 0.05
    assert np.isnan(objects["boundary_iou"].iat[2]) and objects["outcome"].iat[2] == "missed"


def test_boundary_ious_measured_on_crops_equal_the_librarys_on_whole_images():
    """Each pair is measured on its union box, all pairs of one image size at once on canvases; every Boundary IoU
    equals the library's own on the whole images: discs and boxes inside the image, cut by its border, far apart,
    overlapping, one mask empty, on images of two sizes (d = 2 and 7 pixels)."""
    from hibug_core.objects import masks

    rng = np.random.default_rng(7)
    sizes = {1: (W, H), 2: (300, 200)}
    found, truth, images = [], [], []
    for k in range(240):
        image = 1 + k % 2
        width, height = sizes[image]
        ys, xs = np.mgrid[:height, :width]
        cx, cy, r = rng.uniform(-5, width + 5), rng.uniform(-5, height + 5), rng.uniform(3, height / 3)
        a = (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r
        if k % 3 == 0:  # a box where the disc is
            a = (abs(xs - cx) <= r) & (abs(ys - cy) <= r * 0.6)
        b = (xs - cx - rng.normal(0, 3)) ** 2 + (ys - cy - rng.normal(0, 3)) ** 2 <= (r * rng.uniform(0.7, 1.3)) ** 2
        if k % 40 == 5:
            b[:] = False
        found.append(masks.compressed(_rle(a), width, height))
        truth.append(masks.compressed(_rle(b), width, height))
        images.append(image)
    paired = masks.paired_boundary_ious(found, truth, images, sizes)
    reference = [_library_boundary_iou(f, t) for f, t in zip(found, truth)]
    assert paired.tolist() == pytest.approx(reference, abs=1e-12)
    assert 0 < (paired == 0).sum() < 60 and (paired > 0.5).sum() > 40


def test_objects_per_image_are_bounded_in_the_truth_and_the_results(tmp_path):
    from hibug_core.objects.masks import MAX_OBJECTS_PER_IMAGE

    truth, results = _files()
    many = [{"id": 1000 + k, "image_id": 2, "category_id": 1, "bbox": [1.0, 1.0, 4.0, 4.0], "iscrowd": 0,
             "segmentation": [[1, 1, 5, 1, 5, 5]]} for k in range(MAX_OBJECTS_PER_IMAGE + 1)]
    with pytest.raises(ManifestError, match="image 2 has 10,002 annotations, more than the 10,000 hibug measures"):
        parse_ground_truth({**truth, "annotations": truth["annotations"] + many}, str(tmp_path / "truth.json"))
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    flood = [{"image_id": 4, "category_id": 1, "bbox": [1.0, 1.0, 3.0, 3.0], "score": 0.5}] * MAX_OBJECTS_PER_IMAGE
    with pytest.raises(ManifestError, match="image 4 has 10,001 results"):
        parse_results(results + flood, ground_truth, str(tmp_path / "results.json"), model="m")


def test_one_object_without_its_mask_in_a_mask_set_is_named(tmp_path):
    truth, _ = _files()
    truth["annotations"][3]["segmentation"] = None
    with pytest.raises(ManifestError) as raised:
        parse_ground_truth(truth, str(tmp_path / "truth.json"))
    assert "annotations[3], field 'segmentation': has no mask, while 18 other objects have one" in str(raised.value)
    for annotation in truth["annotations"]:  # none at all: a box project, as it says
        annotation.pop("segmentation")
    assert not parse_ground_truth(truth, str(tmp_path / "truth.json")).has_masks


def test_an_image_larger_than_hibug_reads_is_refused_before_its_masks_are_drawn(tmp_path):
    truth, _ = _files()
    truth["images"][0].update(width=100_000, height=100_000)
    with pytest.raises(ManifestError, match=r"images\[0\], field 'width': 100000 x 100000 is more than the"):
        parse_ground_truth(truth, str(tmp_path / "truth.json"))


def test_a_far_polygon_is_refused_in_bounded_memory(tmp_path):
    """The polygon that grew a server by 3.4 GB (a vertex at 3e7 px) and a 10 MB polygon: refused, memory flat."""
    import subprocess
    import sys

    truth, results = _files()
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    far = [{"image_id": 1, "category_id": 1, "score": 0.9, "segmentation": [[0, 0, 10, 0, 3e7, 10]]},
           {"image_id": 1, "category_id": 1, "score": 0.9, "segmentation": [[float(v % 40) for v in range(1_000_000)]]}]
    (tmp_path / "results.json").write_text(json.dumps(results + far))
    script = (
        "import sys\n"
        "from hibug_core.errors import ManifestError\n"
        "from hibug_core.objects.coco import read_ground_truth, read_results\n"
        "truth = read_ground_truth(sys.argv[1])\n"
        "def peak():\n    status = open('/proc/self/status').read().splitlines()\n"
        "    return int(next(l for l in status if l.startswith('VmHWM:')).split()[1])\n"
        "before = peak()\n"
        "try:\n    read_results(sys.argv[2], truth)\nexcept ManifestError as error:\n    print(error)\n"
        "print('grew', (peak() - before) // 1024, 'MB')\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "truth.json"), str(tmp_path / "results.json")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "far outside its image (64 x 48)" in out.stdout and "more than 50,000 polygon points" in out.stdout
    assert int(out.stdout.split("grew ")[1].split()[0]) < 300, out.stdout  # the JSON itself: ~100 MB


def test_overlaps_of_many_objects_on_one_image_are_worked_in_blocks_with_the_same_result():
    import pandas as pd

    from hibug_core.objects import geometry

    rng = np.random.default_rng(0)
    n = 600
    boxes = np.c_[rng.uniform(0, 500, (n, 2)), rng.uniform(5, 80, (n, 2))]
    others = pd.DataFrame({"id": np.arange(n), "image_id": 1, "x": boxes[:, 0], "y": boxes[:, 1], "w": boxes[:, 2],
                           "h": boxes[:, 3]})
    whole = geometry._largest_cover(boxes, np.ones(n, int), np.arange(n), others)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("hibug_core.objects.coco.PAIR_BLOCK", 1000)  # two rows at a time
        patched.setattr(geometry, "row_blocks", lambda r, c: [slice(s, min(s + 2, r)) for s in range(0, r, 2)])
        blocked = geometry._largest_cover(boxes, np.ones(n, int), np.arange(n), others)
    np.testing.assert_array_equal(whole, blocked)
    assert whole.max() > 0.5


@pytest.mark.parametrize("field, problem", [
    ("iscrowd", "field 'iscrowd': must be 0 or 1; found true"),
    ("category_id", "field 'category_id': true is not the id of a category"),
    ("image_id", "field 'image_id': true is not the id of an image"),
])
def test_a_yes_no_where_a_coco_number_is_expected_is_refused_in_the_truth(tmp_path, field, problem):
    truth, _ = _files()
    truth["annotations"][0][field] = True  # true == 1 in Python: it was read as category, image or crowd 1
    with pytest.raises(ManifestError) as raised:
        parse_ground_truth(truth, str(tmp_path / "truth.json"))
    assert f"annotations[0], {problem}" in str(raised.value)


def test_more_annotation_attributes_than_a_project_holds_are_refused(tmp_path):
    truth, _ = _files()
    truth["annotations"][0]["attributes"] = {f"a{k}": "x" for k in range(201)}
    with pytest.raises(ManifestError, match="201 attribute names, more than the 200 a project holds"):
        parse_ground_truth(truth, str(tmp_path / "truth.json"))


def test_a_box_or_keypoints_far_outside_the_image_are_refused_too(tmp_path):
    truth, results = _files()
    ground_truth = parse_ground_truth(truth, str(tmp_path / "truth.json"))
    results[1] = {"image_id": 1, "category_id": 1, "bbox": [1.0, 1.0, 1e300, 5.0], "score": 0.5}
    with pytest.raises(ManifestError) as raised:
        parse_results(results, ground_truth, str(tmp_path / "results.json"), model="m")
    assert "results[1], field 'bbox': has a point (1, 1) far outside" not in str(raised.value)
    assert "results[1], field 'bbox': has a point (1e+300, 6) far outside its image (64 x 48)" in str(raised.value)
