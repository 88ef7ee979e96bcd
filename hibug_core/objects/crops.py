"""Object pictures for grids and the detail view: the object's crop with a context margin (or its whole image), the
true box and the predicted box drawn, coloured by outcome; made once and kept in the project."""
from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hibug_core.objects.coco import UNLABELLED
from hibug_core.thumbnails import THUMBS_DIR

TRUE_BOX = (37, 99, 235)  # blue: where the object is
OUTCOME_COLOURS = {"true positive": (22, 163, 74), "false positive": (220, 38, 38), "near miss": (234, 140, 0),
                   UNLABELLED: (107, 114, 128)}
LEGEND = ("blue: the true box; the predicted box is green when it found the object, amber when it came close (a "
          "localization or classification error) and red for a false positive; grey: a detection in an unlabelled "
          "image (no true box to compare with)")


@dataclass(frozen=True)
class ObjectPicture:
    """What one picture shows: boxes are (x, y, w, h) in image pixels; pred_box None when nothing was predicted."""

    box: tuple[float, float, float, float]
    pred_box: tuple[float, float, float, float] | None
    outcome: str  # a key of OUTCOME_COLOURS

    def key(self, content_hash: str, size: int, margin: float, whole: bool) -> str:
        text = f"{content_hash}|{self.box}|{self.pred_box}|{self.outcome}|{size}|{margin}|{whole}"
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def picture_of(row) -> ObjectPicture:
    """The picture of an object sample row (project.objects(model) columns joined to its sample)."""
    box = tuple(float(row[c]) for c in ("box_x", "box_y", "box_w", "box_h"))
    pred = tuple(float(row.get(c, np.nan)) for c in ("pred_x", "pred_y", "pred_w", "pred_h"))
    pred_box = None if any(np.isnan(pred)) else pred
    outcome = str(row.get("outcome") or "")
    if outcome in ("false positive", UNLABELLED):
        return ObjectPicture(box, None, outcome)  # its own box is the prediction; there is no true box
    return ObjectPicture(box, pred_box, "true positive" if outcome == "true positive" else "near miss")


def crop_region(box, pred_box, image_size: tuple[int, int], margin: float) -> tuple[int, int, int, int]:
    """The part of the image a crop shows: both boxes, grown by `margin` of their size (at least 6 pixels) on every
    side, made square where the image allows, within the image. (left, top, right, bottom)."""
    boxes = [box] + ([pred_box] if pred_box else [])
    left = min(b[0] for b in boxes)
    top = min(b[1] for b in boxes)
    right = max(b[0] + b[2] for b in boxes)
    bottom = max(b[1] + b[3] for b in boxes)
    grow = max(6.0, margin * max(right - left, bottom - top))
    side = max(right - left, bottom - top) + 2 * grow
    cx, cy = (left + right) / 2, (top + bottom) / 2
    width, height = image_size
    side = min(side, max(width, height))
    x0 = int(np.clip(cx - side / 2, 0, max(0, width - side)))
    y0 = int(np.clip(cy - side / 2, 0, max(0, height - side)))
    return x0, y0, int(min(width, x0 + np.ceil(side))), int(min(height, y0 + np.ceil(side)))


def render_picture(image, picture: ObjectPicture, *, size: int = 160, margin: float = 0.3, whole: bool = False):
    """A PIL image: the crop (or the whole image) scaled to `size` on its longer side with the boxes drawn on top."""
    from PIL import Image, ImageDraw

    image = image.convert("RGB")
    region = (0, 0, *image.size) if whole else crop_region(picture.box, picture.pred_box, image.size, margin)
    crop = image.crop(region)
    scale = size / max(crop.size)
    crisp = Image.NEAREST if scale >= 2 else Image.BILINEAR  # small objects stay sharp when enlarged
    shown = crop.resize((max(1, round(crop.width * scale)), max(1, round(crop.height * scale))), crisp)
    draw = ImageDraw.Draw(shown)
    line = max(2, size // 80)

    def outline(box, colour):
        x, y, w, h = box
        corners = [(x - region[0]) * scale, (y - region[1]) * scale, (x + w - region[0]) * scale,
                   (y + h - region[1]) * scale]
        corners = [round(c) for c in corners]
        draw.rectangle(corners, outline=(255, 255, 255), width=line + 2)  # a halo: visible on any colour
        draw.rectangle([corners[0] + 1, corners[1] + 1, corners[2] - 1, corners[3] - 1], outline=colour, width=line)

    if picture.outcome in ("false positive", UNLABELLED):
        outline(picture.box, OUTCOME_COLOURS[picture.outcome])
    else:
        outline(picture.box, TRUE_BOX)
        if picture.pred_box:
            outline(picture.pred_box, OUTCOME_COLOURS[picture.outcome])
    return shown


def ensure_object_picture(project_folder: Path, image_path: Path, content_hash: str, picture: ObjectPicture, *,
                          size: int = 160, margin: float = 0.3, whole: bool = False) -> Path:
    """Path of the picture's PNG, made on first use and kept under the project's thumbnails."""
    from PIL import Image

    target = Path(project_folder) / THUMBS_DIR / "objects" / content_hash[:2] / (
        picture.key(content_hash, size, margin, whole) + ".png")
    if target.exists():
        return target
    with Image.open(image_path) as image:
        shown = render_picture(image, picture, size=size, margin=margin, whole=whole)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{uuid.uuid4().hex}.tmp")
    shown.save(temporary, "PNG")
    os.replace(temporary, target)
    return target
