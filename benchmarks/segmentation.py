"""Benchmark: a COCO instance-segmentation set of 5,000 images and 40,000 masks with a mask model's results, imported
as a project of masks, matched by mask IoU, typed and sliced.

Times `hibug new --coco` (read and check both files, every polygon and RLE and every image; match by mask IoU with
faster-coco-eval; TIDE's types by mask IoU, each object's Boundary IoU and outline errors; the AP with each error type
fixed; box and mask attributes measured; the masks stored) and then the first `hibug slices` on it (ready to slice),
against the target (< 60 s together) and against the peer measured in the same run: pycocotools' segm evaluation
alone (COCO + loadRes + COCOeval evaluate / accumulate / summarize; no images, no store; target: hibug's import within
3x of it). Both must give the same mask AP. Each is run --repeats times, alternating, and their medians are compared.
Usage: python benchmarks/segmentation.py [--images 5000] [--objects-per-image 8] [--dir /tmp/hibug-bench-masks]
       [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mask_matching import HEIGHT, WIDTH, make_data
from objects import import_and_slice, peer


def write_data(folder: Path, n_images: int, per_image: int) -> tuple[Path, Path]:
    """The files of mask_matching.make_data (ellipses as polygons; the model's masks as compressed RLEs) with their
    images (flat colours, so the files are small)."""
    truth, results = make_data(n_images, per_image)
    (folder / "images").mkdir(parents=True)
    for image in truth["images"]:
        image["file_name"] = f"images/{image['file_name']}"
        Image.new("RGB", (WIDTH, HEIGHT), ((image["id"] * 37) % 255, 120, 200)).save(folder / image["file_name"])
    paths = folder / "instances.json", folder / "masks.json"
    paths[0].write_text(json.dumps(truth))
    paths[1].write_text(json.dumps(results))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--objects-per-image", type=int, default=8)
    parser.add_argument("--dir", default="/tmp/hibug-bench-masks")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, alternating; medians are compared")
    args = parser.parse_args()
    folder = Path(args.dir)
    shutil.rmtree(folder, ignore_errors=True)
    truth, results = write_data(folder / "data", args.images, args.objects_per_image)
    project = folder / "project"
    runs, peers = [], []
    for _ in range(args.repeats):  # alternating, so that a loaded moment weighs on both
        shutil.rmtree(project, ignore_errors=True)
        runs.append(import_and_slice(project, truth, results, "masks"))
        peers.append(peer(truth, results, "segm"))
    new_s, slices_s = (statistics.median(r[i] for r in runs) for i in (0, 1))
    peer_s, peer_ap = statistics.median(p[0] for p in peers), peers[0][1]
    print(f"medians of {args.repeats}: hibug new --coco {', '.join(f'{r[0]:.2f}' for r in runs)} s; pycocotools "
          f"{', '.join(f'{p[0]:.2f}' for p in peers)} s")
    from hibug_core.store.project import Project

    with Project.open(project, read_only=True) as opened:
        task = opened.task
        evaluation = opened.object_evaluation("masks")
        objects = opened.objects("masks")
        samples = sum(opened.split_counts().values())
    ours_ap = evaluation["summary"]["AP"]
    total = new_s + slices_s
    print(f"images={args.images} masks={args.images * args.objects_per_image} samples={samples} task={task} "
          f"outline errors={int((objects['error_type'] == 'outline').sum())}")
    print(f"hibug new --coco: {new_s:6.2f} s; first hibug slices: {slices_s:5.2f} s; together {total:6.2f} s "
          f"(target < 60 s: {'PASS' if total < 60 else 'FAIL'})")
    print(f"pycocotools' segm evaluation alone: {peer_s:5.2f} s; hibug's whole import is {new_s / peer_s:.1f}x "
          f"that (target within 3x: {'PASS' if new_s <= 3 * peer_s else 'FAIL'}); mask AP {ours_ap:.6f} "
          f"(pycocotools {peer_ap:.6f}: {'equal' if abs(ours_ap - peer_ap) < 1e-12 else 'DIFFERENT'})")
    print(evaluation["fixes"].to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
