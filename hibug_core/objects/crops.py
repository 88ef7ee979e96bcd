"""Object pictures for grids and the detail view: the object's crop with a context margin (or its whole image), the
true box and the predicted box drawn, coloured by outcome (an object outlined by a mask: the outlines of its true and
predicted masks instead), and a person's true and predicted skeletons with joints coloured by keypoint type; made once
and kept in the project."""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hibug_core.image_loader import open_image
from hibug_core.objects.coco import UNLABELLED
from hibug_core.safe_files import folder_within, inside
from hibug_core.thumbnails import THUMBS_DIR

TRUE_BOX = (37, 99, 235)  # blue: where the object is
OUTCOME_COLOURS = {"true positive": (22, 163, 74), "false positive": (220, 38, 38), "near miss": (234, 140, 0),
                   UNLABELLED: (107, 114, 128)}
LEGEND = ("blue: the true box; the predicted box is green when it found the object, amber when it came close (a "
          "localization or classification error) and red for a false positive; grey: a detection in an unlabelled "
          "image (no true box to compare with)")


# A keypoint's colour by its type (Ronchi and Perona's); a predicted point with no type (nothing true to compare with)
# is drawn in its outcome's colour.
KEYPOINT_COLOURS = {"g": (22, 163, 74), "j": (234, 179, 8), "i": (147, 51, 234), "s": (249, 115, 22),
                    "m": (220, 38, 38)}
SKELETON_LEGEND = ("the true skeleton in blue, the predicted one in the outcome's colour; predicted joints by their "
                   "keypoint type: green good, yellow jitter, purple inversion (left for right), orange swap (another "
                   "person's), red miss")
MASK_LEGEND = ("blue: the outline of the true mask; the predicted mask's outline is green when it found the object, "
               "amber when it came close (an outline, localization or classification error) and red for a false "
               "positive; grey: a mask in an unlabelled image")


def picture_legend(rows) -> str:
    """What the pictures of these sample rows show, in words: boxes, masks' outlines, and skeletons where they have
    them."""
    def has(column: str) -> bool:
        return column in rows and rows[column].notna().any()

    return (MASK_LEGEND if has("mask_json") else LEGEND) + (f"; {SKELETON_LEGEND}" if has("keypoints_json") else "")


@dataclass(frozen=True)
class ObjectPicture:
    """What one picture shows: boxes are (x, y, w, h) in image pixels; pred_box None when nothing was predicted.
    People also show skeletons: keypoints as (x, y) pairs in image pixels (None where not labelled or predicted), the
    limbs joining them, and the letter of each predicted keypoint's type."""

    box: tuple[float, float, float, float]
    pred_box: tuple[float, float, float, float] | None
    outcome: str  # a key of OUTCOME_COLOURS
    points: tuple[tuple[float, float] | None, ...] = ()
    pred_points: tuple[tuple[float, float] | None, ...] = ()
    limbs: tuple[tuple[int, int], ...] = ()
    types: str = ""
    mask: str = ""  # objects outlined by masks: the true mask as stored (hibug_core.objects.masks.stored)
    pred_mask: str = ""  # the predicted mask that went with it, as stored

    def key(self, content_hash: str, size: int, margin: float, whole: bool) -> str:
        text = (f"{content_hash}|{self.box}|{self.pred_box}|{self.outcome}|{size}|{margin}|{whole}|{self.points}|"
                f"{self.pred_points}|{self.limbs}|{self.types}|{self.mask}|{self.pred_mask}")
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _points(text, labelled_only: bool) -> tuple[tuple[float, float] | None, ...]:
    """COCO keypoints [x, y, v, ...] (JSON) as (x, y) pairs, None for a keypoint not labelled (v 0) when asked."""
    if not isinstance(text, str):
        return ()
    values = json.loads(text)
    return tuple(None if labelled_only and values[i + 2] <= 0 else (float(values[i]), float(values[i + 1]))
                 for i in range(0, len(values), 3))


def picture_of(row, limbs=()) -> ObjectPicture:
    """The picture of an object sample row (project.objects(model) columns joined to its sample); a person's
    skeletons are joined by `limbs` (the evaluation's, keypoint index pairs)."""
    box = tuple(float(row[c]) for c in ("box_x", "box_y", "box_w", "box_h"))
    pred = tuple(float(row.get(c, np.nan)) for c in ("pred_x", "pred_y", "pred_w", "pred_h"))
    pred_box = None if any(np.isnan(pred)) else pred
    outcome = str(row.get("outcome") or "")
    limbs = tuple((int(a), int(b)) for a, b in limbs)
    mask, pred_mask = (text if isinstance(text, str) else "" for text in (row.get("mask_json"),
                                                                             row.get("pred_mask_json")))
    if outcome in ("false positive", UNLABELLED):  # its own box, keypoints and mask are the prediction; nothing true
        return ObjectPicture(box, None, outcome, pred_points=_points(row.get("keypoints_json"), False), limbs=limbs,
                             pred_mask=mask)
    types = row.get("keypoint_types")
    return ObjectPicture(box, pred_box, "true positive" if outcome == "true positive" else "near miss",
                         points=_points(row.get("keypoints_json"), True),
                         pred_points=_points(row.get("pred_keypoints_json"), False), limbs=limbs,
                         types=types if isinstance(types, str) else "", mask=mask, pred_mask=pred_mask)


