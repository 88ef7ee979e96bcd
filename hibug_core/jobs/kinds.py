"""The long work the dashboard runs as background jobs: each takes (project, params, progress) and returns a summary."""
from __future__ import annotations

from hibug_core.embeddings.registry import DEFAULT_ENCODER


def embed(project, params: dict, progress) -> dict:
    """params: encoder, splits (default: all)."""
    from hibug_core.embeddings.compute import embed_project

    encoder = params.get("encoder", DEFAULT_ENCODER)
    embeddings = embed_project(project, encoder, sample_ids=project.split_ids(params.get("splits")), progress=progress)
    return {"encoder": encoder, "samples": len(embeddings.sample_ids),
            "summary": f"{len(embeddings.sample_ids):,} images embedded with {encoder}."}


def tag(project, params: dict, progress) -> dict:
    """params: attributes (default: every enabled one), splits, and either encoder (zero-shot and measured) or
    llm {base_url, model} (multimodal LLM; the key comes from the worker's environment, never from params)."""
    ids = project.split_ids(params.get("splits"))
    attributes = params.get("attributes")
    if params.get("llm"):
        from hibug_core.llm.client import LLMConfig
        from hibug_core.tagging.mllm import tag_with_llm

        config = LLMConfig.from_env(**params["llm"])
        runs = [tag_with_llm(project, config, attributes=attributes, sample_ids=ids, progress=progress,
                             author=params.get("author"))]
    else:
        from hibug_core.tagging.run import tag_project

        runs = tag_project(project, encoder=params.get("encoder", DEFAULT_ENCODER), attributes=attributes,
                           sample_ids=ids, progress=progress, author=params.get("author"))
    from hibug_core.tagging.sources import run_digest

    return {"runs": runs,
            "summary": f"Tagging run(s) {', '.join(f'#{r}' for r in runs)} stored. {run_digest(project, runs)}"}


def teach(project, params: dict, progress) -> dict:
    """params: attribute, examples {sample id: tag} (may be empty: teach from the examples already given), encoder."""
    from hibug_core.tagging.run import teach as teach_attribute

    examples = {int(k): v for k, v in (params.get("examples") or {}).items()}
    run_id, report = teach_attribute(project, params["attribute"], examples,
                                     encoder=params.get("encoder", DEFAULT_ENCODER), progress=progress,
                                     author=params.get("author"))
    from hibug_core.tagging.sources import run_digest

    return {"run": run_id, "cv_accuracy": report.cv_accuracy, "examples": report.examples,
            "summary": f"Taught '{params['attribute']}' from {sum(report.examples.values())} examples: "
                       f"cross-validated accuracy {report.cv_accuracy:.1%}. {run_digest(project, [run_id])}"}


def embedding_map(project, params: dict, progress) -> dict:
    """params: encoder, splits, method (umap or pca): embeds what is missing, then lays out the 2-D map."""
    from hibug_core.embeddings.compute import embed_project
    from hibug_core.embeddings.projection import MapConfig, compute_map

    encoder = params.get("encoder", DEFAULT_ENCODER)
    ids = project.split_ids(params.get("splits"))
    embed_project(project, encoder, sample_ids=ids, progress=progress)
    config = MapConfig(method=params.get("method", MapConfig.method))
    layout = compute_map(project, encoder, sample_ids=ids, config=config, progress=progress)
    return {"encoder": encoder, "points": len(layout),
            "summary": f"Map of {len(layout):,} images laid out ({config.method}, {encoder})."}


def generate(project, params: dict, progress) -> dict:
    """params: generator, images, seed, steps, and either prompts (rows with prompt, label, slice_id, slice, weight:
    edited on the page) or method (hibug / backgrounds) with top, encoder and llm {base_url, model}."""
    import pandas as pd

    from hibug_core.repair.generated import generate_for_prompts
    from hibug_core.repair.generators import load_generator
    from hibug_core.repair.prompts import build_prompts

    if params.get("prompts"):
        prompts = pd.DataFrame(params["prompts"])
    else:
        llm = None
        if params.get("llm"):
            from hibug_core.llm.client import LLMConfig

            llm = LLMConfig.from_env(**params["llm"])
        prompts = build_prompts(project, params.get("method", "hibug"), model=params.get("model"),
                                top=int(params.get("top", 5)), llm=llm, encoder=params.get("encoder", DEFAULT_ENCODER),
                                progress=progress)
    generator = load_generator(params.get("generator", "shape-world renderer"), steps=int(params.get("steps", 25)))
    run_id = generate_for_prompts(project, generator, prompts, int(params.get("images", 100)),
                                  seed=int(params.get("seed", 0)), author=params.get("author"), progress=progress)
    images = int(params.get("images", 100))
    return {"run": run_id, "images": images, "generator": generator.name,
            "summary": f"{images:,} images generated with {generator.name} for {len(prompts)} prompt(s) "
                       f"(generation run #{run_id}); they are the split 'generated'."}


def repair(project, params: dict, progress) -> dict:
    """params: see hibug_core.repair.loop.repair_config."""
    from hibug_core.repair.loop import repair_config, run_repair

    result = run_repair(project, repair_config(params), author=params.get("author"), progress=progress)
    return {"run": result.run_id, "models": len(result.runs), "summary": result.verdict()}


def search_failures(project, params: dict, progress) -> dict:
    """params: label, model, generator, captioner (renderer / llm), llm {base_url, model}, baseline, images, captions,
    seed. The table is kept as a repair run of kind "failure search"."""
    from hibug_core.repair.failure_search import (FailureSearchConfig, LLMCaptioner, RendererCaption,
                                                  failure_search, network_predictor)
    from hibug_core.repair.generators import load_generator
    from hibug_core.repair.runs import finish_run, start_run

    predict = network_predictor(project, params.get("model") or project.models()[0])
    generator = load_generator(params.get("generator", "shape-world renderer"), steps=int(params.get("steps", 25)))
    if params.get("captioner") == "llm":
        from hibug_core.llm.client import LLMConfig

        captioner = LLMCaptioner(LLMConfig.from_env(**(params.get("llm") or {})))
    else:
        captioner = RendererCaption()
    config = FailureSearchConfig(images_per_caption=int(params.get("images", 32)),
                                 captions=int(params.get("captions", 8)), seed=int(params.get("seed", 0)))
    run_id = start_run(project, "failure search", {**params, "generator": generator.name,
                                                    "captioner": captioner.name}, author=params.get("author"))
    table = failure_search(generator, predict, captioner, params["label"], baseline_prompt=params.get("baseline"),
                           config=config, progress=progress)
    finish_run(project, run_id, {"label": params["label"], "significant": int(table["significant"].sum()),
                                 "table": table.to_dict("records")}, author=params.get("author"))
    significant = int(table["significant"].sum())
    return {"run": run_id, "captions": len(table), "significant": significant,
            "summary": f"{len(table)} captions of failures tested; {significant} make the model fail significantly "
                       "more often than the baseline prompt."}
