"""Benchmark: a COCO set of instance masks (polygons in the ground truth, run-length encodings in the results) read,
checked and matched by hibug, against pycocotools' segm evaluation alone on the same files.

hibug's side is what an import of masks does before the images and the store: read and check both files (every
polygon and RLE against its image), match by mask IoU with faster-coco-eval, TIDE's error types by mask IoU, each
found object's Boundary IoU, and TIDE's AP-if-fixed table (six more evaluations). The peer: pycocotools' COCO +
loadRes + COCOeval("segm") evaluate / accumulate / summarize. Both must give the same AP; the ratio is printed per
stage. (Issue 56's target, under 3x and 60 s ready to slice at 5,000 images, is for the whole import, which needs the
segmentation task: this measures the matching that import will run.)
Usage: python benchmarks/mask_matching.py [--images 5000] [--objects-per-image 8]
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import time

import numpy as np

WIDTH, HEIGHT = 640, 480
CLASSES = ("person", "car", "dog", "bicycle", "chair")


def ellipse(cx: float, cy: float, rx: float, ry: float, points: int = 16) -> list[float]:
    angles = np.linspace(0, 2 * np.pi, points, endpoint=False)
    xy = np.c_[np.clip(cx + rx * np.cos(angles), 0, WIDTH - 1), np.clip(cy + ry * np.sin(angles), 0, HEIGHT - 1)]
    return np.round(xy.ravel(), 1).tolist()


def make_data(n_images: int, per_image: int, seed: int = 0) -> tuple[dict, list[dict]]:
    """Ellipses as polygons; a model's masks that find most (shifted and scaled a little), confuse some classes and
    invent some, as compressed RLEs."""
    from pycocotools import mask

    rng = np.random.default_rng(seed)
    images, annotations, results = [], [], []
    for image_id in range(1, n_images + 1):
        images.append({"id": image_id, "file_name": f"{image_id}.png", "width": WIDTH, "height": HEIGHT})
        for _ in range(per_image):
            rx, ry = rng.uniform(6, 90, 2)
            cx, cy = rng.uniform(rx, WIDTH - rx), rng.uniform(ry, HEIGHT - ry)
            category = int(rng.integers(1, len(CLASSES) + 1))
            polygon = ellipse(cx, cy, rx, ry)
            encoded = mask.frPyObjects([polygon], HEIGHT, WIDTH)[0]
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                                "segmentation": [polygon], "area": float(mask.area(encoded)),
                                "bbox": [float(v) for v in mask.toBbox(encoded)], "iscrowd": 0})
            if rng.random() < 0.85:
                shift, scale = rng.normal(0, 0.1, 2) * [rx, ry], rng.uniform(0.85, 1.15)
                found = mask.frPyObjects([ellipse(cx + shift[0], cy + shift[1], rx * scale, ry * scale)], HEIGHT,
                                         WIDTH)[0]
                results.append({"image_id": image_id, "score": float(rng.random()),
                                "category_id": category if rng.random() < 0.9 else int(rng.integers(1, 6)),
                                "segmentation": {"size": found["size"], "counts": found["counts"].decode()}})
        for _ in range(2):
            invented = mask.frPyObjects([ellipse(*rng.uniform(40, 400, 2), 20, 20)], HEIGHT, WIDTH)[0]
            results.append({"image_id": image_id, "category_id": int(rng.integers(1, len(CLASSES) + 1)),
                            "segmentation": {"size": invented["size"], "counts": invented["counts"].decode()},
                            "score": float(rng.random())})
    truth = {"images": images, "annotations": annotations,
             "categories": [{"id": i + 1, "name": name} for i, name in enumerate(CLASSES)]}
    return truth, results


def pycocotools_segm(truth: dict, results: list[dict]) -> tuple[float, float]:
    """(seconds, AP) of pycocotools' segm evaluation of the files as they are in memory."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth, results = copy.deepcopy(truth), copy.deepcopy(results)  # loadRes writes into its records
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = truth
        gt.createIndex()
        evaluation = COCOeval(gt, gt.loadRes(results), "segm")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return time.perf_counter() - start, float(evaluation.stats[0])


def hibug_matching(truth: dict, results: list[dict]) -> tuple[dict[str, float], float, object]:
    """(seconds per stage, AP, the matches) of hibug reading, checking and matching the files by masks."""
    from hibug_core.objects.coco import parse_ground_truth, parse_results
    from hibug_core.objects.matching import MatchConfig, match

    times = {}
    start = time.perf_counter()
    ground_truth = parse_ground_truth(truth, "instances.json")
    found = parse_results(results, ground_truth, "masks.json", model="m")
    times["read and check"] = time.perf_counter() - start
    start = time.perf_counter()
    matches = match(ground_truth, found, MatchConfig(masks=True))
    times["match, TIDE, boundary IoU, AP if fixed"] = time.perf_counter() - start
    return times, matches.summary["AP"], matches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--objects-per-image", type=int, default=8)
    args = parser.parse_args()
    start = time.perf_counter()
    truth, results = make_data(args.images, args.objects_per_image)
    print(f"{args.images:,} images, {len(truth['annotations']):,} masks, {len(results):,} detections "
          f"(made in {time.perf_counter() - start:.1f} s)")
    peer_s, peer_ap = pycocotools_segm(truth, results)
    times, ap, matches = hibug_matching(truth, results)
    assert abs(ap - peer_ap) < 1e-9, (ap, peer_ap)
    total = sum(times.values())
    for stage, seconds in times.items():
        print(f"  hibug {stage:<42} {seconds:7.1f} s")
    print(f"  pycocotools segm evaluation alone              {peer_s:7.1f} s")
    print(f"hibug / pycocotools: {total / peer_s:.2f}x (AP {ap:.4f} in both; "
          f"{int((matches.objects['outcome'] == 'true positive').sum()):,} objects found)")


if __name__ == "__main__":
    main()
