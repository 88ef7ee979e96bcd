"""Person attributes measured from keypoints, on hand-built skeletons with COCO's 17 keypoints: visible keypoints,
body orientation, facing and crossed limbs, each case by construction."""
from __future__ import annotations

import numpy as np
import pytest

from hibug_core.objects.pose_geometry import NOT_VISIBLE, measure_people, pose_attributes

from pose_support import NAMES, STANDING


def person(points=STANDING, visibility=2, scale=100.0, offset=(50.0, 20.0)):
    xy = np.asarray(points, float) * scale + offset
    v = np.broadcast_to(np.asarray(visibility, float), (len(xy),))
    return np.column_stack([xy, v]).ravel().tolist()


def rotated(degrees: float) -> np.ndarray:
    """STANDING turned by `degrees` about its centre (clockwise on the screen: image y grows downwards)."""
    t = np.radians(degrees)
    centre = STANDING.mean(axis=0)
    turn = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
    return (STANDING - centre) @ turn.T + centre


def measured(*people):
    return measure_people(list(people), NAMES).to_dict("records")


def test_a_standing_person_facing_the_camera():
    assert measured(person()) == [{"visible keypoints": "all", "body orientation": "upright", "facing": "front",
                                   "is crossing limbs": "no"}]


@pytest.mark.parametrize("degrees, orientation", [(30, "upright"), (60, "lying"), (90, "lying"), (-90, "lying"),
                                                  (130, "lying"), (150, "upside down"), (180, "upside down")])
def test_orientation_follows_the_torso(degrees, orientation):
    (tags,) = measured(person(rotated(degrees)))
    assert tags["body orientation"] == orientation
    assert tags["facing"] == "front", "turning a person in the picture's plane does not turn them around"


def test_seen_from_behind_the_sides_swap():
    behind = STANDING.copy()
    behind[:, 0] = 1 - behind[:, 0]  # mirrored: the person's left now on the image's left
    assert measured(person(behind))[0]["facing"] == "back"
    centre = behind.mean(axis=0)
    lying = (behind - centre) @ np.array([[0.0, -1.0], [1.0, 0.0]]).T + centre  # and turned to lie down
    assert measured(person(lying))[0] == {"visible keypoints": "all", "body orientation": "lying", "facing": "back",
                                          "is crossing limbs": "no"}


def test_a_wrist_or_ankle_across_the_midline_crosses_limbs():
    arm = STANDING.copy()
    arm[9] = (0.2, 0.5)  # the left wrist over on the right side of the body
    leg = STANDING.copy()
    leg[16] = (0.6, 0.97)  # the right ankle over on the left side
    assert [t["is crossing limbs"] for t in measured(person(arm), person(leg))] == ["yes", "yes"]


def test_unlabelled_keypoints_make_what_they_decide_not_visible():
    visibility = np.full(17, 2.0)
    visibility[[11, 12]] = 0  # no hips
    assert measured(person(visibility=visibility))[0] == {
        "visible keypoints": "most", "body orientation": NOT_VISIBLE, "facing": NOT_VISIBLE,
        "is crossing limbs": NOT_VISIBLE}
    visibility = np.full(17, 2.0)
    visibility[[9, 10, 15, 16]] = 0  # no wrists, no ankles
    visibility[:5] = 1  # the face labelled but hidden
    tags = measured(person(visibility=visibility))[0]
    assert tags["is crossing limbs"] == NOT_VISIBLE and tags["visible keypoints"] == "some"
    assert measured(None) == [{"visible keypoints": None, "body orientation": None, "facing": None,
                               "is crossing limbs": None}]


def test_the_attributes_are_declared_with_every_tag_they_give():
    declared = {a.name: set(a.tags) for a in pose_attributes()}
    assert declared["body orientation"] == {"upright", "lying", "upside down", NOT_VISIBLE}
    assert all(a.source == "measured" for a in pose_attributes())
