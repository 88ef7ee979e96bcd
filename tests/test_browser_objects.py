"""The detection demo in real headless Chromium: the Overview's COCO evaluation and its confusion matrix (one click on
a cell opens its objects), then the three planted bugs named exactly in the top 5 error slices, typed from the
detector's training annotations (missing annotations twice, bad boxes); the green triangles' slice opened, its bug
type shown, and its objects shown as crops with their true boxes drawn (checked in the pixels the browser shows)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from browser_support import ARTIFACTS, first_picture, idle, open_app, open_slice_row, serve, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PLANTED = {("color", "green"), ("class", "triangle")}  # left unannotated in the detector's training


@pytest.fixture(scope="module")
def objects_server(detection_demo):
    yield from serve(detection_demo)


def test_find_the_planted_object_slice_and_see_its_boxes(browser, objects_server, detection_demo):
    from hibug_core.objects.summary import object_confusion
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(detection_demo, read_only=True) as project:  # where the page ranks the planted slices
        ranked = error_slices(project)
        samples = project.samples(ranked.model).join(project.objects(ranked.model))
    val = samples[(samples["split"] == "val") & samples["outcome"].notna()]
    background_circles = int(object_confusion(val).at["(background)", "circle"])  # the cell the page shows
    top = ranked.slices.head(5)

    def named(conditions: set, bug_type: str) -> int | None:
        """The rank (from 0) of a top-5 slice that is exactly the planted bug, typed as it was planted."""
        return next((rank for rank, (definition, typed) in enumerate(zip(top["definition"], top["bug_type"]))
                     if conditions == set(definition) and typed == bug_type), None)

    row = named(PLANTED, "missing annotations")
    assert row is not None, top[["description", "bug_type"]].to_string()
    assert named({("color", "blue"), ("object size", "small")}, "missing annotations") is not None
    assert named({("is truncated", "yes")}, "bad boxes") is not None
    description = top["description"].iat[row]

    page = browser.new_page(viewport={"width": 1500, "height": 1600})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_app(page, objects_server)
    shown(page, "COCO evaluation", timeout=90_000)
    shown(page, "Missed objects by box error type (TIDE)")
    shown(page, "False positives by error type")
    _one_click_on_the_background_row_opens_its_false_positives(page, background_circles)
    shot(page, "objects-1-overview")

    open_slice_row(page, objects_server, row, description)
    shown(page, "Its failures by box error type (TIDE)", timeout=60_000)
    # the bug type, from the training annotations, as the slice's heading line says it (not the table's cell)
    page.locator("strong", has_text="missing annotations").first.wait_for(timeout=60_000)
    reason = page.get_by_text("annotated in the training annotations").first.inner_text()
    assert "in training images, but only" in reason
    image = first_picture(page)
    idle(page)
    shot(page, "objects-2-planted-slice")
    raw = image.screenshot()
    (ARTIFACTS / "objects-first-crop.png").write_bytes(raw)
    pixels = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")).astype(int)
    red, green, blue = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    # The true box's blue (37, 99, 235), as the browser scales it: blue well above red, green half-way (the scenes'
    # own blue, (0, 0, 255), has no green).
    true_box_blue = ((blue > 150) & (blue - red > 60) & (green >= 60) & (green <= 130)).sum()
    assert true_box_blue > 40, "the true box is not drawn on the object's crop"
    assert errors == [], errors
    page.close()


def _one_click_on_the_background_row_opens_its_false_positives(page, expected: int) -> None:
    """The Overview's confusion matrix: one click on the (background) → circle cell lists that many objects, each crop
    captioned a false positive (the matrix and the crops agree)."""
    grid = page.locator(".st-key-overview_object_confusion")
    grid.scroll_into_view_if_needed()
    grid.locator("canvas").first.wait_for()
    idle(page)
    area = grid.bounding_box()
    # the index column, then circle, rectangle, triangle, (missed); the header and three class rows above it
    x = area["x"] + area["width"] * 0.27
    y = area["y"] + 35 * 4 + 17
    page.mouse.click(x, y)  # one click, no hover before it
    shown(page, f"{expected:,} objects: true (background), predicted circle", timeout=60_000)
    idle(page)
    captions = page.get_by_test_id("stImageCaption").all_inner_texts()  # the cell's crops, then the Overview's own
    cell = [c for c in captions if "→" not in c]  # grid of failures ("label → prediction")
    assert len(cell) == min(expected, 24) and all(c.startswith("false positive") for c in cell), cell
