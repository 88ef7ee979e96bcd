"""Several models on the same slices: one enumeration, a score per model, overlap of their worst slices and of
their failure sets."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from hibug_core.slices.report import SliceError, enumerated_slices, enumeration_for, tag_frame
from hibug_core.slices.search import SliceConfig, TagMatrix


@dataclass
class ModelComparison:
    scores: pd.DataFrame  # one row per enumerated slice: slice_id, description, depth, count, one score column per model
    worst_overlap: pd.DataFrame  # model pairs: Jaccard overlap of their worst `worst_share` slices
    failure_iou: pd.DataFrame  # model pairs: intersection over union of the samples each gets wrong
    overall: dict[str, float]


def compare_models(project, models: list[str], *, split: str = "val", config: SliceConfig = SliceConfig(),
                   worst_share: float = 0.1, attributes: list[str] | None = None) -> ModelComparison:
    if len(models) < 2:
        raise SliceError("compare at least two models")
    frames = {m: project.samples(m) for m in models}
    base = frames[models[0]]
    rows = base.index[(base["split"] == split) & base["label"].notna()]
    for model in models:
        rows = rows[frames[model].loc[rows, "prediction"].notna().to_numpy()]
    if len(rows) == 0:
        raise SliceError(f"no labelled '{split}' samples that every one of {', '.join(models)} predicts")
    tags = TagMatrix.from_frame(tag_frame(project, attributes).loc[rows])
    errors = np.stack([1.0 - frames[m].loc[rows, "score"].to_numpy(float) for m in models], axis=1)
    enumeration = enumeration_for(project, tags, errors, list(models), split, config)
    table, slice_errors = enumerated_slices(tags, enumeration)
    table = table.drop(columns="definition")
    for column, model in enumerate(models):
        table[model] = 1 - slice_errors[:, column] / table["count"]
    worst = {m: set(table.nsmallest(max(1, int(round(worst_share * len(table)))), m)["slice_id"]) for m in models}
    failed = {m: set(rows[errors[:, i] > 0.5]) for i, m in enumerate(models)}
    overlap, iou = [], []
    for a, b in combinations(models, 2):
        overlap.append({"model_a": a, "model_b": b, "worst_slices": len(worst[a]),
                        "shared": len(worst[a] & worst[b]),
                        "jaccard": len(worst[a] & worst[b]) / max(len(worst[a] | worst[b]), 1)})
        union = failed[a] | failed[b]
        iou.append({"model_a": a, "model_b": b, "failures_a": len(failed[a]), "failures_b": len(failed[b]),
                    "both": len(failed[a] & failed[b]), "iou": len(failed[a] & failed[b]) / max(len(union), 1)})
    return ModelComparison(table, pd.DataFrame(overlap), pd.DataFrame(iou),
                           {m: float(1 - errors[:, i].mean()) for i, m in enumerate(models)})
