"""What the Overview counts of a model's sample table: the true samples per split (a detector's own detections
apart), its false positives, and a seeded draw of a split's rows (its errors, or all) to show."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from hibug_core.objects.coco import BACKGROUND, DETECTION_KIND


@dataclass(frozen=True)
class SampleCounts:
    samples: int  # the true samples (for objects: the annotated objects or people, not the model's detections)
    per_split: dict[str, int] = field(default_factory=dict)  # of those, per split
    detections: int | None = None  # the models' detections on no true object (None: the task has none)
    false_positives: int = 0  # of those, on labelled images
    pool_detections: int = 0  # of those, in the pool split


def sample_counts(samples: pd.DataFrame) -> SampleCounts:
    """The true samples per split and the detections apart (a column at a time: selecting rows copies every one)."""
    if "object_kind" not in samples:
        return SampleCounts(len(samples), samples["split"].value_counts().to_dict())
    detections = (samples["object_kind"] == DETECTION_KIND).to_numpy(bool)
    true = samples["split"][~detections]
    return SampleCounts(len(true), true.value_counts().to_dict(), int(detections.sum()),
                        int((detections & (samples["label"] == BACKGROUND).to_numpy(bool)).sum()),
                        int((detections & (samples["split"] == "pool").to_numpy(bool)).sum()))


def drawn_sample(samples: pd.DataFrame, split: str, errors_only: bool, count: int) -> tuple[pd.Index, int, int]:
    """`count` rows of `split` (its errors only, where asked) drawn with a fixed seed: their ids, how many rows they
    were drawn from, and how many of those are false positives (samples too, counted apart)."""
    listed = samples["split"] == split
    if errors_only:
        listed &= (samples["correct"] == False).fillna(False)  # noqa: E712 (pandas nullable boolean)
    rows = samples.loc[listed, "label"]  # a column: the drawn rows are taken whole by the caller
    drawn = rows.sample(n=min(count, len(rows)), random_state=0).index if len(rows) else rows.index[:0]
    return drawn, len(rows), int((rows == BACKGROUND).sum())
