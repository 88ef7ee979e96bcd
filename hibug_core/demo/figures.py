"""Scenes for the pose demo: articulated stick figures (13 keypoints with left/right pairs) in several poses, seen from
the front or from behind, in coloured clothes on varied backgrounds, overlapping and cut by the border, with their
exact keypoints, visibility and boxes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.errors import check_fields

FIGURE_KEYPOINTS = ("head", "left shoulder", "right shoulder", "left elbow", "right elbow", "left wrist", "right wrist",
                    "left hip", "right hip", "left knee", "right knee", "left ankle", "right ankle")
FIGURE_LIMBS = ((0, 1), (0, 2), (1, 2), (1, 3), (3, 5), (2, 4), (4, 6), (1, 7), (2, 8), (7, 8), (7, 9), (9, 11),
                (8, 10), (10, 12))
# OKS sigmas: COCO's for the joints it shares (pycocotools' values), its ear's for the head's centre
FIGURE_SIGMAS = (0.035, 0.079, 0.079, 0.072, 0.072, 0.062, 0.062, 0.107, 0.107, 0.087, 0.087, 0.089, 0.089)
POSES = ("standing", "arms raised", "sitting", "lying")
# Shirt colours stay clear of the colours hibug draws over people (the true skeleton's blue, the keypoint types'
# green, yellow, purple, orange and red), so a picture's overlay can be told from the figure in its pixels.
SHIRT_COLOURS = {"red": (200, 30, 60), "blue": (30, 60, 190), "green": (40, 140, 40), "yellow": (235, 200, 30),
                 "purple": (140, 50, 170), "black": (25, 25, 25)}
TROUSER_COLOURS = ((40, 40, 90), (60, 60, 60), (110, 70, 40), (20, 20, 20))
BACKGROUNDS = ("plain", "striped", "noisy")
SKIN = ((240, 200, 165), (200, 150, 110), (140, 95, 65))
HAIR = (70, 45, 25)


@dataclass(frozen=True)
class FigureSceneConfig:
    """How the pose demo's scenes are drawn; the shares are each figure's chance, drawn independently."""

    size: int = 128  # square images, pixels
    min_people: int = 1
    max_people: int = 3
    small_height: tuple[int, int] = (22, 40)  # a small figure's height, pixels (COCO's small area class)
    height: tuple[int, int] = (58, 100)  # every other figure's height
    small_share: float = 0.25
    pose_shares: tuple[float, float, float, float] = (0.4, 0.25, 0.2, 0.15)  # standing, arms raised, sitting, lying
    back_share: float = 0.25  # seen from behind
    crossing_share: float = 0.15  # one arm across the body
    truncated_share: float = 0.12  # placed across the image's border
    max_overlap: float = 0.35  # largest IoU between two figures' boxes

    def __post_init__(self):
        check_fields(self, {
            "size": (self.size >= 64, "64 or more"),
            "max_people": (1 <= self.min_people <= self.max_people, "at least min_people, which is 1 or more"),
            "pose_shares": (len(self.pose_shares) == len(POSES) and abs(sum(self.pose_shares) - 1) < 1e-6
                            and min(self.pose_shares) >= 0, f"{len(POSES)} shares summing to 1"),
            **{name: (0 <= getattr(self, name) <= 1, "a share in [0, 1]") for name in
               ("small_share", "back_share", "crossing_share", "truncated_share", "max_overlap")}})


def _skeleton(rng, pose: str, back: bool, crossing: bool) -> np.ndarray:
    """A figure's 13 keypoints (x, y) in a body frame: height 1, hips' centre at the origin, y up, unrotated. Seen
    from the front the person's left is on the image's right (+x); from behind it is on the left."""
    def along(start, angle, length):  # angle from straight down, positive away from the body (x sign applied later)
        return start + length * np.array([np.sin(angle), -np.cos(angle)])

    points = np.zeros((13, 2))
    points[0] = (0, 0.41 + rng.normal(0, 0.005))
    for side, sign in ((0, 1.0), (1, -1.0)):  # the person's left, then right, before mirroring for the view
        shoulder = np.array([0.12, 0.3])
        if pose == "arms raised":
            upper, fore = rng.uniform(2.3, 2.9), rng.uniform(2.6, 3.1)
        else:
            upper = rng.uniform(0.1, 0.45)
            fore = upper + rng.uniform(-0.1, 0.5)
        if crossing and side == 0:
            upper, fore = -rng.uniform(0.1, 0.35), -rng.uniform(1.7, 2.1)  # the forearm folds across the chest
        elbow = along(shoulder, upper, 0.17)
        wrist = along(elbow, fore, 0.16)
        hip = np.array([0.07, 0.0])
        if pose == "sitting":
            knee = along(hip, rng.uniform(1.1, 1.5), 0.15)  # the thigh seen shortened, knees apart
            ankle = along(knee, rng.uniform(-0.1, 0.15), 0.23)
        else:
            knee = along(hip, rng.uniform(0.03, 0.18), 0.25)
            ankle = along(knee, rng.uniform(-0.05, 0.1), 0.24)
        for joint, point in zip((1, 3, 5, 7, 9, 11), (shoulder, elbow, wrist, hip, knee, ankle)):
            points[joint + side] = point * [sign, 1]
    if back:
        points[:, 0] *= -1
    return points


def _place(points: np.ndarray, height: float, angle: float, centre: np.ndarray) -> np.ndarray:
    """The body frame's points in image pixels: scaled, rotated by `angle` (radians), centred at `centre`, y down."""
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    scaled = points * height @ rotation.T
    low, high = scaled.min(axis=0), scaled.max(axis=0)
    return (scaled - (low + high) / 2) * [1, -1] + centre


