"""Benchmark: HiBug2's Table 3, "are error slices distinct bugs?": fix one error slice of the classification demo and
measure the model before and after on its validation data, on the data of the error slices that share a tag with it,
and on the data of the error slices that share none.

HiBug2 (A.1.7) queries the 20 images matching one slice from held-out data and fine-tunes the model on them for 20
epochs. Here the 20 are the pool images matching the demo's worst error slice (least confident first), and the model
is fine-tuned with the training split beside them (hibug's retraining: loss = L(original) + lambda * L(new), the new
images weighed as if added), up to --epochs epochs with early stopping on val.
Usage: python benchmarks/fix_one_slice.py [--dir /tmp/hibug-fix-one] [--images 20] [--epochs 20] [--seeds 0 1 2]
       [--slice "color = blue"]
"""
from __future__ import annotations

import argparse
import copy
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.demo import DEMOS, demo_folder
from hibug_core.models.finetune import TuneConfig
from hibug_core.repair.retrain import RetrainConfig, retrain
from hibug_core.repair.selection import SelectionConfig, select_pool
from hibug_core.slices.overlap import GROUPS, slice_groups
from hibug_core.slices.report import error_slices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/hibug-fix-one", help="where the demo is built (reused when there)")
    parser.add_argument("--images", type=int, default=20, help="pool images matching the slice to fine-tune on")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--slice", default=None, help="the slice to fix, as the report describes it (default: the "
                                                      "worst error slice)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    project = DEMOS.build("classification", folder=folder / demo_folder("classification"))
    try:
        # 1. The slice and its groups of validation data, and the model's answers before.
        report = error_slices(project)
        definition = report.definition(args.slice) if args.slice else report.slices["definition"].iat[0]
        groups = slice_groups(report, definition)
        evaluation = report.evaluation
        before = (evaluation["prediction"] == evaluation["label"]).to_numpy()
        # 2. The pool images matching it, least confident first.
        one = copy.copy(report)
        one.slices = report.slices[report.slices["definition"].map(set) == set(definition)]
        chosen = select_pool(one, SelectionConfig(method="hibug2", budget=args.images), project=project)
        # 3. Fine-tuned once per seed; the model's answers after, on the same validation data.
        rows = []
        for seed in args.seeds:
            config = RetrainConfig(fine_tune=TuneConfig(epochs=args.epochs, seed=seed), seed=seed)
            ids, probabilities, classes = retrain(project, report.model, chosen.index.to_numpy(), config)
            predicted = pd.Series(np.asarray(classes, dtype=object)[probabilities.argmax(axis=1)], index=ids)
            after = (predicted.reindex(evaluation.index) == evaluation["label"]).to_numpy()
            rows += [{"seed": seed, "data": name, "rows": int(groups[name].sum()),
                      "before": float(before[groups[name]].mean()), "after": float(after[groups[name]].mean())}
                     for name in GROUPS if groups[name].any()]
    finally:
        project.close()
    table = pd.DataFrame(rows)
    summary = table.groupby("data", sort=False).agg(rows=("rows", "first"), before=("before", "first"),
                                                    after=("after", "mean"), after_sd=("after", "std"))
    print(f"fixed: {' & '.join(f'{a} = {t}' for a, t in definition)} ({len(chosen)} pool images, "
          f"{args.epochs} epochs at most, seeds {args.seeds}); validation accuracy by kind of data:")
    print(summary.round(3).to_string())
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
