"""Benchmark: a COCO set of 5,000 images and 40,000 objects imported, matched and sliced.

Times `hibug new --coco` (read and check both files and every image, match with faster-coco-eval, TIDE error types,
measured geometry, write the project) and then the first `hibug slices` on it (ready to slice), against the target
(< 60 s together) and against the peer measured in the same run: the same matching by pycocotools alone (COCO +
loadRes + COCOeval evaluate / accumulate / summarize, no images, no store). Both must give the same AP.
Usage: python benchmarks/objects.py [--images 5000] [--objects-per-image 8] [--dir /tmp/hibug-bench-objects]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import timed

CLASSES = ["person", "car", "dog", "bicycle", "chair"]
WIDTH, HEIGHT = 640, 480


def make_data(folder: Path, n_images: int, per_image: int, seed: int = 0) -> tuple[Path, Path]:
    """Images (flat colours, so the files are small) with `per_image` objects each, and a detector's results that
    find most, shift some, confuse some and invent some."""
    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    images, annotations, detections = [], [], []
    for image_id in range(1, n_images + 1):
        name = f"images/{image_id}.png"
        Image.new("RGB", (WIDTH, HEIGHT), tuple(int(v) for v in rng.integers(0, 255, 3))).save(folder / name)
        images.append({"id": image_id, "file_name": name, "width": WIDTH, "height": HEIGHT})
        for _ in range(per_image):
            w, h = rng.uniform(8, 200, 2)
            x, y = rng.uniform(0, WIDTH - w), rng.uniform(0, HEIGHT - h)
            category = int(rng.integers(1, len(CLASSES) + 1))
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0})
            if rng.random() < 0.85:
                jitter = rng.normal(0, 0.1, 4) * [w, h, w, h]
                detections.append({"image_id": image_id, "score": float(rng.random()),
                                   "category_id": category if rng.random() < 0.9 else int(rng.integers(1, 6)),
                                   "bbox": [x + jitter[0], y + jitter[1], max(1.0, w + jitter[2]),
                                            max(1.0, h + jitter[3])]})
        for _ in range(2):
            detections.append({"image_id": image_id, "category_id": int(rng.integers(1, len(CLASSES) + 1)),
                               "bbox": [float(rng.uniform(0, 500)), float(rng.uniform(0, 400)), 50.0, 50.0],
                               "score": float(rng.random())})
    categories = [{"id": i + 1, "name": name} for i, name in enumerate(CLASSES)]
    truth, results = folder / "instances.json", folder / "detector.json"
    truth.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    results.write_text(json.dumps(detections))
    return truth, results


def peer(truth: Path, results: Path, iou_type: str = "bbox") -> tuple[float, float]:
    """pycocotools alone (its evaluation of boxes, or of "keypoints"): seconds and AP."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(truth))
        evaluation = COCOeval(gt, gt.loadRes(str(results)), iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return time.perf_counter() - start, float(evaluation.stats[0])


def import_and_slice(project: Path, truth: Path, results: Path, model: str) -> tuple[float, float]:
    """Seconds of `hibug new --coco` and of the first `hibug slices` on the project it made."""
    hibug = [sys.executable, "-m", "hibug_core.cli"]
    new_s = timed([*hibug, "new", str(project), "--coco", str(truth), "--results", f"{model}={results}"])
    return new_s, timed([*hibug, "slices", str(project), "--model", model, "--top", "5"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--objects-per-image", type=int, default=8)
    parser.add_argument("--dir", default="/tmp/hibug-bench-objects")
    args = parser.parse_args()
    folder = Path(args.dir)
    shutil.rmtree(folder, ignore_errors=True)
    truth, results = make_data(folder / "data", args.images, args.objects_per_image)
    project = folder / "project"
    new_s, slices_s = import_and_slice(project, truth, results, "detector")
    peer_s, peer_ap = peer(truth, results)
    from hibug_core.store.project import Project

    with Project.open(project, read_only=True) as opened:
        ours_ap = opened.object_evaluation("detector")["summary"]["AP"]
        samples = sum(opened.split_counts().values())
    total = new_s + slices_s
    print(f"images={args.images} objects={args.images * args.objects_per_image} samples={samples}")
    print(f"hibug new --coco: {new_s:6.2f} s; first hibug slices: {slices_s:5.2f} s; together {total:6.2f} s "
          f"(target < 60 s: {'PASS' if total < 60 else 'FAIL'})")
    print(f"pycocotools alone (matching and AP only): {peer_s:5.2f} s; hibug's whole import is {new_s / peer_s:.1f}x "
          f"that; AP {ours_ap:.6f} "
          f"(pycocotools {peer_ap:.6f}: {'equal' if abs(ours_ap - peer_ap) < 1e-12 else 'DIFFERENT'})")


if __name__ == "__main__":
    main()
