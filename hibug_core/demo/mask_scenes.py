"""Scenes for the segmentation demo: several flat shapes per image (thin bars and rings among them), each with its
exact visible mask (a shape drawn later covers the ones under it, as COCO annotates what is seen)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.demo.scenes import SCENE_COLOURS, _iou
from hibug_core.repair.generators import COLOURS

MASK_SHAPES = ("circle", "rectangle", "triangle", "bar", "ring")


@dataclass(frozen=True)
class MaskSceneConfig:
    size: int = 96  # square images, pixels
    min_objects: int = 2
    max_objects: int = 5
    min_side: int = 12  # an object's longer side, pixels
    max_side: int = 40
    shape_shares: tuple[float, ...] = (0.22, 0.22, 0.22, 0.2, 0.14)  # per MASK_SHAPES
    bar_width: tuple[int, int] = (3, 5)  # a bar's thickness, pixels (from, to inclusive)
    truncated_share: float = 0.1  # objects placed so that the border cuts them
    max_overlap: float = 0.25  # largest IoU between two objects' boxes in a scene


def shape_pixels(shape: str, box: tuple[float, float, float, float], size: int, rng,
                 bar_width: tuple[int, int] = (3, 5)) -> np.ndarray:
    """The (size, size) bool mask of one shape drawn in box (x, y, w, h), cut by the image's border. A bar is a
    thin rotated rectangle across its box; a ring an ellipse with a hole of half its size."""
    from PIL import Image, ImageDraw

    canvas = Image.new("1", (size, size), 0)
    draw = ImageDraw.Draw(canvas)
    x, y, w, h = box
    x0, y0, x1, y1 = x, y, x + w - 1, y + h - 1
    if shape == "circle":
        draw.ellipse((x0, y0, x1, y1), fill=1)
    elif shape == "rectangle":
        draw.rectangle((x0, y0, x1, y1), fill=1)
    elif shape == "triangle":
        draw.polygon([(x0, y1), (x1, y1), ((x0 + x1) / 2, y0)], fill=1)
    elif shape == "bar":
        thickness = float(rng.integers(bar_width[0], bar_width[1] + 1))
        angle = rng.uniform(0, np.pi)
        length = max(w, h)
        cx, cy = x + w / 2, y + h / 2
        along = np.array([np.cos(angle), np.sin(angle)]) * length / 2
        across = np.array([-np.sin(angle), np.cos(angle)]) * thickness / 2
        corners = [(cx + s * along[0] + t * across[0], cy + s * along[1] + t * across[1])
                   for s, t in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        draw.polygon(corners, fill=1)
    else:  # ring
        draw.ellipse((x0, y0, x1, y1), fill=1)
        draw.ellipse((x0 + w / 4, y0 + h / 4, x1 - w / 4, y1 - h / 4), fill=0)
    return np.asarray(canvas, dtype=bool)


def render_mask_scenes(n: int, seed: int, config: MaskSceneConfig = MaskSceneConfig(),
                       shape_shares: tuple[float, ...] | None = None) -> tuple[list, pd.DataFrame, list]:
    """`n` scenes (PIL images), one row per object (scene, shape, colour, box x/y/w/h of its visible mask, whether the
    border cuts it, its drawing order) and per object its visible mask ((size, size) bool). Seeded."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    shares = np.asarray(shape_shares or config.shape_shares, float)
    size = config.size
    images, rows, masks = [], [], []
    for scene in range(n):
        background = np.array([int(v) for v in rng.integers(205, 256, 3)], dtype=np.uint8)
        labels = np.full((size, size), -1, dtype=np.int64)  # the object seen at each pixel
        placed, members = [], []
        for _ in range(int(rng.integers(config.min_objects, config.max_objects + 1))):
            for _attempt in range(20):
                side = int(rng.integers(config.min_side, config.max_side + 1))
                aspect = rng.uniform(0.6, 1.0) if rng.random() < 0.5 else 1.0
                w, h = (side, max(6, int(side * aspect))) if rng.random() < 0.5 else (max(6, int(side * aspect)), side)
                if rng.random() < config.truncated_share:  # across an edge, up to half outside
                    x = rng.uniform(-0.5 * w, size - 0.5 * w)
                    y = rng.uniform(-0.5 * h, 0) if rng.random() < 0.5 else rng.uniform(size - h, size - 0.5 * h)
                else:
                    x, y = rng.uniform(0, size - w), rng.uniform(0, size - h)
                box = (x, y, w, h)
                if all(_iou(box, other) <= config.max_overlap for other in placed):
                    break
            else:
                continue
            shape = MASK_SHAPES[int(rng.choice(len(MASK_SHAPES), p=shares / shares.sum()))]
            colour = SCENE_COLOURS[int(rng.integers(len(SCENE_COLOURS)))]
            pixels = shape_pixels(shape, box, size, rng, config.bar_width)
            if pixels.sum() < 12:
                continue
            placed.append(box)
            labels[pixels] = len(members)
            members.append({"scene": scene, "shape": shape, "color": colour, "order": len(placed) - 1,
                            "truncated": bool(x < 0 or y < 0 or x + w > size or y + h > size)})
        image = np.broadcast_to(background, (size, size, 3)).copy()
        for k, member in enumerate(members):
            visible = labels == k
            ys, xs = np.nonzero(visible)
            if not len(ys):
                continue
            image[visible] = COLOURS[member["color"]]
            rows.append({**member, "x": float(xs.min()), "y": float(ys.min()), "w": float(xs.max() - xs.min() + 1),
                         "h": float(ys.max() - ys.min() + 1), "area": float(visible.sum())})
            masks.append(visible)
        images.append(Image.fromarray(image))
    return images, pd.DataFrame(rows), masks
