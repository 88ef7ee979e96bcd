"""The long work the dashboard runs as background jobs: each kind runs one operation (hibug_core.operations) with a
progress callback and returns a JSON-able result with a one-line "summary"."""
from __future__ import annotations

import importlib
import os

from hibug_core.operations import (
    Embed,
    EmbeddingMap,
    FailureSearch,
    Generate,
    Operation,
    Predict,
    Repair,
    Tag,
    Teach,
    register_operation,
)
from hibug_core.registry import Registry
from hibug_core.tasks import task_of

JOB_KINDS = Registry("job kind")  # name = the operation's kind; build(project, operation, progress, author)
EXTENSIONS_ENV = "HIBUG_JOB_MODULES"  # comma-separated modules that register more kinds (read by the worker)


def job_kind(op: type[Operation]):
    """Decorator: the function runs operation `op` as a background job (op.kind names the job kind)."""
    def decorate(function):
        register_operation(op)
        JOB_KINDS.add(op.kind, op.summary, function)
        return function
    return decorate


def load_extensions() -> None:
    """Import the modules named in HIBUG_JOB_MODULES, which register their own kinds with @job_kind. The jobs table
    only names a kind: a worker never imports what a row names."""
    for name in filter(None, (part.strip() for part in os.environ.get(EXTENSIONS_ENV, "").split(","))):
        importlib.import_module(name)


@job_kind(Embed)
def embed(project, op: Embed, progress, author: str | None = None) -> dict:
    from hibug_core.embeddings.compute import EmbedConfig, embed_project

    ids = project.split_ids(op.splits)
    if op.ray:
        from hibug_core.embeddings.ray_backend import embed_with_ray

        embeddings = embed_with_ray(project, op.encoder, sample_ids=ids, options=op.ray_options(op.batch_size),
                                    progress=progress)
    else:
        embeddings = embed_project(project, op.encoder, sample_ids=ids, progress=progress,
                                   config=EmbedConfig(batch_size=op.batch_size, workers=op.workers))
    return {"encoder": op.encoder, "samples": len(embeddings.sample_ids),
            "dimension": int(embeddings.embedding.shape[1]),
            "summary": f"{task_of(project).nouns.count(len(embeddings.sample_ids))} embedded with {op.encoder}."}


@job_kind(Tag)
def tag(project, op: Tag, progress, author: str | None = None) -> dict:
    """Zero-shot and measured tags with the encoder, or a multimodal LLM (the key comes from the worker's environment,
    never from the operation)."""
    from hibug_core.tagging.sources import run_digest, run_outcomes, run_summary, run_verdict, run_warning

    ids, views = project.split_ids(op.splits), task_of(project).views
    if op.llm:
        from hibug_core.tagging.mllm import tag_with_llm

        runs = [tag_with_llm(project, op.llm_config(), views=views, attributes=op.attributes, sample_ids=ids,
                             progress=progress, author=author)]
    else:
        from hibug_core.tagging.run import tag_project

        runs = tag_project(project, views=views, encoder=op.encoder, attributes=op.attributes, model=op.model,
                           sample_ids=ids, progress=progress, author=author)
    outcomes = run_outcomes(project, runs)  # measured once, for the warning and both summaries
    return {"runs": runs, "warning": run_verdict(project, runs, outcomes=outcomes),
            "warning_details": run_warning(project, runs, outcomes=outcomes),
            "per_attribute": run_summary(project, runs, outcomes=outcomes),
            "summary": f"Tagging run(s) {', '.join(f'#{r}' for r in runs)} stored. "
                       f"{run_digest(project, runs, outcomes=outcomes)}"}


@job_kind(Teach)
def teach(project, op: Teach, progress, author: str | None = None) -> dict:
    from hibug_core.tagging.run import teach as teach_attribute
    from hibug_core.tagging.sources import run_digest, run_outcomes, run_verdict, run_warning

    run_id, report = teach_attribute(project, op.attribute, dict(op.examples), encoder=op.encoder, progress=progress,
                                     author=author)
    outcomes = run_outcomes(project, [run_id])  # measured once, for the warning and the summary
    return {"run": run_id, "cv_accuracy": report.cv_accuracy, "cv_std": report.cv_std, "folds": report.folds,
            "examples": report.examples, "warning": run_verdict(project, [run_id], outcomes=outcomes),
            "warning_details": run_warning(project, [run_id], outcomes=outcomes),
            "summary": f"Taught '{op.attribute}' from {sum(report.examples.values())} examples: "
                       f"cross-validated accuracy {report.cv_accuracy:.1%}. "
                       f"{run_digest(project, [run_id], outcomes=outcomes)}"}


@job_kind(EmbeddingMap)
def embedding_map(project, op: EmbeddingMap, progress, author: str | None = None) -> dict:
    from hibug_core.embeddings.compute import embed_project
    from hibug_core.embeddings.projection import MapConfig, compute_map

    ids = project.split_ids(op.splits)
    embed_project(project, op.encoder, sample_ids=ids, progress=progress)
    layout = compute_map(project, op.encoder, sample_ids=ids, config=MapConfig(method=op.method), progress=progress)
    return {"encoder": op.encoder, "points": len(layout),
            "summary": f"Map of {task_of(project).nouns.count(len(layout))} laid out ({op.method}, {op.encoder})."}


