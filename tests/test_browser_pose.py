"""The pose demo in real headless Chromium: the Overview's keypoint evaluation (the AP if each error type were fixed),
then a planted pose slice found among the top ranked error slices with its keypoint error mix, opened, and its people
shown with their skeletons drawn (checked in the pixels the browser shows)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from browser_support import ARTIFACTS, first_picture, idle, open_app, open_slice_row, serve, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLANTED = ("facing = back", "pose = lying", "body orientation = lying", "shirt colour = black & pose = arms raised",
           "object size = small")  # the demo's planted slices, as the slice table names them


@pytest.fixture(scope="module")
def pose_server(pose_demo):
    yield from serve(pose_demo)


def test_find_a_planted_pose_slice_with_its_error_mix_and_see_its_skeletons(browser, pose_server, pose_demo):
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(pose_demo, read_only=True) as project:  # where the page ranks the planted slices
        ranked = error_slices(project)
    descriptions = ranked.slices["description"].tolist()
    top = dict(zip(descriptions[:5], ranked.slices["bug_type"].head(5)))
    # The swap found as the annotation bug it is; the people lying and the small ones, rare in training, as a shift
    assert top.get("facing = back") == "left and right swapped", top
    assert top.get("pose = lying") == "distribution shift" and top.get("object size = small") == "distribution shift"
    row = next(rank for rank, d in enumerate(descriptions[:5]) if d in PLANTED)
    planted = descriptions[row]
    mix = ranked.slices["reason"].iat[row]
    assert "its failures: " in mix

    # Twice the pixels per CSS pixel: a grid's picture is shown at least at its own size, so thin limbs keep
    # their colour
    page = browser.new_page(viewport={"width": 1500, "height": 1600}, device_scale_factor=2)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_app(page, pose_server)
    shown(page, "COCO evaluation", timeout=90_000)
    shown(page, "AP if each error type were fixed", timeout=60_000)
    shot(page, "pose-1-overview")

    open_slice_row(page, pose_server, row, planted)
    page.locator("strong", has_text=top[planted]).first.wait_for(timeout=60_000)  # its bug type, on its heading
    shown(page, "its failures: " + mix.split("its failures: ")[1].split(",")[0], timeout=60_000)
    shown(page, "Its failures by keypoint error type", timeout=60_000)
    image = first_picture(page)
    idle(page)
    shot(page, "pose-2-planted-slice")
    raw = image.screenshot()
    (ARTIFACTS / "pose-first-person.png").write_bytes(raw)
    pixels = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")).astype(int)

    def near(colour, within: int) -> int:
        return int((((pixels - np.array(colour)) ** 2).sum(axis=-1) < within ** 2).sum())

    # Blue (37, 99, 235) is the true box's and the true skeleton's; the figures' blue shirts (30, 60, 190) are 60 away.
    assert near((37, 99, 235), 40) > 60, "the true box and skeleton are not drawn over the person"
    # Predicted joints coloured by their keypoint type, in the colours only a skeleton's joints have (boxes are blue,
    # green, amber or red; no shirt comes near): inversion purple (147, 51, 234), swap orange (249, 115, 22). The
    # slice's failures are mostly inversions.
    typed = [near(colour, 30) for colour in ((147, 51, 234), (249, 115, 22))]
    assert sum(typed) > 30, f"no predicted joint coloured by its type: {typed}"
    assert errors == [], errors
    page.close()
