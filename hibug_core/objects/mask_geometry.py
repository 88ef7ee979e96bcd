"""Object attributes measured exactly from instance masks, beside the box geometry: how much of its box the mask
fills, how elongated it is, holes, pieces, how ragged its outline is against its area, and how much of its box other
objects' masks cover."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import Bins, measured_definitions
from hibug_core.attributes.schema import Attribute
from hibug_core.errors import check_fields


@dataclass(frozen=True)
class MaskGeometryConfig:
    """Bins of the measured mask attributes."""

    fill: Bins = Bins(("sparse", "partial", "solid"), (0.4, 0.75))  # mask area / box area (a disc fills 0.785)
    elongation: Bins = Bins(("compact", "elongated", "thin"), (2.0, 5.0))  # sqrt of the pixel covariance's
    # eigenvalue ratio: 1 for a disc or a square, the side ratio for a rectangle
    outline: Bins = Bins(("smooth", "moderate", "ragged"), (1.6, 3.0))  # perimeter^2 / (4 pi area): a disc's ~1
    occlusion: Bins = Bins(("none", "partial", "heavy"), (0.05, 0.5))  # largest share of its box another mask covers

    def __post_init__(self):
        check_fields(self, {name: (len(bins.edges) == len(bins.tags) - 1 and list(bins.edges) == sorted(bins.edges),
                                   "one edge fewer than tags, in increasing order")
                            for name, bins in vars(self).items()})


MASK_DESCRIPTIONS = {
    "mask fill": "the share of the object's box its mask covers",
    "mask elongation": "how drawn out the mask is (the ratio of its spread along its long and short axes)",
    "is holed": "the mask encloses background",
    "is in pieces": "the mask is in several disconnected parts",
    "outline": "how long the mask's outline is for its area (a disc's is shortest): ragged outlines are hard to trace",
    "mask occlusion": "the largest share of the object's box another object's mask covers",
}


def mask_attributes(config: MaskGeometryConfig = MaskGeometryConfig()) -> list[Attribute]:
    """The measured mask attributes' definitions, as the schema holds them."""
    tags = {"mask fill": config.fill.tags, "mask elongation": config.elongation.tags, "is holed": ("yes", "no"),
            "is in pieces": ("yes", "no"), "outline": config.outline.tags, "mask occlusion": config.occlusion.tags}
    return measured_definitions(tags, MASK_DESCRIPTIONS, "the masks")


@dataclass(frozen=True)
class MaskMeasures:
    """One mask's raw measures (before binning)."""

    fill: float
    elongation: float
    holes: int
    pieces: int
    outline: float


def measure_mask(pixels: np.ndarray) -> MaskMeasures:
    """The raw measures of one (height, width) bool mask; an empty mask measures as nothing (fill 0, no piece)."""
    rows, columns = np.nonzero(pixels)
    if not len(rows):
        return EMPTY
    return measure_crops([pixels[rows.min():rows.max() + 1, columns.min():columns.max() + 1]])[0]


EMPTY = MaskMeasures(0.0, 1.0, 0, 0, 1.0)


def measure_crops(crops: list[np.ndarray]) -> list[MaskMeasures]:
    """The raw measures of masks each cropped to its box (non-empty (height, width) bool arrays), measured together
    on canvases (hibug_core.objects.masks.laid_out): one labelling of a canvas counts every crop's pieces
    (4-connected), one of its background every crop's holes (the rings join all the background that reaches a crop's
    edge into one region), and per-row sums give areas, moments and outlines (pixels with a 4-neighbour outside)."""
    from hibug_core.objects.masks import canvas_groups

    measured: list[MaskMeasures | None] = [None] * len(crops)
    for group in canvas_groups([crop.shape for crop in crops]):
        for i, measures in zip(group, _measure_group([crops[i] for i in group])):
            measured[i] = measures
    return measured


