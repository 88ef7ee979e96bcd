"""Thumbnails made once per image content and kept in the project, so grids never re-read full images."""
from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

from hibug_core.image_loader import ImageUnreadable, open_image, shown_as_stored
from hibug_core.safe_files import IMAGE_MAX_BYTES, FileRefused, check_regular, folder_within, inside

THUMBS_DIR = "thumbs"


def read_only_pictures(project_folder: Path) -> Path:
    """Where the thumbnails of a project opened read-only are kept: a cache of this account's outside the project,
    one folder per project (a read-only server writes nothing into a project)."""
    import hashlib
    import tempfile

    key = hashlib.blake2b(os.path.realpath(project_folder).encode(), digest_size=12).hexdigest()
    account = os.getuid() if hasattr(os, "getuid") else 0
    cache = Path(tempfile.gettempdir()) / f"hibug-pictures-{account}"
    cache.mkdir(mode=0o700, exist_ok=True)
    info = os.lstat(cache)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != account:  # a link, a file, or another account's folder
        raise FileRefused(f"{cache} is not a folder of this account's; remove it")
    folder = cache / key
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def thumbnail_path(project_folder: Path, content_hash: str, size: int) -> Path:
    return Path(project_folder) / THUMBS_DIR / str(size) / content_hash[:2] / f"{content_hash}.jpg"


def ensure_thumbnail(project_folder: Path, image_path: Path, content_hash: str, size: int = 128,
                     original_size: tuple[int, int] | None = None) -> Path:
    """Path of a JPEG no larger than size x size, made by the one image loader; images already that small, in a
    format browsers show as the loader reads it, are used as they are.

    Passing the stored original_size (width, height) spares opening small images on every call.
    """
    as_stored = shown_as_stored(image_path)
    if as_stored and original_size is not None and max(original_size) <= size:
        try:  # served as it is: still a regular file of a sane size (not swapped for a pipe or a device since)
            check_regular(image_path, max_bytes=IMAGE_MAX_BYTES, what="an image file")
        except FileRefused as error:
            raise ImageUnreadable(str(error)) from None
        return Path(image_path)
    target = thumbnail_path(project_folder, content_hash, size)
    if target.exists() and inside(target, project_folder):  # a link leading out is made again, replacing it
        return target
    small = open_image(image_path, size_hint=size)
    if as_stored and max(small.size) <= size:
        return Path(image_path)
    small.thumbnail((size, size))
    return _written(small, project_folder, target, "JPEG", quality=85)


def _written(image, project_folder: Path, target: Path, image_format: str, **options) -> Path:
    """`image` saved at `target` whole or not at all (another process may be making the same copy), in a folder of
    the project's own (never through a link leading out: FileRefused)."""
    folder_within(project_folder, target.parent)
    temporary = target.with_name(f".{uuid.uuid4().hex}.tmp")
    image.save(temporary, image_format, **options)
    os.replace(temporary, target)
    return target


def enlargement(width: int, height: int, at_least: int) -> int:
    """The whole factor that brings an image's longer side to `at_least` pixels or more (1: large enough already)."""
    longer = max(int(width), int(height), 1)
    return max(1, -(-int(at_least) // longer))


def ensure_enlarged(project_folder: Path, image_path: Path, content_hash: str, factor: int) -> Path:
    """Path of a PNG of the image `factor` times larger, each pixel a block (no smoothing: a small image keeps its
    pixels sharp when shown large), made once by the one image loader; factor 1: the image itself."""
    if factor <= 1:
        return Path(image_path)
    target = Path(project_folder) / THUMBS_DIR / f"x{factor}" / content_hash[:2] / f"{content_hash}.png"
    if target.exists() and inside(target, project_folder):
        return target
    from PIL import Image

    image = open_image(image_path)
    large = image.resize((image.width * factor, image.height * factor), Image.Resampling.NEAREST)
    return _written(large, project_folder, target, "PNG")
