"""Benchmark: a demo's planted bugs (pose or instance segmentation) found by hibug's error slices, with true tags and
with automatic tags.

Each problem is the task's demo (pose: drawn figures and a Keypoint R-CNN trained with four planted bugs: lying
figures rare in training, left and right swapped for figures seen from behind, one shirt colour with one pose left
unannotated, small figures rare; segmentation: drawn shapes and a Mask R-CNN trained with three: thin bars taught by
their filled boxes, blue objects left out of the training masks, rings rare) whose validation objects are sliced; its
ranked error slices are scored: Find Attr and Find Tag (a top-10 slice names every planted attribute, or every planted
attribute and tag) and Precision@10 (the share of the top 10 slices naming every condition of a planted bug). Tags:
the scenes' true tags ("truth"), or the object's colour measured from its crop ("automatic"); both with the measured
box geometry and the attributes measured from the true keypoints or masks. The first problem is the demo itself (its
shipped model); each further one trains its own model on CPU (pose about 15 minutes, segmentation about 45).
Usage: python benchmarks/demo_bugs.py [--task pose|segmentation] [--problems 1] [--out /tmp/hibug-demo-bench]
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from hibug_core.bench.contest import finders_table, gathered
from hibug_core.bench.demo_bugs import run_demo_benchmark, summary
from hibug_core.bench.masks import MASK_BENCH
from hibug_core.bench.pose import POSE_BENCH
from hibug_core.bench.summary import markdown_table
from hibug_core.csv_export import write_csv

BENCHES = {"pose": POSE_BENCH, "segmentation": MASK_BENCH}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=tuple(BENCHES), default="pose")
    parser.add_argument("--problems", type=int, default=1)
    parser.add_argument("--out", default="/tmp/hibug-demo-bench")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("hibug_core.store.project", "hibug_core.tagging.run", "hibug_core.torch_compat"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    start = time.perf_counter()
    contests: list = []
    rows = run_demo_benchmark(Path(args.out) / args.task, BENCHES[args.task], args.problems, contests=contests)
    write_csv(rows, Path(args.out) / f"{args.task}_bugs.csv")
    print(rows.to_string(index=False))
    print()
    print(summary(rows).round(3).to_string())
    bugs = len(rows.drop_duplicates(["problem", "bug"]))
    table = finders_table(contests)  # every slice finder on the same tags and errors, and on bug-free twins
    out = Path(args.out)
    write_csv(gathered(contests)[1], out / "finders.csv")
    print()
    print(markdown_table(table))
    print(f"\n{args.problems} problems, {bugs} planted bugs, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
