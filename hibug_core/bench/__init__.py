"""The planted-bug benchmark: problems with known bugs in the shape world, hibug run on each, and scores; and the
object tasks' benchmarks, one registered per task (`hibug bench --task`), each running every slice finder."""
from __future__ import annotations

from pathlib import Path

from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

# name: the task; build(out, problems=, seed=, encoder=, progress=) runs its problems and returns (its own tables by
# title: its problems, and ObjectLab's flags per object where it runs; the slice finders' contests:
# hibug_core.bench.contest)
TASK_BENCHES = Registry("task benchmark")


@TASK_BENCHES.register("detection", "a detector (FCOS) trained from scratch per problem, three annotation bugs planted "
                       "in its training annotations (default: 6 problems)")
def _detection(out: Path, *, problems: int | None = None, seed: int = 0, encoder: str = "conse",
               progress: ProgressCallback = no_progress):
    from dataclasses import replace

    import pandas as pd

    from hibug_core.bench.objects import ObjectBenchConfig, run_object_benchmark

    contests: list = []
    objectlab: list = []
    config = replace(ObjectBenchConfig(), problems=problems or ObjectBenchConfig.problems, seed=seed, encoder=encoder)
    drawn = run_object_benchmark(out, config, progress=progress, contests=contests, objectlab=objectlab)
    from hibug_core.bench.objectlab import pooled

    per_problem = pd.DataFrame(objectlab)
    lab = pd.concat([per_problem, pd.DataFrame([{"problem": "all", **pooled(per_problem)}])]) if len(per_problem) \
        else per_problem.assign(problem=[])
    return {"problems": drawn.set_index("problem"), "ObjectLab's flags per object": lab.set_index("problem")}, contests


def _demo_bench(bench, out: Path, problems: int | None, seed: int, encoder: str, progress: ProgressCallback):
    from hibug_core.bench.demo_bugs import run_demo_benchmark

    contests: list = []
    drawn = run_demo_benchmark(out, bench, problems or 1, seed=seed, progress=progress, contests=contests,
                               encoder=encoder)
    return {"problems": drawn.set_index("problem")}, contests


@TASK_BENCHES.register("pose", "the pose demo's keypoint model and its four planted bugs (seed 0's first problem), "
                       "then problems with three bugs each planted in a keypoint model's outputs (default: 1 problem)")
def _pose(out: Path, *, problems: int | None = None, seed: int = 0, encoder: str = "conse",
          progress: ProgressCallback = no_progress):
    from hibug_core.bench.pose import POSE_BENCH

    return _demo_bench(POSE_BENCH, out, problems, seed, encoder, progress)


@TASK_BENCHES.register("segmentation", "the mask demo's Mask R-CNN and its three planted bugs (seed 0's first "
                       "problem), then problems with three bugs each planted in a mask model's outputs (default: 1 "
                       "problem)")
def _segmentation(out: Path, *, problems: int | None = None, seed: int = 0, encoder: str = "conse",
                  progress: ProgressCallback = no_progress):
    from hibug_core.bench.masks import MASK_BENCH

    return _demo_bench(MASK_BENCH, out, problems, seed, encoder, progress)
