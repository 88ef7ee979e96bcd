"""Every operation hibug runs (embed, tag, teach, map, predict, propose, suggest tags, find slices, compare, check,
select, repair, generate, failure search, report): one typed definition each, with its defaults, allowed choices (from
the registries) and checks. The CLI's options, the pages' forms and the background jobs are built from these, so they
cannot drift."""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hibug_core.attributes.library import LIBRARY
from hibug_core.embeddings.projection import MapConfig
from hibug_core.embeddings.registry import DEFAULT_ENCODER, ENCODERS
from hibug_core.errors import HibugError
from hibug_core.models.registry import MODELS
from hibug_core.redaction import carries_secret, redact
from hibug_core.registry import Registry
from hibug_core.repair.generators import GENERATORS, SHAPE_RENDERER
from hibug_core.repair.loop import DATA_SOURCES, GENERATED, RepairConfig
from hibug_core.repair.prompts import PROMPT_METHODS
from hibug_core.repair.retrain import RETRAIN_METHODS, RetrainConfig
from hibug_core.repair.selection import SELECTION_METHODS, SelectionConfig, budget_problem, parse_budget
from hibug_core.slices.compare import CompareConfig
from hibug_core.slices.report import TAG_SOURCES
from hibug_core.slices.search import RANKINGS, SliceConfig
from hibug_core.slices.unseen import UNSEEN_METHODS
from hibug_core.values import normalise_name

NO_BASELINE = "none"


class OperationError(HibugError):
    """Parameters an operation refuses; the message names the field and what is allowed."""


@dataclass(frozen=True)
class OneOf:
    """Field metadata: the value must be one of these (a registry's entries, including its families and test-only
    entries; menus offer `names()`)."""

    choices: Registry | tuple[str, ...]
    extra: tuple[str, ...] = ()  # values allowed besides the choices (e.g. "none")

    def names(self) -> list[str]:
        base = self.choices.names() if isinstance(self.choices, Registry) else list(self.choices)
        return base + [e for e in self.extra if e not in base]

    def allows(self, value: str) -> bool:
        if value in self.extra:
            return True
        return value in self.choices if isinstance(self.choices, Registry) else value in self.names()

    def check(self, value):
        if value is not None and not self.allows(value):
            raise ValueError(f"not allowed; use one of: {self.describe()}")
        return value

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def describe(self) -> str:
        if isinstance(self.choices, Registry):
            return self.choices.help_text() + "".join(f"; {e}" for e in self.extra)
        return ", ".join(self.names())


@dataclass(frozen=True)
class Cli:
    """Field metadata: how the field appears on the command line (default: --field-name)."""

    flag: str | None = None  # another spelling, e.g. --split for `splits`
    positional: bool = False
    comma: bool = False  # a list typed as "a,b,c"
    repeat: bool = False  # a list typed as --flag a --flag b
    skip: bool = False  # not a command-line option (e.g. rows edited on a page)
    parse: typing.Callable[[str], Any] | None = None  # how the typed text is read (default: the field's type)


