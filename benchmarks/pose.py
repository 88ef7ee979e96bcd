"""Benchmark: a COCO keypoint set of 5,000 images and 11,000 people with a pose model's results, imported, matched by
OKS, typed (Ronchi and Perona's keypoint errors, the AP each fix would give) and sliced.

Times `hibug new --coco` (read and check both files and every image, match with faster-coco-eval, type every
keypoint, the keypoint AP with each error type fixed, measured geometry and keypoint attributes, write the project)
and then the first `hibug slices` on it (ready to slice), against the target (< 60 s together) and against the peer
measured in the same run: pycocotools' keypoint evaluation alone (COCO + loadRes + COCOeval evaluate / accumulate /
summarize, no images, no store; target: hibug's import within 3x of it). Both must give the same keypoint AP.
Each is run --repeats times, alternating, and their medians are compared.
Usage: python benchmarks/pose.py [--images 5000] [--people 11000] [--dir /tmp/hibug-bench-pose] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from objects import import_and_slice, peer

from hibug_core.objects.keypoint_errors import mirror_pairs
from hibug_core.objects.matching import COCO_PERSON_KEYPOINTS, COCO_PERSON_SKELETON

WIDTH, HEIGHT = 640, 480
# (x, y) of each keypoint in a unit box, standing and facing the camera (the person's left on the image's right)
STANDING = np.array([(.5, .08), (.55, .05), (.45, .05), (.6, .07), (.4, .07), (.7, .25), (.3, .25), (.8, .42),
                     (.2, .42), (.85, .58), (.15, .58), (.62, .55), (.38, .55), (.63, .77), (.37, .77), (.64, .97),
                     (.36, .97)])
MIRROR = list(mirror_pairs(COCO_PERSON_KEYPOINTS))


def make_data(folder: Path, n_images: int, n_people: int, seed: int = 0) -> tuple[Path, Path]:
    """Images (flat colours, so the files are small) with people spread over them, and a pose model's results that
    find most with jitter, invert some (left for right), swap some joints between neighbours, miss some joints,
    miss some people and invent a few."""
    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    per_image = np.bincount(rng.integers(0, n_images, n_people), minlength=n_images)
    images, annotations, results = [], [], []
    for image_id in range(1, n_images + 1):
        name = f"images/{image_id}.png"
        Image.new("RGB", (WIDTH, HEIGHT), tuple(int(v) for v in rng.integers(0, 255, 3))).save(folder / name)
        images.append({"id": image_id, "file_name": name, "width": WIDTH, "height": HEIGHT})
        people = []
        for _ in range(per_image[image_id - 1]):
            h = float(rng.uniform(60, 300))
            w = h * float(rng.uniform(0.35, 0.6))
            x, y = float(rng.uniform(0, WIDTH - w)), float(rng.uniform(0, HEIGHT - h))
            points = STANDING * [w, h] + [x, y]
            visibility = np.where(rng.random(17) < 0.1, 1, 2)
            visibility[rng.random(17) < 0.05] = 0
            truth = np.column_stack([points, visibility])
            truth[visibility == 0, :2] = 0
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": 1,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                                "keypoints": truth.ravel().round(2).tolist(),
                                "num_keypoints": int((visibility > 0).sum())})
            people.append(points)
        for i, points in enumerate(people):
            if rng.random() < 0.08:  # a missed person
                continue
            scale = float(np.ptp(points[:, 1]))
            predicted = points + rng.normal(0, 0.02 * scale, points.shape)
            if rng.random() < 0.15:  # seen the wrong way round: left and right inverted
                predicted = predicted[MIRROR]
            if len(people) > 1 and rng.random() < 0.2:  # a joint put on a neighbour
                j = int(rng.integers(0, 17))
                predicted[j] = people[(i + 1) % len(people)][j]
            gone = rng.random(17) < 0.05  # joints put nowhere near
            predicted[gone] += rng.normal(0, 0.5 * scale, (int(gone.sum()), 2))
            results.append({"image_id": image_id, "category_id": 1, "score": float(rng.uniform(0.3, 1.0)),
                            "keypoints": np.column_stack([predicted, np.ones(17)]).ravel().round(2).tolist()})
        if rng.random() < 0.1:  # a person where there is none
            box = STANDING * [60, 120] + [float(rng.uniform(0, WIDTH - 60)), float(rng.uniform(0, HEIGHT - 120))]
            results.append({"image_id": image_id, "category_id": 1, "score": float(rng.uniform(0.3, 0.9)),
                            "keypoints": np.column_stack([box, np.ones(17)]).ravel().round(2).tolist()})
    categories = [{"id": 1, "name": "person", "keypoints": list(COCO_PERSON_KEYPOINTS),
                   "skeleton": [list(limb) for limb in COCO_PERSON_SKELETON]}]
    truth, predictions = folder / "person_keypoints.json", folder / "pose.json"
    truth.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    predictions.write_text(json.dumps(results))
    return truth, predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--people", type=int, default=11_000)
    parser.add_argument("--dir", default="/tmp/hibug-bench-pose")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, alternating; medians are compared")
    args = parser.parse_args()
    folder = Path(args.dir)
    shutil.rmtree(folder, ignore_errors=True)
    truth, results = make_data(folder / "data", args.images, args.people)
    project = folder / "project"
    runs, peers = [], []
    for _ in range(args.repeats):  # alternating, so that a loaded moment weighs on both
        shutil.rmtree(project, ignore_errors=True)
        runs.append(import_and_slice(project, truth, results, "pose"))
        peers.append(peer(truth, results, "keypoints"))
    new_s, slices_s = (statistics.median(r[i] for r in runs) for i in (0, 1))
    peer_s, peer_ap = statistics.median(p[0] for p in peers), peers[0][1]
    print(f"medians of {args.repeats}: hibug new --coco {', '.join(f'{r[0]:.2f}' for r in runs)} s; pycocotools "
          f"{', '.join(f'{p[0]:.2f}' for p in peers)} s")
    from hibug_core.store.project import Project

    with Project.open(project, read_only=True) as opened:
        evaluation = opened.object_evaluation("pose")
        people = opened.objects("pose")
        typed = int(people["keypoint_types"].notna().sum())
        samples = sum(opened.split_counts().values())
    ours_ap = evaluation["summary"]["AP"]
    total = new_s + slices_s
    print(f"images={args.images} people={args.people} samples={samples} people typed={typed}")
    print(f"hibug new --coco: {new_s:6.2f} s; first hibug slices: {slices_s:5.2f} s; together {total:6.2f} s "
          f"(target < 60 s: {'PASS' if total < 60 else 'FAIL'})")
    print(f"pycocotools' keypoint evaluation alone: {peer_s:5.2f} s; hibug's whole import is {new_s / peer_s:.1f}x "
          f"that (target within 3x: {'PASS' if new_s <= 3 * peer_s else 'FAIL'}); keypoint AP {ours_ap:.6f} "
          f"(pycocotools {peer_ap:.6f}: {'equal' if abs(ours_ap - peer_ap) < 1e-12 else 'DIFFERENT'})")
    print(evaluation["fixes"].to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
