"""Model comparisons kept beside the database for the project's current state: a new process (the dashboard after a
restart) reads a comparison's tables from Arrow files, and its shared samples and tags from the project's column files
only when first asked for (the tables answer the page's and the command's first questions), instead of enumerating
every shared sample again (most of a minute at ten million objects). A cache only, as report_files is: a missing,
stale or damaged file means the comparison is computed (and kept) again."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd

from hibug_core.progress import no_progress
from hibug_core.slices.compare import (
    CompareConfig,
    ModelComparison,
    SharedRows,
    compare_models,
    compared_tags,
    shared_samples,
)
from hibug_core.slices.report_files import definitions_as_text, read_definitions, remove_old, settings_digest
from hibug_core.slices.search import SliceConfig
from hibug_core.store.tag_store import tags_version

FORMAT = "1"  # bumped when what is kept, or how it is computed, changes: older files are then stale
KEPT = 8  # the newest comparisons kept per project; older ones' files are removed
PREFIX = "comparison-"
TABLES = ("overall", "slices", "classes", "worst_overlap", "failure_iou")


def kept_comparison(project, models: list[str], *, split: str = "val", slices: SliceConfig = SliceConfig(),
                    config: CompareConfig = CompareConfig(), attributes: list[str] | None = None,
                    tags: str = "in force", progress=no_progress) -> ModelComparison:
    """compare_models(project, models, split=, slices=, config=, attributes=, tags=), read from the project's files
    when they hold this project state, else computed (its steps told to `progress`) and kept there (a read-only
    project only reads them)."""
    name, version = _kept_as(project, models, split, slices, config, attributes, tags)
    comparison = _load(project, name, version, list(models), split, slices, config, attributes, tags)
    if comparison is None:
        comparison = compare_models(project, list(models), split=split, slices=slices, config=config,
                                    attributes=attributes, tags=tags, progress=progress)
        _save(project, name, version, comparison)
    return comparison


def is_kept(project, models: list[str], *, split: str = "val", slices: SliceConfig = SliceConfig(),
            config: CompareConfig = CompareConfig(), attributes: list[str] | None = None,
            tags: str = "in force") -> bool:
    """Whether the project's files hold this comparison for the project's current state (one small file read)."""
    name, version = _kept_as(project, models, split, slices, config, attributes, tags)
    return project.columns.load(f"{name}-summary", version) is not None


def _kept_as(project, models, split, slices, config, attributes, tags) -> tuple[str, str]:
    """(the files' name, the version they must hold) of a comparison with these settings."""
    name = PREFIX + settings_digest([list(models), split, dataclasses.asdict(slices), dataclasses.asdict(config),
                                     attributes, tags])
    return name, f"{FORMAT} {tags_version(project)}"


def _load(project, name: str, version: str, models: list[str], split: str, slices: SliceConfig,
          config: CompareConfig, attributes, tags: str) -> ModelComparison | None:
    parts = {}
    for part in ("summary", *TABLES):
        parts[part] = project.columns.load(f"{name}-{part}", version)
        if parts[part] is None:
            return None
    summary = json.loads(parts["summary"]["summary"].iat[0])
    table = read_definitions(parts["slices"])

    def shared_rows():  # read when a page or command first asks for the samples themselves
        evaluation, _ = shared_samples(project, models, split)
        return evaluation, compared_tags(project, evaluation.index, attributes, tags, slices)

    return ModelComparison(models, split, summary["test"], parts["overall"], table, parts["classes"],
                           parts["worst_overlap"], parts["failure_iou"], SharedRows(shared_rows), config, slices)


def _save(project, name: str, version: str, comparison: ModelComparison) -> None:
    if project.columns.read_only:
        return
    tables = {part: getattr(comparison, part) for part in TABLES}
    tables["slices"] = definitions_as_text(tables["slices"])
    tables["summary"] = pd.DataFrame({"summary": [json.dumps({"test": comparison.test})]})
    for part in (*TABLES, "summary"):  # the summary last: a comparison is read only when every part holds this version
        project.columns.save(f"{name}-{part}", version, tables[part])
    remove_old(project.columns.root, PREFIX, KEPT)
