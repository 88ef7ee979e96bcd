"""Benchmark: does selecting pool images by the objects in them that fall in error slices repair a detector (or a
keypoint model) better than the baselines?

On the detection demo (FCOS trained with three planted annotation bugs), with --task pose on the pose demo (Keypoint
R-CNN trained with four planted bugs), or with --task segmentation on the segmentation demo (Mask R-CNN, three planted
bugs), for each seed: select a budget of pool images with each method (the
pool's detections ranked by it, an image taken with its first ranked detection), label them (the pool's annotations
stand in for a labelling team), fine-tune the model on its training annotations plus the new images (loss =
L(original) + lambda * L(new)), and count the held-out test objects (people) found at the operating point, overall
and in the planted slices. Also: the same fine-tuning with no new data (control). Prints mean ± sd over seeds, the
paired difference of each method against random with its 95% t-interval, and the test AP (keypoint AP for pose).
Usage: python benchmarks/object_repair.py [--task detection|pose|segmentation] [--seeds 0 1 2] [--budget 240]
       [--epochs 3] [--lam 1.0] [--methods "expected failures" hibug2 "hibug rule" hibug random uncertainty]
       [--dir object-repair-bench]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.demo import DEMOS
from hibug_core.models.finetune import TuneConfig
from hibug_core.progress import tqdm_progress
from hibug_core.repair.loop import CONTROL, RepairConfig, method_difference, run_repair
from hibug_core.repair.retrain import RetrainConfig
from hibug_core.repair.selection import SelectionConfig, parse_budget
from hibug_core.tasks import task_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("detection", "pose", "segmentation"), default="detection",
                        help="the demo repaired: detection (FCOS), pose (Keypoint R-CNN) or segmentation "
                        "(Mask R-CNN)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=parse_budget, default=240, help="pool images (a count, or a share of training "
                                                                   "images below 1)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lam", type=float, default=1.0)
    parser.add_argument("--methods", nargs="+", default=["expected failures", "hibug2", "hibug rule", "hibug", "random",
                                                         "uncertainty"])  # hibug2 and hibug rule: HiBug2's Table 2
    parser.add_argument("--dir", default="object-repair-bench")
    args = parser.parse_args()
    project = DEMOS.build(args.task, folder=Path(args.dir) / "demo")
    runs, changes = [], []
    started = time.perf_counter()
    for k, method in enumerate(args.methods):
        config = RepairConfig(selection=SelectionConfig(method=method, budget=args.budget), baseline=None,
                              control=k == 0, seeds=tuple(args.seeds),
                              retrain=RetrainConfig(lam=args.lam, fine_tune=TuneConfig(epochs=args.epochs)))
        report, close = tqdm_progress()  # a long run on CPU shows where it is, on stderr
        result = run_repair(project, config, task=task_of(project), progress=report)
        close()
        runs.append(result.runs)
        changes.append(result.changes)
        print(f"{method}: {time.perf_counter() - started:.0f} s", flush=True)
    runs, changes = pd.concat(runs, ignore_index=True), pd.concat(changes, ignore_index=True)
    methods = args.methods + [CONTROL]
    shown = changes[changes["planted"] | (changes["slice_id"] == "overall")]
    rows = []
    for (slice_name, n, before), group in shown.groupby(["slice", "n", "before"], sort=False):
        row = {"slice": slice_name, "test objects": n, "found before": f"{before:.1%}"}
        for method in methods:
            after = group.loc[group["method"] == method, "after"]
            row[method] = f"{after.mean():.1%} ± {after.std(ddof=1):.1%}"
        rows.append(row)
    ap = runs.groupby("method", sort=False)["AP after"].agg(["mean", "std"])
    rows.append({"slice": "test AP", "test objects": "", "found before": f"{runs['AP before'].iat[0]:.3f}",
                 **{m: f"{ap.at[m, 'mean']:.3f} ± {ap.at[m, 'std']:.3f}" for m in methods}})
    print(f"\nObjects found at the operating point on the held-out test split, mean ± sd over seeds {args.seeds} "
          f"(budget {args.budget} pool images, {args.epochs} epochs, lambda {args.lam:g}):\n")
    print(markdown_table(pd.DataFrame(rows)))
    differences = []
    for method in methods:
        if method == "random" or "random" not in methods:  # the comparison is against random, when it was run
            continue
        table = method_difference(changes, method, "random")
        planted = changes[changes["planted"]].groupby(["method", "seed"])["after"].mean().unstack(0)
        values = (planted[method] - planted["random"]).to_numpy()
        differences.append({"method": method, "vs random": "planted slices (mean)",
                            "difference": f"{values.mean() * 100:+.1f} points", "seeds won": int((values > 0).sum())})
        for row in table.itertuples():
            differences.append({"method": method, "vs random": row.comparison,
                                "difference": f"{row.difference * 100:+.1f} points [{row.low * 100:+.1f}, "
                                              f"{row.high * 100:+.1f}]", "seeds won": row.won})
    if differences:
        print("\nPaired difference against random (95% t-interval over seeds):\n")
        print(markdown_table(pd.DataFrame(differences)))
    print(f"\n{len(runs)} fine-tuned models in {time.perf_counter() - started:.0f} s; "
          f"{np.mean(runs['new_images']):.0f} new images on average")


if __name__ == "__main__":
    main()
