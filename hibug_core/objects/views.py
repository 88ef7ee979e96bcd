"""What an encoder sees of an object sample: its crop with a context margin (for main-object attributes) or its whole
image (background and global attributes). A crop is cached under its own key: image content, box and margin."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.objects.crops import crop_regions

CONTEXT_MARGIN = 0.3  # of the box's longer side, added around it on every side (at least 6 pixels)


def crop_key(content_hash: str, region: tuple[int, int, int, int]) -> str:
    """The cache key of a crop of an image: its content hash and the region, hashed to the length of a content hash."""
    return hashlib.blake2b(f"{content_hash}|crop|{region}".encode(), digest_size=16).hexdigest()


def object_views(samples: pd.DataFrame, objects: pd.DataFrame, margin: float = CONTEXT_MARGIN) -> pd.DataFrame:
    """`samples` (image_path, content_hash, width, height) as encoder views of their objects' crops: content_hash is
    the crop's key and `crop` the region (left, top, right, bottom) to cut; samples without a box keep their image."""
    views = samples[["image_path", "content_hash", "width", "height"]].copy()
    views["crop"] = None
    boxed = objects.reindex(views.index)
    has_box = boxed["box_x"].notna().to_numpy()
    regions = list(map(tuple, crop_regions(
        boxed.loc[has_box, ["box_x", "box_y", "box_w", "box_h"]].to_numpy(np.float64),
        views.loc[has_box, ["width", "height"]].to_numpy(np.int64), margin).tolist()))
    views.loc[has_box, "crop"] = pd.Series(regions, index=views.index[has_box], dtype=object)
    views.loc[has_box, "content_hash"] = [crop_key(h, r) for h, r in zip(views.loc[has_box, "content_hash"], regions)]
    return views


@dataclass(frozen=True)
class SampleViews:
    """What a tagger sees of a sample (a task decides it): the attribute groups judged on the sample's crop with a
    context margin (the others on its whole image), and whether a multimodal model is shown the sample outlined on
    its image."""

    crop_groups: frozenset[str] = frozenset()
    outlined: bool = False

    def on_crop(self, group: str) -> bool:
        return group in self.crop_groups

    def split(self, attributes: list) -> dict[bool, list]:
        """Attributes by where they are judged (True: on the crop), crops first, leaving out an empty side."""
        sides = {crop: [a for a in attributes if self.on_crop(a.group) == crop] for crop in (True, False)}
        return {crop: chosen for crop, chosen in sides.items() if chosen}


WHOLE_IMAGE = SampleViews()  # every attribute on the whole image (a sample is an image)
OBJECT_CROPS = SampleViews(frozenset({"main object"}), outlined=True)  # main-object attributes on the object's crop


def crops_of(views: pd.DataFrame) -> list | None:
    """The crop regions of views in order (None where a view is a whole image), or None when nothing is cropped."""
    crops = views["crop"].tolist() if "crop" in views else []
    return crops if any(c is not None for c in crops) else None
