"""Which attributes a tagging run covers, and the class noun each image's prompts use."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.attributes.schema import Attribute, AttributeSchema
from hibug_core.errors import TaggingError


def chosen_attributes(schema: AttributeSchema, names: list[str] | None) -> list[Attribute]:
    if names is None:
        return schema.enabled()
    unknown = [n for n in names if n not in schema.names()]
    if unknown:
        raise TaggingError(f"unknown attribute(s) {', '.join(unknown)}; the schema has: {', '.join(schema.names())}")
    return [schema[n] for n in names]


def prompt_labels(project, samples: pd.DataFrame, model: str | None) -> np.ndarray:
    """The class noun of each image for its prompts: its label, else the model's prediction, else None."""
    labels = samples["label"].astype(object).to_numpy().copy()
    models = project.models()
    if model is None and models:
        model = models[0]
    if model is not None and pd.isna(samples["label"]).any():
        predictions = project.samples(model)["prediction"].reindex(samples.index).astype(object).to_numpy()
        missing = pd.isna(samples["label"]).to_numpy()
        labels[missing] = predictions[missing]
    return np.array([None if pd.isna(v) else v for v in labels], dtype=object)
