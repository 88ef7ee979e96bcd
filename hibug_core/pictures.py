"""An evaluated sample's picture as every surface shows it: an image's thumbnail, or an object's crop with its true and
predicted outlines drawn."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from hibug_core.objects.crops import ensure_object_picture, picture_of
from hibug_core.thumbnails import ensure_thumbnail


def sample_picture(project, row: pd.Series, limbs=()) -> Path:
    """The picture of one row of the sample table (`limbs`: the keypoint skeleton's, where people are drawn)."""
    image = project.served_image(row["image_path"])
    if pd.notna(row.get("box_x")):
        return ensure_object_picture(project.pictures_folder, image, row["content_hash"], picture_of(row, limbs))
    return ensure_thumbnail(project.pictures_folder, image, row["content_hash"],
                            original_size=(int(row["width"]), int(row["height"])))
