"""Arrays stored per image content hash (embeddings per encoder, pixel measures), so nothing is computed twice."""
from __future__ import annotations

import time
import uuid

import numpy as np
import pandas as pd

from hibug_core.cache import BoundedCache

# Loaded parts per (arrays folder, cache folder, the parts there): a new part is a new key, so never stale.
LOADED_PARTS = BoundedCache("content cache parts", max_items=4)


class ContentCache:
    """Append-only parts under arrays/<folder>/; reads join them by content hash."""

    def __init__(self, project, folder: str, dtype=np.float16):
        self.project = project
        self.prefix = f"{folder}/"
        self.dtype = dtype

    def _load(self) -> tuple[pd.Index, dict[str, np.ndarray]]:
        names = tuple(self.project.arrays.names(self.prefix))

        def load() -> tuple[pd.Index, dict[str, np.ndarray]]:
            parts = [part for part in map(self.project.arrays.load_recomputable, names) if part is not None]
            hashes = pd.Index(np.concatenate([p["hashes"] for p in parts]) if parts else np.array([], dtype=str))
            keys = [k for k in (parts[0] if parts else {}) if k != "hashes"]
            arrays = {k: np.concatenate([p[k] for p in parts]) for k in keys}
            first = ~hashes.duplicated()  # two jobs that embedded the same images at once each stored a part
            if not first.all():
                hashes, arrays = hashes[first], {k: v[first] for k, v in arrays.items()}
            return hashes, arrays

        return LOADED_PARTS.get_or_make((str(self.project.arrays.root), self.prefix, names), load)

    def missing(self, samples: pd.DataFrame) -> tuple[list[str], list[str]]:
        """The distinct contents of `samples` with nothing stored yet (first-seen order), and one image path each."""
        todo = self.missing_rows(samples)
        return todo["content_hash"].tolist(), todo["image_path"].tolist()

    def missing_rows(self, samples: pd.DataFrame) -> pd.DataFrame:
        """The first row of each distinct content of `samples` with nothing stored yet (first-seen order), with all
        its columns (an object view's `crop` too)."""
        stored, _ = self._load()
        first = samples.drop_duplicates("content_hash")
        return first[~first["content_hash"].isin(stored)] if len(stored) else first

    def add(self, hashes: list[str], arrays: dict[str, np.ndarray]) -> None:
        """Store one part (embeddings in float16: half the size, cosine similarities kept to about 1e-3)."""
        name = f"{self.prefix}part-{time.time_ns()}-{uuid.uuid4().hex[:6]}"
        self.project.arrays.save(name, hashes=np.array(hashes, dtype=str),
                                 **{k: v.astype(self.dtype) for k, v in arrays.items()})

    def get(self, hashes, kind: str = "embedding") -> np.ndarray:
        """float32 rows aligned with `hashes`; KeyError names the first hash that was never embedded."""
        stored, arrays = self._load()
        position = stored.get_indexer(pd.Index(list(hashes)))
        if (position < 0).any():
            raise KeyError(f"image {list(hashes)[int(np.argmin(position))]} has no stored embedding; compute it first")
        if kind not in arrays:
            raise KeyError(f"no '{kind}' stored under {self.prefix}; there is {', '.join(arrays) or 'nothing'}")
        return arrays[kind][position].astype(np.float32)

    def kinds(self) -> list[str]:
        return list(self._load()[1])

    def __len__(self) -> int:
        return len(self._load()[0])
