"""The long work the dashboard runs as background jobs: each takes (project, params, progress) and returns a summary."""
from __future__ import annotations

from hibug_core.embeddings.registry import DEFAULT_ENCODER


def embed(project, params: dict, progress) -> dict:
    """params: encoder, splits (default: all)."""
    from hibug_core.embeddings.compute import embed_project

    encoder = params.get("encoder", DEFAULT_ENCODER)
    embeddings = embed_project(project, encoder, sample_ids=project.split_ids(params.get("splits")), progress=progress)
    return {"encoder": encoder, "samples": len(embeddings.sample_ids)}


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
    return {"runs": runs}


def teach(project, params: dict, progress) -> dict:
    """params: attribute, examples {sample id: tag} (may be empty: teach from the examples already given), encoder."""
    from hibug_core.tagging.run import teach as teach_attribute

    examples = {int(k): v for k, v in (params.get("examples") or {}).items()}
    run_id, report = teach_attribute(project, params["attribute"], examples,
                                     encoder=params.get("encoder", DEFAULT_ENCODER), progress=progress,
                                     author=params.get("author"))
    return {"run": run_id, "cv_accuracy": report.cv_accuracy, "examples": report.examples}


def embedding_map(project, params: dict, progress) -> dict:
    """params: encoder, splits, method (umap or pca): embeds what is missing, then lays out the 2-D map."""
    from hibug_core.embeddings.compute import embed_project
    from hibug_core.embeddings.projection import MapConfig, compute_map

    encoder = params.get("encoder", DEFAULT_ENCODER)
    ids = project.split_ids(params.get("splits"))
    embed_project(project, encoder, sample_ids=ids, progress=progress)
    config = MapConfig(method=params.get("method", MapConfig.method))
    layout = compute_map(project, encoder, sample_ids=ids, config=config, progress=progress)
    return {"encoder": encoder, "points": len(layout)}
