"""Selection baselines from active learning: margin sampling, Coreset (k-center greedy, Sener and Savarese) and BADGE
(k-means++ on gradient embeddings, Ash et al.), on arrays (selection.py registers them as methods)."""
from __future__ import annotations

import numpy as np

from hibug_core.repair.pool_outputs import margins


def squared_distances(points: np.ndarray, centres: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Each point's squared Euclidean distance to its nearest centre (chunked: bounded memory)."""
    nearest = np.full(len(points), np.inf, dtype=np.float64)
    point_norms = (points.astype(np.float64) ** 2).sum(axis=1)
    for start in range(0, len(centres), chunk):
        block = centres[start:start + chunk].astype(np.float64)
        distances = point_norms[:, None] + (block ** 2).sum(axis=1)[None, :] - 2 * points.astype(np.float64) @ block.T
        nearest = np.minimum(nearest, distances.min(axis=1))
    return np.maximum(nearest, 0.0)


def k_center_greedy(points: np.ndarray, labelled: np.ndarray, budget: int) -> np.ndarray:
    """Coreset's greedy: repeatedly the point farthest from every labelled and already chosen point."""
    nearest = squared_distances(points, labelled) if len(labelled) else np.full(len(points), np.inf)
    chosen = []
    for _ in range(min(budget, len(points))):
        pick = int(np.argmax(nearest))
        chosen.append(pick)
        nearest = np.minimum(nearest, ((points - points[pick]) ** 2).sum(axis=1))
        nearest[pick] = -1.0
    return np.array(chosen, dtype=int)


def smallest_margins(probabilities: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """Rows by margin, smallest first; ties in a seeded order."""
    tie = np.random.default_rng(seed).random(len(probabilities))
    return np.lexsort((tie, margins(probabilities)))[:budget]


def badge(probabilities: np.ndarray, hidden: np.ndarray, budget: int, seed: int) -> np.ndarray:
    """k-means++ seeding on the last layer's gradient embeddings (p - onehot(predicted)) x h. Distances between such
    outer products factor, so they are never built: <a x h, b x g> = <a, b> <h, g>."""
    probabilities, hidden = probabilities.astype(np.float64), hidden.astype(np.float64)
    residual = probabilities.copy()
    residual[np.arange(len(residual)), residual.argmax(axis=1)] -= 1.0
    norms = (residual ** 2).sum(axis=1) * (hidden ** 2).sum(axis=1)
    rng = np.random.default_rng(seed)
    chosen = [int(np.argmax(norms))]
    nearest = np.full(len(norms), np.inf)
    while len(chosen) < min(budget, len(norms)):
        last = chosen[-1]
        inner = (residual @ residual[last]) * (hidden @ hidden[last])
        nearest = np.minimum(nearest, np.maximum(norms + norms[last] - 2 * inner, 0.0))
        nearest[chosen] = 0.0
        total = nearest.sum()
        chosen.append(int(rng.choice(len(norms), p=nearest / total)) if total > 0 else
                      int(rng.choice(np.setdiff1d(np.arange(len(norms)), chosen))))
    return np.array(chosen, dtype=int)