class Operation(BaseModel):
    """Base of every operation: frozen, unknown parameters refused, choices checked when built."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str]
    summary: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()  # what the project's task must be able to do (tasks.base.CAPABILITY_WORDS)

    def required(self) -> tuple[str, ...]:
        """The capabilities this operation, with these parameters, needs of the project's task."""
        return self.needs

    def refusal(self, task) -> str | None:
        """Why the project's task cannot run this operation, and what to do instead; None when it can."""
        return task.refusal(self.required())

    def check_task(self, task) -> None:
        """TaskError before anything runs when the project's task cannot do what this operation needs."""
        from hibug_core.tasks.base import TaskError

        refusal = self.refusal(task)
        if refusal:
            raise TaskError(refusal)

    @classmethod
    def build(cls, params: dict[str, Any] | None = None, **more):
        """The operation from plain parameters (a job's, a form's); OperationError naming every bad field."""
        try:
            return cls.model_validate({**(params or {}), **more})
        except ValidationError as error:
            problems = []
            for issue in error.errors():
                where = ".".join(str(part) for part in issue["loc"])
                message = issue["msg"].removeprefix("Value error, ")
                if not issue["loc"]:
                    problems.append(message)  # a check across fields names its fields itself
                elif issue["type"] in ("missing", "extra_forbidden"):
                    problems.append(f"{where}: {message}")
                else:
                    problems.append(f"{where} = {issue['input']!r}: {message}")
            raise OperationError(f"{cls.kind}: " + "; ".join(problems)) from None

    @classmethod
    def default(cls, name: str):
        return cls.model_fields[name].get_default(call_default_factory=True)

    @classmethod
    def rule(cls, name: str) -> OneOf | None:
        """The field's allowed values, when it has a fixed set."""
        return next((m for m in cls.model_fields[name].metadata if isinstance(m, OneOf)), None)

    @classmethod
    def choices(cls, name: str) -> list[str]:
        """The values offered for a field (registry entries meant for users; test-only ones left out)."""
        rule = cls.rule(name)
        if rule is None:
            raise KeyError(f"{cls.__name__}.{name} has no fixed choices")
        return rule.names()

    @classmethod
    def field_type(cls, name: str) -> tuple[type, bool]:
        """(the field's scalar type, whether it is a list of them), Optional unwrapped."""
        annotation = cls.model_fields[name].annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        if typing.get_origin(annotation) is list:
            return typing.get_args(annotation)[0], True
        return annotation, False

    @classmethod
    def help(cls, name: str) -> str:
        return cls.model_fields[name].description or ""

    def params(self) -> dict[str, Any]:
        """JSON-able parameters (what a job stores)."""
        return self.model_dump(mode="json")


Encoder = Annotated[str, OneOf(ENCODERS), Field(description="encoder: " + ENCODERS.help_text())]
Splits = Annotated[list[str] | None, Cli(flag="--split", repeat=True),
                   Field(description="only these splits (repeatable; default: all)")]
Attributes = Annotated[list[str] | None, Cli(comma=True),
                       Field(description="comma-separated attribute names (default: every enabled one)")]
def _stored_name(value: str | None) -> str | None:
    """A name typed for a model, an attribute or a view, in the one form the store keeps (hibug_core.values)."""
    return None if value is None or not str(value).strip() else normalise_name(value, "the name")


StoredName = AfterValidator(_stored_name)
ModelName = Annotated[str | None, StoredName, Field(description="model name (default: the project's first)")]
LLMModel = Annotated[str | None, Field(description="LLM model name (default: HIBUG_LLM_MODEL, else gpt-4o-mini)")]
LLMBaseURL = Annotated[str | None, Field(description="OpenAI-compatible server URL (default: HIBUG_LLM_BASE_URL); "
                                                     "the key is read from OPENAI_API_KEY or Streamlit secrets")]
Seed = Annotated[int, Field(ge=0, description="random seed")]


