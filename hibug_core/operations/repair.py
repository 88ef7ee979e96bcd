"""Operations that repair a model: select pool images for its error slices, retrain and compare before and after,
generate images for the slices, and search for failures with generated images (Wiles et al.)."""
from __future__ import annotations

from dataclasses import replace
from typing import Annotated, ClassVar

import pandas as pd
from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from hibug_core.bounds import configured
from hibug_core.embeddings.registry import ENCODERS
from hibug_core.operations.base import (
    NO_BASELINE,
    Cli,
    Encoder,
    LLMSettings,
    ModelName,
    OneOf,
    Operation,
    Result,
    Seed,
)
from hibug_core.progress import no_progress
from hibug_core.repair.failure_search import CAPTIONERS
from hibug_core.repair.generators import GENERATORS, SHAPE_RENDERER
from hibug_core.repair.loop import DATA_SOURCES, GENERATED, RepairConfig
from hibug_core.repair.pool_outputs import OWN_FEATURES
from hibug_core.repair.prompts import PROMPT_METHODS
from hibug_core.repair.retrain import RETRAIN_METHODS, RetrainConfig
from hibug_core.repair.selection import SELECTION_METHODS, SelectionConfig, budget_problem, parse_budget
from hibug_core.slices.search import SliceConfig


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


def _known_features(value: str) -> str:
    if value != OWN_FEATURES and value not in ENCODERS:
        raise ValueError(f"use '{OWN_FEATURES}' or an encoder ({ENCODERS.help_text()})")
    return value


Features = Annotated[str, AfterValidator(_known_features), Field(
    description=f"features for the linear head and for the selections that spread out (coreset, BADGE, expected "
                f"failures): '{OWN_FEATURES}' (the network's own) or an encoder's stored embeddings")]
SliceSplit = Annotated[str, Cli(flag="--split")]
TopSlices = Annotated[int, Cli(flag="--top")]


def _no_split(project, split: str, what: str) -> str | None:
    """'This project has no ...' when the project holds no samples of `split`; None when it does."""
    return None if project.split_counts().get(split) else f"this project has no {what}; nothing was started"


class Select(Operation):
    kind: ClassVar[str] = "select"
    summary: ClassVar[str] = "select pool images to label for the error slices (no retraining)"
    model: ModelName = None
    method: Annotated[str, OneOf(SELECTION_METHODS)] = Field(SelectionConfig.method,
                                                             description="how pool images are selected")
    budget: Budget = SelectionConfig.budget
    beta: float = configured(SelectionConfig, "beta")
    seed: Seed = 0
    split: str = Field("val", description="where error slices are found")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    top: int = Field(10, ge=1, description="slices listed")
    features: Features = SelectionConfig.features
    export: str | None = Field(None, description="write the selection to this .csv or .parquet file")

    def selection_config(self) -> SelectionConfig:
        return SelectionConfig(method=self.method, budget=self.budget, beta=self.beta, seed=self.seed,
                               features=self.features)

    def data_refusal(self, project) -> str | None:
        return _no_split(project, "pool", "pool images to select from: import unlabelled ones with split 'pool' "
                                          "(`hibug import PROJECT --manifest M.csv`, split column 'pool')")

    def slice_config(self) -> SliceConfig:
        return SliceConfig(by_class=self.by_class)

    def choose(self, project, report) -> pd.DataFrame:
        """The pool images chosen for `report`'s slices (the error slices of self.slice_config() on self.split)."""
        from hibug_core.tasks import task_of

        return task_of(project).select_pool(report, self.selection_config(), project=project)

    def selection(self, project) -> pd.DataFrame:
        """The pool images chosen for the model's error slices on self.split."""
        from hibug_core.slices.report import error_slices

        return self.choose(project, error_slices(project, self.model, split=self.split, config=self.slice_config()))

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.repair.selection import export_selection

        chosen = self.selection(project)
        lines = [chosen["slice"].fillna("(no slice)").value_counts().head(self.top).to_string()]
        if self.export:
            lines.append(f"written to {export_selection(chosen, self.export)}")
        return Result(f"{len(chosen)} pool images selected by {self.method} (budget {chosen.attrs['budget']}, "
                      f"unspent {chosen.attrs['unspent']})", {"selected": len(chosen)}, lines, summary_first=True)


