"""Scenes for the detection demo: several easy-vqa-style shapes per image, with their exact boxes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.repair.generators import COLOURS

SCENE_SHAPES = ("circle", "rectangle", "triangle")
SCENE_COLOURS = tuple(c for c in COLOURS if c not in ("gray",))  # gray is too close to the backgrounds


@dataclass(frozen=True)
class SceneConfig:
    size: int = 96  # square images, pixels
    min_objects: int = 2
    max_objects: int = 5
    min_side: int = 7  # an object's longer side, pixels
    max_side: int = 40
    truncated_share: float = 0.15  # objects placed so that the border cuts them
    max_overlap: float = 0.3  # largest IoU between two objects of a scene


def _draw(draw, shape: str, box: tuple[int, int, int, int], colour) -> None:
    """Draw one flat shape filling box (x0, y0, x1, y1, inclusive) as the easy-vqa images do."""
    x0, y0, x1, y1 = box
    if shape == "circle":
        draw.ellipse(box, fill=colour)
    elif shape == "rectangle":
        draw.rectangle(box, fill=colour)
    else:
        draw.polygon([(x0, y1), (x1, y1), ((x0 + x1) / 2, y0)], fill=colour)


def render_scenes(n: int, seed: int, config: SceneConfig = SceneConfig()) -> tuple[list, pd.DataFrame]:
    """`n` scenes (PIL images) and one row per object: scene, shape, colour, box x/y/w/h clipped to the image, whether
    the border cuts it, and its side before clipping. Seeded: the same call draws the same scenes."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    size = config.size
    images, rows = [], []
    for scene in range(n):
        background = tuple(int(v) for v in rng.integers(205, 256, 3))
        image = Image.new("RGB", (size, size), background)
        draw = ImageDraw.Draw(image)
        placed: list[tuple[float, float, float, float]] = []
        for _ in range(int(rng.integers(config.min_objects, config.max_objects + 1))):
            for _attempt in range(20):
                side = int(rng.integers(config.min_side, config.max_side + 1))
                aspect = rng.uniform(0.6, 1.0) if rng.random() < 0.5 else 1.0
                w, h = (side, max(4, int(side * aspect))) if rng.random() < 0.5 else (max(4, int(side * aspect)), side)
                if side >= 12 and rng.random() < config.truncated_share:  # across an edge, up to 60% outside
                    edge = int(rng.integers(4))
                    cut = rng.uniform(0.2, 0.6)
                    x = (rng.uniform(0, size - w) if edge in (0, 2)
                         else (-cut * w if edge == 1 else size - (1 - cut) * w))
                    y = (rng.uniform(0, size - h) if edge in (1, 3)
                         else (-cut * h if edge == 0 else size - (1 - cut) * h))
                else:
                    x, y = rng.uniform(0, size - w), rng.uniform(0, size - h)
                box = (x, y, w, h)
                if all(_iou(box, other) <= config.max_overlap for other in placed):
                    break
            else:
                continue
            placed.append(box)
            shape = SCENE_SHAPES[int(rng.integers(len(SCENE_SHAPES)))]
            colour = SCENE_COLOURS[int(rng.integers(len(SCENE_COLOURS)))]
            x0, y0 = int(round(x)), int(round(y))
            _draw(draw, shape, (x0, y0, x0 + w - 1, y0 + h - 1), COLOURS[colour])
            cx0, cy0 = max(0, x0), max(0, y0)
            cx1, cy1 = min(size, x0 + w), min(size, y0 + h)
            rows.append({"scene": scene, "shape": shape, "color": colour, "x": float(cx0), "y": float(cy0),
                         "w": float(cx1 - cx0), "h": float(cy1 - cy0), "truncated": (cx0, cy0, cx1, cy1) != (
                             x0, y0, x0 + w, y0 + h), "side": max(w, h), "order": len(placed) - 1})
        images.append(image)
    return images, pd.DataFrame(rows)


def _iou(a, b) -> float:
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    inter = max(0.0, min(ax1, bx1) - max(a[0], b[0])) * max(0.0, min(ay1, by1) - max(a[1], b[1]))
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)
