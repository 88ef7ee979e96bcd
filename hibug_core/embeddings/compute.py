"""Embed a project's images: distinct contents only, batched through a DataLoader that decodes in parallel."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.embeddings.base import Encoder
from hibug_core.embeddings.cache import ContentCache
from hibug_core.embeddings.registry import DEFAULT_ENCODER, encoder_key, load_encoder
from hibug_core.errors import TaggingError, unreadable_images
from hibug_core.image_loader import open_image
from hibug_core.native_memory import reuse_freed_tensor_memory
from hibug_core.objects.views import crops_of, object_views
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store.recorded_models import recorded_model

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbedConfig:
    """How images are batched and decoded; None means chosen for this machine."""

    batch_size: int = 64
    workers: int | None = None  # decoding processes; default: 1 on small machines, up to 4
    torch_threads: int | None = None  # default: every core
    save_every: int = 4096  # images per stored part at most, so an interrupted run keeps its work...
    save_every_s: float = 5.0  # ...and a part at least this often, so a slow encoder's run keeps it too


@dataclass
class EmbeddingSet:
    """Embeddings of samples, aligned with sample_ids; backbone features are read only when asked for."""

    encoder: str
    sample_ids: np.ndarray
    embedding: np.ndarray
    cache: ContentCache
    hashes: np.ndarray

    def for_probe(self) -> np.ndarray:
        """The richest representation for training a classifier: backbone features when the encoder has them."""
        return self.cache.get(self.hashes, "features") if "features" in self.cache.kinds() else self.embedding


def decode(path: str, transform, size_hint: int, crop=None):
    """The encoder's input tensor of one image file (or of its region `crop`: left, top, right, bottom), or None
    (logged) when the file cannot be read."""
    try:
        image = open_image(path, size_hint=None if crop is not None else size_hint)
        return transform(image.crop(tuple(crop)) if crop is not None else image)
    except (OSError, ValueError) as error:
        logger.warning("cannot read %s: %s", path, error)
        return None


class _ImageFiles:
    """Map-style dataset: index -> (transformed image tensor, ok flag); unreadable files become zeros."""

    def __init__(self, paths: list[str], transform, size_hint: int, crops: list | None = None):
        self.paths, self.transform, self.size_hint = paths, transform, size_hint
        self.crops = crops or [None] * len(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int):
        import torch

        tensor = decode(self.paths[index], self.transform, self.size_hint, self.crops[index])
        if tensor is None:
            return torch.zeros(self.transform(_blank(self.size_hint)).shape), False
        return tensor, True


def _blank(size: int):
    from PIL import Image

    return Image.new("RGB", (size, size))


def configure_threads(config: EmbedConfig) -> int:
    """Give torch every core for the forward pass, and the allocator the settings batches of tensors want;
    decoding overlaps in loader workers."""
    import torch

    reuse_freed_tensor_memory()
    cores = os.cpu_count() or 1
    torch.set_num_threads(config.torch_threads or cores)
    return config.workers if config.workers is not None else min(4, max(1, cores // 4))


def encode_paths(encoder: Encoder, paths: list[str], on_chunk, config: EmbedConfig = EmbedConfig(),
                 progress: ProgressCallback = no_progress, stage: str = "embedding images",
                 crops: list | None = None) -> np.ndarray:
    """Encode images from files (or their regions `crops`, one per path), handing every `config.save_every` images
    (or what `config.save_every_s` seconds encoded, if fewer) to on_chunk(start, stop, arrays, readable) so they are
    stored as the work is done (nothing else is kept); returns which files could be read."""
    from torch.utils.data import DataLoader

    workers = configure_threads(config)
    loader = DataLoader(_ImageFiles(paths, encoder.transform, encoder.input_size, crops), batch_size=config.batch_size,
                        num_workers=workers, shuffle=False, persistent_workers=False,
                        prefetch_factor=4 if workers else None)
    readable: list[np.ndarray] = []
    pending: dict[str, list[np.ndarray]] = {}
    pending_ok: list[np.ndarray] = []
    pending_start = done = 0
    saved_at = time.monotonic()
    for batch, ok in loader:
        for kind, values in encoder.encode_images(batch).items():
            pending.setdefault(kind, []).append(values)
        readable.append(ok.numpy())
        pending_ok.append(ok.numpy())
        done += len(batch)
        if (done - pending_start >= config.save_every or done == len(paths)
                or time.monotonic() - saved_at >= config.save_every_s):
            on_chunk(pending_start, done, {k: np.concatenate(v) for k, v in pending.items()},
                     np.concatenate(pending_ok))
            pending, pending_ok, pending_start, saved_at = {}, [], done, time.monotonic()
        progress(stage, done, len(paths))  # after storing: a cancel here keeps the chunk just done
    return np.concatenate(readable) if readable else np.zeros(0, dtype=bool)


def embedding_cache(project, encoder_key: str) -> ContentCache:
    return ContentCache(project, f"embeddings/{encoder_key}")


MODEL_PREFIX = "model:"  # "model:<name>": the own features of a model `hibug predict` ran, used as an encoder's


def own_features(project, model: str) -> str | None:
    """The encoder name ("model:<name>") of a model's own stored features, or None when it has none (imported
    predictions)."""
    recorded = recorded_model(project, model)
    return MODEL_PREFIX + model if recorded is not None and recorded.weights else None


def model_cache(project, model: str) -> ContentCache:
    """Per image content, the outputs of a model run by `hibug predict` (probabilities, features, embedding)."""
    recorded = recorded_model(project, model)
    if recorded is None or not recorded.weights:
        raise TaggingError(f"'{model}' was not run by hibug, so it has no features (imported predictions have "
                           "none); run it with `hibug predict`")
    return ContentCache(project, f"models/{recorded.weights}", dtype=np.float32)


def embed_project(project, encoder: str | Encoder = DEFAULT_ENCODER, *, sample_ids=None,
                  config: EmbedConfig = EmbedConfig(), progress: ProgressCallback = no_progress,
                  crops: bool = True) -> EmbeddingSet:
    """Embeddings of the project's samples (all, or `sample_ids`), encoding only contents not stored yet; a model's
    own features ("model:<name>") are what `hibug predict` stored. Object samples are seen as their crops (with a
    context margin), or with crops=False as their whole images; each view is cached once."""
    if isinstance(encoder, str) and encoder.startswith(MODEL_PREFIX):
        return stored_embeddings(project, encoder, sample_ids)
    encoder = load_encoder(encoder) if isinstance(encoder, str) else encoder
    samples = encoder_views(project, project.samples(sample_ids=sample_ids), crops)
    cache = embedding_cache(project, encoder.key)
    missing = cache.missing_rows(samples)
    todo, paths, regions = missing["content_hash"].tolist(), missing["image_path"].tolist(), crops_of(missing)
    if todo:

        def store(start: int, stop: int, arrays: dict[str, np.ndarray], readable: np.ndarray) -> None:
            # Unreadable images are never cached, so fixing the file and re-running embeds them.
            cache.add([h for h, ok in zip(todo[start:stop], readable) if ok],
                      {k: v[readable] for k, v in arrays.items()})

        logger.info("embedding %d new images with %s", len(todo), encoder.spec)
        readable = encode_paths(encoder, paths, store, config, progress, crops=regions)
        unreadable = [p for p, ok in zip(paths, readable) if not ok]
        if unreadable:
            raise TaggingError(unreadable_images(unreadable, "the other embeddings"))
    return _from_cache(cache, encoder.spec, samples)


def stored_embeddings(project, encoder: str, sample_ids=None, *, crops: bool = True) -> EmbeddingSet:
    """Embeddings already stored, without loading the encoder; a clear error when some are missing. "model:<name>"
    reads the own features of a model `hibug predict` ran."""
    if encoder.startswith(MODEL_PREFIX):
        return _from_cache(model_cache(project, encoder[len(MODEL_PREFIX):]), encoder,
                           project.samples(sample_ids=sample_ids))
    return _from_cache(embedding_cache(project, encoder_key(encoder)), encoder,
                       encoder_views(project, project.samples(sample_ids=sample_ids), crops))


def encoder_views(project, samples: pd.DataFrame, crops: bool) -> pd.DataFrame:
    """The samples as an encoder sees them: a sample with a box as its crop when `crops` (hibug_core.objects.views),
    any other as its image."""
    objects = project.objects() if crops else None
    return object_views(samples, objects) if objects is not None and len(objects) else samples


def _from_cache(cache: ContentCache, spec: str, samples: pd.DataFrame) -> EmbeddingSet:
    hashes = samples["content_hash"].to_numpy()
    try:
        return EmbeddingSet(spec, samples.index.to_numpy(), cache.get(hashes), cache, hashes)
    except KeyError as error:
        raise TaggingError(f"{error.args[0]} (encoder {spec}: `hibug embed --encoder {spec}`)") from None
