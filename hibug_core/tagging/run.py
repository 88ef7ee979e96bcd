"""Tagging a project end to end: pick the attributes, compute what is missing, store each run, read tags back."""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import MeasuredConfig
from hibug_core.attributes.schema import MEASURED, AttributeSchema
from hibug_core.embeddings.compute import EmbedConfig, embed_project
from hibug_core.embeddings.registry import DEFAULT_ENCODER, load_encoder
from hibug_core.objects.views import SampleViews
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry
from hibug_core.store import tag_store
from hibug_core.store.attribute_versions import latest_version, load_schema
from hibug_core.tagging.choice import chosen_attributes, prompt_labels
from hibug_core.tagging.measured import measure_project, measured_tags
from hibug_core.tagging.mllm import MLLM, tag_with_llm
from hibug_core.tagging.probe import ProbeConfig, ProbeReport, teach_probe
from hibug_core.tagging.quality import TagQuality, audit_precision, tag_quality
from hibug_core.tagging.sources import ground_truth, source_order
from hibug_core.tagging.zero_shot import ZeroShotConfig, zero_shot_tags

logger = logging.getLogger(__name__)


def tag_project(project, *, views: SampleViews, encoder: str = DEFAULT_ENCODER, attributes: list[str] | None = None,
                model: str | None = None, sample_ids=None, zero_shot: ZeroShotConfig = ZeroShotConfig(),
                measured: MeasuredConfig = MeasuredConfig(), embed: EmbedConfig = EmbedConfig(),
                progress: ProgressCallback = no_progress, author: str | None = None) -> list[int]:
    """Tag the chosen (default: enabled) attributes; measured ones from pixels, the rest zero-shot, each seen as the
    task's `views` say (hibug_core.tasks: task_of(project).views). Returns run ids.

    Image embeddings are computed only for images not embedded before, so after an attribute edit only the
    text side is encoded again. People's corrections are stored apart and keep overriding the new tags.
    """
    schema, version = load_schema(project), latest_version(project)
    chosen = chosen_attributes(schema, attributes)
    samples = project.samples(sample_ids=sample_ids)
    run_ids = []
    by_measure = [a for a in chosen if a.measured]
    by_model = [a for a in chosen if not a.measured]
    if by_measure:
        run_ids.append(TAGGERS.build("measured", project=project, attributes=by_measure, samples=samples,
                                     config=measured, version=version, progress=progress, author=author))
    if by_model:
        run_ids.append(TAGGERS.build("zero-shot", project=project, attributes=by_model, samples=samples,
                                     encoder=encoder, model=model, config=zero_shot, embed=embed, version=version,
                                     views=views, progress=progress, author=author))
    logger.info("tagged %d attributes on %d samples (runs %s)", len(chosen), len(samples), run_ids)
    return run_ids


TAGGERS = Registry("tagger")  # how tags are made; a tagging run's method is one of these names


@TAGGERS.register(MEASURED, "computed exactly from pixels, no model: brightness, contrast, saturation, "
                  "colourfulness, sharpness, noise, resolution, aspect ratio, dominant colour")
def _measured(*, project, attributes, samples, config, version, progress, author) -> int:
    measures = measure_project(project, sample_ids=samples.index, progress=progress)
    return tag_store.save_run(project, measured_tags(measures, attributes, config), method="measured",
                              schema_version=version, author=author)


@TAGGERS.register("zero-shot", "a vision-language encoder (CLIP, or the offline ConSE) scores each tag's prompts "
                  "against each image")
