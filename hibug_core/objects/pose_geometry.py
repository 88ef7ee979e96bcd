"""Person attributes measured exactly from the true keypoints: how many are visible, the body's orientation (upright,
lying, upside down), which way the person faces (front or back, from the left/right order) and whether arms or legs
cross the body's midline."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from hibug_core.attributes.measured import Bins, measured_definitions
from hibug_core.attributes.schema import Attribute
from hibug_core.objects.keypoint_errors import sides

NOT_VISIBLE = "not visible"  # too few keypoints labelled to say


@dataclass(frozen=True)
class PoseGeometryConfig:
    """Bins of the measured person attributes."""

    visible: Bins = Bins(("few", "some", "most", "all"), (1 / 3, 2 / 3, 1.0))  # share of keypoints labelled visible
    upright: float = 45.0  # the torso within this many degrees of up: upright; beyond 180 minus it: upside down


POSE_DESCRIPTIONS = {
    "visible keypoints": "the share of the person's keypoints labelled visible (few under a third, all: every one)",
    "body orientation": "the torso's direction, hips to shoulders: upright within 45 degrees of up, upside down "
                        "within 45 degrees of down, else lying",
    "facing": "front when the person's left side is on the image's right (seen along the torso), else back",
    "is crossing limbs": "a wrist or ankle lies across the body's midline, on the other side from its shoulder or hip",
}

# How a generation prompt says a person's measured pose (tags not listed are said as the tag itself).
POSE_PHRASES = {
    ("facing", "front"): "seen from the front", ("facing", "back"): "seen from behind",
    ("body orientation", "upright"): "standing upright", ("body orientation", "lying"): "lying down",
    ("body orientation", "upside down"): "upside down", ("is crossing limbs", "yes"): "with crossed arms or legs",
    ("is crossing limbs", "no"): "with arms and legs apart", ("visible keypoints", "few"): "mostly hidden",
    ("visible keypoints", "some"): "partly hidden", ("visible keypoints", "most"): "mostly in view",
    ("visible keypoints", "all"): "in full view",
}


def pose_attributes(config: PoseGeometryConfig = PoseGeometryConfig()) -> list[Attribute]:
    """The measured person attributes' definitions, as the schema holds them."""
    tags = {"visible keypoints": config.visible.tags, "body orientation": ("upright", "lying", "upside down",
                                                                           NOT_VISIBLE),
            "facing": ("front", "back", NOT_VISIBLE), "is crossing limbs": ("yes", "no", NOT_VISIBLE)}
    return measured_definitions(tags, POSE_DESCRIPTIONS, "the keypoints")


@dataclass(frozen=True)
class BodyParts:
    """Where the skeleton's shoulders, hips, wrists and ankles are, by name (-1 when it names none)."""

    left_shoulder: int
    right_shoulder: int
    left_hip: int
    right_hip: int
    ends: tuple[tuple[int, int], ...]  # (a wrist or ankle, the shoulder or hip of its side)

    @classmethod
    def named(cls, names) -> BodyParts:
        named = sides(names)

        def find(side: str, part: str) -> int:
            return next((i for i, key in enumerate(named) if key and key[0] == side and part in key[1]), -1)

        ends = tuple((find(side, end), find(side, root)) for side in "lr"
                     for end, root in (("wrist", "shoulder"), ("ankle", "hip")))
        return cls(find("l", "shoulder"), find("r", "shoulder"), find("l", "hip"), find("r", "hip"),
                   tuple((e, r) for e, r in ends if e >= 0 and r >= 0))


def measure_people(keypoints: list, names, config: PoseGeometryConfig = PoseGeometryConfig()) -> pd.DataFrame:
    """Each person's measured tags from their true keypoints ([x, y, v] * k, or None for a row that is no person);
    every person at once."""
    parts = BodyParts.named(names)
    k = len(names)
    rows = np.array([points is not None for points in keypoints], dtype=bool)
    columns = {name: np.full(len(keypoints), None, dtype=object) for name in POSE_DESCRIPTIONS}
    if not rows.any():
        return pd.DataFrame({name: values.tolist() for name, values in columns.items()},
                            index=pd.RangeIndex(len(keypoints)))
    p = np.array([points for points in keypoints if points is not None], dtype=np.float64).reshape(-1, k, 3)
    n = len(p)
    seen = p[:, :, 2] > 0
    visible = np.asarray(config.visible.tags, dtype=object)[config.visible.tag((p[:, :, 2] == 2).mean(axis=1))]
    orientation, facing = np.full(n, NOT_VISIBLE, dtype=object), np.full(n, NOT_VISIBLE, dtype=object)
    crossing = np.full(n, NOT_VISIBLE, dtype=object)
    torso = [parts.left_shoulder, parts.right_shoulder, parts.left_hip, parts.right_hip]
    measured = seen[:, torso].all(axis=1) if min(torso) >= 0 else np.zeros(n, bool)
    if measured.any():
        q = p[measured]
        shoulders = (q[:, parts.left_shoulder, :2] + q[:, parts.right_shoulder, :2]) / 2
        hips = (q[:, parts.left_hip, :2] + q[:, parts.right_hip, :2]) / 2
        up = shoulders - hips
        # image y grows downwards: the angle between the torso and straight up (0, -1)
        length = np.maximum(np.sqrt(up[:, 0] * up[:, 0] + up[:, 1] * up[:, 1]), 1e-9)
        angle = np.degrees(np.arccos(np.clip(-up[:, 1] / length, -1, 1)))
        orientation[measured] = np.where(angle <= config.upright, "upright",
                                         np.where(angle >= 180 - config.upright, "upside down", "lying"))
        across = (q[:, parts.left_shoulder, :2] - q[:, parts.right_shoulder, :2]
                  + q[:, parts.left_hip, :2] - q[:, parts.right_hip, :2])  # from the person's right to their left
        facing[measured] = np.where(up[:, 0] * across[:, 1] - up[:, 1] * across[:, 0] > 0, "front", "back")
        # the midline: the line through the hips' and shoulders' centres; a side by the sign of the cross product
        centre = (shoulders + hips) / 2

        def side(joint: int) -> np.ndarray:
            offset = q[:, joint, :2] - centre
            return np.sign(up[:, 0] * offset[:, 1] - up[:, 1] * offset[:, 0])

        any_end, crossed = np.zeros(len(q), bool), np.zeros(len(q), bool)
        for end, root in parts.ends:
            shown = seen[measured, end]
            end_side = side(end)
            any_end |= shown
            crossed |= shown & (end_side != 0) & (end_side != side(root))
        crossing[measured] = np.where(any_end, np.where(crossed, "yes", "no"), NOT_VISIBLE)
    for name, values in (("visible keypoints", visible), ("body orientation", orientation), ("facing", facing),
                         ("is crossing limbs", crossing)):
        columns[name][rows] = values
    return pd.DataFrame({name: values.tolist() for name, values in columns.items()},
                        index=pd.RangeIndex(len(keypoints)))
