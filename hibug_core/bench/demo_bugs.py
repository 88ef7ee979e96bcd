"""The planted-bug benchmark on a task's demo: the demo built per problem (its shipped model first, then models
trained on other seeds), its validation error slices scored by Find Attr, Find Tag and Precision@10 against the
demo's planted bugs, with true tags and with automatic ones (each object's colour measured from its crop)."""
from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path

import pandas as pd

from hibug_core.attributes.measured import measured_attributes
from hibug_core.attributes.schema import AttributeSchema
from hibug_core.bench.contest import contest, embeddings_of, task_of_report
from hibug_core.bench.ranking import PlantedBug
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.report import error_slices
from hibug_core.store.attribute_versions import save_schema
from hibug_core.tagging.run import tag_project
from hibug_core.tasks import task_of

logger = logging.getLogger(__name__)
BUILT_META = "bench_problem"  # the problem a benchmark project was built for, set once its build finished


@dataclass(frozen=True)
class DemoProblem:
    id: str
    demo: object  # the problem's config: its planted bugs (planted_bugs()), scenes and model settings
    build: Callable | None = None  # (folder, demo, progress=) -> its Project (None: the benchmark's demo build)


@dataclass(frozen=True)
class DemoBugBench:
    """What the benchmark needs of a demo: its model's name, how it is built and its attributes, its problems, the
    taggers compared, and what another tag source calls a planted condition."""

    name: str
    model: str
    build: Callable  # (folder, demo config, progress=) -> the demo's Project
    schema: Callable[[], AttributeSchema]
    problems: Callable[[int, int], list[DemoProblem]]  # (count, seed): seed 0's first is the demo itself
    taggers: dict[str, tuple[str, list[str]]]  # tagger -> (the tag source it reads, the attributes it slices by)
    same_as: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)


def demo_then_planted(demo, world, model: str) -> Callable[..., list[DemoProblem]]:
    """A task's problems, (count, seed) -> list: seed 0's first is its demo (`demo`, built with its shipped model),
    then problems whose bugs are planted in `model`'s outputs on `world` (hibug_core.bench.output_bugs), drawn from
    the seed."""
    from hibug_core.bench.output_bugs import build_output_problem, draw_problems

    def build(folder, problem, progress: ProgressCallback = no_progress):
        return build_output_problem(folder, world, problem, model, progress=progress)

    def problems(count: int, seed: int = 0) -> list[DemoProblem]:
        first = [DemoProblem("demo", demo)] if seed == 0 else []
        return first + [DemoProblem(p.id, p, build=build) for p in draw_problems(world, count - len(first), seed)]
    return problems


def planted_bugs(problem: DemoProblem) -> list[PlantedBug]:
    return [PlantedBug(tuple(bug.slice.items()), bug.diagnosed_as) for bug in problem.demo.planted_bugs()]


def same_attribute(same_as: dict) -> Callable[[str, str], bool]:
    """What another tag source calls a planted attribute (same_as, read attribute by attribute)."""
    called = {(planted, attribute) for (planted, _), same in same_as.items() for attribute, _ in same}
    return lambda attribute, planted: attribute == planted or (planted, attribute) in called


def run_problem(folder: Path, bench: DemoBugBench, problem: DemoProblem, contests: list, *,
                progress: ProgressCallback = no_progress, encoder: str = "conse") -> dict:
    """Build the problem's project (the demo with its model shipped or trained, or its outputs planted), measure each
    object's crop colour, and run every slice finder on each tagger's default report (objects embedded by `encoder`
    for the finders that cluster), to `contests`; what the problem was."""
    project = _built(folder, problem.build or bench.build, problem.demo, progress)
    try:
        schema = bench.schema()
        save_schema(project, AttributeSchema(attributes=(*schema.attributes, *measured_attributes()),
                                             task=schema.task), author="benchmark")
        tag_project(project, views=task_of(project).views, attributes=["dominant colour"], progress=progress)
        ap = project.object_evaluation(bench.model, "val")["summary"]["AP"]
        for tagger, (source, attributes) in bench.taggers.items():
            report = error_slices(project, bench.model, split="val", attributes=attributes, tags=source,
                                  check_tags=False)
            task = task_of_report(report, embeddings_of(project, report, encoder))
            contests.append(contest(task, planted_bugs(problem), same=same_attribute(bench.same_as),
                                    labels={"problem": problem.id, "tags": tagger}))
        return {"problem": problem.id, "bugs": "; ".join(f"{b.diagnosed_as or b.bug_type}: "
                                                         + " & ".join(f"{a} = {t}" for a, t in b.slice.items())
                                                         for b in problem.demo.planted_bugs()),
                "AP": round(float(ap), 3)}
    finally:
        project.close()


def _built(folder: Path, build: Callable, demo, progress: ProgressCallback):
    """The problem's project: the one an earlier run finished building here for the same problem, else built anew
    (what an interrupted build left is removed first: the folder is the benchmark's own)."""
    from hibug_core.store.project import DB_FILE, Project

    said = json.dumps(asdict(demo) if is_dataclass(demo) else repr(demo), sort_keys=True, default=str)
    if (folder / DB_FILE).exists():
        project = Project.open(folder)
        if project.meta().get(BUILT_META) == said:
            return project
        project.close()
    if folder.exists():
        shutil.rmtree(folder)
    project = build(folder, demo, progress=progress)
    project.set_meta(BUILT_META, said, author="benchmark")
    return project


def run_demo_benchmark(folder: str | Path, bench: DemoBugBench, problems: int = 1, *, contests: list, seed: int = 0,
                       progress: ProgressCallback = no_progress, encoder: str = "conse") -> pd.DataFrame:
    """Every problem drawn from `seed`, every slice finder's (bugs, problems) rows per problem and tagger added to
    `contests`; one row per problem (its bugs, its model's AP)."""
    rows = []
    for problem in bench.problems(problems, seed):
        logger.info("%s benchmark: %s: %s", bench.name, problem.id,
                    "; ".join(b.how for b in problem.demo.planted_bugs()))
        rows.append(run_problem(Path(folder) / problem.id, bench, problem, contests, progress=progress,
                                encoder=encoder))
    return pd.DataFrame(rows)
