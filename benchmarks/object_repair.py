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
Each finished (method, seed) is saved as JSON under --dir/runs and reused by a later run with the same settings: a
long CPU run can be stopped and resumed, or its seeds run at different times, and the table covers every seed asked.
Usage: python benchmarks/object_repair.py [--task detection|pose|segmentation] [--seeds 0 1 2] [--budget 240]
       [--epochs 3] [--lam 1.0] [--methods "expected failures" hibug2 "hibug rule" hibug random uncertainty]
       [--dir object-repair-bench]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.demo import DEMOS
from hibug_core.models.finetune import TuneConfig
from hibug_core.progress import tqdm_progress
from hibug_core.repair.loop import CONTROL, RepairConfig, method_difference, paired_interval, run_repair
from hibug_core.repair.retrain import RetrainConfig
from hibug_core.repair.selection import SelectionConfig, parse_budget
from hibug_core.store.project import Project
from hibug_core.tasks import task_of

CHANGE_COLUMNS = ["method", "seed", "slice_id", "slice", "n", "before", "after", "planted"]  # what the tables read


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
    folder = Path(args.dir) / "demo"
    project = Project.open(folder) if folder.exists() else DEMOS.build(args.task, folder=folder)
    settings = f"{args.task}-budget{args.budget}-epochs{args.epochs}-lam{args.lam:g}"
    runs, changes = [], []
    started = time.perf_counter()
    for seed in args.seeds:
        for k, method in enumerate(args.methods):
            wanted = [method] + ([CONTROL] if k == 0 else [])  # the control runs beside the first method
            saved = {name: Path(args.dir) / "runs" / f"{settings}-seed{seed}-{name.replace(' ', '_')}.json"
                     for name in wanted}
            if not all(path.exists() for path in saved.values()):
                config = RepairConfig(selection=SelectionConfig(method=method, budget=args.budget), baseline=None,
                                      control=k == 0, seeds=(seed,),
                                      retrain=RetrainConfig(lam=args.lam, fine_tune=TuneConfig(epochs=args.epochs)))
                report, close = tqdm_progress()  # a long run on CPU shows where it is, on stderr
                result = run_repair(project, config, task=task_of(project), progress=report)
                close()
                for name, path in saved.items():
                    _save(path, result.runs[result.runs["method"] == name],
                          result.changes.loc[result.changes["method"] == name, CHANGE_COLUMNS])
                print(f"{method} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
            for path in saved.values():
                run_rows, change_rows = _load(path)
                runs.append(run_rows)
                changes.append(change_rows)
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
        pair = paired_interval((planted[method] - planted["random"]).to_numpy())
        comparisons = [{"comparison": "planted slices (mean)", **pair}, *table.to_dict("records")]
        for row in pd.DataFrame(comparisons).itertuples():
            differences.append({"method": method, "vs random": row.comparison,
                                "difference": f"{row.difference * 100:+.1f} points [{row.low * 100:+.1f}, "
                                              f"{row.high * 100:+.1f}]", "seeds won": row.won})
    if differences:
        print("\nPaired difference against random (95% t-interval over seeds):\n")
        print(markdown_table(pd.DataFrame(differences)))
    print(f"\n{len(runs)} fine-tuned models ({time.perf_counter() - started:.0f} s in this run, the rest saved); "
          f"{np.mean(runs['new_images']):.0f} new images on average")


def _save(path: Path, runs: pd.DataFrame, changes: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"runs": json.loads(runs.to_json(orient="records")),
                                   "changes": json.loads(changes.to_json(orient="records"))}))
    partial.replace(path)  # a stopped run leaves no half-written result


def _load(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    saved = json.loads(path.read_text())
    return pd.DataFrame(saved["runs"]), pd.DataFrame(saved["changes"])


if __name__ == "__main__":
    main()
