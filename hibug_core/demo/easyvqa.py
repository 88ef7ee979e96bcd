"""Ground truth of the easy-vqa shape images: shape and colour from its questions, size and position from pixels."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.progress import ProgressCallback, no_progress

SHAPES = ("circle", "rectangle", "triangle")
ATTRIBUTES = ("shape", "color", "size", "horizontal position", "vertical position")
COLORS = ("black", "blue", "brown", "gray", "green", "red", "teal", "yellow")
_NEGATIONS = {"not", "no"}


@dataclass(frozen=True)
class ShapeImage:
    source_split: str  # easy-vqa's own split: train or test
    source_id: int
    path: Path
    shape: str
    color: str


def facts_from_questions(texts: list[str], answers: list[str], image_ids: list[int]) -> dict[int, dict[str, str]]:
    """Shape and colour of each image that its questions decide (positive answers, or elimination)."""
    positive = defaultdict(lambda: {"shape": set(), "color": set()})
    negative = defaultdict(lambda: {"shape": set(), "color": set()})
    for question, answer, image_id in zip(texts, answers, image_ids):
        words = re.findall(r"[a-z]+", question.lower())
        shapes = [w for w in words if w in SHAPES]
        colors = [w for w in words if w in COLORS]
        if answer in SHAPES:
            positive[image_id]["shape"].add(answer)
            positive[image_id]["color"].update(colors)
        elif answer in COLORS:
            positive[image_id]["color"].add(answer)
            positive[image_id]["shape"].update(shapes)
        else:
            holds = (answer == "yes") != bool(_NEGATIONS & set(words))
            target = positive if holds else negative
            target[image_id]["shape"].update(shapes)
            target[image_id]["color"].update(colors)
    facts: dict[int, dict[str, str]] = {}
    for image_id in set(image_ids):
        known = {}
        for kind, values in (("shape", SHAPES), ("color", COLORS)):
            said = positive[image_id][kind]
            if len(said) == 1:
                known[kind] = next(iter(said))
            elif not said:
                remaining = [v for v in values if v not in negative[image_id][kind]]
                if len(remaining) == 1:
                    known[kind] = remaining[0]
        facts[image_id] = known
    return facts


def load_shape_images() -> list[ShapeImage]:
    """Every easy-vqa image whose shape and colour its questions decide, in a fixed order."""
    import easy_vqa

    images = []
    for split, questions, paths in (("train", easy_vqa.get_train_questions, easy_vqa.get_train_image_paths),
                                    ("test", easy_vqa.get_test_questions, easy_vqa.get_test_image_paths)):
        facts = facts_from_questions(*questions())
        files = paths()
        for image_id in sorted(facts):
            known = facts[image_id]
            if "shape" in known and "color" in known and image_id in files:
                images.append(ShapeImage(split, image_id, Path(files[image_id]), known["shape"], known["color"]))
    return images


def foreground_mask(pixels: np.ndarray, threshold: int = 40) -> np.ndarray:
    """Pixels that differ from the background colour (the most common border colour)."""
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]]).astype(np.int32)
    colours, counts = np.unique(border, axis=0, return_counts=True)
    background = colours[counts.argmax()]
    return np.abs(pixels.astype(np.int32) - background).sum(axis=-1) > threshold


def measure_geometry(pixels: np.ndarray, small_below: int = 19, large_from: int = 27) -> dict[str, str]:
    """Size from the bounding box's longer side, position from its centre, in thirds of the image."""
    mask = foreground_mask(pixels)
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    height, width = mask.shape
    if len(rows) == 0:
        return {"size": "not visible", "horizontal position": "not visible", "vertical position": "not visible"}
    side = max(rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1)
    size = "small" if side < small_below else "large" if side >= large_from else "medium"
    cx, cy = (cols[0] + cols[-1] + 1) / 2 / width, (rows[0] + rows[-1] + 1) / 2 / height
    horizontal = "left" if cx < 1 / 3 else "right" if cx > 2 / 3 else "center"
    vertical = "top" if cy < 1 / 3 else "bottom" if cy > 2 / 3 else "middle"
    return {"size": size, "horizontal position": horizontal, "vertical position": vertical}


@dataclass(frozen=True)
class ShapeWorld:
    """Every decided easy-vqa image with its pixels and true attributes (one row each, a fixed order)."""

    images: tuple[ShapeImage, ...]
    pixels: np.ndarray  # (n, 64, 64, 3) uint8
    attributes: pd.DataFrame  # ATTRIBUTES columns, index: "<easy-vqa split>-<id>"

    @property
    def ids(self) -> np.ndarray:
        return self.attributes.index.to_numpy()

    @property
    def source_splits(self) -> np.ndarray:
        return np.array([item.source_split for item in self.images])

    def labels(self) -> np.ndarray:
        """Class index of every image in SHAPES order."""
        return self.attributes["shape"].map({s: i for i, s in enumerate(SHAPES)}).to_numpy()


_WORLD: list[ShapeWorld] = []


def load_shape_world(progress: ProgressCallback = no_progress) -> ShapeWorld:
    """Load the images once per process and measure their size and position."""
    from hibug_core.image_loader import open_image

    if _WORLD:
        return _WORLD[0]
    images = tuple(load_shape_images())
    pixels = np.stack([np.asarray(open_image(item.path)) for item in images])
    rows = []
    for i, (item, array) in enumerate(zip(images, pixels)):
        rows.append({"shape": item.shape, "color": item.color, **measure_geometry(array)})
        if (i + 1) % 500 == 0 or i + 1 == len(pixels):
            progress("measuring size and position", i + 1, len(pixels))
    index = pd.Index([f"{item.source_split}-{item.source_id}" for item in images], name="id")
    _WORLD.append(ShapeWorld(images, pixels, pd.DataFrame(rows, index=index, columns=list(ATTRIBUTES))))
    return _WORLD[0]
