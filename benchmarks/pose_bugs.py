"""Benchmark: planted pose bugs found by hibug's error slices, with true tags and with automatic tags.

Each problem is a pose demo (drawn figures; a Keypoint R-CNN trained with four planted bugs: lying figures rare in
training, left and right swapped for figures seen from behind, one shirt colour with one pose left unannotated, small
figures rare) whose validation people are sliced; its ranked error slices are scored: Find Attr and Find Tag (a top-10
slice names every planted attribute, or every planted attribute and tag) and Precision@10 (the share of the top 10
slices naming every condition of a planted bug). Tags: the figures' true pose, shirt colour and background ("truth"),
or the person's colour measured from its crop ("automatic"); both with the measured box geometry and the attributes
measured from the true keypoints (body orientation, facing, ...). The first problem is the demo itself (its shipped
model); each further one trains its own model on CPU (about 15 minutes).
Usage: python benchmarks/pose_bugs.py [--problems 1] [--out /tmp/hibug-pose-bench]
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from hibug_core.bench.pose import run_pose_benchmark, summary
from hibug_core.csv_export import write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=1)
    parser.add_argument("--out", default="/tmp/hibug-pose-bench")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("hibug_core.store.project", "hibug_core.tagging.run", "hibug_core.torch_compat"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start = time.perf_counter()
    rows = run_pose_benchmark(Path(args.out), args.problems)
    write_csv(rows, Path(args.out) / "pose_bugs.csv")
    print(rows.to_string(index=False))
    print()
    print(summary(rows).round(3).to_string())
    print(f"\n{args.problems} problems, {len(rows) // 2} planted bugs, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
