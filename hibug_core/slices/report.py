"""Error slices of a project's model: tags in force, one enumeration per dataset (reused across models), scoring,
diagnosis with training-split evidence, and turning a slice back into its images."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hibug_core import metrics
from hibug_core.cache import BoundedCache, new_identity
from hibug_core.errors import HibugError
from hibug_core.metrics import BACKGROUND
from hibug_core.registry import Registry
from hibug_core.rows import rows_by_id
from hibug_core.slices.diagnosis import (
    ANNOTATION_BUGS,
    DiagnosisConfig,
    ObjectEvidence,
    diagnose,
    explained_annotation_bugs,
    rare_classes,
)
from hibug_core.slices.enumeration import Enumeration, enumerate_slices
from hibug_core.slices.evidence import TASK_EVIDENCE
from hibug_core.slices.redundancy import mark_repeats
from hibug_core.slices.search import (
    CLASS,
    SliceConfig,
    TagMatrix,
    describe,
    parse_definition,
    score_slices,
    slice_id,
    smallest_significant_gap,
)
from hibug_core.slices.tag_precision import KNOWN_PREFIX, slice_tag_precision
from hibug_core.stats import zero_one
from hibug_core.tagging.sources import ground_truth

ENUMERATIONS = BoundedCache("slice enumerations", max_items=4)
# What a page asks of a chosen slice on each of its runs (its samples, failures first; its parents and children), by
# the report's identity: a slice's mask and sort over ten million rows took a second or more a run. Kept few: one
# slice's positions can be megabytes.
SLICE_PARTS = BoundedCache("slice parts", max_items=12)


class SliceError(HibugError):
    """Slices that cannot be computed (no tags, no labelled rows, unknown slice)."""


@dataclass
class SliceReport:
    model: str
    split: str
    slices: pd.DataFrame  # ranked error slices with statistics, bug type and evidence
    overall_score: float
    rare_classes: pd.DataFrame
    evaluation: pd.DataFrame  # the evaluated samples: label, prediction, score, error (index: sample id)
    tags: TagMatrix  # their tags
    enumerated: int
    config: SliceConfig = field(default_factory=SliceConfig)
    samples: pd.DataFrame | None = None  # every sample with the model's outputs
    all_tags: pd.DataFrame | None = None  # tags in force of every sample (the sliced attributes)
    enumeration: Enumeration | None = None  # every slice with enough support, reported or not
    model_column: int = 0  # this model's column in the enumeration's errors
    poor: dict[str, str] = field(default_factory=dict)  # sliced attributes whose tags are too poor to trust: why
    apart: int | None = None  # the model's false positives on the split, counted once (every page run asks)
    identity: str = field(default_factory=new_identity, repr=False, compare=False)  # what SLICE_PARTS keys it by

    def __post_init__(self):
        if self.apart is None:
            self.apart = false_positives(self.samples, self.split) if self.samples is not None else 0

    def false_positives(self) -> int:
        """The model's false positives on the split: measured apart, never in the true samples' score."""
        return self.apart

    def headline(self, nouns) -> str:
        """The report in one line, in the task's words (`nouns`: tasks.base.Nouns): what was scored, how, and the
        false positives measured apart (they never enter the true samples' score)."""
        apart = self.false_positives()
        return (f"{self.model} on {self.split}: {nouns.figure} {self.overall_score:.1%} over "
                f"{nouns.count(len(self.evaluation))}" + (f" ({apart:,} false positives measured apart)" if apart
                                                           else "")
                + f"; {self.enumerated:,} slices enumerated, {len(self.slices)} error slices ({self._rule(nouns)})")

    def _rule(self, nouns) -> str:
        """What an error slice scores: below the cut, which a whole that scores nothing leaves no room under."""
        cut = self.slices.attrs["cut"]
        if cut <= 0:
            return f"none can score below the whole's {self.overall_score:.1%}: every one of its {nouns.samples} failed"
        return f"{nouns.figure} below {cut:.1%}"

    def empty_verdict(self) -> str | None:
        """When no slice is reported: that nothing is significant at this size, with what the data allow (the
        smallest gap a slice of M samples, and one of a tenth of the split, would need to show) and what would help;
        None when slices are reported."""
        if len(self.slices):
            return None
        attrs, n = self.slices.attrs, len(self.evaluation)
        tested = max(int(attrs.get("enumerated", self.enumerated) or 1), 1)
        support = self.config.min_support
        binary = bool(zero_one(self.evaluation["error"].to_numpy(float)))
        gaps = [smallest_significant_gap(n, self.overall_score, size, self.config.alpha, tested, binary=binary)
                for size in (support, max(support, n // 10))]
        below = int(attrs.get("under_cut_not_significant", 0))
        shown = (f"{below:,} slice{'s' if below != 1 else ''} scored below the cut but none significantly worse than "
                 "the whole" if below else "no slice scored below the cut")
        sizes = (f"a slice of {support:,} would have to score {gaps[0] * 100:.1f} points below the overall "
                 f"{self.overall_score:.1%}" if np.isfinite(gaps[0]) else f"a slice of {support:,} cannot show a gap")
        if n // 10 > support and np.isfinite(gaps[1]):
            sizes += f", one of {n // 10:,} (a tenth of the split) {gaps[1] * 100:.1f} points"
        return (f"Nothing significant at this size: {shown} (false discovery rate {self.config.alpha:g}, "
                f"{tested:,} slices tested over {n:,} samples). What the data allow: {sizes}. What would help: more "
                f"{self.split} samples, a lower minimum size M, fewer or better tags (fewer slices tested).")

    def every_slice(self) -> pd.DataFrame:
        """Every enumerated slice, reported or not: definition, slice_id, description, depth, count, failures, score."""
        table, errors = enumerated_slices(self.tags, self.enumeration)
        table["failures"] = errors[:, self.model_column]
        table["score"] = 1 - table["failures"] / table["count"]
        return table

    def slices_below(self, cut: float) -> pd.DataFrame:
        """HiBug's slices: every enumerated slice (each holds the minimum support), reported or not and whatever its
        parents do, scoring below `cut`, worst first (the larger first on a tie)."""
        every = self.every_slice()
        below = every[every["score"] < cut]
        return below.iloc[np.lexsort((-below["count"].to_numpy(), below["score"].to_numpy()))].reset_index(drop=True)

    def split_matrix(self, split: str, labelled: bool = False) -> tuple[TagMatrix, pd.DataFrame]:
        """Tags and samples of another split, coded like the evaluation rows."""
        rows = self.samples[self.samples["split"] == split]
        if labelled:
            rows = metrics.labelled(rows)
        # the same frame the evaluation rows were coded from: its categories are theirs
        return TagMatrix.from_frame(self.all_tags, rows.index), rows

    def definition(self, ref) -> tuple[tuple[str, str], ...]:
        """A slice by id, description ("color = blue & size = small") or definition."""
        return slice_definition(self.slices, ref, "this report")

    def stats(self, definition) -> dict:
        """Count, failures (the samples the model got wrong: a whole number, also where the score is graded, as an
        object's IoU) and score of any slice over the evaluated samples."""
        mask = self.tags.mask(definition)
        errors = self.evaluation["error"].to_numpy()[mask]
        return {"count": int(mask.sum()), "failures": int(self.failed()[mask].sum()),
                "score": float(1 - errors.mean()) if mask.any() else np.nan}

    def failed(self) -> np.ndarray:
        """Per evaluated sample, whether the model got it wrong (its `correct` is false; a whole error without it)."""
        if "correct" in self.evaluation:
            return ~self.evaluation["correct"].fillna(False).to_numpy(bool)
        return self.evaluation["error"].to_numpy() >= 1

    def exported(self) -> pd.DataFrame:
        """The ranked slices as a file holds them, ranked from 1: `failures` is the number of samples the model got
        wrong; where scores are graded (an object's IoU, a person's OKS) `error_sum` is the sum of 1 - score the
        ranking reads."""
        table = self.slices.drop(columns=["definition"])
        table.index = pd.RangeIndex(1, len(table) + 1, name="rank")
        graded = not np.isin(self.evaluation["error"].to_numpy(), (0.0, 1.0)).all()
        if graded:
            table.insert(table.columns.get_loc("failures") + 1, "error_sum", table["failures"].to_numpy())
        failed = self.failed()
        table["failures"] = [int(failed[self.tags.mask(d)].sum()) for d in self.slices["definition"]]
        return table

    def related(self, ref) -> pd.DataFrame:
        """The slice's parents (one condition fewer, reported or not) and its reported children, with their stats."""
        definition = tuple(self.definition(ref))
        return SLICE_PARTS.get_or_make((self.identity, "related", definition), lambda: self._related(definition)).copy()

    def _related(self, definition: tuple[tuple[str, str], ...]) -> pd.DataFrame:
        rows = []
        for skip in range(len(definition)) if len(definition) > 1 else ():
            parent = definition[:skip] + definition[skip + 1:]
            rows.append({"relation": "parent", "description": describe(parent), **self.stats(parent)})
        for child in self.slices["definition"]:
            if len(child) > len(definition) and set(definition) <= set(child):
                rows.append({"relation": "child", "description": describe(child), **self.stats(child)})
        frame = pd.DataFrame(rows, columns=["relation", "description", "count", "failures", "score"])
        frame["gap"] = self.overall_score - frame["score"]
        return frame

    def sample_ids(self, ref) -> np.ndarray:
        """The slice's evaluated samples, failures first."""
        return self.evaluation.index.to_numpy()[self.sample_positions(ref)]

    def sample_positions(self, ref) -> np.ndarray:
        """The slice's evaluated samples as positions among the evaluation's rows, failures first (read-only: kept
        for the next call)."""
        definition = tuple(self.definition(ref))
        return SLICE_PARTS.get_or_make((self.identity, "positions", definition),
                                       lambda: self._sample_positions(definition, ref))

    def _sample_positions(self, definition: tuple[tuple[str, str], ...], ref) -> np.ndarray:
        try:
            mask = self.tags.mask(definition)
        except ValueError as error:
            raise SliceError(f"slice '{ref}' uses a tag the current attributes do not have: {error}") from None
        positions = np.flatnonzero(mask)  # the error column alone: its rows of every column were a copy of millions
        positions = positions[np.argsort(-self.evaluation["error"].to_numpy()[positions], kind="stable")]
        positions.setflags(write=False)
        return positions


def slice_definition(slices: pd.DataFrame, ref, within: str) -> tuple[tuple[str, str], ...]:
    """A slice of a table with slice_id and definition columns, by id, description or definition."""
    if isinstance(ref, tuple):
        return ref
    hit = slices.index[slices["slice_id"] == ref]
    if len(hit):
        return slices.at[hit[0], "definition"]
    try:
        return parse_definition(ref)
    except ValueError:
        raise SliceError(f"no slice '{ref}' in {within}") from None


def enumerated_slices(tags: TagMatrix, enumeration: Enumeration) -> tuple[pd.DataFrame, np.ndarray]:
    """Every slice of an enumeration (definition, slice_id, description, depth, count) and its summed errors per
    model, (slices, models)."""
    definitions = [tags.definition(f, enumeration) for level in enumeration.levels for f in level.features]
    table = pd.DataFrame({"definition": definitions, "slice_id": [slice_id(d) for d in definitions],
                          "description": [describe(d) for d in definitions],
                          "depth": [len(d) for d in definitions],
                          "count": np.concatenate([level.count for level in enumeration.levels])})
    return table, np.concatenate([level.errors for level in enumeration.levels])


@dataclass(frozen=True)
class TagSource:
    """Which tags a slice search reads."""

    schema: bool  # the schema attributes' tags (else the imported attr: columns only)
    runs_only: bool  # of the schema's, only what tagging runs made (else the best measured or chosen source)
    imported: bool  # the imported attr: columns no schema attribute covers

    @property
    def in_force(self) -> bool:
        """Whether it reads the sources in force, whose trust the Tagging page ranks (and a search warns of)."""
        return self.schema and not self.runs_only


TAG_SOURCES = Registry("tag source")
TAG_SOURCES.add("in force", "per attribute the best measured or chosen one (see `hibug tags`), plus the imported "
                "attr: columns", lambda: TagSource(schema=True, runs_only=False, imported=True))
TAG_SOURCES.add("imported", "the imported attr: columns only (e.g. ground truth)",
                lambda: TagSource(schema=False, runs_only=False, imported=True))
TAG_SOURCES.add("model", "tagging runs only", lambda: TagSource(schema=True, runs_only=True, imported=False))


def tag_source(name: str) -> TagSource:
    """The tag source `name` names; SliceError saying the choices for any other."""
    entry = TAG_SOURCES.find(name)
    if entry is None:
        raise SliceError(f"unknown tag source '{name}'; choose one of {', '.join(TAG_SOURCES.names())}")
    return entry.build()


def tag_frame(project, attributes: list[str] | None, source: str = "in force", *,
              by_class: bool = False, allow_empty: bool = False) -> pd.DataFrame:
    """Tags of every sample to slice by. source: "in force" (per schema attribute the best measured source or the
    one a person chose, plus imported attr: columns that no schema attribute covers), "imported" (attr: columns
    only, e.g. ground truth) or "model" (tagging runs only). Any imported column can also be asked for by name as
    "known: <column>", whatever the source. by_class adds the label as the attribute CLASS, unless an attribute
    already equals it. With allow_empty, no tags at all is an empty frame instead of an error."""
    from hibug_core.store.attribute_versions import latest_version
    from hibug_core.tagging.run import current_tags

    reads = tag_source(source)
    samples = project.samples()
    has_schema = reads.schema and latest_version(project) is not None
    tags = current_tags(project, model_only=reads.runs_only).tags if has_schema else \
        pd.DataFrame(index=samples.index)
    known = project.known_tags()
    # the imported columns wanted, found among the samples once (one lookup per column took seconds at ten million)
    wanted = {column: column for column in known.columns if reads.imported and (
        column not in tags.columns or tags[column].isna().all())}
    wanted.update({name: name.removeprefix(KNOWN_PREFIX) for name in attributes or ()
                   if name.startswith(KNOWN_PREFIX) and name.removeprefix(KNOWN_PREFIX) in known.columns})
    if wanted:
        aligned = rows_by_id(known[sorted(set(wanted.values()))], tags.index)
        # one frame made of their arrays (a column set at a time, or a Series each, compared the indexes each time:
        # 1.2 s for fifty at ten million)
        columns = {name: tags[name].array for name in tags.columns}
        columns.update({name: _categorical(aligned[column]).array for name, column in wanted.items()})
        tags = pd.DataFrame(columns, index=tags.index, copy=False)
    if attributes is not None:
        missing = [a for a in attributes if a not in tags.columns]
        if missing:
            choices = [*tags.columns, *(KNOWN_PREFIX + c for c in known.columns)]
            raise SliceError(f"no tags for attribute(s) {', '.join(missing)}; choose from: {', '.join(choices)}")
        tags = tags[attributes]
    tags = tags[tagged_columns(tags)]
    if tags.columns.empty and not allow_empty:
        raise SliceError("no attribute has tags yet; run a tagger first (Tagging page or `hibug tag`)")
    if by_class and not label_attributes(tags, samples["label"]):
        # A false positive has no true class: "class = (background)" would only say that false positives fail.
        classes = samples["label"].where(samples["label"] != BACKGROUND)
        tags[CLASS] = rows_by_id(classes, tags.index).astype("category")
    return tags


def _categorical(column: pd.Series) -> pd.Series:
    """The column as a categorical (one already is kept as it is: astype made it again, 16 ms at ten million)."""
    return column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")


def tagged_columns(tags: pd.DataFrame) -> list[str]:
    """The columns of `tags` with a tag on some row, a categorical's read from its codes (frame.notna() made a
    boolean frame of every column: seconds at ten million)."""
    return [c for c in tags.columns if (
        tags[c].cat.codes.to_numpy().max(initial=-1) >= 0 if isinstance(tags[c].dtype, pd.CategoricalDtype)
        else tags[c].notna().any())]


FIRST_ROWS = 65_536  # label_attributes looks at an attribute's first rows first: a difference there is final


def label_attributes(tags: pd.DataFrame, labels: pd.Series) -> list[str]:
    """Attributes that are the label itself (CLASS, or tags equal to the label on every labelled sample)."""
    # Compared as integer codes (each tag value mapped to the label it spells): comparing ten million strings per
    # attribute took most of a minute at ten million objects.
    label_codes, label_values = pd.factorize(labels.reindex(tags.index))
    label_index = pd.Index(np.asarray(label_values, dtype=object))
    found = []
    for c in tags.columns:
        if c == CLASS:
            found.append(c)
            continue
        column = tags[c]
        codes, values = (column.cat.codes.to_numpy(), column.cat.categories) \
            if isinstance(column.dtype, pd.CategoricalDtype) else pd.factorize(column)
        as_label = label_index.get_indexer(pd.Index(np.asarray(values, dtype=object)))
        if _spells(as_label, codes[:FIRST_ROWS], label_codes[:FIRST_ROWS]) is False:  # most attributes differ early:
            continue  # the first rows say so without gathering every row (a second per attribute at ten million)
        if _spells(as_label, codes, label_codes):
            found.append(c)
    return found


def _spells(as_label: np.ndarray, codes: np.ndarray, label_codes: np.ndarray) -> bool | None:
    """Whether every row with both a tag and a label has the label its tag spells (as_label: each tag's label code,
    -1 for none); None where no row has both (images without this tag, e.g. generated ones, do not count)."""
    both = (label_codes >= 0) & (codes >= 0)
    if not both.any():
        return None
    return bool((as_label[codes[both]] == label_codes[both]).all())


EVALUATED = ("label", "prediction", "confidence", "score", "correct")  # the columns of project.samples(model) a report
#                                                                       keeps of its evaluation rows, with their error


def evaluation_rows(samples: pd.DataFrame, model: str, split: str) -> pd.DataFrame:
    """The labelled, predicted samples of `split` from project.samples(model) (their EVALUATED columns), with their
    error (1 - score). A false positive (a detection that found no object: its label is BACKGROUND, no true label) is
    not among them: true objects and people are judged against true objects and people, and false positives are
    counted apart (false_positives)."""
    # one selection of the rows and of the columns read (at ten million, selecting every column took 5 s, the image
    # paths and keys among them)
    chosen = (samples["split"] == split).to_numpy(bool) & metrics.judged(samples["label"], samples["score"])
    rows = samples[[c for c in samples.columns if c in EVALUATED]][chosen]
    if rows.empty:
        raise SliceError(f"no labelled '{split}' samples with predictions of '{model}'")
    rows["error"] = 1.0 - rows["score"].astype(float)
    return rows


def false_positive_rows(samples: pd.DataFrame, split: str | None = None) -> pd.Series:
    """True for the model's detections that found no object (project.samples(model)'s BACKGROUND rows with its
    prediction), on `split` (None: every split): measured apart from the true samples the slices judge."""
    rows = (samples["label"] == BACKGROUND) & samples["prediction"].notna()
    return rows if split is None else rows & (samples["split"] == split)


def false_positives(samples: pd.DataFrame, split: str) -> int:
    """How many of the model's detections on `split` found no object (false_positive_rows)."""
    return int(false_positive_rows(samples, split).sum())


def enumeration_for(project, tags: TagMatrix, errors: np.ndarray, models: list[str], split: str,
                    config: SliceConfig) -> Enumeration:
    """One enumeration per (tags in force, split, depth, support, models): recomputed only after a change."""
    codes = np.ascontiguousarray(tags.codes)
    key = (str(project.folder), project.data_version(), split, config.max_depth, config.min_support, tuple(models),
           tuple(tags.attributes), hashlib.blake2b(codes.view(np.uint8), digest_size=16).hexdigest())
    return ENUMERATIONS.get_or_make(key, lambda: enumerate_slices(
        tags.codes, [len(t) for t in tags.tags], errors, max_depth=config.max_depth, min_support=config.min_support))


def unannotated_slices(enumeration: Enumeration, train_matrix: TagMatrix, found: ObjectEvidence,
                       diagnosis: DiagnosisConfig) -> np.ndarray:
    """Per enumerated slice (levels in order), True where its objects in the training images were mostly left out of
    the training annotations (diagnose's missing annotations): counted for every slice at once by the enumeration
    kernel over the training objects, a slice's key found among the training slices' keys."""
    rows = found.train_object
    left_out = (~found.annotated[rows]).astype(np.float64)
    if not rows.any():
        return np.zeros(sum(len(level.count) for level in enumeration.levels), bool)
    overall = 1 - left_out.mean()
    seen = enumerate_slices(train_matrix.codes[rows], [len(t) for t in train_matrix.tags], left_out,
                            max_depth=len(enumeration.levels), min_support=diagnosis.min_failures)
    flags = []
    for level, trained in zip(enumeration.levels, seen.levels):
        if not len(trained.keys):  # no slice of this depth has enough training objects
            flags.append(np.zeros(len(level.keys), bool))
            continue
        at = np.minimum(np.searchsorted(trained.keys, level.keys), len(trained.keys) - 1)
        annotated = 1 - trained.errors[at, 0] / np.maximum(trained.count[at], 1)
        flags.append((trained.keys[at] == level.keys) & (annotated <= diagnosis.missing_share)
                     & (annotated <= overall - diagnosis.missing_gap))
    return np.concatenate(flags)


def poor_attributes(project, sliced: list[str], source: str, config: SliceConfig) -> dict[str, str]:
    """Of the `sliced` attributes, those whose tags in force are too poor to trust (tagging.sources.untrusted), with
    why."""
    from hibug_core.store.attribute_versions import schema_names
    from hibug_core.tagging.sources import rank_sources, too_poor

    names = [name for name in schema_names(project) if name in sliced]
    reads = tag_source(source)
    if not reads.schema or not names:
        return {}
    return too_poor(rank_sources(project, names, model_only=reads.runs_only), config.min_tag_precision)


def error_slices(project, model: str | None = None, *, split: str = "val", config: SliceConfig = SliceConfig(),
                 diagnosis: DiagnosisConfig = DiagnosisConfig(), attributes: list[str] | None = None,
                 tags: str = "in force", check_tags: bool = True) -> SliceReport:
    """Ranked, diagnosed error slices of `model` (default: the first) on `split`, over the tags from `tags` (see
    tag_frame). With check_tags, each slice carries the precision of its tags against the true tags the project
    holds (imported or audited), and slices whose tags are measured below config.min_tag_precision are flagged and
    ranked after the others; without it (as a project with no true tags), nothing is checked."""
    # 1. Check inputs: the model, the tag source, labelled rows of the split (configs are checked when built).
    models = project.models()
    model = model or (models[0] if models else None)
    if model not in models:
        raise SliceError(f"no model '{model}' in this project; known: {', '.join(models)}")
    tag_source(tags)  # an unknown source is refused before any work
    samples = project.samples(model)
    evaluation = evaluation_rows(samples, model, split)
    # 2. The tags sliced by, in force (or the chosen source), with the class when by_class.
    tags_source = tags
    frame = tag_frame(project, attributes, tags_source, by_class=config.by_class)
    tags = TagMatrix.from_frame(frame, evaluation.index)
    # 3. Enumerate every slice once per dataset and score this model's.
    # Errors of every model that predicts all these rows (in name order), so other models reuse the enumeration.
    columns, names = [], []
    for name in sorted(models):
        errors = evaluation["error"] if name == model else \
            1.0 - rows_by_id(project.predictions(name)["score"], evaluation.index).astype(float)
        if name == model or errors.notna().all():
            columns.append(errors.to_numpy(float))
            names.append(name)
    enumeration = enumeration_for(project, tags, np.stack(columns, axis=1), names, split, config)
    errors = evaluation["error"].to_numpy()
    train = samples[["label"]][((samples["split"] == "train") & samples["label"].notna()
                                & (samples["label"] != BACKGROUND)).to_numpy(bool)]  # their labels: all that is read
    # the training rows' tags coded as the evaluation rows' are (the same frame's categories)
    train_matrix = TagMatrix.from_frame(frame, train.index) if len(train) else None
    if train_matrix is not None and not (train_matrix.codes >= 0).any(axis=1).mean() > 0.5:
        train_matrix = None  # not tagged enough to compare with
    evidence = TASK_EVIDENCE.find(project.task) if project.task else None  # the task's own, where it has one
    found, error_types = evidence.build(project, model, evaluation, train) if evidence is not None else (None, None)
    keep = (unannotated_slices(enumeration, train_matrix, found, diagnosis)
            if found is not None and found.annotated is not None and train_matrix is not None else None)
    slices = score_slices(enumeration, tags, model=names.index(model), config=config, keep=keep)
    # 4. Diagnose each slice with the training split's evidence (rare case, spurious correlation, ...).
    masks = [tags.mask(d) for d in slices["definition"]]
    train_masks = tag_masks = None
    if train_matrix is not None:
        train_masks = [train_matrix.mask(d) for d in slices["definition"]]
        of_label = set(label_attributes(rows_by_id(frame, train.index), train["label"]))
        tag_parts = [tuple(c for c in d if c[0] not in of_label) for d in slices["definition"]]
        tag_masks = [train_matrix.mask(part) if part else None for part in tag_parts]
    labels, train_labels = evaluation["label"], train["label"]  # as they are: diagnose codes them once
    evidence = diagnose(masks, train_masks, labels, evaluation["prediction"], errors, diagnosis,
                        tag_train_masks=tag_masks, train_labels=train_labels, error_types=error_types, objects=found,
                        alpha=config.alpha)
    # 5. Check the slices' tags against the true tags, flag untrusted ones, group repeats of one bug.
    summary = dict(slices.attrs)
    truth = ground_truth(project) if check_tags else None
    precision = slice_tag_precision(slices["definition"], frame, truth, skip={CLASS}, z=config.z)
    slices = pd.concat([slices, evidence.set_index(slices.index), precision.set_index(slices.index)], axis=1)
    poor = poor_attributes(project, list(frame.columns), tags_source, config) if check_tags else {}
    slices["tag_warning"] = [
        "; ".join(f"{a}: {poor[a]}" for a, _ in definition if a in poor) for definition in slices["definition"]]
    slices["trusted"] = ~(slices["tag_precision_high"] < config.min_tag_precision) & (slices["tag_warning"] == "")
    # Trusted distinct slices, then trusted repeats, then the untrusted ones (grouped among themselves): a slice on
    # poor tags never stands for trusted ones.
    trusted = slices["trusted"].to_numpy(bool)
    explained = explained_annotation_bugs(slices["bug_type"].tolist(), masks, train_masks, found, diagnosis,
                                          groups=trusted)
    descriptions = slices["description"].tolist()
    slices["explained_by"] = [descriptions[j] if j is not None else "" for j in explained]
    slices["reason"] = [reason + (f"; {bug}: those of '{by}' (not seen without its objects)" if by else "")
                        for reason, bug, by in zip(slices["reason"], slices["bug_type"], slices["explained_by"])]
    slices = pd.concat([mark_repeats(part, tags, errors, config.max_overlap, own_kinds=ANNOTATION_BUGS,
                                     explained=part["explained_by"]) for part in (slices[trusted], slices[~trusted])]
                       ).reset_index(drop=True)
    slices.index.name = "rank"
    slices.attrs.update(summary, untrusted=int((~slices["trusted"]).sum()),
                        repeats=int((slices["repeats"] != "").sum()))
    classes = rare_classes(train_labels, labels, errors, diagnosis)
    return SliceReport(model, split, slices, float(1 - errors.mean()), classes, evaluation, tags,
                       int(slices.attrs.get("enumerated", 0)), config, samples, frame, enumeration, names.index(model),
                       poor)


def trust_note(row) -> str:
    """Why a slice (a row of a report's slices) rests on tags too poor to trust, as every view flags it; "" when it
    does not."""
    if row.get("trusted", True):
        return ""
    if row.get("tag_warning"):
        return f"⚠ tags too poor to trust: {row['tag_warning']}"
    return (f"⚠ tags too poor to trust: right on {row['tag_precision']:.0%} of {int(row['tag_checked']):,} checked "
            f"(95% interval up to {row['tag_precision_high']:.0%})")


def one_row_per_bug(slices: pd.DataFrame) -> pd.DataFrame:
    """A report's slices with one row per bug, in rank order: the distinct slices, each with `members` (the
    descriptions of the slices that repeat it, folded under it) and `rank` (from 1; trusted bugs first)."""
    repeats = slices.get("repeats", pd.Series("", index=slices.index))
    folded = slices.loc[repeats != "", "description"].groupby(repeats[repeats != ""], sort=False).agg(list)
    distinct = slices[repeats == ""].copy()
    distinct["members"] = [folded.get(d, []) for d in distinct["description"]]
    distinct.insert(0, "rank", np.arange(1, len(distinct) + 1))
    return distinct


__all__ = ["CLASS", "TAG_SOURCES", "SliceError", "TagSource", "tag_source", "SliceReport", "enumerated_slices",
           "error_slices", "evaluation_rows", "false_positive_rows", "false_positives", "one_row_per_bug",
           "slice_id", "tagged_columns", "trust_note"]
