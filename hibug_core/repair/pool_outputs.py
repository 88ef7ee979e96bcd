"""What the model under test says about pool images, for the selection methods that read it: class probabilities
(margin, BADGE) and penultimate features (coreset, BADGE, diversity), aligned with the pool's rows."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.errors import HibugError


def margins(probabilities: np.ndarray) -> np.ndarray:
    """Top-1 minus top-2 probability: small means the model hesitates between two classes."""
    top = np.sort(probabilities, axis=1)
    return top[:, -1] - (top[:, -2] if probabilities.shape[1] > 1 else 0.0)


class PoolOutputsError(HibugError):
    """The model's outputs a selection method needs are not stored."""


def probabilities(project, model: str, ids: pd.Index) -> np.ndarray:
    """Class probabilities of `ids` (rows in that order)."""
    stored = project.probabilities(model) if project is not None else None
    if stored is None:
        raise PoolOutputsError(f"'{model}' has no stored class probabilities (its manifest had no prob: columns); "
                               "margin and BADGE need them: import them, or run the model with `hibug predict`")
    sample_ids, values, _ = stored
    rows = pd.Index(sample_ids).get_indexer(ids)
    if (rows < 0).any():
        raise PoolOutputsError(f"'{model}' has no probabilities for sample {ids[int(np.argmin(rows))]}; run it on "
                               "every image")
    return np.asarray(values, dtype=np.float32)[rows]


OWN_FEATURES = "model"  # the features choice that names the model's own (recorded by `hibug predict`), not an encoder


def features(project, model: str, ids: pd.Index, source: str = OWN_FEATURES) -> np.ndarray:
    """Features of `ids`: the model's own (recorded by `hibug predict`) for source OWN_FEATURES, else an encoder's
    stored embeddings."""
    from hibug_core.embeddings.compute import own_features, stored_embeddings

    if project is None:
        raise PoolOutputsError("this selection method reads stored features; pass the project")
    if source == OWN_FEATURES:
        source = own_features(project, model)
        if source is None:
            raise PoolOutputsError(f"'{model}' has no stored features (imported predictions); run it with `hibug "
                                   "predict`, or choose an encoder's embeddings for the selection's features")
    return np.asarray(stored_embeddings(project, source, ids).for_probe(), dtype=np.float32)
