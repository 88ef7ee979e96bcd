"""COCO's 17 person keypoints for hand-built pose tests: their names and a standing figure facing the camera in a unit
box."""
from __future__ import annotations

import numpy as np

NAMES = ["nose", "left eye", "right eye", "left ear", "right ear", "left shoulder", "right shoulder", "left elbow",
         "right elbow", "left wrist", "right wrist", "left hip", "right hip", "left knee", "right knee", "left ankle",
         "right ankle"]
# (x, y) of each keypoint in a unit box, standing and facing the camera (the person's left on the image's right)
STANDING = np.array([(.5, .08), (.55, .05), (.45, .05), (.6, .07), (.4, .07), (.7, .25), (.3, .25), (.8, .42),
                     (.2, .42), (.85, .58), (.15, .58), (.62, .55), (.38, .55), (.63, .77), (.37, .77), (.64, .97),
                     (.36, .97)])
