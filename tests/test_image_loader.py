"""The one image loader reads files as a person sees them, and every reader goes through it: the size recorded at
import, the pixels an encoder and a model see, the thumbnail and the detail view agree."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageCms

from hibug_core.image_loader import ImageUnreadable, open_image, seen_size
from hibug_core.ingest.images import inspect_image

RED, BLUE = (230, 20, 20), (20, 20, 230)


def _turned_jpeg(path: Path, orientation: int = 6) -> Path:
    """A 40 x 20 JPEG whose left half is red, right half blue, stored with EXIF orientation 6 (turn 90° clockwise to
    view): a person sees it 20 x 40, red on top."""
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[:, :20], pixels[:, 20:] = RED, BLUE
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(path, "JPEG", quality=95, exif=exif.tobytes())
    return path


def _close(pixel, colour, tolerance=30) -> bool:
    return all(abs(int(a) - int(b)) <= tolerance for a, b in zip(pixel, colour))


def test_a_turned_camera_image_is_recorded_read_and_shown_as_seen(tmp_path):
    path = _turned_jpeg(tmp_path / "turned.jpg")
    with Image.open(path) as raw:
        assert raw.size == (40, 20) and seen_size(raw) == (20, 40)
    info = inspect_image(path)
    assert (info.width, info.height) == (20, 40)
    image = open_image(path)
    assert image.size == (20, 40) and image.mode == "RGB"
    assert _close(image.getpixel((10, 5)), RED) and _close(image.getpixel((10, 35)), BLUE)


def test_every_reader_sees_the_same_pixels(tmp_path):
    """The encoder's decode, the measured-attribute reader, the LLM's data URL, an object crop and a thumbnail all
    see the turned image."""
    import base64

    from hibug_core.embeddings.compute import decode
    from hibug_core.llm.client import image_data_url
    from hibug_core.objects.crops import ObjectPicture, ensure_object_picture
    from hibug_core.thumbnails import ensure_thumbnail

    path = _turned_jpeg(tmp_path / "turned.jpg")
    assert decode(str(path), lambda image: image.size, 64) == (20, 40)
    sent = Image.open(io.BytesIO(base64.b64decode(image_data_url(str(path)).split(",", 1)[1])))
    assert sent.size == (20, 40) and _close(sent.getpixel((10, 5)), RED)
    thumb = Image.open(ensure_thumbnail(tmp_path / "project", path, "ab" * 16, size=16))
    assert thumb.size == (8, 16) and _close(thumb.getpixel((4, 2)), RED)
    crop = ensure_object_picture(tmp_path / "project", path, "cd" * 16,
                                 ObjectPicture((0, 0, 20, 20), None, "near miss"),
                                 size=40, margin=0.0)
    with Image.open(crop) as picture:  # the box's square is the red top of the turned image
        assert _close(picture.convert("RGB").getpixel((picture.width // 2, picture.height // 2)), RED)


def test_sixteen_bit_grey_keeps_its_levels(tmp_path):
    """Pillow's own conversion clips 16-bit levels to 255: a mid-grey scan would look white."""
    levels = np.full((8, 8), 32768, np.uint16)
    levels[0, 0] = 65535
    path = tmp_path / "scan.png"
    Image.fromarray(levels).save(path)
    pixels = np.asarray(open_image(path))
    assert tuple(pixels[4, 4]) == (128, 128, 128) and tuple(pixels[0, 0]) == (255, 255, 255)
    assert (inspect_image(path).width, inspect_image(path).height) == (8, 8)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_transparent_pixels_are_seen_over_white(tmp_path, mode):
    image = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    image.putpixel((0, 0), (200, 10, 10, 255))
    path = tmp_path / f"clear-{mode}.png"
    (image if mode == "RGBA" else image.convert(mode)).save(path, transparency=0) if mode == "P" else \
        (image if mode == "RGBA" else image.convert(mode)).save(path)
    seen = open_image(path)
    assert seen.getpixel((3, 3)) == (255, 255, 255)


def test_cmyk_and_a_colour_profile_come_out_in_srgb(tmp_path):
    cmyk = tmp_path / "press.jpg"
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(cmyk, "JPEG", quality=95)  # pure red ink
    assert _close(open_image(cmyk).getpixel((4, 4)), (255, 0, 0), tolerance=40)
    tagged = tmp_path / "tagged.png"
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    Image.new("RGB", (8, 8), (40, 120, 200)).save(tagged, icc_profile=srgb)
    assert _close(open_image(tagged).getpixel((4, 4)), (40, 120, 200), tolerance=2)
    broken = tmp_path / "broken-profile.png"
    Image.new("RGB", (8, 8), (40, 120, 200)).save(broken, icc_profile=b"not a profile")
    assert open_image(broken).getpixel((4, 4)) == (40, 120, 200)  # an unreadable profile is ignored


def test_an_animation_is_its_first_frame_and_a_tiff_is_shown_through_a_copy(tmp_path):
    from hibug_core.thumbnails import ensure_thumbnail

    frames = [Image.new("RGB", (6, 6), colour) for colour in (RED, BLUE)]
    gif = tmp_path / "moving.gif"
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    assert _close(open_image(gif).getpixel((3, 3)), RED)
    tiff = tmp_path / "scan.tif"
    Image.new("RGB", (6, 6), BLUE).save(tiff)
    shown = ensure_thumbnail(tmp_path / "project", tiff, "ef" * 16, size=16, original_size=(6, 6))
    assert shown.suffix == ".jpg" and _close(Image.open(shown).getpixel((3, 3)), BLUE)  # browsers cannot draw TIFF
    png = tmp_path / "small.png"
    Image.new("RGB", (6, 6), BLUE).save(png)
    assert ensure_thumbnail(tmp_path / "project", png, "12" * 16, size=16, original_size=(6, 6)) == png


def _jpeg_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.mark.parametrize("data, named", [(b"", "not an image"), (_jpeg_bytes()[:300], "corrupt or truncated"),
                                         (b"plain text", "not an image")])
def test_what_cannot_be_read_is_named(data, named, tmp_path):
    with pytest.raises(ImageUnreadable, match=named):
        open_image(data)
    with pytest.raises(ImageUnreadable, match="file not found"):
        open_image(tmp_path / "absent.png")


def test_a_coco_record_of_the_unturned_size_says_how_the_file_is_seen(tmp_path):
    from hibug_core.objects.coco import image_sizes_issues, parse_ground_truth

    _turned_jpeg(tmp_path / "turned.jpg")
    truth = parse_ground_truth({"images": [{"id": 1, "file_name": "turned.jpg", "width": 40, "height": 20}],
                                "categories": [{"id": 1, "name": "thing"}], "annotations": []},
                               str(tmp_path / "instances.json"))
    info = inspect_image(tmp_path / "turned.jpg")
    [issue] = image_sizes_issues(truth, {1: (info.width, info.height)})
    assert str(issue) == ("images[0], field 'width': the file turned.jpg is 20 x 40 pixels as seen (where its EXIF "
                          "orientation turns it a quarter turn, boxes are drawn on the turned image, as viewers and "
                          "hibug show it), the record says 40 x 20")
