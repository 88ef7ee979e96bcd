"""Validating a manifest against the data contract; every problem is reported with its row and column."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import MAX_ATTRIBUTES
from hibug_core.config import IngestConfig
from hibug_core.errors import Issues, ManifestError, RowIssue, nearest, rename_hint
from hibug_core.ingest.columns import check_images, model_column, named_models, parse_numbers, read_splits
from hibug_core.ingest.images import inspect_images
from hibug_core.ingest.table import explained, normalised_table
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.values import near_duplicates_note

DEFAULT_MODEL = "model"
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
@dataclass
class ModelColumns:
    """Which manifest columns hold one model's outputs."""

    prediction: str
    confidence: str | None = None
    score: str | None = None
    probabilities: dict[str, str] = field(default_factory=dict)  # class name -> column


@dataclass
class ColumnPlan:
    image: str
    label: str
    key: str | None
    split: str | None
    models: dict[str, ModelColumns]
    attributes: dict[str, str]  # attribute name -> column
    ignored: list[str]


@dataclass
class ModelOutputs:
    """One model's validated outputs, aligned with the manifest rows."""

    prediction: list[str]
    confidence: np.ndarray  # float64, NaN where unknown
    score: np.ndarray  # float64 in [0, 1], NaN where the row has no label
    classes: list[str] | None = None
    probabilities: np.ndarray | None = None  # float32 (rows x classes)


@dataclass
class ValidatedManifest:
    """A manifest that passed every check, ready to be written to a project in one transaction."""

    source: str
    samples: pd.DataFrame  # sample_key, image_path, label, split, content_hash, width, height
    models: dict[str, ModelOutputs]
    known_tags: dict[str, list[str | None] | pd.Categorical]  # per attribute a tag per row (None / NaN: none)
    ignored_columns: list[str]
    key_column: str = "image"
    objects: pd.DataFrame | None = None  # objects only (hibug_core.objects): image_key, object_kind, owner, box_*
    object_evaluations: dict = field(default_factory=dict)  # model -> hibug_core.tasks.object_import.ObjectEvaluation
    task: str = field(kw_only=True)  # the task whose validator made it (hibug_core.tasks), stored at the first import
    notes: list[str] = field(default_factory=list, kw_only=True)  # harmless changes made to its values, said once
    warnings: list[str] = field(default_factory=list, kw_only=True)  # what was kept as given but may be a mistake
    measured_with: str | None = field(default=None, kw_only=True)  # the settings its measured tags were binned with
    # (objects: hibug_core.objects.geometry.GeometryConfig), kept by the project at the first import
    crowd_regions: dict[str, str] | None = field(default=None, kw_only=True)  # labelled objects: image key -> its
    # crowd regions as JSON (hibug_core.tasks.object_import.crowd_regions), what a model added later is checked by

    def __post_init__(self) -> None:
        predicted = [pd.unique(pd.Series(outputs.prediction, dtype=object)) for outputs in self.models.values()]
        classes = [*pd.unique(self.samples["label"].dropna()),
                   *(p for values in predicted for p in values if isinstance(p, str) and p)]
        note = near_duplicates_note(classes, "classes")
        if note:
            self.warnings.append(note)

    @property
    def n_rows(self) -> int:
        return len(self.samples)


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text))


def _are_numbers(values: pd.Series) -> np.ndarray:
    """_is_number of every cell at once (a vectorised regular expression)."""
    return values.astype(str).str.fullmatch(_NUMBER.pattern.strip("^$")).to_numpy(bool)


def _canonical_number(text: str) -> str:
    value = float(text)
    return str(int(value)) if value.is_integer() else repr(value)


CONTRACT_COLUMNS = ("image", "label", "id", "split", "prediction", "confidence", "score")


def _renamed(wanted: str, columns: list[str]) -> str:
    """rename_hint for a missing column, among the file's columns the contract does not already name."""
    return rename_hint(wanted, [c for c in columns if c not in CONTRACT_COLUMNS and ":" not in c])


def ignored_note(columns: list[str]) -> str:
    """The columns a manifest's import left aside, each with the contract's name it looks mistyped from."""
    def hinted(column: str) -> str:
        kind, colon, rest = column.partition(":")
        near = nearest(kind, ("pred", "confidence", "score", "prob", "attr") if colon else CONTRACT_COLUMNS)
        return f"{column} (did you mean '{near}{colon}{rest}'?)" if near and near != kind else column
    return "ignored columns (not in the data contract): " + ", ".join(hinted(c) for c in columns)


