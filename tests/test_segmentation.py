"""The segmentation task (issue 56): COCO files whose truth and results carry masks make a project of masks, matched
by mask IoU; each object keeps its true mask, the mask that went with it and their Boundary IoU; an object found in
place but outlined badly is an outline error; its masks are measured; another model's masks import the same way."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from test_masks import H, W, _compressed, _disc, _pycocotools_segm_ap, _rle
from test_objects import _write

from hibug_core.cli import main
from hibug_core.errors import HibugError
from hibug_core.objects.masks import stored_pixels
from hibug_core.store.project import Project
from hibug_core.tasks import load_coco


def _box(pixels: np.ndarray) -> list[float]:
    ys, xs = np.nonzero(pixels)
    return [float(xs.min()), float(ys.min()), float(np.ptp(xs) + 1), float(np.ptp(ys) + 1)]


def _scene():
    """Four images of one object each, and a model's masks: a good one; the right box outlined with notches (an
    outline error); a mask placed badly (localization); nothing (missed). A ring is holed, two squares in pieces."""
    rectangle = np.zeros((H, W), bool)
    rectangle[10:40, 10:50] = True
    notched = rectangle.copy()
    for row in range(10, 40, 4):  # teeth cut into every side: the box stays, the outline does not
        notched[row:row + 2, 10:16] = notched[row:row + 2, 44:50] = False
    for column in range(10, 50, 4):
        notched[10:16, column:column + 2] = notched[34:40, column:column + 2] = False
    ring = _disc(32, 24, 14) & ~_disc(32, 24, 6)
    pieces = np.zeros((H, W), bool)
    pieces[5:15, 5:15] = pieces[30:40, 40:50] = True
    masks = {1: rectangle, 2: rectangle, 3: ring, 4: pieces}
    truth = {"images": [{"id": i, "file_name": f"images/{i}.png", "width": W, "height": H} for i in masks],
             "categories": [{"id": 1, "name": "shape"}],
             "annotations": [{"id": i, "image_id": i, "category_id": 1, "segmentation": _rle(m), "iscrowd": 0,
                              "bbox": _box(m), "area": float(m.sum())} for i, m in masks.items()]}
    results = [{"image_id": 1, "category_id": 1, "segmentation": _compressed(rectangle), "score": 0.9},
               {"image_id": 2, "category_id": 1, "segmentation": _compressed(notched), "score": 0.9},
               {"image_id": 3, "category_id": 1, "segmentation": _compressed(_disc(44, 24, 14) & ~_disc(44, 24, 6)),
                "score": 0.8}]
    return truth, results, notched


def test_masks_in_the_truth_and_every_results_file_make_a_project_of_masks(tmp_path):
    truth, results, notched = _scene()
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results})
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"m={paths['m']}"]) == 0
    with Project.open(tmp_path / "p") as project:
        assert project.task == "segmentation"
        samples = project.objects("m").sort_index()
        evaluation = project.object_evaluation("m")
    objects, false = samples[samples["object_kind"] == "object"], samples[samples["object_kind"] == "detection"]
    # 1. Matched by masks: the outcomes, the error types and each mask's Boundary IoU with the one that went with it.
    assert evaluation["settings"]["iou_type"] == "segm" and evaluation["settings"]["outline_threshold"] == 0.5
    assert objects["outcome"].tolist() == ["true positive", "true positive", "missed", "missed"]
    assert objects["error_type"].tolist() == ["", "outline", "localization", "missed"]
    assert objects["iou"].tolist()[:2] == [1.0, pytest.approx(notched.sum() / 1200)]  # inside the true 40 x 30
    assert objects["boundary_iou"].iat[0] == 1.0 and objects["boundary_iou"].iat[1] < 0.5
    assert 0 < objects["boundary_iou"].iat[2] < 0.5 and np.isnan(objects["boundary_iou"].iat[3])
    # 2. Each object keeps its true mask, and the mask that went with it, pixel for pixel.
    truth_masks = [stored_pixels(text) for text in objects["mask_json"]]
    assert all((m == stored_pixels(json.dumps(_rle_of(a)))).all()
               for m, a in zip(truth_masks, truth["annotations"]))
    assert (stored_pixels(objects["pred_mask_json"].iat[1]) == notched).all()
    assert not isinstance(objects["pred_mask_json"].iat[3], str)  # no mask went with it
    # 3. The AP were the outline fixed (the notched mask redrawn as its object's) is pycocotools' on that file.
    fixes = evaluation["fixes"].set_index("error type")
    assert fixes.at["outline", "count"] == 1 and fixes.at["outline", "unit"] == "objects"
    redrawn = [results[0], {**results[1], "segmentation": _compressed(truth_masks[1])}, results[2]]
    assert fixes.at["outline", "AP if fixed"] == pytest.approx(_pycocotools_segm_ap(truth, redrawn, tmp_path))
    assert fixes.at["outline", "AP gain"] > 0
    # 4. The misplaced ring is a false positive of its own, drawn by its own mask.
    assert false["error_type"].tolist() == ["localization"] and false["outcome"].tolist() == ["false positive"]
    assert (stored_pixels(false["mask_json"].iat[0]) == (_disc(44, 24, 14) & ~_disc(44, 24, 6))).all()


def _rle_of(annotation: dict) -> dict:
    from hibug_core.objects.masks import encoded

    rle = encoded(annotation["segmentation"], W, H)
    return {"size": list(rle["size"]), "counts": rle["counts"].decode()}


def test_a_project_of_masks_measures_each_true_mask(tmp_path):
    truth, results, _ = _scene()
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results})
    manifest = load_coco(truth_file, paths)
    assert manifest.task == "segmentation"
    tags = {name: values[:4] for name, values in manifest.known_tags.items()}
    assert tags["is holed"] == ["no", "no", "yes", "no"]
    assert tags["is in pieces"] == ["no", "no", "no", "yes"]
    assert tags["mask fill"] == ["solid", "solid", "partial", "sparse"]  # the two squares fill 200 of 1,260 pixels
    assert tags["mask elongation"][0] == "compact"  # 40 x 30
    assert tags["object size"] == ["medium", "medium", "small", "small"]  # COCO's bins of 1,200; 1,200; 500; 200 px


def test_files_with_masks_may_be_read_as_detection_and_a_task_that_cannot_read_them_is_refused(tmp_path):
    truth, results, _ = _scene()
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results})
    assert load_coco(truth_file, paths, task="detection").task == "detection"
    with pytest.raises(HibugError, match="the pose task reads keypoints and box; keypoints is not carried by every "
                                         "file: the objects of instances.json and the detections of 'm' each need"):
        load_coco(truth_file, paths, task="pose")
    # a model whose results carry no masks: the files draw boxes only, and detection claims them
    boxes_only = [{k: v for k, v in r.items() if k != "segmentation"} | {"bbox": [10.0, 10.0, 40.0, 30.0]}
                  for r in results]
    _, plain = _write(tmp_path / "data", truth, {"boxes": boxes_only})
    assert load_coco(truth_file, plain).task == "detection"
    with pytest.raises(HibugError, match="the segmentation task reads mask and box; mask is not carried by every"):
        load_coco(truth_file, plain, task="segmentation")


def test_another_models_masks_are_matched_as_the_first_models_were(tmp_path):
    truth, results, _ = _scene()
    better = [dict(r, segmentation=_compressed(_disc(32, 24, 14) & ~_disc(32, 24, 6))) if r["image_id"] == 3 else r
              for r in results]
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results, "better": better})
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"m={paths['m']}"]) == 0
        assert main(["import", str(tmp_path / "p"), "--models-only", "--coco", str(truth_file), "--results",
                     f"better={paths['better']}"]) == 0
        assert main(["import", str(tmp_path / "p"), "--models-only", "--coco", str(truth_file), "--results",
                     f"other={paths['m']}", "--task", "detection"]) == 2
    with Project.open(tmp_path / "p") as project:
        objects = project.objects("better").sort_index().iloc[:4]
        assert project.object_evaluation("better")["settings"]["iou_type"] == "segm"
    assert objects["outcome"].tolist() == ["true positive", "true positive", "true positive", "missed"]
    assert objects["iou"].iat[2] == 1.0 and objects["boundary_iou"].iat[2] == 1.0
    assert "this project holds segmentation samples" in quiet.getvalue()


def test_a_picture_of_an_object_of_masks_draws_the_outlines_of_its_true_and_predicted_masks():
    """On the whole image at its own size (a 2-pixel line): the true mask's outline in blue is its exact 2-pixel rim
    (264 pixels of a 40 x 30 rectangle); the predicted mask's in green lies on the predicted mask's own rim; no box
    is drawn."""
    from PIL import Image
    from scipy import ndimage

    from hibug_core.objects.crops import OUTCOME_COLOURS, TRUE_BOX, ObjectPicture, render_picture
    from hibug_core.objects.masks import stored

    truth, _, notched = _scene()
    rectangle = stored_pixels(stored(truth["annotations"][0]["segmentation"], W, H))
    image = Image.new("RGB", (W, H), (250, 250, 250))
    alone = ObjectPicture((10, 10, 40, 30), None, "near miss", mask=stored(_rle(rectangle), W, H))
    pixels = np.asarray(render_picture(image, alone, size=W, whole=True))
    blue = (pixels == TRUE_BOX).all(axis=2)
    assert blue.sum() == 264 and (blue == (rectangle & ~ndimage.binary_erosion(rectangle, iterations=2))).all()
    both = ObjectPicture((10, 10, 40, 30), (10, 10, 40, 30), "true positive", mask=stored(_rle(rectangle), W, H),
                         pred_mask=stored(_compressed(notched), W, H))
    pixels = np.asarray(render_picture(image, both, size=W, whole=True))
    green = (pixels == OUTCOME_COLOURS["true positive"]).all(axis=2)
    assert (green == (notched & ~ndimage.binary_erosion(notched, iterations=2))).all()
    blue = (pixels == TRUE_BOX).all(axis=2)
    assert blue.any() and not (blue & notched).any()  # the true outline shows where the notches cut into it


def test_a_slice_taught_with_masks_that_do_not_outline_it_is_diagnosed_bad_masks_only_when_significant():
    from hibug_core.slices.diagnosis import BAD_MASKS, ObjectEvidence, diagnose

    n_train, n_eval = 200, 100
    bars = np.zeros(n_train, bool)
    bars[:40] = True  # 40 training bars, 36 of them taught with their filled box as the mask
    wrong = np.zeros(n_train)
    wrong[:36] = 1.0
    wrong[150:156] = 1.0  # and 6 others (4% of the rest)
    few = np.zeros(n_train, bool)
    few[100:110] = True  # 10 others, 1 of them taught wrong: no bug
    wrong[100] = 1.0
    evidence = ObjectEvidence(np.ones(n_train, bool), np.ones(n_train, bool), np.ones(n_train),
                              np.full(n_eval, np.nan), train_mask_wrong=wrong)
    eval_bars, eval_few = np.zeros(n_eval, bool), np.zeros(n_eval, bool)
    eval_bars[:15], eval_few[50:60] = True, True
    errors = np.where(eval_bars | eval_few, 1.0, 0.0)
    labels = np.full(n_eval, "bar", dtype=object)
    table = diagnose([eval_bars, eval_few], [bars, few], labels, labels.copy(), errors, objects=evidence,
                     train_labels=np.full(n_train, "bar", dtype=object))
    assert table["bug_type"].tolist()[0] == BAD_MASKS
    assert table["reason"].iat[0] == ("40 in training, 90% of them annotated with a mask that does not outline them in "
                                      "the training annotations (22% of all objects): the model learnt to outline "
                                      "them so")
    assert table["bug_type"].iat[1] != BAD_MASKS


def test_training_masks_are_compared_with_the_true_ones(tmp_path):
    """The evidence per training object: annotated or not, and whether its training mask outlines it (mask IoU 0.5
    or more with its true mask). The training set a repair fine-tunes on reads every image's masks, none for an image
    nobody annotated."""
    from hibug_core.models.object_models import coco_training_set
    from hibug_core.objects.training_evidence import annotation_evidence
    from hibug_core.store.recorded_models import RecordedModel, record_model

    truth, results, _ = _scene()
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results})
    taught = json.loads(json.dumps(truth))
    square = np.zeros((H, W), bool)
    square[10:40, 10:20] = True  # object 2's training mask: a third of it
    taught["annotations"][1]["segmentation"] = _rle(square)
    del taught["annotations"][3]  # object 4 left unannotated
    (tmp_path / "data" / "taught.json").write_text(json.dumps(taught))
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        assert main(["new", str(tmp_path / "p"), "--coco", str(truth_file), "--results", f"m={paths['m']}",
                     "--split", "train"]) == 0
    with Project.open(tmp_path / "p") as project:
        record_model(project, RecordedModel("m", "scene-masks:none.pt", training=str(tmp_path / "data" /
                                                                                      "taught.json")))
        objects = project.objects().join(project.samples()[["label"]])
        objects = objects[objects["object_kind"] == "object"]
        evidence = annotation_evidence(project, "m", objects)
    assert evidence["annotated"].tolist() == [True, True, True, False]
    assert evidence["mask_wrong"].tolist()[:3] == [0.0, 1.0, 0.0] and np.isnan(evidence["mask_wrong"].iat[3])
    trained = coco_training_set(tmp_path / "data" / "taught.json")
    assert [m.shape for m in trained.masks] == [(1, H, W)] * 3 + [(0, H, W)]
    assert (trained.masks[1][0] == square).all()
    assert trained.objects[3][0].shape == (0, 4) and trained.objects[3][1] == []


def test_the_overview_of_a_project_of_masks_charts_outline_errors_and_their_ap_if_fixed(tmp_path, monkeypatch):
    from page_support import bars, charts, open_page

    truth, results, _ = _scene()
    truth_file, paths = _write(tmp_path / "data", truth, {"m": results})
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["new", str(tmp_path / "project"), "--coco", str(truth_file), "--results", f"m={paths['m']}"]) == 0
    at = open_page(monkeypatch, "app.py", tmp_path / "project")
    assert not at.exception
    fixes = next(d.value for d in at.dataframe if "AP if fixed" in d.value.columns).set_index("error type")
    assert fixes["count"].to_dict() == {"classification": 0, "localization": 1, "both": 0, "duplicate": 0,
                                        "background": 0, "missed": 1, "outline": 1}
    titles = [m.value for m in at.markdown if " by " in m.value and m.value.startswith("**")]
    # the object outlined badly was found: it is counted beside the missed ones, on its own chart
    assert titles[:3] == ["**Missed objects and objects found by mask outline (Boundary IoU)**",
                          "**Missed objects by mask error type (TIDE)**",
                          "**False positives by error type** (TIDE; measured apart)"]
    assert [bars(figure) for figure in charts(at)[:3]] == [{"outline": 1}, {"localization": 1, "missed": 1},
                                                            {"localization": 1}]


def _measured_alone(pixels: np.ndarray):
    """One whole-image mask measured by itself with scipy (the reference the canvas of crops must equal): its fill of
    its box, its elongation (numpy's covariance), 4-connected pieces, background regions not reaching the image's edge
    (holes), and the pixels erosion removes (its outline)."""
    import math

    from scipy import ndimage

    from hibug_core.objects.mask_geometry import MaskMeasures

    area = int(pixels.sum())
    rows, columns = np.nonzero(pixels)
    box = (rows.max() - rows.min() + 1) * (columns.max() - columns.min() + 1)
    spread = np.cov(np.c_[columns, rows].T.astype(np.float64)) if area > 1 else np.zeros((2, 2))
    low, high = np.linalg.eigvalsh(spread + np.eye(2) / 12.0)
    _, pieces = ndimage.label(pixels)
    background, regions = ndimage.label(~pixels)
    touching = set(np.unique(np.r_[background[0], background[-1], background[:, 0], background[:, -1]])) - {0}
    inner = ndimage.binary_erosion(pixels, structure=ndimage.generate_binary_structure(2, 1), border_value=0)
    perimeter = int((pixels & ~inner).sum())
    return MaskMeasures(area / box, math.sqrt(high / low), regions - len(touching), pieces,
                        perimeter * perimeter / (4 * math.pi * area))


def test_masks_measured_from_their_encodings_are_measured_as_from_their_pixels():
    """The import measures each stored mask on its box, read from the runs that cross the box's columns; on drawn
    scenes (bars, rings, shapes covering shapes, cut by the border) every tag equals the one measured on the whole
    image's pixels: each mask measured where it lies, its occlusion the largest share of its box another mask of its
    scene covers."""
    from hibug_core.demo.mask_scenes import render_mask_scenes
    from hibug_core.objects.mask_geometry import mask_tags, measure_masks, measure_stored_masks
    from hibug_core.objects.masks import stored

    _, objects, masks = render_mask_scenes(40, 5)
    texts = np.array([stored(_rle_96(m), 96, 96) for m in masks], dtype=object)
    scenes = objects["scene"].to_numpy()
    occlusion = []
    for i, pixels in enumerate(masks):
        rows, columns = np.nonzero(pixels)
        box = np.s_[rows.min():rows.max() + 1, columns.min():columns.max() + 1]
        others = [masks[j][box].sum() for j in np.flatnonzero(scenes == scenes[i]) if j != i]
        occlusion.append(max(others, default=0) / pixels[box].size)
    from_pixels = mask_tags([_measured_alone(m) for m in masks], np.array(occlusion))
    assert measure_stored_masks(texts, scenes).equals(from_pixels)
    assert measure_masks(masks, scenes).equals(from_pixels)
    assert {"none", "partial"} <= set(from_pixels["mask occlusion"]) and (from_pixels["is holed"] == "yes").any()


def _rle_96(pixels: np.ndarray) -> dict:
    from faster_coco_eval.core import mask

    encoded = mask.encode(np.asfortranarray(pixels.astype(np.uint8)))
    return {"size": [int(v) for v in encoded["size"]], "counts": encoded["counts"].decode()}
