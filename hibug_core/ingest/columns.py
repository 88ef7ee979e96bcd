"""Manifest columns every task's manifest has, read one way for all of them: the image paths and the splits (an
empty or unknown split said with the nearest known one)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.errors import Issues, nearest

SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val", "training": "train",
                 "testing": "test", "unlabeled": "pool", "unlabelled": "pool"}


def parse_numbers(text: pd.Series) -> np.ndarray:
    """Floats of a column of text, NaN where empty or not a number (pyarrow's cast when every cell parses: several
    times faster than pandas.to_numeric at a million rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        cells = pa.array(text, type=pa.string())
        return pc.cast(pc.if_else(pc.equal(cells, ""), None, cells), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # some cells are not numbers: they are named one by one
        return pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(dtype=float)


def check_images(frame: pd.DataFrame, column: str, issues: Issues) -> None:
    """Every row names an image."""
    for i in np.flatnonzero((frame[column] == "").to_numpy()):
        issues.add(i, column, "empty image path")


def read_splits(frame: pd.DataFrame, column: str | None, config: IngestConfig, issues: Issues) -> pd.Series:
    """Each row's split, lower-cased (the default split where the manifest has no split column); an empty or unknown
    one is an issue that names the allowed splits and the nearest of them."""
    if column is None:
        return pd.Series([config.default_split] * len(frame))
    splits = frame[column].str.lower()
    allowed = ", ".join(config.allowed_splits)
    for i in np.flatnonzero(~splits.isin(config.allowed_splits).to_numpy()):
        value = frame[column].iat[i]
        if value == "":
            issues.add(i, column, f"empty split; use one of {allowed}")
            continue
        guess = SPLIT_ALIASES.get(value.lower()) or nearest(value, config.allowed_splits)
        issues.add(i, column, f"unknown split '{value}'; use one of {allowed}" +
                   (f" (did you mean '{guess}'?)" if guess else ""))
    return splits


# One grammar for every task's model columns: the default model's are bare ('prediction', 'confidence', 'pred_box'),
# a named model's are '<prefix>:<model>' ('pred:<model>', 'confidence:<model>', 'pred_box:<model>').
NAMED_PREFIX = {"prediction": "pred"}  # roles whose named form is spelt otherwise


def model_column(role: str, model: str | None) -> str:
    """The column of a model's `role`: bare for the default model (None), '<prefix>:<model>' for a named one."""
    return role if model is None else f"{NAMED_PREFIX.get(role, role)}:{model}"


def named_models(columns: list[str], role: str) -> list[str]:
    """The models that name themselves in a `role` column ('pred:a', 'pred:b' for role 'prediction'), in order; an
    empty name is kept as '' for the caller to refuse."""
    prefix = NAMED_PREFIX.get(role, role) + ":"
    return [column[len(prefix):].strip() for column in columns if column.startswith(prefix)]
