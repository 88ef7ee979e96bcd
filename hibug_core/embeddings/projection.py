"""A 2-D map of the images (UMAP after PCA, seeded) for the embedding map: computed once per set of image contents
and settings, stored in the project, read back per sample."""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from hibug_core.embeddings.compute import encoder_views, stored_embeddings
from hibug_core.embeddings.registry import encoder_key
from hibug_core.errors import TaggingError
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MapConfig:
    method: str = "umap"  # a LAYOUTS entry
    pca_dims: int = 50  # UMAP runs on this many principal components: faster, and little is lost
    n_neighbors: int = 15
    min_dist: float = 0.1
    max_fit: int = 20_000  # UMAP is fitted on at most this many distinct images; the others are placed by transform
    seed: int = 0


def _name(encoder: str, hashes: np.ndarray, config: MapConfig) -> str:
    digest = hashlib.blake2b(digest_size=8)
    digest.update(json.dumps(asdict(config), sort_keys=True).encode())
    for value in np.sort(hashes):
        digest.update(value.encode())
    return f"maps/{encoder_key(encoder)}/{config.method}-{digest.hexdigest()}"


def _layout(vectors: np.ndarray, config: MapConfig, progress: ProgressCallback) -> np.ndarray:
    from sklearn.decomposition import PCA

    entry = LAYOUTS.find(config.method)
    if entry is None:
        raise TaggingError(f"unknown map method '{config.method}'; use one of {', '.join(LAYOUTS.names())}")
    progress("map: principal components", 0, 1)
    dims = min(config.pca_dims, vectors.shape[1], max(len(vectors) - 1, 1))
    reduced = PCA(n_components=dims, random_state=config.seed).fit_transform(vectors)
    if len(vectors) < 5:  # too few for UMAP's neighbours: the first two components say it all
        return _first_components(reduced, config, progress)
    return entry.build(reduced, config, progress)


LAYOUTS = Registry("map layout")  # each: (principal components, config, progress) -> (n, 2) positions


@LAYOUTS.register("umap", "UMAP on the principal components (seeded): neighbours kept together")
def _umap(reduced: np.ndarray, config: MapConfig, progress: ProgressCallback) -> np.ndarray:
    import umap  # first import compiles numba code (cached afterwards)

    rng = np.random.default_rng(config.seed)
    fit_rows = np.sort(rng.choice(len(reduced), config.max_fit, replace=False)) if len(reduced) > config.max_fit \
        else np.arange(len(reduced))
    progress("map: UMAP", 0, 1)
    reducer = umap.UMAP(n_neighbors=min(config.n_neighbors, len(fit_rows) - 1), min_dist=config.min_dist,
                        random_state=config.seed, n_jobs=1)
    layout = np.empty((len(reduced), 2), dtype=np.float32)
    layout[fit_rows] = reducer.fit_transform(reduced[fit_rows])
    rest = np.setdiff1d(np.arange(len(reduced)), fit_rows)
    if len(rest):
        progress("map: placing the other images", 0, 1)
        layout[rest] = reducer.transform(reduced[rest])
    return layout


@LAYOUTS.register("pca", "the first two principal components: instant, less separated")
def _first_components(reduced: np.ndarray, config: MapConfig, progress: ProgressCallback) -> np.ndarray:
    return reduced[:, :2] if reduced.shape[1] >= 2 else np.c_[reduced, np.zeros(len(reduced))]


def compute_map(project, encoder: str, *, sample_ids=None, config: MapConfig = MapConfig(),
                progress: ProgressCallback = no_progress) -> pd.DataFrame:
    """x, y per sample (index: sample id) from the stored embeddings of `encoder`; computed once and stored."""
    stored = stored_map(project, encoder, sample_ids=sample_ids, config=config)
    if stored is not None:
        return stored
    embeddings = stored_embeddings(project, encoder, sample_ids)
    hashes, first = np.unique(embeddings.hashes, return_index=True)
    layout = _layout(embeddings.embedding[first], config, progress)
    save_map(project, encoder, hashes, layout, config)
    progress("map: done", 1, 1)
    return _per_sample(embeddings.sample_ids, embeddings.hashes, hashes, layout)


def save_map(project, encoder: str, hashes: np.ndarray, layout: np.ndarray, config: MapConfig = MapConfig()) -> None:
    """Store `layout` (x, y per distinct content hash, in the order of `hashes`) as the map of these contents by
    `encoder` and `config`, where stored_map finds it."""
    project.arrays.save(_name(encoder, hashes, config), hashes=np.asarray(hashes).astype(str),
                        xy=np.asarray(layout, dtype=np.float32))


def stored_map(project, encoder: str, *, sample_ids=None, config: MapConfig = MapConfig()) -> pd.DataFrame | None:
    """The stored map of these samples' images (objects: their crops), or None when it has not been computed for
    exactly them."""
    samples = encoder_views(project, project.samples(sample_ids=sample_ids), crops=True)
    hashes = samples["content_hash"].to_numpy()
    name = _name(encoder, pd.unique(hashes), config)  # _name sorts the distinct hashes (a million rows: not sorted)
    if not project.arrays.exists(name):
        return None
    arrays = project.arrays.load_recomputable(name)  # a damaged map is computed again, as if it had never been
    if arrays is None:
        return None
    return _per_sample(samples.index.to_numpy(), hashes, arrays["hashes"], arrays["xy"])


def _per_sample(sample_ids: np.ndarray, hashes: np.ndarray, distinct: np.ndarray, layout: np.ndarray) -> pd.DataFrame:
    position = pd.Index(distinct).get_indexer(hashes)
    return pd.DataFrame({"x": layout[position, 0], "y": layout[position, 1]}, index=pd.Index(sample_ids, name="id"))
