"""A model of objects' false positives as a measure of their own: of its detections on a split (those that found an
object, and those that found none), the share that found none, per slice of the detections' tags, against the share
over all of them; the same enumeration and significance rule as the error slices, never mixed into their baseline."""
from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from hibug_core.objects.matching import TRUE_POSITIVE
from hibug_core.rows import rows_by_id
from hibug_core.slices.report import SliceError, false_positive_rows, tag_frame
from hibug_core.slices.search import SliceConfig, TagMatrix, find_error_slices


@dataclass(frozen=True)
class FalsePositives:
    """A split's detections: how many, how many found nothing, and the slices where those gather."""

    model: str
    split: str
    detections: int
    false: int
    slices: pd.DataFrame  # ranked like error slices; score: the share of the slice's detections that found an object

    @property
    def share(self) -> float:
        return self.false / self.detections if self.detections else 0.0

    def headline(self) -> str:
        """One line: the false positives measured apart, and where they gather."""
        if not self.false:
            return f"No false positives of {self.model} on {self.split}."
        top = "; ".join(f"{row.description} ({1 - row.score:.0%} of its {int(row.count):,})"
                        for row in self.slices.head(3).itertuples())
        return (f"False positives, measured apart: {self.false:,} of {self.model}'s {self.detections:,} detections on "
                f"{self.split} ({self.share:.1%}) found no object; " + (
                    f"significantly more among: {top}." if top else "no slice of them stands out significantly."))


def false_positive_slices(project, model: str, *, split: str = "val", config: SliceConfig = SliceConfig(),
                          tags: str = "in force") -> FalsePositives:
    """The slices of `model`'s detections on `split` (tags in force of each: a false positive's own box and crop, a
    found object's) where a significantly larger share found no object than over all its detections (the error-slice
    rule: below the cut by C, Benjamini-Hochberg at config.alpha, worse than each parent). SliceError for a model
    with no detections."""
    # 1. The detections: the objects it found and its false positives, on the split.
    samples = project.samples(model)
    objects = project.objects(model, columns=["outcome"])
    if objects.empty:
        raise SliceError(f"'{model}' has no detections: false positives are a measure of object models")
    false = false_positive_rows(samples, split).to_numpy(bool)
    found = (samples["split"] == split).to_numpy(bool) & (
        rows_by_id(objects["outcome"], samples.index) == TRUE_POSITIVE).to_numpy(bool)
    detections = false | found
    rows = samples.index[detections]
    if not len(rows):
        raise SliceError(f"'{model}' has no detections on '{split}'")
    # 2. Their tags, and each one's error: 1 where it found nothing.
    matrix = TagMatrix.from_frame(tag_frame(project, None, tags, allow_empty=True), rows).without(untagged=True)
    errors = false[detections].astype(float)
    slices = pd.DataFrame()
    if matrix.attributes and false.any():
        slices = find_error_slices(matrix, errors, replace(config, by_class=False))
    return FalsePositives(model, split, len(rows), int(false.sum()), slices)


__all__ = ["FalsePositives", "false_positive_slices"]
