"""The planted-bug benchmark on a task's demo: the demo built per problem (its shipped model first, then models
trained on other seeds), its validation error slices scored by Find Attr, Find Tag and Precision@10 against the
demo's planted bugs, with true tags and with automatic ones (each object's colour measured from its crop)."""
from __future__ import annotations

import itertools
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
from hibug_core.bench.objects import finding_table
from hibug_core.bench.ranking import PlantedBug
from hibug_core.bench.scoring import HIBUG2_SEARCH, SEARCHES
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


def names(same_as: dict, definition, attribute: str, tag: str | None) -> bool:
    """Whether a slice's conditions name a planted condition: its attribute (tag None), or its attribute and tag;
    what another tag source calls the same thing counts (same_as)."""
    if tag is None:
        called = {attribute} | {a for (n, _), same in same_as.items() if n == attribute for a, _ in same}
        return any(name in called for name, _ in definition)
    wanted = {(attribute, tag), *same_as.get((attribute, tag), set())}
    return any((name, value) in wanted for name, value in definition)


def score(slices: pd.DataFrame, bugs: list, top_n: int, same_as: dict) -> tuple[list[dict], float]:
    """Per planted bug: named by attribute / by tag in the top `top_n` reported slices, and the first rank naming it;
    and Precision@top_n: the share of the top slices naming every condition of some planted bug."""
    top = list(slices["definition"])[:top_n]

    def finds(definition, bug, by_tag: bool) -> bool:
        return all(names(same_as, definition, a, t if by_tag else None) for a, t in bug.slice.items())

    rows = []
    for bug in bugs:
        first = next((rank for rank, d in enumerate(top, 1) if finds(d, bug, True)), None)
        rows.append({"bug": bug.bug_type, "slice": " & ".join(f"{a} = {t}" for a, t in bug.slice.items()),
                     "find_attr": any(finds(d, bug, False) for d in top), "find_tag": first is not None,
                     "rank": first})
    hits = sum(any(finds(d, bug, True) for bug in bugs) for d in top)
    return rows, hits / top_n


def planted_bugs(problem: DemoProblem) -> list[PlantedBug]:
    return [PlantedBug(tuple(bug.slice.items()), bug.diagnosed_as) for bug in problem.demo.planted_bugs()]


def same_attribute(same_as: dict) -> Callable[[str, str], bool]:
    """What another tag source calls a planted attribute (same_as, read attribute by attribute)."""
    called = {(planted, attribute) for (planted, _), same in same_as.items() for attribute, _ in same}
    return lambda attribute, planted: attribute == planted or (planted, attribute) in called


def run_problem(folder: Path, bench: DemoBugBench, problem: DemoProblem, *, top_n: int = 10,
                progress: ProgressCallback = no_progress, contests: list | None = None,
                encoder: str = "conse") -> list[dict]:
    """Build the problem's demo (its model shipped or trained), measure each object's crop colour, find and score
    its validation error slices with each tagger and search; with `contests`, every slice finder on each tagger's
    default report (objects embedded by `encoder` for the finders that cluster) is added to it."""
    project = _built(folder, problem.build or bench.build, problem.demo, progress)
    try:
        schema = bench.schema()
        save_schema(project, AttributeSchema(attributes=(*schema.attributes, *measured_attributes()),
                                             task=schema.task), author="benchmark")
        tag_project(project, views=task_of(project).views, attributes=["dominant colour"], progress=progress)
        ap = project.object_evaluation(bench.model, "val")["summary"]["AP"]
        rows = []
        for (tagger, (source, attributes)), (search, config) in itertools.product(bench.taggers.items(),
                                                                                   SEARCHES.items()):
            report = error_slices(project, bench.model, split="val", attributes=attributes, config=config,
                                  tags=source, check_tags=False)
            found, precision = score(report.slices, problem.demo.planted_bugs(), top_n, bench.same_as)
            rows += [{"problem": problem.id, "tagger": tagger, "search": search, **row,
                      f"precision@{top_n}": precision, "AP": ap} for row in found]
            if contests is not None and search == HIBUG2_SEARCH:
                task = task_of_report(report, embeddings_of(project, report, encoder))
                contests.append(contest(task, planted_bugs(problem), same=same_attribute(bench.same_as),
                                        labels={"problem": problem.id, "tags": tagger}))
        return rows
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


def run_demo_benchmark(folder: str | Path, bench: DemoBugBench, problems: int = 1, *, seed: int = 0,
                       top_n: int = 10, progress: ProgressCallback = no_progress, contests: list | None = None,
                       encoder: str = "conse") -> pd.DataFrame:
    """Every problem drawn from `seed`; one row per (problem, planted bug, tagger, search); with `contests`, every
    slice finder's (bugs, problems) rows per problem and tagger are added to it."""
    rows = []
    for problem in bench.problems(problems, seed):
        logger.info("%s benchmark: %s: %s", bench.name, problem.id,
                    "; ".join(b.how for b in problem.demo.planted_bugs()))
        rows += run_problem(Path(folder) / problem.id, bench, problem, top_n=top_n, progress=progress,
                            contests=contests, encoder=encoder)
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame, top_n: int = 10) -> pd.DataFrame:
    """Find Attr, Find Tag (share of planted bugs) and mean Precision@top_n per tagger, and Find Tag per bug."""
    return finding_table(rows, "bug", top_n)
