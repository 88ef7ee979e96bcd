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
# The demo's planted slices, as the slice table names them, and what each slice's failures are mostly
PLANTED = {"class = bar": "outline", "color = blue": "missed", "class = ring": None}


@pytest.fixture(scope="module")
def segmentation_server(segmentation_demo):
    yield from serve(segmentation_demo)


def test_find_the_planted_mask_slices_with_their_types_and_see_their_outlines(browser, segmentation_server,
                                                                             segmentation_demo):
    from hibug_core.objects.crops import OUTCOME_COLOURS, TRUE_BOX
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(segmentation_demo, read_only=True) as project:  # where the page ranks the planted slices
        ranked = error_slices(project)
    descriptions = ranked.slices["description"].head(5).tolist()
    assert set(PLANTED) <= set(descriptions), descriptions
    reasons = dict(zip(descriptions, ranked.slices["reason"].head(5)))
    for description, kind in PLANTED.items():  # each slice's failures, by their commonest type
        if kind is not None:
            assert f"its failures: {kind}" in reasons[description], reasons[description]

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
    shown(page, "Its failures by mask outline (Boundary IoU)", timeout=60_000)
    image = first_picture(page)
    idle(page)
    shot(page, "segmentation-2-thin-bars")
    # The picture as the server sent it to the browser: the true mask's outline in blue, the predicted mask's in its
    # outcome's colour, drawn in exact colours that no shape of the scenes has.
    sent = page.request.get(image.evaluate("img => img.src"))  # its absolute address
    assert sent.ok
    (ARTIFACTS / "segmentation-first-object.png").write_bytes(sent.body())
    pixels = np.asarray(Image.open(io.BytesIO(sent.body())).convert("RGB"))

    def count(colour) -> int:
        return int((pixels == np.array(colour)).all(axis=-1).sum())

    assert count(TRUE_BOX) > 40, "the true mask's outline is not drawn"
    predicted = [count(OUTCOME_COLOURS[outcome]) for outcome in ("true positive", "near miss")]
    assert sum(predicted) > 40, f"the predicted mask's outline is not drawn: {predicted}"
    assert errors == [], errors
    page.close()