def _draw_figure(draw, points: np.ndarray, height: float, shirt, trousers, skin, back: bool | None) -> None:
    """Draw a figure: legs, torso, arms, hands and head; its face unless seen from behind (back) or drawn as a mask
    (back None: every part in the one fill `shirt`)."""
    limb = max(2, int(round(height * 0.06)))
    for a, b in ((7, 9), (9, 11), (8, 10), (10, 12)):
        draw.line([tuple(points[a]), tuple(points[b])], fill=trousers, width=limb)
    draw.polygon([tuple(points[i]) for i in (1, 2, 8, 7)], fill=shirt)
    for a, b in ((1, 3), (3, 5), (2, 4), (4, 6)):
        draw.line([tuple(points[a]), tuple(points[b])], fill=shirt, width=limb)
    for wrist in (5, 6):
        r = limb * 0.6
        draw.ellipse([points[wrist][0] - r, points[wrist][1] - r, points[wrist][0] + r, points[wrist][1] + r],
                     fill=skin)
    x, y = points[0]
    r = max(2.0, height * 0.075)
    draw.ellipse([x - r, y - r, x + r, y + r], fill=skin if back is None else HAIR if back else skin)
    if back is False:  # a face: two eyes and a mouth on the side the person faces (the camera)
        e = max(0.6, r * 0.22)
        up = points[0] - (points[1] + points[2]) / 2
        up = up / max(np.linalg.norm(up), 1e-9)
        across = np.array([-up[1], up[0]])
        for offset in (across * r * 0.4 + up * r * 0.2, -across * r * 0.4 + up * r * 0.2):
            ex, ey = points[0] + offset
            draw.ellipse([ex - e, ey - e, ex + e, ey + e], fill=(20, 20, 20))
        mx, my = points[0] - up * r * 0.45
        draw.line([(mx - across[0] * r * 0.3, my - across[1] * r * 0.3),
                   (mx + across[0] * r * 0.3, my + across[1] * r * 0.3)], fill=(150, 30, 30), width=1)


def _background(rng, kind: str, size: int):
    from PIL import Image, ImageDraw

    base = rng.integers(190, 246, 3)
    if kind == "noisy":
        noise = rng.normal(0, 18, (size, size, 3))
        return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))
    image = Image.new("RGB", (size, size), tuple(int(v) for v in base))
    if kind == "striped":
        draw = ImageDraw.Draw(image)
        other = tuple(int(v) for v in np.clip(base - rng.integers(25, 45, 3), 0, 255))
        width = int(rng.integers(6, 14))
        vertical = rng.random() < 0.5
        for start in range(0, size, 2 * width):
            box = [start, 0, start + width - 1, size] if vertical else [0, start, size, start + width - 1]
            draw.rectangle(box, fill=other)
    return image


