"""Checking that image files exist and decode, and hashing their content, in parallel."""
from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from hibug_core.image_loader import MAX_PIXELS, as_rgb, seen_size
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.safe_files import IMAGE_MAX_BYTES, FileRefused, open_checked


@dataclass(frozen=True)
class ImageInfo:
    content_hash: str
    width: int
    height: int


def content_hash(data: bytes) -> str:
    """The key under which everything computed from an image is stored."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()




def _link_out_of_folder(path: Path) -> str | None:
    """Where a symbolic link leads when that is outside the image's own folder (the dashboard would serve it)."""
    if not path.is_symlink():
        return None
    real = os.path.realpath(path)
    return None if real.startswith(os.path.realpath(path.parent) + os.sep) else real


def _too_large(error: Exception) -> str:
    found = re.search(r"\((\d+) pixels\)", str(error))
    size = f"{int(found.group(1)):,} pixels, " if found else ""
    return f"image too large ({size}more than the {MAX_PIXELS:,} hibug reads); downscale it"


def inspect_image(path: Path, check_size: int = 64) -> ImageInfo:
    """Check, hash and read one image; raise ValueError if unusable (any error of the file system, a name too long
    included, says what it was). Its header is read first, so a file that is no image, or one larger than hibug
    reads, is refused before the rest is read; the rest is then hashed as it streams by, never held whole. The size
    is the one a person sees (EXIF orientation applied). An 8-bit PNG is checked by its chunks' checksums through to
    its end (Pillow's verify: a truncated or damaged file fails, and nothing is decompressed); other images are read
    as the image loader reads them, at reduced size where the format allows (JPEG)."""
    try:
        outside = _link_out_of_folder(path)
        if outside:
            raise ValueError(f"is a link to {outside}, outside the image's folder; copy the file there instead")
        handle = open_checked(path, max_bytes=IMAGE_MAX_BYTES, what="an image file")
    except FileRefused as error:
        raise ValueError(str(error)) from None
    except OSError as error:
        raise ValueError(f"cannot read file ({error.strerror or error})") from None
    with handle:
        if os.fstat(handle.fileno()).st_size == 0:
            raise ValueError("file is empty")
        try:
            with Image.open(handle) as header:  # the header alone: what it is and how large
                header_format = header.format
            handle.seek(0)
            digest, has_exif_chunk = _streamed_hash(handle)
            handle.seek(0)
            return ImageInfo(digest, *_checked_size(handle, header_format, has_exif_chunk, check_size))
        except UnidentifiedImageError:
            raise ValueError("not an image, or a format Pillow cannot read") from None
        except Image.DecompressionBombError as error:
            raise ValueError(_too_large(error)) from None
        except OSError as error:
            if error.errno is not None:  # the file system's, not Pillow's about the data
                raise ValueError(f"cannot read file ({error.strerror or error})") from None
            raise ValueError("corrupt or truncated image data") from None
        except (SyntaxError, ValueError):
            raise ValueError("corrupt or truncated image data") from None


HASH_CHUNK = 1 << 20


def _streamed_hash(handle) -> tuple[str, bool]:
    """content_hash() of an open file read a chunk at a time, and whether it holds a PNG eXIf chunk's name."""
    digest = hashlib.blake2b(digest_size=16)
    tail, exif = b"", False
    while chunk := handle.read(HASH_CHUNK):
        digest.update(chunk)
        exif = exif or b"eXIf" in tail + chunk[:3] or b"eXIf" in chunk
        tail = chunk[-3:]
    return digest.hexdigest(), exif


def _checked_size(handle, image_format: str, has_exif_chunk: bool, check_size: int) -> tuple[int, int]:
    with Image.open(handle) as image:
        if image_format == "PNG" and image.mode in ("RGB", "RGBA", "L", "P"):
            width, height = image.size
            image.verify()  # decoding costs 50x the check of every chunk's CRC, which damage breaks
            if has_exif_chunk:  # a PNG can carry an EXIF orientation too (read after: verify comes first)
                handle.seek(0)
                with Image.open(handle) as again:
                    width, height = seen_size(again)
            return int(width), int(height)
        # The size as a person sees it (turned by its EXIF orientation), read as every reader will (image_loader),
        # so what cannot be read is named now.
        width, height = seen_size(image)
        image.draft("RGB", (check_size, check_size))
        image.load()
        as_rgb(image)
        return int(width), int(height)


OUTSIDE_ROOTS = "outside this server's data roots (images are read only inside them)"


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):  # a name the file system refuses lies in no root
        return False
    return any(real.is_relative_to(root) for root in roots)


def inspect_images(
    paths: Iterable[Path],
    *,
    workers: int = 8,
    check_size: int = 64,
    progress: ProgressCallback = no_progress,
    within: tuple[Path, ...] | None = None,
) -> tuple[dict[Path, ImageInfo], dict[Path, str]]:
    """Inspect every distinct path once; returns (infos of good images, problem of each bad one). within: folders the
    images must lie in once links are followed; a path outside is refused unread, with one message whether or not it
    exists (a served dashboard's data roots)."""
    unique = list(dict.fromkeys(paths))
    infos: dict[Path, ImageInfo] = {}
    problems: dict[Path, str] = {}

    def one(path: Path):
        if within is not None and not _inside(path, within):
            return path, None, OUTSIDE_ROOTS
        try:
            return path, inspect_image(path, check_size), None
        except ValueError as error:
            return path, None, str(error)

    total = len(unique)
    progress("checking images", 0, total)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for done, (path, info, problem) in enumerate(pool.map(one, unique, chunksize=64), start=1):
            if problem is None:
                infos[path] = info
            else:
                problems[path] = problem
            if done % 500 == 0 or done == total:
                progress("checking images", done, total)
    return infos, problems
