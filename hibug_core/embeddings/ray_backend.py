"""Inference on a cluster: Ray Data batch inference (map_batches over an actor pool, one GPU per actor when there
are GPUs) for encoders and for the user's own models; results land in the same per-content caches as local runs."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from hibug_core.embeddings.cache import ContentCache
from hibug_core.embeddings.compute import EmbeddingSet, _from_cache, embedding_cache
from hibug_core.embeddings.registry import DEFAULT_ENCODER, encoder_key, load_encoder
from hibug_core.errors import ModelLoadError, TaggingError
from hibug_core.progress import ProgressCallback, no_progress

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide: the cluster (None: a local instance), actors, GPUs per actor (None: 1 where there are
    GPUs), images per batch and per stored part."""

    address: str | None = None
    actors: int = 2
    gpus_per_actor: float | None = None
    batch_size: int = 64
    save_every: int = 4096


class EncodingActor:
    """Builds its encoder once per actor with `load` (a picklable callable: an encoder or the user's model, any object
    with `transform`, `input_size` and `encode_images`); turns a batch of paths into its outputs (unreadable files
    flagged)."""

    def __init__(self, load: Callable[[], object]):
        import hibug_core  # noqa: F401  (installs the torchvision import hook in the worker process)

        self.encoder = load()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        from hibug_core.embeddings.compute import decode

        decoded = [decode(str(path), self.encoder.transform, self.encoder.input_size) for path in batch["path"]]
        tensors = [t for t in decoded if t is not None]
        ok = [t is not None for t in decoded]
        output: dict[str, np.ndarray] = {"hash": batch["hash"], "ok": np.array(ok)}
        if tensors:
            with torch.inference_mode():
                encoded = self.encoder.encode_images(torch.stack(tensors))
            for kind, values in encoded.items():
                values = np.asarray(values)
                full = np.zeros((len(ok), values.shape[1]), dtype=np.float32)
                full[np.array(ok)] = values
                output[kind] = full
        return output


def run_on_ray(load: Callable[[], object], hashes: list[str], paths: list[str], cache: ContentCache, *,
               options: RayOptions = RayOptions(), progress: ProgressCallback = no_progress,
               stage: str = "running on Ray") -> list[str]:
    """Run what `load` builds (in each actor) over the images (one path per content hash) on Ray, storing each
    returned part in `cache` as it comes; returns the paths that could not be read."""
    try:
        import ray
    except ImportError as error:
        raise ModelLoadError("the Ray backend needs ray: `pip install 'hibug[cluster]'`") from error
    if not ray.is_initialized():
        ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
    gpus = options.gpus_per_actor
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    path_of = dict(zip(hashes, paths))
    dataset = ray.data.from_items([{"hash": h, "path": p} for h, p in zip(hashes, paths)])
    encoded = dataset.map_batches(EncodingActor, fn_constructor_kwargs={"load": load},
                                  batch_size=options.batch_size, batch_format="numpy",
                                  compute=ray.data.ActorPoolStrategy(size=options.actors), num_gpus=gpus)
    done, unreadable = 0, []
    for batch in encoded.iter_batches(batch_size=options.save_every, batch_format="numpy"):
        ok = batch["ok"].astype(bool)
        unreadable += [path_of[str(h)] for h in batch["hash"][~ok]]
        if ok.any():
            cache.add([str(h) for h in batch["hash"][ok]],
                      {k: v[ok] for k, v in batch.items() if k not in ("hash", "ok")})
        done += len(ok)
        progress(stage, done, len(hashes))
    logger.info("ran %s on %d images on Ray", getattr(load, "args", load), done)
    return unreadable


def embed_with_ray(project, encoder: str = DEFAULT_ENCODER, *, sample_ids=None, options: RayOptions = RayOptions(),
                   progress: ProgressCallback = no_progress) -> EmbeddingSet:
    """Like embed_project, with the encoding spread over a Ray cluster."""
    samples = project.samples(sample_ids=sample_ids)
    cache = embedding_cache(project, encoder_key(encoder))
    todo, paths = cache.missing(samples)
    if todo:
        unreadable = run_on_ray(partial(load_encoder, encoder), todo, paths, cache, options=options,
                                progress=progress, stage="embedding images on Ray")
        if unreadable:
            raise TaggingError(f"{len(unreadable)} image(s) could not be read (e.g. {unreadable[0]}); fix or remove "
                               "them and run again (the other embeddings are stored)")
    return _from_cache(cache, encoder, samples)
