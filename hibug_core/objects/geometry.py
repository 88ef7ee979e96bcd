"""Object attributes measured exactly from boxes: COCO area class, aspect ratio, truncation, occlusion, crowding and
position in the image."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import Bins
from hibug_core.attributes.schema import MEASURED, Attribute
from hibug_core.errors import check_fields
from hibug_core.objects.coco import positions_by, row_blocks

COCO_AREA_EDGES = (32.0 ** 2, 96.0 ** 2)  # COCO's small / medium / large areas, square pixels


@dataclass(frozen=True)
class GeometryConfig:
    """Bins of the measured object attributes."""

    size: Bins = Bins(("small", "medium", "large"), COCO_AREA_EDGES)  # the box's area class;
    # scenes far smaller than COCO's pick their own (a project keeps one set: store.project.MEASURES_META)
    aspect_ratio: Bins = Bins(("tall", "square", "wide"), (0.75, 4 / 3))  # box width / height
    occlusion: Bins = Bins(("none", "partial", "heavy"), (0.05, 0.5))  # largest share of the box another object covers
    crowding: Bins = Bins(("alone", "few", "many"), (2, 6))  # objects in the image
    horizontal: Bins = Bins(("left", "centre", "right"), (1 / 3, 2 / 3))  # box centre, share of the image width
    vertical: Bins = Bins(("top", "middle", "bottom"), (1 / 3, 2 / 3))  # box centre, share of the image height
    border: float = 1.0  # a box within this many pixels of the image's edge is truncated

    def __post_init__(self):
        check_fields(self, {name: (len(bins.edges) == len(bins.tags) - 1 and list(bins.edges) == sorted(bins.edges),
                                   "one edge fewer than tags, in increasing order")
                            for name, bins in vars(self).items() if isinstance(bins, Bins)})

    def to_json(self) -> str:
        """The settings as a project keeps them: its measured tags mean these bins, for every import."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> GeometryConfig:
        """Settings kept by to_json (None: the defaults, COCO's)."""
        if not text:
            return cls()
        stored = json.loads(text)
        return cls(**{f.name: Bins(tuple(stored[f.name]["tags"]), tuple(stored[f.name]["edges"]))
                      if isinstance(stored[f.name], dict) else stored[f.name] for f in fields(cls)})

    def size_description(self) -> str:
        small, large = (math.sqrt(edge) for edge in self.size.edges)
        whose = "COCO's area class of the object" if self.size.edges == COCO_AREA_EDGES else "the box's area class"
        return f"{whose}: small below {small:g}x{small:g} pixels, large from {large:g}x{large:g}"


GEOMETRY_DESCRIPTIONS = {
    "object size": GeometryConfig().size_description(),
    "object aspect ratio": "the box's width over its height",
    "is truncated": "the box touches the image's border (the object is cut by it)",
    "occlusion": "the largest share of the box covered by another object's box",
    "crowding": "how many objects the image holds",
    "horizontal position": "where the box's centre lies across the image",
    "vertical position": "where the box's centre lies down the image",
}

# How a generation prompt says an object's measured context (tags not listed are said as the tag itself).
GEOMETRY_PHRASES = {
    ("is truncated", "yes"): "cut off by the picture's border", ("is truncated", "no"): "fully inside the picture",
    ("occlusion", "none"): "in full view", ("occlusion", "partial"): "partly hidden behind another object",
    ("occlusion", "heavy"): "mostly hidden behind another object", ("crowding", "alone"): "alone in the picture",
    ("crowding", "few"): "among a few other objects", ("crowding", "many"): "among many other objects",
}


def geometry_attributes(config: GeometryConfig = GeometryConfig()) -> list[Attribute]:
    """The measured object attributes' definitions, as the schema holds them."""
    tags = {"object size": config.size.tags, "object aspect ratio": config.aspect_ratio.tags, "is truncated":
            ("yes", "no"), "occlusion": config.occlusion.tags, "crowding": config.crowding.tags,
            "horizontal position": config.horizontal.tags, "vertical position": config.vertical.tags}
    described = {**GEOMETRY_DESCRIPTIONS, "object size": config.size_description()}
    return [Attribute(name=name, group="main object" if "position" not in name and name != "crowding" else "global",
                      kind="binary" if name.startswith("is ") else "descriptive", tags=tags[name], source=MEASURED,
                      description=f"measured from the boxes: {described[name]}") for name in tags]


def measure_objects(boxes: np.ndarray, areas: np.ndarray, image_ids: np.ndarray, image_size: np.ndarray,
                    own_ids: np.ndarray, others: pd.DataFrame, config: GeometryConfig = GeometryConfig()
                    ) -> pd.DataFrame:
    """Each box's measured tags. boxes (n, 4) xywh in pixels, areas (n,) (COCO's annotation area where there is one),
    image_size (n, 2) width and height, own_ids: the box's annotation id (-1 for a detection), others: the
    ground-truth objects (id, image_id, x, y, w, h) that occlude and crowd (an object does not occlude itself)."""
    boxes = np.asarray(boxes, dtype=np.float64)
    n = len(boxes)
    x, y, w, h = boxes.T
    width, height = np.asarray(image_size, dtype=np.float64).T

    def tag(bins: Bins, values) -> np.ndarray:
        return np.asarray(bins.tags, dtype=object)[bins.tag(np.asarray(values, dtype=np.float64))]

    truncated = ((x <= config.border) | (y <= config.border) | (x + w >= width - config.border)
                 | (y + h >= height - config.border))
    counts = others.groupby("image_id").size()
    crowd = counts.reindex(image_ids).fillna(0).to_numpy()
    occlusion = _largest_cover(boxes, image_ids, np.asarray(own_ids), others)
    return pd.DataFrame({
        "object size": tag(config.size, areas),
        "object aspect ratio": tag(config.aspect_ratio, w / np.maximum(h, 1e-9)),
        "is truncated": np.where(truncated, "yes", "no").astype(object),
        "occlusion": tag(config.occlusion, occlusion),
        "crowding": tag(config.crowding, crowd),
        "horizontal position": tag(config.horizontal, (x + w / 2) / width),
        "vertical position": tag(config.vertical, (y + h / 2) / height),
    }, index=pd.RangeIndex(n))


def _largest_cover(boxes: np.ndarray, image_ids: np.ndarray, own_ids: np.ndarray, others: pd.DataFrame) -> np.ndarray:
    """Per box, the largest share of its area covered by one other object of its image (intersection / own area)."""
    cover = np.zeros(len(boxes))
    if others.empty:
        return cover
    other_boxes = others[["x", "y", "w", "h"]].to_numpy(np.float64)
    other_ids = others["id"].to_numpy()
    by_image = positions_by(others["image_id"].to_numpy())
    mine = positions_by(image_ids)
    for image_id, rows in mine.items():
        members = by_image.get(image_id)
        if members is None:
            continue
        b = other_boxes[members]
        for block in row_blocks(len(rows), len(members)):
            chosen = rows[block]
            a = boxes[chosen]
            left = np.maximum(a[:, None, 0], b[None, :, 0])
            top = np.maximum(a[:, None, 1], b[None, :, 1])
            right = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2])
            bottom = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3])
            inter = np.clip(right - left, 0, None) * np.clip(bottom - top, 0, None)
            inter[own_ids[chosen][:, None] == other_ids[members][None, :]] = 0.0
            cover[chosen] = (inter / np.maximum(a[:, None, 2] * a[:, None, 3], 1e-9)).max(axis=1)
    return cover