def crop_region(box, pred_box, image_size: tuple[int, int], margin: float) -> tuple[int, int, int, int]:
    """The part of the image a crop shows: both boxes, grown by `margin` of their size (at least 6 pixels) on every
    side, made square where the image allows, within the image. (left, top, right, bottom)."""
    region = crop_regions(np.array([box], dtype=np.float64), np.array([image_size]), margin,
                          np.array([pred_box], dtype=np.float64) if pred_box else None)[0]
    return int(region[0]), int(region[1]), int(region[2]), int(region[3])


def crop_regions(boxes: np.ndarray, image_sizes: np.ndarray, margin: float,
                 pred_boxes: np.ndarray | None = None) -> np.ndarray:
    """crop_region of many objects at once: boxes and pred_boxes (n, 4) xywh (a row of NaN: no predicted box),
    image_sizes (n, 2) width and height; (n, 4) int64 left, top, right, bottom."""
    left, top = boxes[:, 0], boxes[:, 1]
    right, bottom = boxes[:, 0] + boxes[:, 2], boxes[:, 1] + boxes[:, 3]
    if pred_boxes is not None:
        has = ~np.isnan(pred_boxes).any(axis=1)
        left = np.where(has, np.minimum(left, pred_boxes[:, 0]), left)
        top = np.where(has, np.minimum(top, pred_boxes[:, 1]), top)
        right = np.where(has, np.maximum(right, pred_boxes[:, 0] + pred_boxes[:, 2]), right)
        bottom = np.where(has, np.maximum(bottom, pred_boxes[:, 1] + pred_boxes[:, 3]), bottom)
    extent = np.maximum(right - left, bottom - top)
    side = extent + 2 * np.maximum(6.0, margin * extent)
    width, height = image_sizes[:, 0], image_sizes[:, 1]
    side = np.minimum(side, np.maximum(width, height))
    x0 = np.clip((left + right) / 2 - side / 2, 0, np.maximum(0, width - side)).astype(np.int64)
    y0 = np.clip((top + bottom) / 2 - side / 2, 0, np.maximum(0, height - side)).astype(np.int64)
    return np.column_stack([x0, y0, np.minimum(width, x0 + np.ceil(side)).astype(np.int64),
                            np.minimum(height, y0 + np.ceil(side)).astype(np.int64)])


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

    def at(point):
        return (point[0] - region[0]) * scale, (point[1] - region[1]) * scale

    def skeleton(points, colour, joints):
        for a, b in picture.limbs:
            if a < len(points) and b < len(points) and points[a] is not None and points[b] is not None:
                draw.line([at(points[a]), at(points[b])], fill=(255, 255, 255), width=line + 2)
                draw.line([at(points[a]), at(points[b])], fill=colour, width=line)
        radius = line + 1
        for point, joint in zip(points, joints):
            if point is not None:
                x, y = at(point)
                draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=joint, outline=(255, 255, 255))

    def contour(stored: str, colour):
        """A stored mask's outline, `line` pixels wide with a white halo, over the shown region."""
        from scipy import ndimage

        from hibug_core.objects.masks import stored_pixels

        pixels = Image.fromarray(stored_pixels(stored)[region[1]:region[3], region[0]:region[2]])
        inside = np.asarray(pixels.resize(shown.size, Image.NEAREST), dtype=bool)
        rim = inside & ~ndimage.binary_erosion(inside, iterations=line, border_value=0)
        halo = ndimage.binary_dilation(rim, iterations=1) & ~rim
        painted = np.asarray(shown).copy()
        painted[halo] = (255, 255, 255)
        painted[rim] = colour
        shown.paste(Image.fromarray(painted))

    if picture.mask or picture.pred_mask:  # an object outlined by masks: its outlines say more than its boxes
        if picture.mask:
            contour(picture.mask, TRUE_BOX)
        if picture.pred_mask:
            contour(picture.pred_mask, OUTCOME_COLOURS[picture.outcome])
    elif picture.outcome in ("false positive", UNLABELLED):
        outline(picture.box, OUTCOME_COLOURS[picture.outcome])
        skeleton(picture.pred_points, OUTCOME_COLOURS[picture.outcome],
                 [OUTCOME_COLOURS[picture.outcome]] * len(picture.pred_points))
    else:
        outline(picture.box, TRUE_BOX)
        if picture.pred_box:
            outline(picture.pred_box, OUTCOME_COLOURS[picture.outcome])
        skeleton(picture.points, TRUE_BOX, [TRUE_BOX] * len(picture.points))
        joints = [KEYPOINT_COLOURS.get(t, OUTCOME_COLOURS[picture.outcome])
                  for t in picture.types.ljust(len(picture.pred_points), "-")]
        skeleton(picture.pred_points, OUTCOME_COLOURS[picture.outcome], joints)
    return shown


def ensure_object_picture(project_folder: Path, image_path: Path, content_hash: str, picture: ObjectPicture, *,
                          size: int = 160, margin: float = 0.3, whole: bool = False) -> Path:
    """Path of the picture's PNG, made on first use and kept under the project's thumbnails."""
    target = Path(project_folder) / THUMBS_DIR / "objects" / content_hash[:2] / (
        picture.key(content_hash, size, margin, whole) + ".png")
    if target.exists() and inside(target, project_folder):  # a link leading out is made again, replacing it
        return target
    shown = render_picture(open_image(image_path), picture, size=size, margin=margin, whole=whole)
    folder_within(project_folder, target.parent)  # never through a link leading out of the project
    temporary = target.with_name(f".{uuid.uuid4().hex}.tmp")
    shown.save(temporary, "PNG")
    os.replace(temporary, target)
    return target