class Repair(Operation):
    kind: ClassVar[str] = "repair"
    summary: ClassVar[str] = ("select pool images (or use generated ones) for the error slices, retrain, and compare "
                              "before and after slice by slice against a baseline and a no-new-data control")
    background: ClassVar[bool] = True
    model: ModelName = None
    method: Annotated[str, OneOf(SELECTION_METHODS)] = Field(SelectionConfig.method,
                                                             description="how pool images are selected")
    baseline: Annotated[str, OneOf(SELECTION_METHODS, extra=(NO_BASELINE,))] = Field(
        RepairConfig.baseline, description="selection run the same way for comparison")
    control: bool = Field(RepairConfig.control, description="also retrain with no new data")
    budget: Budget = SelectionConfig.budget
    beta: float = configured(SelectionConfig, "beta")
    data: Annotated[str, OneOf(DATA_SOURCES)] = Field(RepairConfig.data, description="new training data: "
                                                      + DATA_SOURCES.help_text())
    retrain: Annotated[str, OneOf(RETRAIN_METHODS)] = Field(RetrainConfig.method, description="how the model is "
                                                            "retrained: " + RETRAIN_METHODS.help_text())
    lam: float | None = configured(RetrainConfig, "lam")
    epochs: int | None = Field(None, ge=1, description="fine-tune: epochs (default: the retraining's own)")
    features: Features = RetrainConfig.features
    seeds: list[int] = Field(
        list(RepairConfig.seeds), min_length=1, description="seeds to repeat over (one seed is noise)")
    slice_split: SliceSplit = Field(RepairConfig.slice_split, description="where error slices are found")
    eval_split: str = Field(RepairConfig.eval_split, description="held-out split for before and after")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    top_slices: TopSlices = configured(RepairConfig, "top_slices")
    record: bool = Field(RepairConfig.record_models, description="store the retrained models' predictions")
    export: str | None = Field(None, description="write the first seed's selection to this .csv or .parquet file")
    labels: str | None = Field(None, description="a detector's selected pool images: their COCO annotations, "
                                                 "relative to the project (default: the pool labels it records)")

    def required(self) -> tuple[str, ...]:
        return DATA_SOURCES.get(self.data).needs

    def refusal(self, task) -> str | None:
        return super().refusal(task) or task.capabilities.retrain_refusal(self.retrain, task.nouns)

    def data_refusal(self, project) -> str | None:
        from hibug_core.repair.generated import GENERATED_SPLIT

        if self.data == GENERATED:
            return _no_split(project, GENERATED_SPLIT, "generated images to retrain with: generate them first (the "
                                                       "Generate images tab, or `hibug generate`)")
        return _no_split(project, "pool", "pool images to select from: import unlabelled ones with split 'pool', or "
                                          "repair with generated images")

    def repair_config(self) -> RepairConfig:
        return RepairConfig(
            model=self.model, data=self.data, selection=self.selection_config(),
            baseline=None if self.baseline == NO_BASELINE else self.baseline, control=self.control,
            retrain=replace(RetrainConfig(), method=self.retrain, lam=self.lam, features=self.features,
                            fine_tune=replace(RetrainConfig().fine_tune, **({"epochs": self.epochs} if self.epochs
                                                                            else {}))),
            seeds=tuple(self.seeds), slice_split=self.slice_split, eval_split=self.eval_split,
            slices=SliceConfig(by_class=self.by_class), top_slices=self.top_slices, record_models=self.record,
            labels=self.labels)

    def selection_config(self) -> SelectionConfig:
        return SelectionConfig(method=self.method, budget=self.budget, beta=self.beta, seed=self.seeds[0],
                               features=self.features)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.bench.summary import markdown_table
        from hibug_core.metrics import points
        from hibug_core.repair.loop import run_repair
        from hibug_core.repair.selection import export_selection
        from hibug_core.tasks import task_of

        config = self.repair_config()
        result = run_repair(project, config, task=task_of(project), author=author, progress=progress)
        lines = []
        main = result.selections.get((self.method, self.seeds[0]))
        if self.export and main is not None:
            lines.append(f"selection written to {export_selection(main, self.export)}")
        table = result.summary.copy()
        table["after"] = [f"{a:.1%} ± {s:.1%}" if s == s else f"{a:.1%}"
                          for a, s in zip(table["after"], table["after_sd"])]
        table["change"] = table["change"].map(points)
        table["before"] = [f"{b:.1%}" for b in table["before"]]
        table["planted"] = table["planted"].map({True: "yes", False: ""})
        lines.append(markdown_table(table[["slice", "planted", "n", "method", "before", "after", "change", "worse"]]))
        lines += [f"on '{config.eval_split}' ('worse' counts seeds where the slice got significantly worse)",
                  result.verdict()]
        methods, seeds = len(dict.fromkeys(result.runs["method"])), result.runs["seed"].nunique()
        # The verdict is the Repair page's own box under the job (and a line above here): not again in the summary.
        return Result(f"Repair run {result.run_id}: {len(result.runs)} models retrained and compared ({methods} "
                      f"method{'s' if methods != 1 else ''} x {seeds} seed{'s' if seeds != 1 else ''}); the verdict "
                      "and the slice-by-slice comparison are below.",
                      {"run": result.run_id, "models": len(result.runs)}, lines)


