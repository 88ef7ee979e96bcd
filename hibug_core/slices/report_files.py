"""Slice reports kept beside the database for the project's current state: a new process (the dashboard after a
restart) reads the ranked slices, their tags and the enumeration from Arrow files instead of computing them again
over every row. A cache only: a missing, stale or damaged file means the report is computed (and kept) again."""
from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pandas as pd

from hibug_core.slices.enumeration import Enumeration, Level
from hibug_core.slices.false_positives import FalsePositives, false_positive_slices
from hibug_core.slices.report import SliceReport, error_slices, evaluation_rows
from hibug_core.slices.search import SliceConfig, TagMatrix
from hibug_core.store.tag_store import tags_version

FORMAT = "5"  # bumped when what is kept, or how it is computed, changes: older files are then stale
KEPT_REPORTS = 8  # the newest reports kept per project; older ones' files are removed
KEPT_TAGS = 3  # the newest tag tables kept (one per tag source and class setting in use)
PREFIX = "slice-report-"
FALSE_POSITIVES_PREFIX = "false-positives-"  # an object model's false positives, measured apart
TAGS_PREFIX = "slice-tags-"  # the tags sliced by, shared by the reports of one tag source and class setting


def kept_error_slices(project, model: str | None = None, *, split: str = "val", config: SliceConfig = SliceConfig(),
                      attributes: list[str] | None = None, tags: str = "in force") -> SliceReport:
    """error_slices(project, model, split=, config=, attributes=, tags=), read from the project's files when they
    hold this project state, else computed and kept there (a read-only project only reads them)."""
    model = model or next(iter(project.models()), None)
    names = {"report": PREFIX + settings_digest([model, split, dataclasses.asdict(config), attributes, tags]),
             "tags": TAGS_PREFIX + settings_digest([attributes, tags, config.by_class])}
    version = f"{FORMAT} {tags_version(project)}"
    report = _load(project, names, version, model, split, config) if model else None
    if report is None:
        report = error_slices(project, model, split=split, config=config, attributes=attributes, tags=tags)
        _save(project, names, version, report)
    return report


def kept_false_positives(project, model: str, *, split: str = "val", config: SliceConfig = SliceConfig(),
                         tags: str = "in force") -> FalsePositives:
    """false_positive_slices(project, model, split=, config=, tags=), read from the project's files when they hold
    this project state, else computed and kept there (a read-only project only reads them): the slices of a model's
    detections are an enumeration of their own (4.7 s at a million objects)."""
    name = FALSE_POSITIVES_PREFIX + settings_digest([model, split, dataclasses.asdict(config), tags])
    version = f"{FORMAT} {tags_version(project)}"
    parts = {part: project.columns.load(f"{name}-{part}", version) for part in ("slices", "summary")}
    if all(part is not None for part in parts.values()):
        summary = json.loads(parts["summary"]["summary"].iat[0])
        return FalsePositives(model, split, summary["detections"], summary["false"], read_definitions(parts["slices"]))
    found = false_positive_slices(project, model, split=split, config=config, tags=tags)
    if not project.columns.read_only:
        project.columns.save(f"{name}-slices", version, definitions_as_text(found.slices))
        project.columns.save(f"{name}-summary", version, pd.DataFrame(  # the summary last: read only when both hold
            {"summary": [json.dumps({"detections": found.detections, "false": found.false})]}))
        remove_old(project.columns.root, FALSE_POSITIVES_PREFIX, KEPT_REPORTS)
    return found


def definitions_as_text(slices: pd.DataFrame) -> pd.DataFrame:
    """A table of slices as kept in a column file: each definition as JSON text, no attrs (the table given is left as
    it is)."""
    kept = slices.copy(deep=False)
    if "definition" in kept:
        kept["definition"] = [json.dumps(d) for d in kept["definition"]]
    kept.attrs = {}
    return kept


def read_definitions(slices: pd.DataFrame) -> pd.DataFrame:
    """The inverse of definitions_as_text: each definition back as ((attribute, tag), ...)."""
    if "definition" not in slices:
        return slices
    return slices.assign(definition=[tuple(map(tuple, json.loads(d))) for d in slices["definition"]])


def settings_digest(settings) -> str:
    """A short name for the settings a kept report was computed with (JSON: lists, dicts, numbers, text)."""
    return hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=8).hexdigest()


