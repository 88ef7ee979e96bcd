"""Benchmark: planted object-level bugs found by hibug's error slices, with true tags and with automatic tags.

Each problem trains the detection demo's detector (FCOS, from scratch on CPU) on scenes whose training annotations
carry three planted bugs (a colour left unannotated; a colour and class together left unannotated, a conjunction;
boxes of one class's large objects shrunk), imports its validation results as objects and scores the ranked error
slices: Find Attr and Find Tag (a top-10 slice names every planted attribute, or every planted attribute and tag) and
Precision@10 (the share of the top 10 slices that name every condition of a planted bug). Tags: the scenes' true
colour ("truth"), or the object's colour measured from its crop's pixels ("automatic"); both with the measured box
geometry (its object size binned for these scenes, as the demo's) and the class.
Usage: python benchmarks/object_bugs.py [--problems 6] [--train-scenes 1600] [--out /tmp/hibug-object-bench]
"""
from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path

from hibug_core.bench.contest import finders_table, gathered
from hibug_core.bench.objects import ObjectBenchConfig, run_object_benchmark, summary
from hibug_core.bench.summary import markdown_table
from hibug_core.csv_export import write_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=ObjectBenchConfig.problems)
    parser.add_argument("--train-scenes", type=int, default=ObjectBenchConfig.train_scenes)
    parser.add_argument("--out", default="/tmp/hibug-object-bench")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("hibug_core.store.project", "hibug_core.tagging.run", "hibug_core.torch_compat"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    config = replace(ObjectBenchConfig(), problems=args.problems, train_scenes=args.train_scenes)
    start = time.perf_counter()
    contests: list = []
    rows = run_object_benchmark(Path(args.out), config, contests=contests)
    write_csv(rows, Path(args.out) / "object_bugs.csv")
    print(rows.to_string(index=False))
    print()
    print(summary(rows, config.top_n).round(3).to_string())
    table = finders_table(contests)  # every slice finder on the same tags and errors, and on bug-free twins
    out = Path(args.out)
    write_csv(gathered(contests)[1], out / "finders.csv")
    print()
    print(markdown_table(table))
    print(f"\n{config.problems} problems, {len(rows) // 2} planted bugs, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
