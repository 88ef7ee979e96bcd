"""Thumbnails are made once per content hash; small images are served as they are."""
from __future__ import annotations

import numpy as np
import pytest
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


def test_small_image_with_known_size_is_not_opened(tmp_path, monkeypatch):
    import os

    from hibug_core.image_loader import ImageUnreadable

    small = tmp_path / "small.png"
    Image.new("RGB", (64, 48)).save(small)
    assert ensure_thumbnail(tmp_path, small, "ef" * 16, size=128) == small
    monkeypatch.setattr("hibug_core.thumbnails.open_image", lambda *a, **k: pytest.fail("opened"))
    assert ensure_thumbnail(tmp_path, small, "cd" * 16, size=128, original_size=(64, 48)) == small
    with pytest.raises(ImageUnreadable, match="file not found"):  # its status is looked at, nothing more
        ensure_thumbnail(tmp_path, tmp_path / "gone.png", "cd" * 16, size=128, original_size=(64, 64))
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(ImageUnreadable, match="is a pipe"):
        ensure_thumbnail(tmp_path, tmp_path / "pipe.png", "cd" * 16, size=128, original_size=(64, 64))


def test_a_small_image_is_enlarged_a_whole_number_of_times_with_its_pixels_kept(tmp_path):
    from hibug_core.thumbnails import enlargement, ensure_enlarged

    assert [enlargement(64, 64, 320), enlargement(64, 48, 320), enlargement(100, 30, 320), enlargement(400, 300, 320)] \
        == [5, 5, 4, 1]
    pixels = np.zeros((2, 3, 3), dtype=np.uint8)
    pixels[0, 0] = (255, 0, 0)
    pixels[1, 2] = (0, 0, 255)
    source = tmp_path / "tiny.png"
    Image.fromarray(pixels).save(source)
    made = ensure_enlarged(tmp_path / "project", source, "ab" * 32, 4)
    large = np.asarray(Image.open(made).convert("RGB"))
    assert large.shape == (8, 12, 3)
    assert (large[:4, :4] == (255, 0, 0)).all() and (large[4:, 8:] == (0, 0, 255)).all()  # blocks, no blending
    assert (large[:4, 4:] == 0).all()
    assert ensure_enlarged(tmp_path / "project", source, "ab" * 32, 4) == made  # made once
    assert ensure_enlarged(tmp_path / "project", source, "cd" * 32, 1) == source  # large enough: as it is
