"""Selection by expected failures: what hibug knows and the baselines do not. Each pool image's chance of being a
failure is learned on the validation split from the error slices it falls in (their failure rates, shrunk towards
the overall rate so small slices are not over-trusted) and the model's own margin; the budget goes to the most
expected failures, spread out by the model's features so one slice's near-duplicates do not take it all."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.embeddings.base import normalize_rows
from hibug_core.repair import pool_outputs
from hibug_core.repair.active_learning import squared_distances
from hibug_core.repair.pool_outputs import margins

SHRINK = 10.0  # pseudo-images at the overall error rate added to every slice's rate (empirical Bayes)


def slice_rates(masks: list[np.ndarray], failures: np.ndarray, counts: np.ndarray, overall: float,
                outside: float, own_error: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the highest shrunk failure rate of the slices it is in (leaving its own outcome out when
    `own_error` is given: validation rows must not see their own label) and which slice that is; rows in no slice
    get `outside` and -1."""
    n = len(masks[0]) if masks else 0
    best, owner = np.full(n, float(outside)), np.full(n, -1)
    for k, mask in enumerate(masks):
        held = own_error[mask] if own_error is not None else 0.0
        rate = (failures[k] - held + SHRINK * overall) / (counts[k] - (own_error is not None) + SHRINK)
        rows = np.flatnonzero(mask)
        better = (rate > best[rows]) | (owner[rows] < 0)
        best[rows[better]], owner[rows[better]] = np.broadcast_to(rate, rows.shape)[better], k
    return best, owner


def slice_failures(report, slices: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, np.ndarray,
                                                          float]:
    """On the validation rows: each row's error, each slice's mask, failures and count, and the overall error rate."""
    errors = report.evaluation["error"].to_numpy(float)
    masks = [report.tags.mask(d) for d in slices["definition"]]
    return (errors, masks, np.array([errors[m].sum() for m in masks]), np.array([m.sum() for m in masks], float),
            float(errors.mean()))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def failure_chance(report, slices: pd.DataFrame, pool: pd.DataFrame, pool_masks: list[np.ndarray],
                   project) -> tuple[np.ndarray, np.ndarray]:
    """(each pool image's estimated chance of being a failure, the slice that says most about it), from a logistic
    model fitted on the validation split: slice failure rate and the model's margin. `pool_masks`: each slice's
    pool rows."""
    from sklearn.linear_model import LogisticRegression

    evaluation = report.evaluation
    errors, val_masks, failures, counts, overall = slice_failures(report, slices)
    rest = errors[~np.any(val_masks, axis=0)]  # validation images in no taken slice
    outside = (rest.sum() + SHRINK * overall) / (len(rest) + SHRINK)
    val_rate, _ = slice_rates(val_masks, failures, counts, overall, outside, own_error=errors)
    pool_rate, owner = slice_rates(pool_masks, failures, counts, overall, outside)
    both = _margins(project, report, evaluation.index.append(pool.index))  # the stored probabilities read once
    val_margin, pool_margin = both[:len(evaluation)], both[len(evaluation):]
    x_val = np.column_stack([_logit(val_rate), val_margin])
    x_pool = np.column_stack([_logit(pool_rate), pool_margin])
    if len(np.unique(errors)) < 2:
        return pool_rate, owner
    model = LogisticRegression(max_iter=1000).fit(x_val, errors.astype(int))
    return model.predict_proba(x_pool)[:, 1], owner


def _margins(project, report, ids: pd.Index) -> np.ndarray:
    try:
        return margins(pool_outputs.probabilities(project, report.model, ids))
    except pool_outputs.PoolOutputsError:  # no probabilities: the confidence stands in for the margin
        return report.samples.loc[ids, "confidence"].fillna(0.5).to_numpy(float)


def spread_out(chance: np.ndarray, features: np.ndarray | None, budget: int,
               labelled: np.ndarray | None = None) -> np.ndarray:
    """Greedy: each step the image with the most expected failure times its distance (up to a typical one) to the
    labelled images and those already chosen, so what the model has seen, and near-duplicates of a chosen image,
    wait while far ones do not."""
    if features is None:
        return np.argsort(-chance, kind="stable")[:budget]
    points = normalize_rows(features)
    rng = np.random.default_rng(0)
    sample = points[rng.choice(len(points), min(256, len(points)), replace=False)]
    typical = np.sqrt(np.median(((sample[:, None, :] - sample[None, :, :]) ** 2).sum(-1))) or 1.0
    reach = np.ones(len(points))
    if labelled is not None and len(labelled):
        reach = np.minimum(reach, np.sqrt(squared_distances(points, normalize_rows(labelled))) / typical)
    chosen = []
    for _ in range(min(budget, len(points))):
        pick = int(np.argmax(chance * reach))
        chosen.append(pick)
        reach = np.minimum(reach, np.sqrt(((points - points[pick]) ** 2).sum(axis=1)) / typical)
        reach[pick] = -1.0
    return np.array(chosen, dtype=int)