def plan_columns(columns: list[str], default_model: str = DEFAULT_MODEL,
                 require_model: bool = True) -> tuple[ColumnPlan | None, list[RowIssue]]:
    """Assign every column a role from the data contract."""
    issues: list[RowIssue] = []
    present = set(columns)
    for required in ("image", "label"):
        if required not in present:
            issues.append(RowIssue(None, required, "required column is missing (a manifest needs 'image' and 'label')"
                                   + _renamed(required, columns)))
    models: dict[str, ModelColumns] = {}
    if "prediction" in present:
        models[default_model] = ModelColumns("prediction")
    for name in named_models(columns, "prediction"):
        if not name:
            issues.append(RowIssue(None, "pred:", "model name is empty; name the column 'pred:<model>'"))
        elif name in models:
            issues.append(RowIssue(None, model_column("prediction", name), f"model '{name}' appears twice"))
        else:
            models[name] = ModelColumns(model_column("prediction", name))
    if not models and require_model:
        issues.append(RowIssue(None, None, "no model output: add a 'prediction' column or 'pred:<model>' columns"
                               + _renamed("prediction", columns)))

    attributes: dict[str, str] = {}
    ignored: list[str] = []
    for column in columns:
        if column in ("image", "label", "id", "split", "prediction") or column.startswith("pred:"):
            continue
        kind, _, rest = column.partition(":")
        kind, rest = kind.strip(), rest.strip()
        if kind in ("confidence", "score") and kind == column:
            if "prediction" not in present:
                issues.append(RowIssue(None, column, f"no 'prediction' column for it; name it '{kind}:<model>'"))
            else:
                setattr(models[default_model], kind, column)
        elif kind in ("confidence", "score") and rest:
            if rest not in models:
                issues.append(RowIssue(None, column, f"no column 'pred:{rest}' for model '{rest}'"))
            else:
                setattr(models[rest], kind, column)
        elif kind == "prob" and rest:
            owner, _, class_name = (part.strip() for part in rest.partition(":"))
            if class_name and owner in models and owner != default_model:
                target, class_name = models[owner].probabilities, class_name
            elif "prediction" in present:
                target, class_name = models[default_model].probabilities, rest
            else:
                target = None
            if target is not None and class_name in target:
                issues.append(RowIssue(None, column, f"class '{class_name}' is also given by column "
                                       f"'{target[class_name]}'; keep one of them"))
            elif target is not None:
                target[class_name] = column
            else:
                issues.append(RowIssue(None, column,
                                       "no model for these probabilities; name it 'prob:<model>:<class>'"))
        elif kind == "attr" and rest:
            if rest in attributes:
                issues.append(RowIssue(None, column, f"attribute '{rest}' is also given by column "
                                       f"'{attributes[rest]}'; keep one of them"))
            attributes[rest] = column
        else:
            ignored.append(column)
    if len(attributes) > MAX_ATTRIBUTES:  # each is sliced by, with every other: thousands ran for minutes
        issues.append(RowIssue(None, None, f"{len(attributes):,} attribute columns (attr:*), more than the "
                               f"{MAX_ATTRIBUTES} a project holds; keep the ones worth slicing by"))
    if issues:
        return None, issues
    return ColumnPlan("image", "label", "id" if "id" in present else None,
                      "split" if "split" in present else None, models, attributes, ignored), []


def _numbers(frame: pd.DataFrame, column: str, issues: Issues, *, low: float, high: float,
             required: np.ndarray | None = None) -> np.ndarray:
    text = frame[column]
    values = parse_numbers(text)
    bad = (text != "").to_numpy() & np.isnan(values)
    for i in np.flatnonzero(bad):
        issues.add(i, column, f"'{text.iat[i]}' is not a number")
    if required is not None:
        for i in np.flatnonzero(required & (text == "").to_numpy()):
            issues.add(i, column, "empty value; every row needs one")
    out_of_range = ~np.isnan(values) & ((values < low) | (values > high))
    for i in np.flatnonzero(out_of_range):
        issues.add(i, column, f"{text.iat[i]} is outside [{low:g}, {high:g}]")
    return values


def _none_where_empty(values: pd.Series) -> np.ndarray:
    """Text cells as an object array with None for empty cells."""
    array = values.to_numpy(object).copy()
    array[array == ""] = None
    return array


def _resolve(base_dir: Path, image: str) -> Path:
    path = Path(image).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base_dir / path))


