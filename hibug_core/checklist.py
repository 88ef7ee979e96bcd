"""Where a project stands on the way through hibug (attributes, tags, error slices, map, repair) and the next step."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    name: str  # Attributes, Tags, Error slices, Embedding map, Repair
    done: bool
    detail: str
    advice: str  # what to do there
    required: bool = True
    warning: str | None = None


def checklist(project, ranking=None) -> list[Step]:
    """The steps in order. ranking: a function giving the tag sources (tagging.sources.rank_sources) when the caller
    has them cached; they are measured only where tagging runs have finished (reading every imported tag at a million
    images takes seconds)."""
    from hibug_core.repair.runs import run_count
    from hibug_core.store import tag_store
    from hibug_core.store.attribute_versions import latest_version, schema_names
    from hibug_core.tagging.sources import rank_sources, untrusted

    version = latest_version(project)
    runs = tag_store.runs(project)
    finished = runs[runs["status"] == "finished"] if not runs.empty else runs
    maps = project.arrays.names("maps/")
    sliceable = not finished.empty or project.has_known_tags()
    repaired = run_count(project, "retrain")
    trust, warning = None, None
    if version is not None and not finished.empty:
        poor = untrusted(ranking() if ranking is not None else rank_sources(project, schema_names(project)))
        trust = f"{len(poor)} too poor to trust" if len(poor) else "measured, none below the floor"
        if len(poor):
            warning = ("Some tags in force are too poor to trust; slices that use them are flagged and ranked down. "
                       "See Tagging → Tag sources.")
    tags_detail = (f"{len(finished)} tagging runs · {trust}" if trust else
                   "imported tags only" if sliceable else "not tagged yet")
    return [
        Step("Attributes", version is not None, f"version {version}" if version else "none yet",
             "propose them from the task (built-in library or a language model), then edit"),
        Step("Tags", not finished.empty, tags_detail,
             "tag every image (Run), then check how good each source is (Tag sources)", warning=warning),
        Step("Error slices", sliceable, "ready to search" if sliceable else "needs tags",
             "find, rank and explain where the model fails"),
        Step("Embedding map", bool(maps), "computed" if maps else "optional",
             "see the images on a map and select groups", required=False),
        Step("Repair", repaired > 0,
             f"{repaired} comparison{'s' if repaired != 1 else ''}" if repaired else "not repaired yet",
             "select or generate data for the worst slices, retrain, compare with random"),
    ]


def next_step(steps: list[Step]) -> Step | None:
    """The first required step not done yet."""
    return next((step for step in steps if step.required and not step.done), None)