def _load(project, names: dict, version: str, model: str, split: str, config: SliceConfig) -> SliceReport | None:
    files = project.columns
    parts = {}
    for part in ("summary", "slices", "rare", "levels", "tags"):
        parts[part] = files.load(names["tags"] if part == "tags" else f"{names['report']}-{part}", version)
        if parts[part] is None:
            return None
    summary = json.loads(parts["summary"]["summary"].iat[0])
    slices = read_definitions(parts["slices"])
    slices.attrs.update(summary["attrs"])
    samples = project.samples(model)
    evaluation = evaluation_rows(samples, model, split)
    frame = parts["tags"]
    matrix = TagMatrix.from_frame(frame, evaluation.index)
    enumeration = _enumeration(parts["levels"], summary["enumeration"])
    return SliceReport(model, split, slices, summary["overall_score"], parts["rare"], evaluation, matrix,
                       summary["enumerated"], config, samples, frame, enumeration, summary["model_column"],
                       summary["poor"])


def _save(project, names: dict, version: str, report: SliceReport) -> None:
    if project.columns.read_only:
        return
    enumeration = report.enumeration
    summary = {"attrs": report.slices.attrs, "overall_score": report.overall_score, "enumerated": report.enumerated,
               "model_column": report.model_column, "poor": report.poor,
               "enumeration": {"depths": len(enumeration.levels),
                               "feature_attribute": enumeration.feature_attribute.tolist(),
                               "feature_tag": enumeration.feature_tag.tolist(), "n_rows": enumeration.n_rows,
                               "min_support": enumeration.min_support, "candidates": enumeration.candidates,
                               "total_errors": enumeration.total_errors.tolist(),
                               "binary_errors": enumeration.binary_errors.tolist(),
                               "models": int(enumeration.total_errors.shape[0])}}
    project.columns.save(names["tags"], version, report.all_tags)
    parts = {"slices": definitions_as_text(report.slices), "rare": report.rare_classes, "levels": _levels(enumeration),
             "summary": pd.DataFrame({"summary": [json.dumps(summary, default=_plain)]})}
    for part, frame in parts.items():  # a report is read only when every part holds this version
        project.columns.save(f"{names['report']}-{part}", version, frame)
    remove_old(project.columns.root, PREFIX, KEPT_REPORTS)
    remove_old(project.columns.root, TAGS_PREFIX, KEPT_TAGS)


def _plain(value):
    return value.item() if isinstance(value, np.generic) else str(value)


def _levels(enumeration: Enumeration) -> pd.DataFrame:
    """Every level's slices in one table: depth, features (-1 past the depth), key, count, errors per model."""
    frames = []
    for depth, level in enumerate(enumeration.levels, start=1):
        features = np.full((len(level.keys), 4), -1, dtype=np.int32)
        features[:, :depth] = level.features
        frames.append(pd.DataFrame({"depth": np.full(len(level.keys), depth, dtype=np.int8),
                                    **{f"f{i}": features[:, i] for i in range(4)}, "key": level.keys,
                                    "count": level.count,
                                    **{f"e{m}": level.errors[:, m] for m in range(level.errors.shape[1])}}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({"depth": np.zeros(0, dtype=np.int8)})


def _enumeration(table: pd.DataFrame, summary: dict) -> Enumeration:
    """The inverse of _levels (with the summary's feature table and totals)."""
    depths = table["depth"].to_numpy()
    errors = [f"e{m}" for m in range(summary["models"])]
    levels = []
    for depth in range(1, summary["depths"] + 1):
        rows = table[depths == depth]
        levels.append(Level(np.ascontiguousarray(rows[[f"f{i}" for i in range(depth)]].to_numpy(np.int32)),
                            rows["key"].to_numpy(np.uint64), rows["count"].to_numpy(np.int64),
                            np.ascontiguousarray(rows[errors].to_numpy(np.float64)).reshape(len(rows), len(errors))))
    return Enumeration(levels, np.asarray(summary["feature_attribute"], dtype=np.int64),
                       np.asarray(summary["feature_tag"], dtype=np.int64), summary["n_rows"], summary["min_support"],
                       summary["candidates"], np.asarray(summary["total_errors"], dtype=np.float64),
                       np.asarray(summary["binary_errors"], dtype=bool))


def remove_old(root, prefix: str, keep: int) -> None:
    """Keep the files of the `keep` newest reports (or tag tables) whose names start with `prefix`."""
    groups: dict[str, float] = {}
    for path in root.glob(prefix + "*.arrow"):
        group = prefix + path.stem[len(prefix):].split("-", 1)[0]
        groups[group] = max(groups.get(group, 0.0), path.stat().st_mtime)
    for group in sorted(groups, key=groups.get, reverse=True)[keep:]:
        for path in root.glob(group + "*.arrow"):
            path.unlink(missing_ok=True)
