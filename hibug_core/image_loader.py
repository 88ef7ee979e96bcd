"""The one image loader: every reader (import checks, thumbnails, encoders, crops, model adapters, the detail view)
opens a file as a person sees it, so the size recorded, the pixels a model sees and the picture shown agree."""
from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from hibug_core.errors import HibugError
from hibug_core.safe_files import IMAGE_MAX_BYTES, FileRefused, open_checked

logger = logging.getLogger(__name__)

# EXIF orientations that turn the picture a quarter turn: its width and height swap.
QUARTER_TURNS = (5, 6, 7, 8)
ORIENTATION_TAG = 0x0112
# Formats a browser draws as this loader does (orientation, colour profile, 16 bits, CMYK), so a small one is served
# as it is; any other (TIFF, ...) is shown through a copy this loader made.
BROWSER_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp"})
MAX_PIXELS = 2 * Image.MAX_IMAGE_PIXELS  # Pillow's refusal; below it hibug reads without its warning (see __init__)
BACKGROUND = (255, 255, 255)  # transparent pixels are seen over the page: white
_SRGB = None


class ImageUnreadable(HibugError, ValueError):
    """An image file that cannot be read; the message says what is wrong with it."""


def orientation(image: Image.Image) -> int:
    """The EXIF orientation a camera wrote (1: as stored), read without decoding the pixels."""
    try:
        value = image.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # noqa: BLE001 - a damaged EXIF block is read as no orientation, as browsers do
        return 1
    return int(value) if isinstance(value, int) and 1 <= value <= 8 else 1


def seen_size(image: Image.Image) -> tuple[int, int]:
    """(width, height) of the picture a person sees: the stored size, turned where the EXIF orientation says so."""
    width, height = image.size
    return (height, width) if orientation(image) in QUARTER_TURNS else (width, height)


def _srgb():
    global _SRGB
    if _SRGB is None:
        _SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB"))
    return _SRGB


def _in_srgb(image: Image.Image) -> Image.Image:
    """Pixels in an embedded colour profile (Adobe RGB, Display P3, CMYK press profiles) turned into sRGB, as a
    colour-managed browser shows them; an unreadable profile is ignored (logged)."""
    profile = image.info.get("icc_profile")
    if not profile or image.mode not in ("RGB", "RGBA", "CMYK", "L", "LA"):
        return image
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        if image.mode in ("RGBA", "LA"):
            alpha = image.getchannel("A")
            converted = ImageCms.profileToProfile(image.convert("RGB" if image.mode == "RGBA" else "L"), source,
                                                  _srgb(), outputMode="RGB")
            converted.putalpha(alpha)
            return converted
        return ImageCms.profileToProfile(image, source, _srgb(), outputMode="RGB")
    except (ImageCms.PyCMSError, OSError, ValueError) as error:
        logger.info("colour profile ignored: %s", error)
        return image


def _eight_bits(image: Image.Image) -> Image.Image:
    """16-bit, 32-bit and float grey levels scaled to 0-255 (Pillow's own conversion clips them: a 16-bit scan
    would come out nearly white)."""
    pixels = np.asarray(image)
    if image.mode == "F":
        top = 1.0 if np.nanmax(pixels, initial=0) <= 1.0 else 255.0
        scaled = np.clip(np.nan_to_num(pixels) / top * 255.0, 0, 255)
    else:
        top = 255 if pixels.max(initial=0) <= 255 else 65535
        scaled = pixels.astype(np.float64) * (255.0 / top)
    return Image.fromarray(np.rint(scaled).astype(np.uint8), "L")


def as_rgb(image: Image.Image) -> Image.Image:
    """An opened image as the RGB picture a person sees: turned by its EXIF orientation, in sRGB, 8 bits per channel,
    transparency over white, the first frame of an animation."""
    image = ImageOps.exif_transpose(image) if orientation(image) != 1 else image
    image = _in_srgb(image)
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        image = _eight_bits(image)
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, BACKGROUND + (255,))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")


def open_image(source: str | Path | bytes | BinaryIO, *, size_hint: int | None = None) -> Image.Image:
    """An image file (a path, its bytes, or an open file) as the RGB picture a person sees (as_rgb). size_hint: the
    largest side needed, so a JPEG is decoded at reduced scale. A path is read only when it names a regular file under
    the size cap (safe_files). Raises ImageUnreadable saying what is wrong."""
    if isinstance(source, (str, Path)):
        try:
            handle = open_checked(source, max_bytes=IMAGE_MAX_BYTES, what="an image file")
        except FileRefused as error:
            raise ImageUnreadable(f"{error}: {source}" if "not found" in str(error) else str(error)) from None
        with handle:
            return _decoded(handle, size_hint)
    return _decoded(io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source, size_hint)


def _decoded(source: BinaryIO, size_hint: int | None) -> Image.Image:
    try:
        opened = Image.open(source)
    except FileNotFoundError:
        raise ImageUnreadable(f"file not found: {source}") from None
    except UnidentifiedImageError:
        raise ImageUnreadable("not an image, or a format Pillow cannot read") from None
    except Image.DecompressionBombError:
        raise ImageUnreadable("image too large for hibug to read; downscale it") from None
    except OSError as error:
        if error.errno is None:  # Pillow's own: the data, not the file system
            raise ImageUnreadable(f"corrupt or truncated image data ({error})") from None
        raise ImageUnreadable(f"cannot read the file ({error.strerror or error})") from None
    with opened:
        try:
            if size_hint:
                opened.draft("RGB", (size_hint, size_hint))
            opened.load()
            return as_rgb(opened)
        except Image.DecompressionBombError:
            raise ImageUnreadable("image too large for hibug to read; downscale it") from None
        except (OSError, SyntaxError, ValueError) as error:
            raise ImageUnreadable(f"corrupt or truncated image data ({error})") from None


def shown_as_stored(path: str | Path) -> bool:
    """Whether a browser shows this file as open_image reads it (a format browsers draw), so it may be served as it
    is; otherwise a copy open_image made is served."""
    return Path(path).suffix.lower() in BROWSER_SUFFIXES