def validate_manifest(
    frame: pd.DataFrame,
    *,
    source: str,
    base_dir: Path,
    default_model: str = DEFAULT_MODEL,
    config: IngestConfig = IngestConfig(),
    progress: ProgressCallback = no_progress,
) -> ValidatedManifest:
    """Check every row and column of a manifest of images (classification); raise ManifestError listing every problem
    found. Which task reads a manifest is decided by hibug_core.tasks.importing."""
    # 1. Structure: every column's role, and rows to read.
    frame, notes = normalised_table(frame, source, config.max_issues)
    plan, structural = plan_columns(list(frame.columns), default_model, config.require_model)
    if plan is None:
        raise ManifestError(source, structural)
    if len(frame) == 0:
        raise ManifestError(source, [RowIssue(None, None, "the manifest has a header but no rows")])
    frame = frame.reset_index(drop=True)
    issues = Issues(config.max_issues)
    n = len(frame)

    # 2. Every row's image, split, label and id (each sample once).
    images = frame[plan.image]
    check_images(frame, plan.image, issues)
    splits = read_splits(frame, plan.split, config, issues)
    labelled = (splits != "pool").to_numpy()

    labels = frame[plan.label]
    for i in np.flatnonzero(labelled & (labels == "").to_numpy()):
        issues.add(i, plan.label, "empty label; only rows of split 'pool' may be unlabelled")
    present_labels = labels[labels != ""]
    numeric_labels = len(present_labels) > 0 and bool(_are_numbers(present_labels).all())
    if numeric_labels:
        labels = labels.map(lambda t: _canonical_number(t) if t else t)
    example_label = present_labels.iat[0] if len(present_labels) else None

    keys_column = plan.key or plan.image
    # Paths are worked out once per distinct image (a million rows often show a few thousand images).
    image_codes, distinct_images = pd.factorize(images.to_numpy(object))
    distinct_paths = [_resolve(base_dir, t) if t else None for t in distinct_images]
    path_text = np.array([str(p) if p else "" for p in distinct_paths], dtype=object)[image_codes]
    keys = frame[keys_column].to_numpy(object) if plan.key else path_text
    if plan.key:
        for i in np.flatnonzero(keys == ""):
            issues.add(i, plan.key, "empty id")
    key_codes, distinct_keys = pd.factorize(keys)  # numpy's object hashing: faster than Arrow's here
    if len(distinct_keys) < n:
        duplicated = (np.bincount(key_codes)[key_codes] > 1) & (keys != "")
        first_row: dict[str, int] = {}
        for i in np.flatnonzero(duplicated):
            key = keys[i]
            if key in first_row:
                what = f"id '{frame[keys_column].iat[i]}'" if plan.key else f"image '{images.iat[i]}'"
                extra = "" if plan.key else " (add an 'id' column if one image holds several samples)"
                issues.add(i, keys_column, f"duplicate {what}, already in row {first_row[key] + 1}{extra}")
            else:
                first_row[key] = i

    # 3. Each model's outputs: predictions in the labels' own kind, confidences, scores, probabilities.
    models: dict[str, ModelOutputs] = {}
    for name, columns in plan.models.items():
        predictions = frame[columns.prediction]
        for i in np.flatnonzero((predictions == "").to_numpy()):
            issues.add(i, columns.prediction, "empty prediction")
        is_number = _are_numbers(predictions)
        if example_label is not None and numeric_labels:
            for i in np.flatnonzero(~is_number & (predictions != "").to_numpy()):
                issues.add(i, columns.prediction, f"'{predictions.iat[i]}' is text but the labels are numbers "
                           f"(e.g. {example_label}); use the same class ids as 'label'")
            predictions = predictions.map(lambda t: _canonical_number(t) if _is_number(t) else t)
        elif example_label is not None:
            known = set(present_labels.unique())
            for i in np.flatnonzero(is_number & ~predictions.isin(known).to_numpy()):
                issues.add(i, columns.prediction, f"'{predictions.iat[i]}' is a number but the labels are class names "
                           f"(e.g. '{example_label}'); use the same class names as 'label'")
        confidence = (_numbers(frame, columns.confidence, issues, low=0, high=1)
                      if columns.confidence else np.full(n, np.nan))
        if columns.score:
            score = _numbers(frame, columns.score, issues, low=0, high=1, required=labelled)
        else:
            score = np.where((labels == "").to_numpy(), np.nan, (predictions == labels).to_numpy(dtype=float))
        classes, probabilities = None, None
        if columns.probabilities:
            class_names = list(columns.probabilities)
            if numeric_labels:
                class_names = [_canonical_number(c) if _is_number(c) else c for c in class_names]
            matrix = np.column_stack([
                _numbers(frame, column, issues, low=0, high=1, required=np.ones(n, bool))
                for column in columns.probabilities.values()
            ])
            sums = matrix.sum(axis=1)
            label_text = f"prob:* of {name}" if name != default_model else "prob:*"
            for i in np.flatnonzero(~np.isnan(sums) & (np.abs(sums - 1) > config.probability_tolerance)):
                issues.add(i, label_text, f"probabilities sum to {sums[i]:.4g}, not 1 "
                           f"(tolerance {config.probability_tolerance:g}); give every class's probability")
            classes, probabilities = class_names, np.nan_to_num(matrix).astype(np.float32)
            # A prediction's confidence is its own class's probability, so every predicted class needs its column.
            column_of = {c: j for j, c in enumerate(class_names)}
            predicted = predictions.to_numpy(object)
            index = np.array([column_of.get(p, -1) for p in predicted], dtype=np.int64)
            for i in np.flatnonzero((index < 0) & (predictions != "").to_numpy()):
                issues.add(i, columns.prediction, f"'{predicted[i]}' has no probability among {label_text} (classes "
                           f"{', '.join(class_names[:6])}{' ...' if len(class_names) > 6 else ''}); give the "
                           "predicted class's probability too")
            if not columns.confidence:
                confidence = np.where(index >= 0, np.nan_to_num(matrix)[np.arange(n), np.maximum(index, 0)], np.nan)
        models[name] = ModelOutputs(predictions.to_numpy(object).tolist(), confidence, score, classes, probabilities)

    # 4. The images themselves (once each), unless the manifest already failed; every problem raised at once.
    if issues.full:
        issues.unchecked = "the images were"
    else:
        infos, problems = inspect_images(
            [p for p in distinct_paths if p is not None], workers=config.workers,
            check_size=config.image_check_size, progress=progress, within=config.image_roots)
        _, first_rows = np.unique(image_codes, return_index=True)  # the first row of each distinct image
        for code, path in enumerate(distinct_paths):
            if path is not None and path in problems:
                problem = problems[path]
                detail = f" (looked for {path})" if problem == "file not found" else ""
                issues.add(int(first_rows[code]), plan.image, f"{problem}: {distinct_images[code]}{detail}")
        if not plan.key:  # one image file is one sample, however it is named (a link, "a/../b.png")
            _same_file_issues(distinct_paths, distinct_images, first_rows, plan.image, issues)
    if issues.items:
        position = {column: i for i, column in enumerate(frame.columns)}
        raise ManifestError(source, explained(frame, sorted(issues.items, key=lambda x: (
            x.row or 0, position.get(x.column, len(position))))), found=issues)

    # 5. The validated samples and outputs.
    info = [infos[p] for p in distinct_paths]
    text_columns = {  # kept as Python strings, which the database is handed (not converted to Arrow and back)
        "sample_key": keys,
        "image_path": path_text,
        "label": _none_where_empty(labels),
        "split": splits.to_numpy(object),
        "content_hash": np.array([i.content_hash for i in info], dtype=object)[image_codes],
    }
    samples = pd.DataFrame({
        **{name: pd.Series(values, dtype=object) for name, values in text_columns.items()},
        "width": np.array([i.width for i in info], dtype=np.int64)[image_codes],
        "height": np.array([i.height for i in info], dtype=np.int64)[image_codes],
    })
    known_tags = {name: _none_where_empty(frame[column]).tolist() for name, column in plan.attributes.items()}
    copies = copies_note({p: infos[p].content_hash for p in distinct_paths})
    return ValidatedManifest(source, samples, models, known_tags, plan.ignored, keys_column, task="classification",
                             notes=notes, warnings=[copies] if copies else [])