@job_kind(Predict)
def predict(project, op: Predict, progress, author: str | None = None) -> dict:
    from hibug_core.embeddings.compute import EmbedConfig
    from hibug_core.models.predict import predict_project

    done = predict_project(project, op.model, name=op.name, splits=op.splits, progress=progress, author=author,
                           config=EmbedConfig(batch_size=op.batch_size, workers=op.workers),
                           ray=op.ray_options(op.batch_size) if op.ray else None)
    return {"model": done.model, "samples": done.samples, "computed": done.computed, "accuracy": done.accuracy,
            "summary": done.summary()}


@job_kind(Generate)
def generate(project, op: Generate, progress, author: str | None = None) -> dict:
    import pandas as pd

    from hibug_core.repair.generated import generate_for_prompts
    from hibug_core.repair.generators import load_generator
    from hibug_core.repair.prompts import build_prompts

    if op.prompt_rows:
        prompts = pd.DataFrame(op.prompt_rows)
    else:
        prompts = build_prompts(project, op.prompts, model=op.model, top=op.top,
                                llm=op.llm_config() if op.llm else None, encoder=op.encoder,
                                failures_of=op.failures_of, progress=progress)
    generator = load_generator(op.generator, steps=op.steps)
    run_id = generate_for_prompts(project, generator, prompts, op.images, seed=op.seed, author=author,
                                  progress=progress)
    return {"run": run_id, "images": op.images, "generator": generator.name, "prompts": len(prompts),
            "summary": f"{op.images:,} images generated with {generator.name} for {len(prompts)} prompt(s) "
                       f"(generation run #{run_id}); they are the split 'generated'."}


@job_kind(Repair)
def repair(project, op: Repair, progress, author: str | None = None) -> dict:
    from hibug_core.repair.loop import run_repair

    result = run_repair(project, op.repair_config(), task=task_of(project), author=author, progress=progress)
    methods = len(dict.fromkeys(result.runs["method"]))
    seeds = result.runs["seed"].nunique()
    # The verdict is the page's own box under the job: said once, not again in the job's message.
    return {"run": result.run_id, "models": len(result.runs),
            "summary": f"Repair run {result.run_id}: {len(result.runs)} models retrained and compared ({methods} "
                       f"method{'s' if methods != 1 else ''} x {seeds} seed{'s' if seeds != 1 else ''}); "
                       "the verdict and the slice-by-slice comparison are below."}


@job_kind(FailureSearch)
def search_failures(project, op: FailureSearch, progress, author: str | None = None) -> dict:
    """The table is kept as a repair run of kind "failure search"."""
    from hibug_core.repair.failure_search import (
        FailureSearchConfig,
        LLMCaptioner,
        RendererCaption,
        encoder_embedding,
        failure_search,
        network_predictor,
        typed_captions,
    )
    from hibug_core.repair.generators import load_generator
    from hibug_core.repair.runs import finish_run, start_run

    predict = network_predictor(project, op.model or project.models()[0])
    generator = load_generator(op.generator, steps=op.steps)
    captioner = LLMCaptioner(op.llm_config()) if op.captioner == "llm" else RendererCaption()
    config = FailureSearchConfig(images_per_caption=op.images, captions=op.captions,
                                 caption_failures=op.caption_failures, cluster=op.cluster, top_k=op.top_k,
                                 target=op.target, target_errors=op.target_errors,
                                 max_images=max(FailureSearchConfig.max_images, op.images), seed=op.seed)
    typed = typed_captions(op.typed_captions, op.label)  # a caption that is not of the class stops here
    run_id = start_run(project, "failure search", {**op.params(), "generator": generator.name,
                                                    "captioner": captioner.name}, author=author)
    table = failure_search(generator, predict, captioner, op.label, baseline_prompt=op.baseline, typed=typed,
                           embed=encoder_embedding(op.encoder) if op.cluster else None, config=config,
                           progress=progress)
    significant = int(table["significant"].sum())
    finish_run(project, run_id, {"label": op.label, "significant": significant, "table": table.to_dict("records")},
               author=author)
    mine = table[table["origin"] == "typed by a person"]
    verdicts = "".join(f" '{row.caption}': {row.failures} of {row.images} fail "
                       f"({'significantly more' if row.significant else 'not significantly more'} than the baseline)."
                       for row in mine.itertuples())
    return {"run": run_id, "captions": len(table), "significant": significant,
            "summary": f"{len(table) - 1} captions tested; {significant} make the model fail significantly more "
                       f"often than the baseline prompt.{verdicts}"}


def run_operation(project, op: Operation, progress, author: str | None = None) -> dict:
    """Run a built operation as its job kind does, after checking the project's task can do what it needs (a
    TaskError saying what to do instead, before anything runs)."""
    entry = JOB_KINDS.get(op.kind)
    op.check_task(task_of(project))
    return entry.build(project, op, progress, author)


def run_kind(project, kind: str, params: dict, progress, author: str | None = None) -> dict:
    """Validate `params` as the kind's operation, then run it (what the worker does with a stored job)."""
    from hibug_core.operations import operation

    JOB_KINDS.get(kind)  # an unknown kind is refused before its parameters are read
    return run_operation(project, operation(kind).build(params), progress, author)
