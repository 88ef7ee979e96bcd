"""The measured attributes' definitions (HiBug2's "global" attributes): their bins and tags. Computing them from
pixels is tagging.measured's job."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hibug_core.attributes.schema import MEASURED, Attribute

COLOUR_NAMES = ("black", "white", "gray", "red", "orange", "brown", "yellow", "green", "teal", "blue", "purple", "pink")


@dataclass(frozen=True)
class Bins:
    """Tags of a numeric measure: value < edges[0] -> tags[0], ..., value >= edges[-1] -> tags[-1]."""

    tags: tuple[str, ...]
    edges: tuple[float, ...]

    def tag(self, values: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.edges), values, side="right").astype(np.int16)


@dataclass(frozen=True)
class MeasuredConfig:
    """Thresholds of the measured attributes (values on a 0..1 scale unless said otherwise)."""

    brightness: Bins = Bins(("dark", "medium", "bright"), (0.3, 0.7))  # mean luma
    contrast: Bins = Bins(("low", "medium", "high"), (0.12, 0.25))  # RMS contrast: std of luma
    saturation: Bins = Bins(("muted", "moderate", "vivid"), (0.2, 0.5))  # mean HSV saturation
    colourfulness: Bins = Bins(("low", "medium", "high"), (20.0, 50.0))  # Hasler & Suesstrunk, 0..255 units
    sharpness: Bins = Bins(("blurry", "soft", "sharp"), (50.0, 300.0))  # variance of the Laplacian, 0..255 units
    noise_level: Bins = Bins(("clean", "slight noise", "noisy"), (2.0, 6.0))  # Immerkaer sigma, 0..255 units
    resolution: Bins = Bins(("low", "medium", "high"), (224.0, 768.0))  # shorter side in pixels
    aspect_ratio: Bins = Bins(("portrait", "square", "landscape"), (0.9, 1.1))  # width / height
    foreground_distance: float = 0.15  # RGB distance from the border colour that makes a pixel part of the subject


def measured_attributes(config: MeasuredConfig = MeasuredConfig()) -> list[Attribute]:
    bins = measure_bins(config)
    attributes = [Attribute(name=name, group="global", tags=b.tags, source=MEASURED,
                            description=f"measured from pixels; edges {b.edges}") for name, b in bins.items()]
    attributes.append(Attribute(name="dominant colour", group="global", tags=COLOUR_NAMES, source=MEASURED,
                                description="most frequent named colour of the subject (pixels unlike the border)"))
    return attributes


def measure_bins(config: MeasuredConfig) -> dict[str, Bins]:
    return {"brightness": config.brightness, "contrast": config.contrast, "saturation": config.saturation,
            "colourfulness": config.colourfulness, "sharpness": config.sharpness, "noise level": config.noise_level,
            "resolution": config.resolution, "aspect ratio": config.aspect_ratio}


def measured_definitions(tags: dict[str, tuple[str, ...]], descriptions: dict[str, str], measured_from: str, *,
                         group: str = "main object") -> list[Attribute]:
    """Attributes measured exactly (source MEASURED) from `measured_from` ("the masks"), one per name in `tags`: a
    yes/no one where its name says "is ...", described by `descriptions`."""
    return [Attribute(name=name, group=group, kind="binary" if name.startswith("is ") else "descriptive",
                      tags=tags[name], source=MEASURED, description=f"measured from {measured_from}: "
                      f"{descriptions[name]}") for name in tags]
