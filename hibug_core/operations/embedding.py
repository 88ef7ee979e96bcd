"""Operations on images: embed them, tag them (zero-shot or a multimodal LLM), teach an attribute by example, lay
them out on a map, run the user's own model over them."""
from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from hibug_core.embeddings.projection import LAYOUTS, MapConfig
from hibug_core.embeddings.registry import DEFAULT_ENCODER
from hibug_core.models.registry import MODELS
from hibug_core.operations.base import (
    Attributes,
    Cli,
    Encoder,
    LLMSettings,
    OneOf,
    Operation,
    RaySettings,
    Result,
    Splits,
    StoredName,
)
from hibug_core.progress import no_progress

BatchSize = Annotated[int, Field(ge=1, description="images per batch")]
Workers = Annotated[int | None, Field(ge=0, description="image decoding processes (default: chosen for this machine)")]


class Embed(Operation, RaySettings):
    kind: ClassVar[str] = "embed"
    summary: ClassVar[str] = "compute and store image embeddings (only images not embedded before)"
    background: ClassVar[bool] = True
    encoder: Encoder = DEFAULT_ENCODER
    splits: Splits = None
    batch_size: BatchSize = 64
    workers: Workers = None

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.embeddings.compute import EmbedConfig, embed_project
        from hibug_core.tasks import task_of

        ids = project.split_ids(self.splits)
        if self.ray:
            from hibug_core.embeddings.ray_backend import embed_with_ray

            embeddings = embed_with_ray(project, self.encoder, sample_ids=ids,
                                        options=self.ray_options(self.batch_size), progress=progress)
        else:
            embeddings = embed_project(project, self.encoder, sample_ids=ids, progress=progress,
                                       config=EmbedConfig(batch_size=self.batch_size, workers=self.workers))
        count, dimension = len(embeddings.sample_ids), int(embeddings.embedding.shape[1])
        return Result(f"{task_of(project).nouns.count(count)} embedded with {self.encoder} (dimension {dimension}).",
                      {"encoder": self.encoder, "samples": count, "dimension": dimension})


def _tagging_result(project, runs: list[int], values: dict, said: str) -> Result:
    """A tagging or teaching run's result: its runs measured once, for the warning, the summary and the lines (one
    per attribute tagged)."""
    from hibug_core.tagging.sources import run_digest, run_outcomes, run_summary, run_verdict, run_warning

    outcomes = run_outcomes(project, runs)
    return Result(f"{said} {run_digest(project, runs, outcomes=outcomes)}", values,
                  run_summary(project, runs, outcomes=outcomes),
                  warning=run_verdict(project, runs, outcomes=outcomes),
                  warning_details=run_warning(project, runs, outcomes=outcomes))


class Tag(Operation, LLMSettings):
    kind: ClassVar[str] = "tag"
    summary: ClassVar[str] = "tag every image with every enabled attribute, then report tag quality"
    background: ClassVar[bool] = True
    attributes: Attributes = None
    splits: Splits = None
    encoder: Encoder = DEFAULT_ENCODER
    model: str | None = Field(None, description="model whose predictions name the class of unlabelled images in "
                                                "prompts (default: the first)")
    llm: bool = Field(False, description="ask a multimodal LLM (OpenAI-compatible) instead of the encoder")

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        """Zero-shot and measured tags with the encoder, or a multimodal LLM (the key comes from the environment,
        never from the operation)."""
        from hibug_core.tasks import task_of

        ids, views = project.split_ids(self.splits), task_of(project).views
        if self.llm:
            from hibug_core.tagging.mllm import tag_with_llm

            runs = [tag_with_llm(project, self.llm_config(), views=views, attributes=self.attributes, sample_ids=ids,
                                 progress=progress, author=author)]
        else:
            from hibug_core.tagging.run import tag_project

            runs = tag_project(project, views=views, encoder=self.encoder, attributes=self.attributes,
                               model=self.model, sample_ids=ids, progress=progress, author=author)
        stored = f"Tagging run(s) {', '.join(f'#{r}' for r in runs)} stored."
        return _tagging_result(project, runs, {"runs": runs}, stored)


class Teach(Operation):
    kind: ClassVar[str] = "teach"
    summary: ClassVar[str] = "teach an attribute by example: a linear probe on stored embeddings"
    background: ClassVar[bool] = True
    attribute: Annotated[str, Cli(positional=True), Field(min_length=1, description="the attribute to teach")]
    examples: Annotated[dict[int, str], Cli(skip=True)] = Field(
        default_factory=dict, description="sample id -> tag (empty: the examples people already gave)")
    encoder: Encoder = DEFAULT_ENCODER

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.tagging.run import teach as teach_attribute

        run_id, report = teach_attribute(project, self.attribute, dict(self.examples), encoder=self.encoder,
                                         progress=progress, author=author)
        taught = (f"Taught '{self.attribute}' from {sum(report.examples.values())} examples: cross-validated "
                  f"accuracy {report.cv_accuracy:.1%} ± {report.cv_std:.1%} over {report.folds} folds (run #{run_id}).")
        return _tagging_result(project, [run_id], {
            "run": run_id, "cv_accuracy": report.cv_accuracy, "cv_std": report.cv_std, "folds": report.folds,
            "examples": report.examples}, taught)


class EmbeddingMap(Operation):
    kind: ClassVar[str] = "map"
    summary: ClassVar[str] = "embed what is missing, then lay the images out on a 2-D map"
    background: ClassVar[bool] = True
    encoder: Encoder = DEFAULT_ENCODER
    splits: Splits = None
    method: Annotated[str, OneOf(LAYOUTS)] = Field(MapConfig.method, description="layout: " + LAYOUTS.help_text())

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.embeddings.compute import embed_project
        from hibug_core.embeddings.projection import compute_map
        from hibug_core.tasks import task_of

        ids = project.split_ids(self.splits)
        embed_project(project, self.encoder, sample_ids=ids, progress=progress)
        layout = compute_map(project, self.encoder, sample_ids=ids, config=MapConfig(method=self.method),
                             progress=progress)
        return Result(f"Map of {task_of(project).nouns.count(len(layout))} laid out ({self.method}, {self.encoder}).",
                      {"encoder": self.encoder, "points": len(layout)})


class Predict(Operation, RaySettings):
    kind: ClassVar[str] = "predict"
    needs: ClassVar[tuple[str, ...]] = ("predict",)
    summary: ClassVar[str] = ("run your own model over the project's images and record its predictions and features "
                              "as a model (resumable)")
    background: ClassVar[bool] = True
    model: Annotated[str, OneOf(MODELS)] = Field(description="the model: " + MODELS.help_text())
    name: Annotated[str | None, StoredName] = Field(None, description="name it is recorded under (default: from the "
                                                                       "spec)")
    splits: Splits = None
    batch_size: BatchSize = 64
    workers: Workers = None

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.embeddings.compute import EmbedConfig
        from hibug_core.models.predict import predict_project

        done = predict_project(project, self.model, name=self.name, splits=self.splits, progress=progress,
                               author=author, config=EmbedConfig(batch_size=self.batch_size, workers=self.workers),
                               ray=self.ray_options(self.batch_size) if self.ray else None)
        return Result(done.summary(), {"model": done.model, "samples": done.samples, "computed": done.computed,
                                       "accuracy": done.accuracy})
