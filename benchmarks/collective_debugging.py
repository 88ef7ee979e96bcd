"""Benchmark: Chegini and Feizi's collective debugging (their Table 3 and Fig. 6) on the classification demo's models of
different capacity.

The models are the demo's shape CNN and the same network at other widths (benchmarks/model_study.py trains them into
--dir, reused when there). Each model is repaired with images generated for prompts written from:
- individual: its own failures (its error slices' HiBug prompts, or --prompts);
- type 1: the failures of all the models pooled (a prompt written for several models weighted by all their failures);
- type 2: the failures of one model (the demo's, --source) only, for every model.
The generated images (the shape-world renderer for the diffusion model) are added with weight lambda (0.5, the
paper's) and the network fine-tuned, over --seeds. Printed per model and arm: test accuracy, and the share of the
model's failures fixed on the val split (the debug seed: the prompts came from it) and on the test split (the debug
held-out set, which nothing saw); then Fig. 6's relative accuracy, each collective arm's held-out share over the
individual arm's.
Usage: python benchmarks/collective_debugging.py [--images 138] [--seeds 0 1 2] [--prompts hibug] [--lam 0.5]
       [--dir model-study]
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pandas as pd
from repair import failures_fixed

from hibug_core.bench.summary import markdown_table
from hibug_core.cli.command import llm_from, model_arguments
from hibug_core.demo import DEMOS
from hibug_core.demo.study import StudyConfig, add_study_models
from hibug_core.repair.generated import generate_for_prompts
from hibug_core.repair.generators import load_generator
from hibug_core.repair.loop import GENERATED, RepairConfig, run_repair
from hibug_core.repair.prompts import PROMPT_METHODS, build_prompts
from hibug_core.repair.retrain import RetrainConfig
from hibug_core.store.project import Project
from hibug_core.tasks import task_of

INDIVIDUAL, TYPE_1, TYPE_2 = "individual", "collective type 1 (pooled)", "collective type 2 (one model's)"


def repaired(source: Path, work: Path, failures_of: list[str], targets: list[str], args) -> list[dict]:
    """On a fresh copy of the study project: images for the prompts written from `failures_of`, then each target model
    repaired with them; per (target, seed): test accuracy and the failures fixed."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    rows = []
    with Project.open(work) as project:
        prompts = build_prompts(project, args.prompts, failures_of=failures_of, encoder=args.encoder,
                                llm=llm_from(args))
        generate_for_prompts(project, load_generator(args.generator), prompts, args.images, seed=0)
        for target in targets:
            result = run_repair(project, RepairConfig(model=target, data=GENERATED, baseline=None, control=False,
                                                      retrain=RetrainConfig(lam=args.lam), seeds=tuple(args.seeds)),
                                task=task_of(project))
            fixed = failures_fixed(project, target, result.runs).drop(columns="method")
            for run, (_, shares) in zip(result.runs.itertuples(), fixed.iterrows()):
                seed_share, held_share = shares.iloc[1], shares.iloc[2]
                rows.append({"model": target, "seed": run.seed, "test": run.after, "debug seed": seed_share,
                             "debug held-out": held_share, "before": run.before})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=138, help="generated images per arm (10%% of training)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--prompts", default="hibug", choices=PROMPT_METHODS.names())
    parser.add_argument("--lam", type=float, default=0.5)
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 16, 32])
    parser.add_argument("--dir", default="model-study")
    model_arguments(parser, encoder=True, llm=True, generator=True)
    args = parser.parse_args()
    started = time.perf_counter()
    folder = Path(args.dir) / "classification"
    project = DEMOS.build("classification", folder=folder)
    source_model = project.models()[0]
    models = [source_model, *add_study_models(project, "classification", StudyConfig(widths=tuple(args.widths)))]
    project.close()
    work = Path(args.dir) / "collective-work"
    rows = []
    for model in models:
        rows += [{**r, "arm": INDIVIDUAL} for r in repaired(folder, work, [model], [model], args)]
    rows += [{**r, "arm": TYPE_1} for r in repaired(folder, work, models, models, args)]
    rows += [{**r, "arm": TYPE_2} for r in repaired(folder, work, [source_model], models, args)]
    runs = pd.DataFrame(rows)
    means = runs.groupby(["model", "arm"], sort=False)[["before", "test", "debug seed", "debug held-out"]].mean()
    spread = runs.groupby(["model", "arm"], sort=False)[["test", "debug seed", "debug held-out"]].std()
    table = pd.DataFrame({"test before": means["before"].map("{:.3f}".format),
                          **{c: [f"{m:.3f} ± {s:.3f}" for m, s in zip(means[c], spread[c])]
                             for c in ("test", "debug seed", "debug held-out")}}, index=means.index)
    print(f"{args.images} generated images per arm ({args.prompts} prompts, {args.generator}), lambda "
          f"{args.lam:g}, fine-tuned, seeds {args.seeds}; type 2's prompts from {source_model}\n")
    print(markdown_table(table))
    held = means["debug held-out"].unstack("arm")
    relative = pd.DataFrame({arm: (held[arm] / held[INDIVIDUAL]).map("{:.2f}".format) for arm in (TYPE_1, TYPE_2)})
    relative.index.name = "model"
    print("\nFig. 6's relative accuracy (each collective arm's held-out share over the individual arm's):\n")
    print(markdown_table(relative))
    print(f"\n{len(runs)} repaired models in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