class Generate(Operation, LLMSettings):
    kind: ClassVar[str] = "generate"
    needs: ClassVar[tuple[str, ...]] = ("generate",)
    summary: ClassVar[str] = "generate images for the error slices and store them as the split 'generated'"
    background: ClassVar[bool] = True
    model: ModelName = None
    generator: Annotated[str, OneOf(GENERATORS)] = Field(SHAPE_RENDERER, description="generator: " +
                                                         GENERATORS.help_text())
    prompts: Annotated[str, OneOf(PROMPT_METHODS)] = Field(
        "hibug", description="how the prompts are written: " + PROMPT_METHODS.help_text())
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

    def prompt_table(self, project, *, progress=no_progress) -> pd.DataFrame:
        """The prompts: as edited (prompt_rows), else written by the prompt method (prompt, label, slice, weight)."""
        from hibug_core.repair.prompts import build_prompts

        if self.prompt_rows:
            return pd.DataFrame(self.prompt_rows)
        return build_prompts(project, self.prompts, model=self.model, top=self.top,
                             llm=self.llm_config() if self.llm else None, encoder=self.encoder,
                             failures_of=self.failures_of, progress=progress)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.repair.generated import generate_for_prompts
        from hibug_core.repair.generators import load_generator

        prompts = self.prompt_table(project, progress=progress)
        generator = load_generator(self.generator, steps=self.steps)
        run_id = generate_for_prompts(project, generator, prompts, self.images, seed=self.seed, author=author,
                                      progress=progress)
        return Result(f"{self.images:,} images generated with {generator.name} for {len(prompts)} prompt(s) "
                      f"(generation run #{run_id}); they are the split 'generated': retrain with them by choosing "
                      "generated as the repair's new data.",
                      {"run": run_id, "images": self.images, "generator": generator.name, "prompts": len(prompts)},
                      [prompts[["prompt", "label", "slice", "weight"]].to_string(index=False)])


class FailureSearch(Operation, LLMSettings):
    kind: ClassVar[str] = "failure search"
    needs: ClassVar[tuple[str, ...]] = ("failure_search",)
    summary: ClassVar[str] = ("generative failure search: captions of failures that make the model fail significantly "
                              "more often (Wiles et al.)")
    background: ClassVar[bool] = True
    label: str = Field(min_length=1, description="class to search")
    model: Annotated[str | None, Field(description="model (the project must hold its network; default: the first)")] \
        = None
    baseline: str | None = Field(None, description="baseline prompt (default: 'A photo of a <label>')")
    generator: Annotated[str, OneOf(GENERATORS)] = Field(SHAPE_RENDERER, description="generator (see `hibug "
                                                                                     "generate --help`)")
    captioner: Annotated[str, OneOf(CAPTIONERS)] = Field("renderer", description="who captions the failures: "
                                                         + CAPTIONERS.help_text())
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

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        """The table is kept as a repair run of kind "failure search"."""
        from hibug_core.repair.failure_search import (
            FailureSearchConfig,
            FailureSearchOutcome,
            encoder_embedding,
            failure_search,
            network_predictor,
            typed_captions,
        )
        from hibug_core.repair.generators import load_generator
        from hibug_core.repair.runs import finish_run, start_run

        # 1. Check inputs: the model's network, the generator, the captioner, the typed captions (each of the class).
        predict = network_predictor(project, self.model or project.models()[0])
        generator = load_generator(self.generator, steps=self.steps)
        captioner = CAPTIONERS.get(self.captioner).build(settings=self)
        config = FailureSearchConfig(images_per_caption=self.images, captions=self.captions,
                                     caption_failures=self.caption_failures, cluster=self.cluster, top_k=self.top_k,
                                     target=self.target, target_errors=self.target_errors,
                                     max_images=max(FailureSearchConfig.max_images, self.images), seed=self.seed)
        typed = typed_captions(self.typed_captions, self.label)
        # 2. The search, kept as a repair run.
        run_id = start_run(project, "failure search", {**self.params(), "generator": generator.name,
                                                        "captioner": captioner.name}, author=author)
        table = failure_search(generator, predict, captioner, self.label, baseline_prompt=self.baseline, typed=typed,
                               embed=encoder_embedding(self.encoder) if self.cluster else None, config=config,
                               progress=progress)
        outcome = FailureSearchOutcome(self.label, table)
        finish_run(project, run_id, {"label": self.label, "significant": outcome.significant,
                                     "table": table.to_dict("records")}, author=author)
        return Result(f"{outcome.summary()} Stored as repair run {run_id}.",
                      {"run": run_id, "captions": len(table), "significant": outcome.significant}, outcome.lines())
