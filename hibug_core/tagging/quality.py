"""Tag quality against ground truth (imported attr: columns, tags people confirmed): accuracy, precision, confusion."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class TagQuality:
    per_attribute: pd.DataFrame  # attribute, n, accuracy
    per_tag: pd.DataFrame  # attribute, tag, support, predicted, precision, recall
    confusion: dict[str, pd.DataFrame]  # attribute -> rows: true tag, columns: model tag

    def accuracy(self, attribute: str) -> float:
        return float(self.per_attribute.set_index("attribute").at[attribute, "accuracy"])


def tag_quality(model_tags: pd.DataFrame, truth: pd.DataFrame, mapping: dict[str, str] | None = None) -> TagQuality:
    """Compare model tags with true tags on the samples where both exist.

    `mapping` pairs a model attribute with a differently named truth column (e.g. dominant colour -> color).
    """
    mapping = mapping or {}
    rows, tag_rows, confusion = [], [], {}
    for attribute in model_tags.columns:
        truth_column = mapping.get(attribute, attribute)
        if truth_column not in truth.columns:
            continue
        both = pd.concat([model_tags[attribute].astype(object).rename("model"),
                          truth[truth_column].astype(object).rename("truth")], axis=1, join="inner").dropna()
        if both.empty:
            continue
        hit = both["model"].to_numpy() == both["truth"].to_numpy()
        rows.append({"attribute": attribute, "truth": truth_column, "n": len(both), "accuracy": float(hit.mean())})
        table = pd.crosstab(both["truth"], both["model"])
        confusion[attribute] = table
        for tag in sorted(set(both["truth"]) | set(both["model"])):
            predicted = int((both["model"] == tag).sum())
            support = int((both["truth"] == tag).sum())
            correct = int(((both["model"] == tag) & (both["truth"] == tag)).sum())
            tag_rows.append({"attribute": attribute, "tag": tag, "support": support, "predicted": predicted,
                             "precision": correct / predicted if predicted else np.nan,
                             "recall": correct / support if support else np.nan})
    return TagQuality(pd.DataFrame(rows, columns=["attribute", "truth", "n", "accuracy"]),
                      pd.DataFrame(tag_rows,
                                   columns=["attribute", "tag", "support", "predicted", "precision", "recall"]),
                      confusion)


def audit_precision(model_tags: pd.Series, people_tags: pd.Series, z: float = 1.96) -> pd.DataFrame:
    """Per model tag, from the images people reviewed (confirmed or corrected): how many, how many they kept, and
    the precision estimate with its Wilson interval (what a tag audit learns before all images are checked)."""
    from hibug_core.stats import wilson_interval

    both = pd.concat([model_tags.astype(object).rename("model"), people_tags.astype(object).rename("person")],
                     axis=1, join="inner").dropna()
    rows = []
    for tag, group in both.groupby("model", sort=True):
        kept = int((group["person"] == tag).sum())
        rows.append({"tag": tag, "reviewed": len(group), "confirmed": kept, "precision": kept / len(group)})
    frame = pd.DataFrame(rows, columns=["tag", "reviewed", "confirmed", "precision"])
    low, high = wilson_interval(frame["confirmed"].to_numpy(float), frame["reviewed"].to_numpy(float), z)
    return frame.assign(low=low, high=high)
