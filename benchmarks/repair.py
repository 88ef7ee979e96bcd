"""Benchmark: does repair with hibug's selection fix the demo's planted bugs better than random selection?

On a fresh copy of the demo project (the small CNN with a planted spurious correlation, blue -> circle, and a
planted rare case, small triangles), for each seed: select 10% of the training split's size from the pool with each
method, label it (the pool's labels stand in for an annotator), fine-tune the model on training + selected data, and
measure every planted and top error slice on the held-out test split. Also: the same with no new data (control),
and with images from the shape-world renderer for the top slices' HiBug prompts. Prints mean ± sd over seeds.
Usage: python benchmarks/repair.py [--seeds 0 1 2 3 4] [--dir repair-bench] [--retrain fine-tune]
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.demo.build import ensure_demo
from hibug_core.repair.generated import generate_for_prompts
from hibug_core.repair.generators import ShapeWorldRenderer
from hibug_core.repair.loop import RepairConfig, run_repair
from hibug_core.repair.prompts import build_prompts
from hibug_core.repair.retrain import RETRAIN_METHODS, RetrainConfig
from hibug_core.repair.selection import SelectionConfig, resolve_budget
from hibug_core.store.project import Project


def table(summary: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    rows = summary[summary["planted"] | (summary["slice"] == "all held-out images")]
    out = []
    for (slice_name, n, before), group in rows.groupby(["slice", "n", "before"], sort=False):
        row = {"slice": slice_name, "test images": n, "before": f"{before:.1%}"}
        for method in methods:
            hit = group[group["method"] == method]
            if len(hit):
                row[method] = f"{hit['after'].iat[0]:.1%} ± {hit['after_sd'].iat[0]:.1%}"
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--dir", default="repair-bench")
    parser.add_argument("--retrain", default="fine-tune", choices=RETRAIN_METHODS.names())
    parser.add_argument("--budget", type=float, default=0.1)
    args = parser.parse_args()
    root = Path(args.dir)
    demo = ensure_demo(root / "demo")
    demo.close()
    work = root / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root / "demo", work)
    project = Project.open(work)
    retrain = RetrainConfig(method=args.retrain)
    seeds = tuple(args.seeds)
    n_train = int((project.samples()["split"] == "train").sum())
    budget = resolve_budget(args.budget, n_train)
    started = time.perf_counter()
    main_run = run_repair(project, RepairConfig(selection=SelectionConfig(method="hibug", budget=args.budget),
                                                baseline="random", control=True, retrain=retrain, seeds=seeds))
    others = run_repair(project, RepairConfig(selection=SelectionConfig(method="hibug2", budget=args.budget),
                                              baseline="uncertainty", control=False, retrain=retrain, seeds=seeds))
    prompts = build_prompts(project, "hibug")
    generate_for_prompts(project, ShapeWorldRenderer(), prompts, budget, seed=0)
    generated = run_repair(project, RepairConfig(data="generated", baseline=None, control=False, retrain=retrain,
                                                 seeds=seeds))
    elapsed = time.perf_counter() - started
    summary = pd.concat([main_run.summary, others.summary, generated.summary], ignore_index=True)
    methods = ["hibug", "random", "hibug2", "uncertainty", "generated", "no new data"]
    print(f"Demo repair, {args.retrain}, budget {budget} images ({args.budget:g} of {n_train} training images), "
          f"accuracy on the test split after repair, mean ± sd over seeds {list(seeds)}:\n")
    print(markdown_table(table(summary, methods)))
    planted = summary[summary["planted"]]
    wins = []
    for slice_name, group in planted.groupby("slice"):
        hibug = group.loc[group["method"] == "hibug", "after"].iat[0]
        random = group.loc[group["method"] == "random", "after"].iat[0]
        wins.append(hibug > random)
        print(f"\n{slice_name}: hibug {hibug:.1%} vs random {random:.1%} ({hibug - random:+.1%})", end="")
    per_seed = main_run.changes[main_run.changes["planted"]].pivot_table(index=["slice", "seed"], columns="method",
                                                                         values="after")
    print("\n\nper seed (planted slices):\n")
    print(markdown_table(per_seed.reset_index()))
    print(f"\nhibug beats random on {sum(wins)} of {len(wins)} planted slices (means). Paired over seeds: "
          f"{main_run.verdict()}\nPrompts used for generation:")
    print(prompts[["prompt", "label", "weight"]].to_string(index=False))
    print(f"\n{len(main_run.runs) + len(others.runs) + len(generated.runs)} retrained models in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
