"""A newcomer's small project with no bug, uploaded in real headless Chromium: the Error slices page says that nothing
is significant at this size, with what the data allow, instead of listing chance slices as bugs."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from browser_support import idle, open_app, serving, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def bug_free_manifest(seed: int = 0) -> bytes:
    """800 validation and 800 training rows of one image, five attributes of random tags, predictions right 80% of
    the time whatever the tags."""
    rng = np.random.default_rng(seed)
    rows = ["id,image,label,prediction,split," + ",".join(f"attr:noise{a}" for a in range(5))]
    for i in range(1600):
        tags = ",".join(f"t{rng.integers(3)}" for _ in range(5))
        rows.append(f"s{i},x.png,cat,{'cat' if rng.random() < 0.8 else 'dog'},{'val' if i < 800 else 'train'},{tags}")
    return ("\n".join(rows) + "\n").encode()


def test_an_uploaded_project_with_no_bug_shows_the_empty_verdict(browser, tmp_path):
    root, data = tmp_path / "projects", tmp_path / "data"
    root.mkdir()
    data.mkdir()
    Image.new("RGB", (16, 16), (120, 60, 30)).save(data / "x.png")
    with serving(None, "--projects-root", str(root), "--data-root", str(data)) as url:
        page = browser.new_context().new_page()
        open_app(page, url)
        page.get_by_label("New project name").wait_for(timeout=60_000)
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            {"name": "mine.csv", "mimeType": "text/csv", "buffer": bug_free_manifest()})
        page.get_by_text("mine.csv").wait_for(timeout=30_000)
        idle(page)
        page.get_by_label("New project name").fill("mine")
        page.get_by_label("Folder its image paths are relative to (when uploading)").fill(str(data))
        page.get_by_role("button", name="Create project").click()
        page.get_by_role("heading", name="mine").wait_for(timeout=120_000)
        open_app(page, f"{url}/Error_slices?project=mine")
        text = shown(page, "Nothing significant at this size", timeout=120_000).inner_text()
        assert "none significantly worse than the whole" in text and "a slice of 10 would have to score" in text
        assert "What would help: more val samples" in text
        assert page.get_by_test_id("stDataFrame").count() == 0  # no table of chance slices
        shot(page, "honest-slices-empty-verdict")
