"""Benchmark: error slices across models of different capacity (HiBug2's §5.3) and the failures they share (Chegini
and Feizi's Fig. 4), on each demo.

For each task's demo: train the demo's network at other widths with the demo's own recipe (hibug_core.demo.study) and
add each to the demo project as a model; compare them all on the val split (hibug_core.slices.compare): per model its
score, its error slices at C = 0.2 (HiBug2's count: slices of up to three attributes under the model's score by C,
after its post-processing), and between every pair the overlap of their worst 10% of slices (Jaccard; HiBug2 reports
86% for four detectors, 73% for four pose models, 31% for three classifiers) and the IoU of the samples they get
wrong (Chegini and Feizi: "over 80% similar" within a category). The projects stay in --dir: open one with
`hibug serve DIR/<task>` and pick the models on the Compare page.
Usage: python benchmarks/model_study.py [--tasks classification detection pose] [--epochs N] [--dir model-study]
"""
from __future__ import annotations

import argparse
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.demo import DEMOS
from hibug_core.demo.study import CAPACITIES, StudyConfig, add_study_models
from hibug_core.slices.compare import CompareConfig, compare_models, pair_matrix
from hibug_core.slices.search import SliceConfig


def study(task: str, folder: Path, epochs: int | None, widths: tuple[int, ...] | None) -> str:
    started = time.perf_counter()
    project = DEMOS.build(task, folder=folder)
    capacity = CAPACITIES.get(task).build()  # the demo's own model's width, then the widths trained here
    shipped_width, trained = capacity.shipped, capacity.widths
    shipped = project.models()[0]
    names = add_study_models(project, task, StudyConfig(widths=tuple(widths or trained), epochs=epochs))
    trained_in = time.perf_counter() - started
    by_width = sorted([(shipped_width, shipped), *zip(widths or trained, names)])
    models = [name for _, name in by_width]
    comparison = compare_models(project, models, split="val", slices=SliceConfig(max_depth=3), config=CompareConfig())
    overlap = pair_matrix(comparison.worst_overlap, models, "jaccard")
    iou = pair_matrix(comparison.failure_iou, models, "iou")
    overall = comparison.overall.set_index("model")
    rows = []
    for width, name in by_width:
        others = [m for m in models if m != name]
        rows.append({"model": name, "width": width, "val score": f"{overall.loc[name, 'score']:.3f}",
                     "error slices (C = 0.2)": int(overall.loc[name, "error_slices"]),
                     "worst 10% overlap, mean": f"{np.mean([overlap.loc[name, o] for o in others]):.2f}",
                     "failure IoU, mean": f"{np.mean([iou.loc[name, o] for o in others]):.2f}"})
    pairs = [{"pair": f"{a} & {b}", "worst 10% overlap": f"{overlap.loc[a, b]:.2f}",
              "failure IoU": f"{iou.loc[a, b]:.2f}"} for a, b in combinations(models, 2)]
    mean_overlap = np.mean([overlap.loc[a, b] for a, b in combinations(models, 2)])
    mean_iou = np.mean([iou.loc[a, b] for a, b in combinations(models, 2)])
    enumerated = len(comparison.slices) // max(len(comparison.candidates), 1)
    return (f"## {task}\n\n{len(comparison.evaluation):,} val samples shared, {enumerated:,} slices enumerated "
            f"(up to 3 attributes, at least {SliceConfig().min_support} samples); models trained in {trained_in:.0f} s"
            f"\n\n{markdown_table(pd.DataFrame(rows))}\n\n{markdown_table(pd.DataFrame(pairs))}\n\n"
            f"mean over pairs: worst 10% overlap "
            f"{mean_overlap:.2f}, failure IoU {mean_iou:.2f} ({time.perf_counter() - started:.0f} s)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=CAPACITIES.names(), choices=CAPACITIES.names())
    parser.add_argument("--widths", type=int, nargs="+", default=None,
                        help="the widths to train (default: per task, around the shipped model's)")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs (default: the demo's recipe)")
    parser.add_argument("--dir", default="model-study")
    args = parser.parse_args()
    for task in args.tasks:
        print(study(task, Path(args.dir) / task, args.epochs, tuple(args.widths) if args.widths else None),
              flush=True)


if __name__ == "__main__":
    main()
