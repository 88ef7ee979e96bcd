"""The segmentation demo in real headless Chromium: the Overview's mask evaluation (the AP were each error type fixed,
outlines among them), the three planted slices found among the top ranked error slices with their types, the thin
bars' slice opened with its outline errors charted, and an object's true and predicted outlines checked in the
pixels of the picture the browser was sent."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from browser_support import ARTIFACTS, first_picture, idle, open_app, open_slice_row, serve, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]
# The demo's planted slices, as the slice table names them: their bug type and what their failures are mostly (rings,
# rare in training, are found as other shapes in the wrong place: TIDE's "both").
PLANTED = {"class = bar": ("bad masks", "outline"), "color = blue": ("missing annotations", "missed"),
           "class = ring": ("rare case", "both")}


def _count(pixels: np.ndarray, colour) -> int:
    """Pixels of exactly this colour."""
    return int((pixels == np.array(colour)).all(axis=-1).sum())


@pytest.fixture(scope="module")
def segmentation_server(segmentation_demo):
    yield from serve(segmentation_demo)


def test_find_the_planted_mask_slices_with_their_types_and_see_their_outlines(browser, segmentation_server,
                                                                             segmentation_demo):
    import hibug_core.tasks  # noqa: F401 (the tasks register their evidence for the diagnosis, as the pages load them)
    from hibug_core.objects.crops import OUTCOME_COLOURS, TRUE_BOX
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(segmentation_demo, read_only=True) as project:  # where the page ranks the planted slices
        ranked = error_slices(project)
    descriptions = ranked.slices["description"].head(5).tolist()
    assert set(PLANTED) <= set(descriptions), descriptions
    found = dict(zip(ranked.slices["description"], zip(ranked.slices["bug_type"], ranked.slices["reason"])))
    for description, (bug, kind) in PLANTED.items():  # each with its bug type, its failures by their commonest type
        assert found[description][0] == bug and f"its failures: {kind}" in found[description][1], found[description]

    page = browser.new_page(viewport={"width": 1500, "height": 1600}, device_scale_factor=2)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_app(page, segmentation_server)
    shown(page, "COCO evaluation", timeout=90_000)
    shown(page, "AP if each error type were fixed", timeout=60_000)
    shown(page, "by mask outline (Boundary IoU)", timeout=60_000)
    shot(page, "segmentation-1-overview")

    row = descriptions.index("class = bar")
    open_slice_row(page, segmentation_server, row, "class = bar")
    page.locator("strong", has_text="bad masks").first.wait_for(timeout=60_000)  # its bug type, on its heading
    shown(page, "Its failures by mask outline (Boundary IoU)", timeout=60_000)
    first_picture(page)
    idle(page)
    shot(page, "segmentation-2-thin-bars")
    # The pictures as the server sent them to the browser (PNG): each object's true mask outlined in blue, and where a
    # mask went with it, that mask outlined in its outcome's colour, in exact colours no shape of the scenes has.
    true_outlines, predicted_outlines = 0, 0
    for number, image in enumerate(page.locator("[data-testid='stImage'] img").all()[:12]):
        sent = page.request.get(image.evaluate("img => img.src"))  # its absolute address
        assert sent.ok and sent.body()[:8] == b"\x89PNG\r\n\x1a\n"
        (ARTIFACTS / f"segmentation-object-{number}.png").write_bytes(sent.body())
        pixels = np.asarray(Image.open(io.BytesIO(sent.body())).convert("RGB"))
        true_outlines += _count(pixels, TRUE_BOX) > 40
        predicted_outlines += sum(_count(pixels, OUTCOME_COLOURS[o]) for o in ("true positive", "near miss")) > 40
    assert true_outlines == 12, "an object's true mask is not outlined"
    assert predicted_outlines >= 3, "the predicted masks that went with the bars are not outlined"
    assert errors == [], errors
    page.close()