def _zero_shot(*, project, attributes, samples, encoder, model, config, embed, version, views, progress,
               author) -> int:
    loaded = load_encoder(encoder)
    labels = prompt_labels(project, samples, model)
    parts = []
    for crop, chosen in views.split(attributes).items():  # e.g. main-object attributes on each object's crop
        embeddings = embed_project(project, loaded, sample_ids=samples.index, config=embed, progress=progress,
                                   crops=crop)
        progress("tagging", 0, len(chosen))
        parts.append(zero_shot_tags(embeddings.sample_ids, embeddings.embedding, labels, chosen, loaded, config))
        progress("tagging", len(chosen), len(chosen))
    result = parts[0] if len(parts) == 1 else tag_store.TagResult(
        parts[0].sample_ids, {**parts[0].attributes, **parts[1].attributes},
        *(np.concatenate([getattr(p, name) for p in parts], axis=1) for name in ("tag_index", "score", "margin")))
    return tag_store.save_run(project, result, method="zero-shot", encoder=loaded.spec, schema_version=version,
                              author=author)


TAGGERS.add(MLLM, "a multimodal LLM (OpenAI-compatible) answers every attribute of an image as validated JSON",
            tag_with_llm)


def teach(project, attribute: str, examples: dict[int, str] | None = None, *, encoder: str = DEFAULT_ENCODER,
          sample_ids=None, config: ProbeConfig = ProbeConfig(), progress: ProgressCallback = no_progress,
          author: str | None = None) -> tuple[int, ProbeReport]:
    """Teach an attribute by example: `examples` (sample id -> tag) are stored as people's tags, then a probe
    trained on every person-given tag of the attribute tags all samples (or `sample_ids` and the examples).
    Returns (run id, report)."""
    schema = load_schema(project)
    target = chosen_attributes(schema, [attribute])[0]
    for tag in sorted(set((examples or {}).values())):
        chosen = [s for s, t in examples.items() if t == tag]
        tag_store.correct_tags(project, attribute, chosen, tag, kind="example", author=author)
    given = tag_store.corrections(project, attribute)
    if sample_ids is not None:
        sample_ids = pd.Index(np.asarray(sample_ids)).union(pd.Index(given["sample_id"].astype(int)))
    embeddings = embed_project(project, encoder, sample_ids=sample_ids, progress=progress)
    result, report = teach_probe(target, embeddings.for_probe(), embeddings.sample_ids,
                                 dict(zip(given["sample_id"].astype(int), given["tag"])), config)
    run_id = tag_store.save_run(project, result, method="probe", encoder=embeddings.encoder,
                                schema_version=latest_version(project), author=author)
    return run_id, report


TAGGERS.add("probe", "a linear probe on stored embeddings, taught by people's examples", teach)


def current_tags(project, schema: AttributeSchema | None = None, *, with_corrections: bool = True,
                 sample_ids=None, model_only: bool = False) -> tag_store.TagTable:
    """The tags in force for every attribute of the schema (default: the newest version): per attribute the source a
    person chose, else the best measured one (sources.rank_sources), then people's corrections. model_only: tagging
    runs only, imported tags left out."""
    schema = schema or load_schema(project)
    names = [a.name for a in schema.attributes]
    order = source_order(project, names, model_only=model_only)  # measured on every sample, whatever the subset
    return tag_store.load_tags(project, {a.name: a.tags for a in schema.attributes}, order,
                               sample_ids=sample_ids, with_corrections=with_corrections)


def project_tag_quality(project, *, mapping: dict[str, str] | None = None, sample_ids=None) -> TagQuality:
    """How good the model tags in force are (tagging runs only; imported tags and people's corrections left out)
    against the ground truth that exists."""
    model_tags = current_tags(project, with_corrections=False, sample_ids=sample_ids, model_only=True).tags
    return tag_quality(model_tags, ground_truth(project), mapping)


def audit(project, attribute: str) -> pd.DataFrame:
    """Precision of each tag in force of `attribute` (before people's corrections), estimated from the images people
    confirmed or corrected."""
    people = tag_store.corrections(project, attribute)
    people = people[people["kind"].isin(["confirm", "correct"])]
    schema = load_schema(project)
    only = AttributeSchema(attributes=(schema[attribute],)) if attribute in schema.names() else schema
    # Only the reviewed images' tags are read: proportional to the audit, not to the project.
    model = current_tags(project, only, with_corrections=False, sample_ids=people["sample_id"].unique()).tags
    return audit_precision(model[attribute], people.set_index("sample_id")["tag"])
