"""Measured attributes that need no model (HiBug2's "global" attributes): computed from pixels, then binned."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import COLOUR_NAMES, MeasuredConfig, measure_bins
from hibug_core.attributes.schema import Attribute
from hibug_core.embeddings.cache import ContentCache
from hibug_core.embeddings.compute import encoder_views
from hibug_core.errors import TaggingError, unreadable_images
from hibug_core.image_loader import open_image
from hibug_core.objects.views import crops_of
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.store.tag_store import TagResult

PIXEL_MEASURES = ("brightness", "contrast", "saturation", "colourfulness", "sharpness", "noise level",
                  "dominant colour")
MEASURE_SIZE = 256  # images are measured at most this big, so a 12-megapixel photo costs what a thumbnail does


def colour_names(rgb: np.ndarray) -> np.ndarray:
    """Index into COLOUR_NAMES for every pixel of an (n, 3) array in 0..1."""
    high, low = rgb.max(axis=1), rgb.min(axis=1)
    chroma = high - low
    saturation = np.where(high > 0, chroma / np.maximum(high, 1e-6), 0.0)
    r, g, b = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    safe = np.maximum(chroma, 1e-6)
    hue = np.select([high == r, high == g], [((g - b) / safe) % 6, (b - r) / safe + 2], (r - g) / safe + 4) * 60.0
    hue_names = np.select(
        [(hue < 15) | (hue >= 345), hue < 45, hue < 70, hue < 160, hue < 200, hue < 260, hue < 290],
        [3, 4, 6, 7, 8, 9, 10], 11)
    hue_names = np.where(np.isin(hue_names, (3, 4)) & (high < 0.75), 5, hue_names)  # dark red/orange is brown
    return np.select([high < 0.18, (saturation < 0.2) & (high > 0.85), saturation < 0.2], [0, 1, 2], hue_names)


def measure_pixels(rgb: np.ndarray, foreground_distance: float = MeasuredConfig.foreground_distance) -> np.ndarray:
    """The pixel measures (PIXEL_MEASURES order) of one (h, w, 3) image in 0..1."""
    luma = rgb @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    high, low = rgb.max(axis=2), rgb.min(axis=2)
    saturation = np.where(high > 0, (high - low) / np.maximum(high, 1e-6), 0.0).mean()
    red_green = 255.0 * (rgb[..., 0] - rgb[..., 1])
    yellow_blue = 255.0 * (0.5 * (rgb[..., 0] + rgb[..., 1]) - rgb[..., 2])
    colourfulness = np.hypot(red_green.std(), yellow_blue.std()) + 0.3 * np.hypot(red_green.mean(), yellow_blue.mean())
    grey = 255.0 * luma
    laplacian = grey[:-2, 1:-1] + grey[2:, 1:-1] + grey[1:-1, :-2] + grey[1:-1, 2:] - 4 * grey[1:-1, 1:-1]
    # Immerkaer (1996): noise sigma from the difference of two Laplacians, which cancels image structure.
    mask = (grey[:-2, :-2] - 2 * grey[:-2, 1:-1] + grey[:-2, 2:] - 2 * grey[1:-1, :-2] + 4 * grey[1:-1, 1:-1]
            - 2 * grey[1:-1, 2:] + grey[2:, :-2] - 2 * grey[2:, 1:-1] + grey[2:, 2:])
    noise = np.sqrt(np.pi / 2) * np.abs(mask).mean() / 6.0 if mask.size else 0.0
    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]])
    pixels = rgb.reshape(-1, 3)
    subject = np.linalg.norm(pixels - np.median(border, axis=0), axis=1) > foreground_distance
    if 0.01 <= subject.mean() <= 0.9:
        pixels = pixels[subject]
    dominant = np.bincount(colour_names(pixels), minlength=len(COLOUR_NAMES)).argmax()
    return np.array([luma.mean(), luma.std(), saturation, colourfulness, laplacian.var() if laplacian.size else 0.0,
                     noise, dominant], dtype=np.float32)


def _measure_file(path: str, crop=None) -> np.ndarray:
    try:
        image = open_image(path, size_hint=None if crop is not None else MEASURE_SIZE)
        image = image.crop(tuple(crop)) if crop is not None else image
    except (OSError, ValueError):
        return np.full(len(PIXEL_MEASURES), np.nan, dtype=np.float32)
    image.thumbnail((MEASURE_SIZE, MEASURE_SIZE))
    return measure_pixels(np.asarray(image, dtype=np.float32) / 255.0)


def measure_project(project, *, sample_ids=None, workers: int = 4,
                    progress: ProgressCallback = no_progress) -> pd.DataFrame:
    """Numeric measures per sample (index: sample id), computed once per image content and stored. An object is
    measured on its crop (its own colour, brightness, ...), cached by image content and region."""
    samples = encoder_views(project, project.samples(sample_ids=sample_ids), crops=True)
    cache = ContentCache(project, "measures/v1", dtype=np.float32)
    missing = cache.missing_rows(samples)
    todo, paths = missing["content_hash"].tolist(), missing["image_path"].tolist()
    if todo:
        values = []
        regions = crops_of(missing) or [None] * len(todo)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for done, row in enumerate(pool.map(_measure_file, paths, regions, chunksize=16), 1):
                values.append(row)
                if done % 256 == 0 or done == len(todo):
                    progress("measuring images", done, len(todo))
        values = np.stack(values)
        readable = ~np.isnan(values).any(axis=1)
        cache.add([h for h, ok in zip(todo, readable) if ok], {"values": values[readable]})
        if not readable.all():
            raise TaggingError(unreadable_images([p for p, ok in zip(paths, readable) if not ok],
                                                 "the other images' measures"))
    frame = pd.DataFrame(cache.get(samples["content_hash"], "values"), index=samples.index, columns=PIXEL_MEASURES)
    frame["resolution"] = np.minimum(samples["width"], samples["height"]).astype(np.float32)
    frame["aspect ratio"] = (samples["width"] / samples["height"]).astype(np.float32)
    return frame


def measured_tags(measures: pd.DataFrame, attributes: list[Attribute],
                  config: MeasuredConfig = MeasuredConfig()) -> TagResult:
    """Bin the measures into the tags of the measured attributes (score and margin are 1: no model doubt)."""
    bins = measure_bins(config)
    columns = []
    for attribute in attributes:
        if attribute.name == "dominant colour":
            names = np.array(COLOUR_NAMES)[measures["dominant colour"].to_numpy().astype(int)]
        else:
            names = np.array(bins[attribute.name].tags)[bins[attribute.name].tag(measures[attribute.name].to_numpy())]
        lookup = {t: i for i, t in enumerate(attribute.tags)}
        columns.append(np.array([lookup.get(t, -1) for t in names], dtype=np.int16))
    tag_index = np.stack(columns, axis=1) if columns else np.zeros((len(measures), 0), dtype=np.int16)
    ones = np.where(tag_index >= 0, 1.0, np.nan).astype(np.float32)
    return TagResult(measures.index.to_numpy(np.int64), {a.name: a.tags for a in attributes}, tag_index, ones, ones)