def _measure_group(crops: list[np.ndarray]) -> list[MaskMeasures]:
    from scipy import ndimage

    from hibug_core.objects.masks import laid_out

    canvas, starts, tile = laid_out(crops)
    local_rows = np.arange(len(canvas)) - starts[tile]
    # 1. Areas and the second moments of each crop's pixels about their mean (as numpy's cov, n - 1).
    pixels = canvas.astype(np.float64)
    columns = np.arange(canvas.shape[1], dtype=np.float64)
    count, column_sum, column_squares = pixels.sum(axis=1), pixels @ columns, pixels @ columns ** 2
    area = np.add.reduceat(count, starts)
    mean_row = np.add.reduceat(count * local_rows, starts) / area
    mean_column = np.add.reduceat(column_sum, starts) / area
    row_offset = local_rows - mean_row[tile]
    spread_rows = np.add.reduceat(count * row_offset ** 2, starts)
    spread_columns = np.add.reduceat(column_squares, starts) - mean_column * np.add.reduceat(column_sum, starts)
    spread_both = np.add.reduceat(row_offset * (column_sum - mean_column[tile] * count), starts)
    scale = np.where(area > 1, 1.0 / np.maximum(area - 1, 1), 0.0)
    a, d, b = spread_columns * scale + 1 / 12.0, spread_rows * scale + 1 / 12.0, spread_both * scale  # + a pixel's
    middle, half_gap = (a + d) / 2, np.sqrt(((a - d) / 2) ** 2 + b ** 2)  # own spread: a 1-pixel line is finite
    elongation = np.sqrt((middle + half_gap) / (middle - half_gap))
    # 2. Outlines: the pixels not inside (all four neighbours in the mask).
    inner = (canvas[1:-1, 1:-1] & canvas[:-2, 1:-1] & canvas[2:, 1:-1] & canvas[1:-1, :-2] & canvas[1:-1, 2:])
    perimeter = area - np.add.reduceat(np.r_[0, inner.sum(axis=1), 0].astype(np.float64), starts)
    # 3. Pieces and holes. Labels are given in reading order and no region spans two crops, so a crop's regions are
    # the labels above the highest of the crops before it; the background's first region is the rings'.
    labels, _ = ndimage.label(canvas)
    pieces = np.diff(np.maximum.accumulate(np.maximum.reduceat(labels.max(axis=1), starts)), prepend=0)
    background, _ = ndimage.label(~canvas)
    holes = np.diff(np.maximum.accumulate(np.maximum.reduceat(background.max(axis=1), starts)), prepend=1)
    boxes = np.array([crop.size for crop in crops])
    return [MaskMeasures(float(area[k] / boxes[k]), float(elongation[k]), int(holes[k]), int(pieces[k]),
                         float(perimeter[k] * perimeter[k] / (4 * math.pi * area[k]))) for k in range(len(crops))]


def measure_masks(masks: list[np.ndarray], image_ids: np.ndarray,
                  config: MaskGeometryConfig = MaskGeometryConfig()) -> pd.DataFrame:
    """Each mask's measured tags, for callers that hold pixels: masks: (height, width) bool arrays of their images;
    image_ids: each one's image (the masks of one image occlude one another). Measured as the store's masks are."""
    import json

    from hibug_core.objects.masks import from_pixels

    texts = [json.dumps(from_pixels(m[None])[0]) for m in masks]
    return measure_stored_masks(np.asarray(texts, dtype=object), image_ids, config)


def measure_stored_masks(stored: np.ndarray, image_ids: np.ndarray,
                         config: MaskGeometryConfig = MaskGeometryConfig()) -> pd.DataFrame:
    """Each stored mask's measured tags (hibug_core.objects.masks.stored: one per object), each measured on its own
    box, read from its run-length encoding without drawing the whole image; its occlusion from the other masks of its
    image whose boxes meet its own."""
    from hibug_core.objects.masks import box_pixels, library_forms, run_lengths, stored_boxes

    measured, occlusion, crops = [None] * len(stored), np.zeros(len(stored)), [None] * len(stored)
    image_ids = np.asarray(image_ids)
    for image in np.unique(image_ids):
        members = np.flatnonzero(image_ids == image)
        forms = library_forms([stored[i] for i in members])
        runs, boxes = run_lengths(forms), stored_boxes(forms).astype(np.int64)
        for k, i in enumerate(members):
            if boxes[k][2] and boxes[k][3]:
                crops[i] = box_pixels(*runs[k], tuple(boxes[k]))
            else:
                measured[i] = EMPTY
        left, top = boxes[:, 0], boxes[:, 1]
        right, bottom = left + boxes[:, 2], top + boxes[:, 3]
        for k, i in enumerate(members):
            if crops[i] is None:
                continue
            # another mask's pixels in this one's box: its own crop (it lies within its box) cut to where they meet
            shares = [0.0]
            for j in np.flatnonzero((left < right[k]) & (left[k] < right) & (top < bottom[k]) & (top[k] < bottom)):
                if j == k or crops[members[j]] is None:
                    continue
                cut = crops[members[j]][max(top[k], top[j]) - top[j]:min(bottom[k], bottom[j]) - top[j],
                                        max(left[k], left[j]) - left[j]:min(right[k], right[j]) - left[j]]
                shares.append(cut.sum() / (boxes[k][2] * boxes[k][3]))
            occlusion[i] = max(shares)
    drawn = [i for i in range(len(stored)) if measured[i] is None]
    for i, measures in zip(drawn, measure_crops([crops[i] for i in drawn])):
        measured[i] = measures
    return mask_tags(measured, occlusion, config)


def mask_tags(measured: list[MaskMeasures], occlusion: np.ndarray,
              config: MaskGeometryConfig = MaskGeometryConfig()) -> pd.DataFrame:
    """The tags of masks measured so (occlusion: the largest share of each one's box another mask covers)."""
    def tag(bins: Bins, values) -> np.ndarray:
        return np.asarray(bins.tags, dtype=object)[bins.tag(np.asarray(values, dtype=np.float64))]

    return pd.DataFrame({
        "mask fill": tag(config.fill, [m.fill for m in measured]),
        "mask elongation": tag(config.elongation, [m.elongation for m in measured]),
        "is holed": np.where([m.holes > 0 for m in measured], "yes", "no").astype(object),
        "is in pieces": np.where([m.pieces > 1 for m in measured], "yes", "no").astype(object),
        "outline": tag(config.outline, [m.outline for m in measured]),
        "mask occlusion": tag(config.occlusion, occlusion),
    }, index=pd.RangeIndex(len(measured)))
