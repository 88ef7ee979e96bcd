"""The planted-bug benchmark for pose: the pose demo's keypoint network (Keypoint R-CNN) trained per problem with four
planted bugs (a pose rare in training, left/right swapped for figures seen from behind, a shirt colour with a pose left
unannotated, small figures rare), its error slices scored by Find Attr, Find Tag and Precision@10 against the planted
slices, with true and automatic tags."""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import measured_attributes
from hibug_core.attributes.schema import AttributeSchema
from hibug_core.bench.objects import finding_table
from hibug_core.bench.scoring import SEARCHES
from hibug_core.demo.figures import POSES, SHIRT_COLOURS
from hibug_core.demo.pose import MODEL_NAME, PoseDemoConfig, build_pose_demo, pose_attribute_schema
from hibug_core.objects.geometry import geometry_attributes
from hibug_core.objects.pose_geometry import pose_attributes
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.slices.report import error_slices
from hibug_core.store.attribute_versions import save_schema
from hibug_core.tagging.run import tag_project
from hibug_core.tasks import task_of

logger = logging.getLogger(__name__)

MEASURED = tuple(a.name for a in (*geometry_attributes(), *pose_attributes()))  # from boxes and true keypoints
# tagger -> (the tag source it reads, the attributes it slices by)
TAGGERS = {"truth": ("imported", ["pose", "shirt colour", "background", *MEASURED]),  # the figures' true tags
           "automatic": ("in force", ["dominant colour", *MEASURED])}  # the person's colour measured from its crop
# A planted condition is also named by these (attribute, tag) pairs: what another tag source calls the same thing.
SAME_AS = {("pose", "lying"): {("body orientation", "lying")},
           **{("shirt colour", c): {("dominant colour", c)} for c in SHIRT_COLOURS}}


@dataclass(frozen=True)
class PoseProblem:
    id: str
    demo: PoseDemoConfig  # its planted bugs, scenes and model settings


def pose_problems(count: int) -> list[PoseProblem]:
    """The demo itself first (its shipped model: no training), then problems on other seeds whose conjunction pairs
    another shirt colour with another pose (each trains its own keypoint model)."""
    problems = [PoseProblem("demo", PoseDemoConfig())]
    rng = np.random.default_rng(7)
    for k in range(1, count):
        colour = str(rng.choice([c for c in SHIRT_COLOURS if c != "red"]))
        pose = str(rng.choice([p for p in POSES if p != "lying"]))
        problems.append(PoseProblem(f"p{k}", replace(PoseDemoConfig(), seed=k, pair_colour=colour, pair_pose=pose)))
    return problems


def _names(definition, attribute: str, tag: str | None) -> bool:
    """Whether a slice's conditions name a planted condition: its attribute (tag None), or its attribute and tag;
    what another tag source calls the same thing counts (SAME_AS)."""
    if tag is None:
        names = {attribute} | {a for (n, _), same in SAME_AS.items() if n == attribute for a, _ in same}
        return any(name in names for name, _ in definition)
    wanted = {(attribute, tag), *SAME_AS.get((attribute, tag), set())}
    return any((name, value) in wanted for name, value in definition)


def score(slices: pd.DataFrame, bugs: list, top_n: int) -> tuple[list[dict], float]:
    """Per planted bug: named by attribute / by tag in the top `top_n` reported slices, and the first rank naming it;
    and Precision@top_n: the share of the top slices naming every condition of some planted bug."""
    top = list(slices["definition"])[:top_n]

    def finds(definition, bug, by_tag: bool) -> bool:
        return all(_names(definition, a, t if by_tag else None) for a, t in bug.slice.items())

    rows = []
    for bug in bugs:
        first = next((rank for rank, d in enumerate(top, 1) if finds(d, bug, True)), None)
        rows.append({"bug": bug.bug_type, "slice": " & ".join(f"{a} = {t}" for a, t in bug.slice.items()),
                     "find_attr": any(finds(d, bug, False) for d in top), "find_tag": first is not None,
                     "rank": first})
    hits = sum(any(finds(d, bug, True) for bug in bugs) for d in top)
    return rows, hits / top_n


def run_problem(folder: Path, problem: PoseProblem, *, top_n: int = 10,
                progress: ProgressCallback = no_progress) -> list[dict]:
    """Build the problem's pose project (its keypoint model shipped or trained), measure each person's crop colour,
    find and score its validation error slices with each tag source."""
    project = build_pose_demo(folder, problem.demo, progress=progress)
    try:
        schema = pose_attribute_schema()
        save_schema(project, AttributeSchema(attributes=(*schema.attributes, *measured_attributes()),
                                             task=schema.task), author="benchmark")
        tag_project(project, views=task_of(project).views, attributes=["dominant colour"], progress=progress)
        ap = project.object_evaluation(MODEL_NAME, "val")["summary"]["AP"]
        rows = []
        for (tagger, (source, attributes)), (search, config) in itertools.product(TAGGERS.items(), SEARCHES.items()):
            report = error_slices(project, MODEL_NAME, split="val", attributes=attributes, config=config, tags=source,
                                  check_tags=False)
            found, precision = score(report.slices, problem.demo.planted_bugs(), top_n)
            rows += [{"problem": problem.id, "tagger": tagger, "search": search, **row,
                      f"precision@{top_n}": precision, "AP": ap} for row in found]
        return rows
    finally:
        project.close()


def run_pose_benchmark(folder: str | Path, problems: int = 1, *, top_n: int = 10,
                       progress: ProgressCallback = no_progress) -> pd.DataFrame:
    """Every problem; one row per (problem, planted bug, tagger, search)."""
    rows = []
    for problem in pose_problems(problems):
        logger.info("pose benchmark: %s: %s", problem.id, "; ".join(b.how for b in problem.demo.planted_bugs()))
        rows += run_problem(Path(folder) / problem.id, problem, top_n=top_n, progress=progress)
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame, top_n: int = 10) -> pd.DataFrame:
    """Find Attr, Find Tag (share of planted bugs) and mean Precision@top_n per tagger, and Find Tag per bug."""
    return finding_table(rows, "bug", top_n)
