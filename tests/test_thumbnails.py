"""Thumbnails are made once per content hash; small images are served as they are."""
from __future__ import annotations

from PIL import Image

from hibug_core.thumbnails import ensure_thumbnail, thumbnail_path


def test_large_image_gets_one_cached_jpeg(tmp_path):
    source = tmp_path / "big.png"
    Image.new("RGB", (400, 200), (10, 200, 30)).save(source)
    made = ensure_thumbnail(tmp_path / "project", source, "ab" * 16, size=128)
    assert made == thumbnail_path(tmp_path / "project", "ab" * 16, 128)
    with Image.open(made) as thumb:
        assert (thumb.format, thumb.size) == ("JPEG", (128, 64))
    source.unlink()  # a cached thumbnail never reads the source again
    assert ensure_thumbnail(tmp_path / "project", source, "ab" * 16, size=128) == made


def test_small_image_with_known_size_is_not_opened(tmp_path):
    missing = tmp_path / "never-read.png"
    assert ensure_thumbnail(tmp_path, missing, "cd" * 16, size=128, original_size=(64, 64)) == missing
    small = tmp_path / "small.png"
    Image.new("RGB", (64, 48)).save(small)
    assert ensure_thumbnail(tmp_path, small, "ef" * 16, size=128) == small
