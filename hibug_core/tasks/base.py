"""What a task is: everything that differs between classification, detection and pose, behind one contract that
generic code (ingest, embeddings, tagging, slices, repair, store, pages) uses without asking which task it runs."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.errors import HibugError
from hibug_core.nouns import Nouns
from hibug_core.objects.views import SampleViews
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry


class TaskError(HibugError):
    """A task that cannot do what was asked (an unknown task, a manifest no task claims, a capability it lacks)."""


CAPABILITY_WORDS = {  # what each capability lets hibug do, as a refusal says it ("hibug cannot ...")
    "predict": "run the model itself",
    "generate": "repair with generated images",
    "failure_search": "search for failures with generated images",
}


@dataclass(frozen=True)
class Capabilities:
    """What hibug itself can do with a task's model, beside importing its outputs; where it cannot, what to do
    instead. Operations name the capabilities they need (hibug_core.operations.Operation.needs)."""

    predict: bool  # run the model under test inside hibug (`hibug predict`)
    generate: bool  # repair with generated images (they come without boxes or keypoints)
    retrain: str  # how its model is retrained for repair, in one phrase
    checkpoint: str  # what a repaired checkpoint holds and how to load it
    instead: tuple[tuple[str, str], ...] = ()  # (capability, what to do instead) where it cannot
    failure_search: bool = False  # generated images of a class, and the model's outcome on each (Wiles et al.)
    retrain_methods: tuple[str, ...] = ("fine-tune",)  # the repair.retrain methods that can retrain its model

    def advice(self, capability: str) -> str:
        return dict(self.instead).get(capability, "")

    def refusal(self, capability: str, nouns: Nouns) -> str | None:
        """Why the task's model cannot `capability` and what to do instead; None when it can."""
        if getattr(self, capability):
            return None
        advice = self.advice(capability)
        return (f"hibug cannot {CAPABILITY_WORDS.get(capability, capability)} for a project of {nouns.samples}"
                + (f": {advice}" if advice else ""))

    def retrain_refusal(self, method: str, nouns: Nouns) -> str | None:
        """Why a repair cannot retrain the task's model with `method`, and what to choose instead; None when it can."""
        if method in self.retrain_methods:
            return None
        return (f"hibug cannot retrain the model of a project of {nouns.samples} with '{method}': choose "
                + " or ".join(f"'{m}'" for m in self.retrain_methods))


@dataclass(frozen=True)
class ErrorGroup:
    """Error types of one kind of failure, charted together and never on one axis with another kind's (a person's
    keypoint errors are not box errors)."""

    name: str  # what the types type, as a chart's title says it: "keypoint error type"
    types: tuple[str, ...]
    source: str  # whose typing it is: "TIDE", "Ronchi and Perona"

    @property
    def title(self) -> str:
        return f"{self.name} ({self.source})"


# What a manifest may draw out of an image: a task registers the shapes its samples are drawn by (Task.shapes), and
# claims the manifests that draw exactly those. A shape is told by a table's columns and by a COCO file's records.
MANIFEST_SHAPES = Registry("shape a manifest draws")  # each entry builds a Shape


@dataclass(frozen=True)
class Shape:
    """How a manifest shows that it draws a shape: by a column of a table, or by a COCO ground truth and its results
    files (hibug_core.objects.coco's CocoGroundTruth and CocoResults)."""

    in_column: Callable[[str], bool]
    in_coco: Callable[[object, list], bool] = lambda truth, results: False


def drawn_shapes(columns: list[str]) -> frozenset[str]:
    """The shapes a manifest with these columns draws (MANIFEST_SHAPES)."""
    return frozenset(e.name for e in MANIFEST_SHAPES if any(e.build().in_column(c) for c in columns))


def drawn_coco_shapes(truth, results: list) -> frozenset[str]:
    """The shapes a COCO ground truth and its results files draw (MANIFEST_SHAPES)."""
    return frozenset(e.name for e in MANIFEST_SHAPES if e.build().in_coco(truth, results))


PER_CLASS = "per class"  # an Overview of accuracy per class and the confusion matrix
COCO_EVALUATION = "COCO evaluation"  # an Overview of COCO's AP, the error types and the class confusion of objects