class LLMSettings(BaseModel):
    """Where the language model is: model name and server; the key never passes through an operation."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a refused URL may hold a key

    llm_model: LLMModel = None
    llm_base_url: LLMBaseURL = None

    @field_validator("llm_base_url")
    @classmethod
    def _no_key_in_the_url(cls, value: str | None) -> str | None:
        if carries_secret(value):
            raise ValueError(f"the server URL carries a key ({redact(value)}); give the URL without it and put the "
                             "key in OPENAI_API_KEY or Streamlit secrets (a URL is stored with the job and shown)")
        return value

    def llm_config(self):
        from hibug_core.llm.client import LLMConfig

        return LLMConfig.from_env(model=self.llm_model or None, base_url=self.llm_base_url or None)


class RaySettings(BaseModel):
    """Running an encoder or a model as Ray Data batch inference on a cluster instead of in this process."""

    ray: bool = Field(False, description="run as Ray Data batch inference (needs hibug[cluster])")
    ray_address: str | None = Field(None, description="Ray cluster address (default: start a local instance)")
    ray_actors: int = Field(2, ge=1, description="actors running the model (one GPU each when there are GPUs)")

    def ray_options(self, batch_size: int):
        from hibug_core.embeddings.ray_backend import RayOptions

        return RayOptions(address=self.ray_address, actors=self.ray_actors, batch_size=batch_size)


# ----- embeddings and tags -----------------------------------------------------------------------------------------
class Embed(Operation, RaySettings):
    kind: ClassVar[str] = "embed"
    summary: ClassVar[str] = "compute and store image embeddings (only images not embedded before)"
    encoder: Encoder = DEFAULT_ENCODER
    splits: Splits = None
    batch_size: int = Field(64, ge=1, description="images per batch")
    workers: int | None = Field(None, ge=0, description="image decoding processes (default: chosen for this machine)")


class Tag(Operation, LLMSettings):
    kind: ClassVar[str] = "tag"
    summary: ClassVar[str] = "tag every image with every enabled attribute, then report tag quality"
    attributes: Attributes = None
    splits: Splits = None
    encoder: Encoder = DEFAULT_ENCODER
    model: str | None = Field(None, description="model whose predictions name the class of unlabelled images in "
                                                "prompts (default: the first)")
    llm: bool = Field(False, description="ask a multimodal LLM (OpenAI-compatible) instead of the encoder")


class Teach(Operation):
    kind: ClassVar[str] = "teach"
    summary: ClassVar[str] = "teach an attribute by example: a linear probe on stored embeddings"
    attribute: Annotated[str, Cli(positional=True), Field(min_length=1, description="the attribute to teach")]
    examples: Annotated[dict[int, str], Cli(skip=True)] = Field(
        default_factory=dict, description="sample id -> tag (empty: the examples people already gave)")
    encoder: Encoder = DEFAULT_ENCODER


class EmbeddingMap(Operation):
    kind: ClassVar[str] = "map"
    summary: ClassVar[str] = "embed what is missing, then lay the images out on a 2-D map"
    encoder: Encoder = DEFAULT_ENCODER
    splits: Splits = None
    method: Annotated[str, OneOf(("umap", "pca"))] = Field(MapConfig.method, description="layout: umap or pca "
                                                                                         "(instant, less separated)")


class Predict(Operation, RaySettings):
    kind: ClassVar[str] = "predict"
    needs: ClassVar[tuple[str, ...]] = ("predict",)
    summary: ClassVar[str] = ("run your own model over the project's images and record its predictions and features "
                              "as a model (resumable)")
    model: Annotated[str, OneOf(MODELS)] = Field(description="the model: " + MODELS.help_text())
    name: Annotated[str | None, StoredName] = Field(None, description="name it is recorded under (default: from the "
                                                                       "spec)")
    splits: Splits = None
    batch_size: int = Field(64, ge=1, description="images per batch")
    workers: int | None = Field(None, ge=0, description="image decoding processes (default: chosen for this machine)")


# ----- attributes --------------------------------------------------------------------------------------------------
class ProposeAttributes(Operation, LLMSettings):
    kind: ClassVar[str] = "propose"
    summary: ClassVar[str] = "propose attributes for the task (a language model, or the built-in library)"
    task: str | None = Field(None, description="what the model does, e.g. 'classify bird species in photos' "
                                               "(default: the project's name)")
    library: Annotated[str | None, OneOf(tuple(LIBRARY))] = Field(
        None, description="built-in library entry (default: chosen from the task)")
    llm: bool = Field(False, description="ask a language model (OpenAI-compatible)")
    method: Annotated[str, OneOf(("hibug2", "hibug", "comparative"))] = Field(
        "hibug2", description="the language model's flow: HiBug2's or HiBug's from the task's words, or HiBug2's "
                              "comparative one (a multimodal model shown pairs of a right and a wrong prediction of "
                              "one class)")
    replace: bool = Field(False, description="replace the attributes in force with the proposal (default: add the "
                                             "proposal's new attributes to them, keeping every current one)")


class SuggestTags(Operation, LLMSettings):
    kind: ClassVar[str] = "suggest tags"
    summary: ClassVar[str] = "suggest tags from representative images (a multimodal LLM, or the encoder's vocabulary)"
    encoder: Encoder = Field("conse", description="encoder for representative images")
    refine: bool = Field(False, description="a pass over validation images instead")
    llm: bool = Field(False, description="ask a multimodal language model")


# ----- slices ------------------------------------------------------------------------------------------------------
class FindSlices(Operation, LLMSettings):
    kind: ClassVar[str] = "slices"
    summary: ClassVar[str] = "find, rank and explain the error slices of a model"
    model: ModelName = None
    split: str = Field("val", min_length=1, description="labelled split to evaluate on")
    depth: int = Field(SliceConfig.max_depth, ge=1, le=4, description="most (attribute = tag) pairs per slice (1-4)")
    support: int = Field(SliceConfig.min_support, ge=1, description="minimum samples in a slice (M)")
    gap: float = Field(SliceConfig.gap, ge=0, le=1, description="error slices score below overall minus this (C)")
    threshold: float | None = Field(None, ge=0, le=1, description="or below this absolute score")
    rank_by: Annotated[str, OneOf(RANKINGS)] = Field(SliceConfig.rank_by, description="order of the error slices")
    alpha: float = Field(SliceConfig.alpha, gt=0, le=1, description="false discovery rate: a slice is reported only "
                         "when it is significantly worse than the whole (Benjamini-Hochberg over every slice tested) "
                         "and than each parent; 1: no test")
    attributes: Annotated[list[str] | None, Cli(comma=True)] = Field(
        None, description="comma-separated attributes to slice by (default: every tagged one); any imported column "
                          "is also 'known: <name>'")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    tags: Annotated[str, OneOf(TAG_SOURCES)] = Field(
        "in force", description="tag source: per attribute the best measured or chosen one (see `hibug tags`), the "
                                "imported attr: columns only, or tagging runs only")
    top: int = Field(20, ge=1, description="slices to show")
    output: str | None = Field(None, description="write every error slice to this .csv or .json file")
    unseen: Annotated[str | None, OneOf(UNSEEN_METHODS)] = Field(
        None, description="also predict slices the split barely shows (HiBug2), each checked on the pool and the "
                          "test split: 'substitution' (similar tags swapped into the top slices, offline) or "
                          "'instruction' (a language model asked; --llm-model, --llm-base-url)")
    unseen_count: int = Field(10, ge=1, le=50, description="slices the language model is asked for")

    def slice_config(self) -> SliceConfig:
        return SliceConfig(max_depth=self.depth, min_support=self.support, gap=self.gap, threshold=self.threshold,
                           rank_by=self.rank_by, alpha=self.alpha, by_class=self.by_class)


class _ComparedSlices(BaseModel):
    """What two or more models are compared on: the split, the slices (their depth, support, tags) and the test."""

    split: str = Field("val", min_length=1, description="labelled split the models are compared on")
    depth: int = Field(2, ge=1, le=4, description="most (attribute = tag) pairs per slice (1-4)")
    support: int = Field(30, ge=1, description="minimum shared samples in a slice compared")
    attributes: Annotated[list[str] | None, Cli(comma=True)] = Field(
        None, description="comma-separated attributes to slice by (default: every tagged one)")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    tags: Annotated[str, OneOf(TAG_SOURCES)] = Field("in force", description="tag source (see `hibug slices --help`)")
    alpha: float = Field(CompareConfig.alpha, gt=0, lt=1, description="false discovery rate at which a change is "
                         "significant (Benjamini-Hochberg over the slices)")

    def slice_config(self) -> SliceConfig:
        return SliceConfig(max_depth=self.depth, min_support=self.support, by_class=self.by_class)


class CompareModels(Operation, _ComparedSlices):
    kind: ClassVar[str] = "compare"
    summary: ClassVar[str] = ("compare models slice by slice on the samples they share: what got better or worse than "
                              "the baseline, with a paired test and q-values")
    models: Annotated[list[str], Cli(comma=True)] = Field(
        min_length=2, description="comma-separated model names, the baseline first (see `hibug info`)")
    top: int = Field(20, ge=1, description="slices shown per candidate")
    output: str | None = Field(None, description="also write the comparison to this .html, .md or .csv file")

    def compare_config(self) -> CompareConfig:
        return CompareConfig(alpha=self.alpha)


class Check(Operation, _ComparedSlices):
    kind: ClassVar[str] = "check"
    summary: ClassVar[str] = ("a gate for CI: exit 1 when the candidate model is significantly worse than the baseline "
                              "by more than --max-drop overall, on a class or on a slice; 0 otherwise; 2 for bad input")
    baseline: str = Field(min_length=1, description="the model to hold the line (e.g. the main branch's)")
    candidate: str = Field(min_length=1, description="the model to check (e.g. the pull request's)")
    max_drop: float = Field(CompareConfig.max_drop, ge=0, le=1, description="a drop of the score (a share: 0.02 is "
                                                                             "2 points) that is tolerated")
    min_count: int | None = Field(None, ge=1, description="check slices of at least this many shared samples "
                                                          "(default: --support)")
    junit: str | None = Field(None, description="write JUnit XML here: one test case per check")
    markdown: str | None = Field(None, description="write a Markdown summary here (to post on a pull request)")

    def compare_config(self) -> CompareConfig:
        return CompareConfig(alpha=self.alpha, max_drop=self.max_drop, min_count=self.min_count)

    @model_validator(mode="after")
    def _two_models(self):
        if self.baseline == self.candidate:
            raise ValueError(f"baseline and candidate are both '{self.baseline}': name two different models")
        return self


# ----- repair ------------------------------------------------------------------------------------------------------
def _budget(value):
    problem = budget_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _budget_typed(value):
    """Text (the command line, a link) read as a count or a share; anything but a number refused as it is."""
    if isinstance(value, str):
        return parse_budget(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(budget_problem(value))
    return value


Budget = Annotated[int | float, BeforeValidator(_budget_typed),
                   AfterValidator(_budget), Cli(parse=parse_budget), Field(
    description="images to select: a count (40) or a share of the training images (0.1 or 10%)")]
Beta = Annotated[float, Field(gt=0, le=1, description="hibug: share of validation failures the slices cover")]


def _known_features(value: str) -> str:
    if value != "model" and value not in ENCODERS:
        raise ValueError(f"use 'model' or an encoder ({ENCODERS.help_text()})")
    return value


Features = Annotated[str, AfterValidator(_known_features), Field(
    description="features for the linear head and for the selections that spread out (coreset, BADGE, expected "
                "failures): 'model' (the network's own) or an encoder's stored embeddings")]


class Select(Operation):
    kind: ClassVar[str] = "select"
    summary: ClassVar[str] = "select pool images to label for the error slices (no retraining)"
    model: ModelName = None
    method: Annotated[str, OneOf(SELECTION_METHODS)] = Field(SelectionConfig.method,
                                                             description="how pool images are selected")
    budget: Budget = SelectionConfig.budget
    beta: Beta = SelectionConfig.beta
    seed: Seed = 0
    split: str = Field("val", description="where error slices are found")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    top: int = Field(10, ge=1, description="slices listed")
    features: Features = SelectionConfig.features
    export: str | None = Field(None, description="write the selection to this .csv or .parquet file")

    def selection_config(self) -> SelectionConfig:
        return SelectionConfig(method=self.method, budget=self.budget, beta=self.beta, seed=self.seed,
                               features=self.features)


class Repair(Operation):
    kind: ClassVar[str] = "repair"
    summary: ClassVar[str] = ("select pool images (or use generated ones) for the error slices, retrain, and compare "
                              "before and after slice by slice against a baseline and a no-new-data control")
    model: ModelName = None
    method: Annotated[str, OneOf(SELECTION_METHODS)] = Field(SelectionConfig.method,
                                                             description="how pool images are selected")
    baseline: Annotated[str, OneOf(SELECTION_METHODS, extra=(NO_BASELINE,))] = Field(
        RepairConfig.baseline, description="selection run the same way for comparison")
    control: bool = Field(RepairConfig.control, description="also retrain with no new data")
    budget: Budget = SelectionConfig.budget
    beta: Beta = SelectionConfig.beta
    data: Annotated[str, OneOf(DATA_SOURCES)] = Field(
        RepairConfig.data, description="new training data: selected pool images (labelled) or the generated split")
    retrain: Annotated[str, OneOf(RETRAIN_METHODS)] = Field(RetrainConfig.method, description="how the model is "
                                                            "retrained: " + RETRAIN_METHODS.help_text())
    lam: float | None = Field(None, ge=0,
                              description="weight of the new data's mean loss (default: as if simply added)")
    epochs: int | None = Field(None, ge=1, description="fine-tune: epochs (default: the retraining's own)")
    features: Features = RetrainConfig.features
    seeds: list[int] = Field(
        list(RepairConfig.seeds), min_length=1, description="seeds to repeat over (one seed is noise)")
    split: str = Field(RepairConfig.slice_split, description="where error slices are found")
    eval_split: str = Field(RepairConfig.eval_split, description="held-out split for before and after")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    top: int = Field(RepairConfig.top_slices, ge=1, description="error slices compared (planted ones are added)")
    record: bool = Field(RepairConfig.record_models, description="store the retrained models' predictions")
    export: str | None = Field(None, description="write the first seed's selection to this .csv or .parquet file")
    labels: str | None = Field(None, description="a detector's selected pool images: their COCO annotations, "
                                                 "relative to the project (default: the pool labels it records)")

    def required(self) -> tuple[str, ...]:
        return ("generate",) if self.data == GENERATED else ()

    def refusal(self, task) -> str | None:
        return super().refusal(task) or task.capabilities.retrain_refusal(self.retrain, task.nouns)

    def repair_config(self) -> RepairConfig:
        from dataclasses import replace

        return RepairConfig(
            model=self.model, data=self.data, selection=self.selection_config(),
            baseline=None if self.baseline == NO_BASELINE else self.baseline, control=self.control,
            retrain=replace(RetrainConfig(), method=self.retrain, lam=self.lam, features=self.features,
                            fine_tune=replace(RetrainConfig().fine_tune, **({"epochs": self.epochs} if self.epochs
                                                                            else {}))),
            seeds=tuple(self.seeds), slice_split=self.split, eval_split=self.eval_split,
            slices=SliceConfig(by_class=self.by_class), top_slices=self.top, record_models=self.record,
            labels=self.labels)

    def selection_config(self) -> SelectionConfig:
        return SelectionConfig(method=self.method, budget=self.budget, beta=self.beta, seed=self.seeds[0],
                               features=self.features)


class Generate(Operation, LLMSettings):
    kind: ClassVar[str] = "generate"
    needs: ClassVar[tuple[str, ...]] = ("generate",)
    summary: ClassVar[str] = "generate images for the error slices and store them as the split 'generated'"
    model: ModelName = None
    generator: Annotated[str, OneOf(GENERATORS)] = Field(SHAPE_RENDERER, description="generator: " +
                                                         GENERATORS.help_text())
    prompts: Annotated[str, OneOf(PROMPT_METHODS)] = Field(
        "hibug", description="HiBug's slice template, uncommon backgrounds (Chegini and Feizi), or the class names "
                             "alone (the papers' baseline)")
    prompt_rows: Annotated[list[dict] | None, Cli(skip=True)] = Field(
        None, description="prompts as edited on the page (prompt, label, slice_id, slice, weight); used instead of "
                          "writing them")
    images: int = Field(100, ge=1, description="images in all, split over prompts by failures")
    failures_of: Annotated[list[str] | None, Cli(comma=True)] = Field(
        None, description="write the prompts from these models' failures (comma-separated; default: --model's): "
                          "several pooled, or another model's, to repair one model with them (Chegini and Feizi's "
                          "collective debugging, types 1 and 2)")
    top: int = Field(5, ge=1, description="hibug prompts: error slices used")
    llm: bool = Field(False, description="backgrounds: list them with a language model")
    encoder: Encoder = Field("conse", description="backgrounds: zero-shot encoder")
    steps: int = Field(25, ge=1, description="diffusers: denoising steps")
    seed: Seed = 0


class FailureSearch(Operation, LLMSettings):
    kind: ClassVar[str] = "failure search"
    needs: ClassVar[tuple[str, ...]] = ("failure_search",)
    summary: ClassVar[str] = ("generative failure search: captions of failures that make the model fail significantly "
                              "more often (Wiles et al.)")
    label: str = Field(min_length=1, description="class to search")
    model: Annotated[str | None, Field(description="model (the project must hold its network; default: the first)")] \
        = None
    baseline: str | None = Field(None, description="baseline prompt (default: 'A photo of a <label>')")
    generator: Annotated[str, OneOf(GENERATORS)] = Field(SHAPE_RENDERER, description="generator (see `hibug "
                                                                                     "generate --help`)")
    captioner: Annotated[str, OneOf(("renderer", "llm"))] = Field(
        "renderer", description="'renderer': the shape-world renderer's scene description; 'llm': a multimodal LLM")
    images: int = Field(32, ge=2, description="images per caption tested")
    captions: int = Field(8, ge=1, description="failures captioned")
    typed_captions: Annotated[list[str] | None, Cli(flag="--caption", repeat=True)] = Field(
        None, description="a caption of the class typed by a person, tested (and refined) like a found one "
                          "(repeatable)")
    caption_failures: bool = Field(True, description="caption the baseline's failures and test those captions (off: "
                                                     "only the typed captions)")
    cluster: bool = Field(False, description="caption one failure per cluster of the failures (k-means over their "
                                             "embeddings by --encoder; Wiles et al.), not the first ones")
    encoder: Encoder = Field("conse", description="clustering: the encoder that embeds the failures")
    top_k: int = Field(1, ge=1, description="an image fails when its class is not among the model's k most probable "
                                            "(1: its first is wrong)")
    target: str | None = Field(None, description="with --target-errors: the wrong class whose errors are gathered")
    target_errors: int | None = Field(None, ge=1, description="draw each caption's images a batch at a time until "
                                                              "this many are called the target (any wrong class "
                                                              "without --target), at most 1,024 (Wiles et al.)")
    steps: int = Field(25, ge=1, description="diffusers: denoising steps")
    seed: Seed = 0

    @model_validator(mode="after")
    def _something_to_test(self):
        if not self.caption_failures and not any(c.strip() for c in self.typed_captions or ()):
            raise ValueError("typed_captions: type a caption to test (--caption), or let the search caption the "
                             "failures")
        return self


class Report(Operation):
    kind: ClassVar[str] = "report"
    summary: ClassVar[str] = ("export the findings (error slices, evidence, thumbnails, reviews) as a self-contained "
                              "HTML page, Markdown or CSV")
    output: str = Field(min_length=1, description="findings.html, findings.md or findings.csv")
    model: ModelName = None
    split: str = Field("val", description="labelled split the slices are found on")
    top: int = Field(20, ge=1, description="error slices in the report")

    @model_validator(mode="after")
    def _known_format(self):
        if not self.output.lower().endswith((".html", ".md", ".csv")):
            raise ValueError(f"output = {self.output!r}: write the report to a .html, .md or .csv file")
        return self


OPERATIONS: dict[str, type[Operation]] = {op.kind: op for op in (
    Embed, Tag, Teach, EmbeddingMap, Predict, ProposeAttributes, SuggestTags, FindSlices, CompareModels, Check, Select,
    Repair, Generate, FailureSearch, Report)}


def register_operation(op: type[Operation]) -> None:
    """Add an operation defined elsewhere (an extension's job kind); a kind names one operation only."""
    if OPERATIONS.get(op.kind, op) is not op:
        raise ValueError(f"operation kind '{op.kind}' is defined twice")
    OPERATIONS[op.kind] = op


def operation(kind: str) -> type[Operation]:
    if kind not in OPERATIONS:
        raise OperationError(f"unknown operation '{kind}'; known: {', '.join(OPERATIONS)}")
    return OPERATIONS[kind]
