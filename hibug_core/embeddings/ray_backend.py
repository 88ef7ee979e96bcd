"""Embedding on a cluster: Ray Data batch inference (map_batches over an actor pool, one GPU per actor when there
are GPUs); results land in the same per-content cache as local embedding."""
from __future__ import annotations

import logging

import numpy as np

from hibug_core.embeddings.compute import EmbeddingSet, _from_cache, embedding_cache
from hibug_core.embeddings.registry import DEFAULT_ENCODER, encoder_key
from hibug_core.errors import ModelLoadError, TaggingError
from hibug_core.progress import ProgressCallback, no_progress

logger = logging.getLogger(__name__)


class EncoderActor:
    """Loads the encoder once per actor; turns a batch of paths into embeddings (unreadable files flagged)."""

    def __init__(self, spec: str):
        import hibug_core  # noqa: F401  (installs the torchvision import hook in the worker process)
        from hibug_core.embeddings.registry import load_encoder

        self.encoder = load_encoder(spec)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        from hibug_core.embeddings.compute import decode

        decoded = [decode(str(path), self.encoder.transform, self.encoder.input_size) for path in batch["path"]]
        tensors = [t for t in decoded if t is not None]
        ok = [t is not None for t in decoded]
        output: dict[str, np.ndarray] = {"hash": batch["hash"], "ok": np.array(ok)}
        if tensors:
            encoded = self.encoder.encode_images(torch.stack(tensors))
            for kind, values in encoded.items():
                full = np.zeros((len(ok), values.shape[1]), dtype=np.float32)
                full[np.array(ok)] = values
                output[kind] = full
        return output


def embed_with_ray(project, encoder: str = DEFAULT_ENCODER, *, sample_ids=None, batch_size: int = 64,
                   actors: int = 2, gpus_per_actor: float | None = None, address: str | None = None,
                   save_every: int = 4096, progress: ProgressCallback = no_progress) -> EmbeddingSet:
    """Like embed_project, with the encoding spread over a Ray cluster (`address`; default: a local instance)."""
    try:
        import ray
    except ImportError as error:
        raise ModelLoadError("the Ray backend needs ray: `pip install 'hibug[cluster]'`") from error
    samples = project.samples(sample_ids=sample_ids)
    cache = embedding_cache(project, encoder_key(encoder))
    todo, paths = cache.missing(samples)
    if todo:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        if gpus_per_actor is None:
            gpus_per_actor = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
        dataset = ray.data.from_items([{"hash": h, "path": p} for h, p in zip(todo, paths)])
        encoded = dataset.map_batches(EncoderActor, fn_constructor_kwargs={"spec": encoder}, batch_size=batch_size,
                                      batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=actors),
                                      num_gpus=gpus_per_actor)
        done, unreadable = 0, []
        for batch in encoded.iter_batches(batch_size=save_every, batch_format="numpy"):
            ok = batch["ok"].astype(bool)
            unreadable += [str(h) for h in batch["hash"][~ok]]
            kinds = {k: v[ok] for k, v in batch.items() if k not in ("hash", "ok")}
            if ok.any():
                cache.add([str(h) for h in batch["hash"][ok]], kinds)
            done += len(ok)
            progress("embedding images on Ray", done, len(todo))
        logger.info("embedded %d images on Ray with %s", done, encoder)
        if unreadable:
            raise TaggingError(f"{len(unreadable)} image(s) could not be read (content {unreadable[0]}); fix or remove "
                               "them and run again (the other embeddings are stored)")
    return _from_cache(cache, encoder, samples)