class Task(ABC):
    """One kind of model hibug debugs. Subclasses set the class attributes and implement the methods; one instance
    per task is registered in hibug_core.tasks.registry.TASKS."""

    name: ClassVar[str]
    help: ClassVar[str]
    nouns: ClassVar[Nouns]
    views: ClassVar[SampleViews]  # what a tagger sees of a sample
    capabilities: ClassVar[Capabilities]
    error_groups: ClassVar[tuple[ErrorGroup, ...]] = ()  # the kinds of failure stored per sample (none for images)
    focus: ClassVar[str]  # what a language model proposing attributes should look for
    likely_failures: ClassVar[str]  # what a language model predicting unseen failure slices should look for
    library: ClassVar[str | None] = None  # the built-in attribute library's entry (None: chosen from the words)
    another_model: ClassVar[str]  # how a second model's outputs come into a project, to compare (one phrase)
    overview: ClassVar[str]  # how the Overview shows its model on a split: PER_CLASS or COCO_EVALUATION
    # The shapes (MANIFEST_SHAPES) its samples are drawn by, the one that makes a manifest its own first (none: its
    # samples are whole images).
    shapes: ClassVar[tuple[str, ...]] = ()

    @property
    def error_types(self) -> tuple[str, ...]:
        """Every error type a sample of this task may have, group by group."""
        return tuple(kind for group in self.error_groups for kind in group.types)

    def outcome(self, row) -> str:
        """A sample's outcome as a grid caption says it: "label → prediction" (a row of the sample table)."""
        return f"{row['label']} → {self.prediction_words(row)}"

    def prediction_words(self, row) -> str:
        """What the model predicted for a sample, in words (a row of the sample table): its prediction."""
        return str(row["prediction"])

    def refusal(self, capabilities) -> str | None:
        """Why this task's model cannot do one of `capabilities`, and what to do instead; None when it can do all."""
        return next(filter(None, (self.capabilities.refusal(c, self.nouns) for c in capabilities)), None)

    # ----- importing -------------------------------------------------------------------------------
    def claims_table(self, columns: list[str]) -> bool:
        """Whether a manifest with these columns holds this task's samples: it draws its first shape (none for an
        image task) and no shape it does not draw. A positive claim: another task's columns are refused, not taken."""
        drawn = drawn_shapes(columns)
        return drawn <= set(self.shapes) and (not self.shapes or self.shapes[0] in drawn)

    @abstractmethod
    def validate_table(self, frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str,
                       config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress):
        """The manifest checked and ready to import (a ValidatedManifest whose task is this one)."""

    def claims_coco(self, truth, results: list) -> bool:
        """Whether a COCO ground truth with these results files (CocoResults) holds this task's samples: they draw
        exactly its shapes (an image task draws none, so reads no COCO file)."""
        return bool(self.shapes) and drawn_coco_shapes(truth, results) == set(self.shapes)

    def reads_coco(self, truth, results: list) -> bool:
        """Whether this task can read these files when a person chooses it: they draw every shape it needs (a
        detection project reads boxes from files that also carry masks)."""
        return bool(self.shapes) and set(self.shapes) <= drawn_coco_shapes(truth, results)

    def coco_matching(self, config):
        """The MatchConfig its COCO files are matched with, from the one given (boxes and keypoints: as given)."""
        return config

    # ----- samples ----------------------------------------------------------------------------------
    def sample_table(self, project, model: str | None) -> pd.DataFrame:
        """One row per sample (index: sample id) with what this task's pages show of it (a model's outputs)."""
        return project.samples(model)

    # ----- attributes ------------------------------------------------------------------------------
    @abstractmethod
    def measured_attributes(self) -> list:
        """Attributes computed exactly (pixels, geometry), offered with every proposal and library entry."""

    def truth_measures_job(self, truth, objects: pd.DataFrame) -> Callable[[], pd.DataFrame] | None:
        """What the true shapes of a COCO import say of each ground-truth object, beside its box geometry (a person's
        skeleton, an object's mask), as a job the import may run in a worker process while it matches (picklable: a
        module-level function with its arguments, functools.partial). The job returns one row per object, one column
        per measured attribute. None when the task measures nothing more. objects: image_id, keypoints and mask (as
        stored) of each object, in the import's order."""
        return None

    # ----- repair ----------------------------------------------------------------------------------
    @abstractmethod
    def select_pool(self, report, config, *, project) -> pd.DataFrame:
        """Pool images to label for the report's worst slices under the selection config's budget."""

    @abstractmethod
    def training_count(self, samples: pd.DataFrame, project) -> int:
        """What a share of a budget is a share of: the training images this task's model learnt from (`samples`: the
        project's sample table)."""

    @abstractmethod
    def repair_round(self, project, report, config, *, progress: ProgressCallback = no_progress,
                     author: str | None = None):
        """The task's half of one repair run (hibug_core.repair.loop.RepairRound): held-out outcomes before, new
        data per method and seed, retraining, outcomes after."""

    def __repr__(self) -> str:
        return f"<task {self.name}>"