def _iou(a, b) -> float:
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def render_figures(n: int, seed: int, config: FigureSceneConfig = FigureSceneConfig()) -> tuple[list, pd.DataFrame]:
    """`n` scenes (PIL images) and one row per figure: scene, pose, facing, shirt colour, background, whether it is
    small, crosses an arm or is cut by the border, its box (x, y, w, h of its visible pixels) and its keypoints (13
    x, y, v triples: v = 2 visible, 1 hidden behind a figure drawn later, 0 outside the image). Seeded."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    size = config.size
    images, rows = [], []
    for scene in range(n):
        background = BACKGROUNDS[int(rng.integers(len(BACKGROUNDS)))]
        image = _background(rng, background, size)
        draw = ImageDraw.Draw(image)
        figures = []
        for _ in range(int(rng.integers(config.min_people, config.max_people + 1))):
            small = bool(rng.random() < config.small_share)
            pose = POSES[int(rng.choice(len(POSES), p=config.pose_shares))]
            back = bool(rng.random() < config.back_share)
            crossing = pose in ("standing", "sitting", "lying") and bool(rng.random() < config.crossing_share)
            points = _skeleton(rng, pose, back, crossing)
            height = float(rng.uniform(*(config.small_height if small else config.height)))
            angle = rng.uniform(-0.15, 0.15) + (rng.choice([-1, 1]) * rng.uniform(1.3, 1.85) if pose == "lying" else 0)
            extent = np.ptp(_place(points, height, angle, np.zeros(2)), axis=0)
            truncated = bool(rng.random() < config.truncated_share)
            for _attempt in range(20):
                if truncated:  # the centre near an edge, so that 20-60% of the figure lies outside
                    centre = rng.uniform(0, size, 2)
                    axis, edge = int(rng.integers(2)), int(rng.integers(2))
                    cut = rng.uniform(0.2, 0.6) * extent[axis]
                    centre[axis] = (-extent[axis] / 2 + (extent[axis] - cut)) if edge == 0 else \
                        size + extent[axis] / 2 - (extent[axis] - cut)
                else:
                    centre = rng.uniform(extent / 2 + 1, size - extent / 2 - 1)
                placed = _place(points, height, angle, centre)
                box = (*placed.min(axis=0), *placed.max(axis=0))
                if all(_iou(box, f["extent"]) <= config.max_overlap for f in figures):
                    break
            else:
                continue
            shirt = list(SHIRT_COLOURS)[int(rng.integers(len(SHIRT_COLOURS)))]
            figure = {"points": placed, "height": height, "shirt": shirt, "pose": pose, "back": back,
                      "crossing": crossing, "small": small, "extent": box,
                      "trousers": TROUSER_COLOURS[int(rng.integers(len(TROUSER_COLOURS)))],
                      "skin": SKIN[int(rng.integers(len(SKIN)))]}
            mask = Image.new("L", (size, size), 0)
            _draw_figure(ImageDraw.Draw(mask), placed, height, 255, 255, 255, None)
            figure["mask"] = np.asarray(mask) > 0
            _draw_figure(draw, placed, height, SHIRT_COLOURS[shirt], figure["trousers"], figure["skin"], back)
            figures.append(figure)
        for order, figure in enumerate(figures):
            rows.append(_figure_row(scene, order, figure, figures[order + 1:], background, size))
        images.append(image)
    frame = pd.DataFrame(rows)
    return images, frame[frame["w"] > 0].reset_index(drop=True)


def _figure_row(scene: int, order: int, figure: dict, later: list[dict], background: str, size: int) -> dict:
    """One figure's row: its visible box, and each keypoint's visibility (outside the image, or under a later
    figure's pixels)."""
    visible_mask = figure["mask"].copy()
    for other in later:
        visible_mask &= ~other["mask"]
    ys, xs = np.nonzero(visible_mask)
    box = (float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)) \
        if len(xs) else (0.0, 0.0, 0.0, 0.0)
    keypoints = []
    for x, y in figure["points"]:
        inside = 0 <= x < size and 0 <= y < size
        hidden = inside and any(other["mask"][int(y), int(x)] for other in later)
        v = 0 if not inside else 1 if hidden else 2
        keypoints += [round(float(x), 2), round(float(y), 2), v] if v else [0.0, 0.0, 0]
    outside = not (0 <= figure["extent"][0] and 0 <= figure["extent"][1] and figure["extent"][2] < size
                   and figure["extent"][3] < size)
    return {"scene": scene, "order": order, "pose": figure["pose"], "facing": "back" if figure["back"] else "front",
            "shirt colour": figure["shirt"], "background": background, "small": figure["small"],
            "crossing": figure["crossing"], "truncated": outside, "height": round(figure["height"], 2),
            "x": box[0], "y": box[1], "w": box[2], "h": box[3], "keypoints": keypoints}