def _same_file_issues(paths: list, names, first_rows: np.ndarray, column: str, issues: Issues) -> None:
    """Rows whose image is the same file as an earlier row's, once links and '..' are followed."""
    seen: dict[str, int] = {}
    for code, path in enumerate(paths):
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen and str(paths[seen[real]]) == str(path):
            continue  # the same path written two ways ('./a.png'): a duplicate image, said already
        if real in seen:
            earlier = seen[real]
            issues.add(int(first_rows[code]), column, f"'{names[code]}' is the same file as row "
                       f"{int(first_rows[earlier]) + 1}'s image '{names[earlier]}' (through a link or '..'); one "
                       "image file is one sample (add an 'id' column if one image holds several samples)")
        else:
            seen[real] = code


def copies_note(hashes: dict) -> str | None:
    """A warning naming images that are byte-for-byte copies of one another (each stays a sample of its own); None
    when there are none. `hashes`: path -> content hash."""
    groups: dict[str, list] = {}
    for path, digest in hashes.items():
        groups.setdefault(digest, []).append(path)
    copies = [sorted(map(str, group)) for group in groups.values() if len(group) > 1]
    if not copies:
        return None
    example = " = ".join(Path(p).name for p in copies[0][:3])
    return (f"{sum(len(g) - 1 for g in copies):,} image(s) are byte-for-byte copies of others (e.g. {example}); each "
            "is a sample of its own, so a copy in two splits is seen in both")
