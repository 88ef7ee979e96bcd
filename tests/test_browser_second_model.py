"""A second model into an object project from the browser: an editor uploads another detector's COCO results on the
Overview, they are matched against the project's ground truth as its first model's were (AP equal to pycocotools), and
the Compare page then compares the two."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_objects import _pycocotools_stats, _random_case, _write

from browser_support import add_another_model, open_app, serving, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def one_detector(tmp_path_factory):
    """A 24-image detection project with one detector's results, and a second detector's results file beside it."""
    from hibug_core.cli import main

    folder = tmp_path_factory.mktemp("second-model")
    truth, found = _random_case(6)
    rng = np.random.default_rng(3)
    second = [dict(d, score=float(rng.random())) for d in found if rng.random() < 0.75]
    truth_file, results = _write(folder / "data", truth, {"first": found, "second": second})
    assert main(["new", str(folder / "p"), "--coco", str(truth_file), "--results", f"first={results['first']}"]) == 0
    return folder / "p", truth_file, results["second"]


def test_an_editor_uploads_a_second_detector_and_compares_the_two(browser, one_detector):
    project, truth_file, second = one_detector
    expected = _pycocotools_stats(truth_file, second, "bbox")[0]
    with serving(project) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        open_app(page, url)
        said = add_another_model(page, "second", second)
        assert f"AP {expected:.3f} on val" in said
        shot(page, "second-model-1-added")
        open_app(page, f"{url}/Compare")
        shown(page, "first (baseline)", timeout=120_000)
        assert page.get_by_text("This project holds one model").count() == 0
        page.get_by_test_id("stMetric").filter(has_text="second").first.wait_for(timeout=30_000)
        shot(page, "second-model-2-compare")
        assert errors == []
    kept = json.loads((project / "results" / "second-val.json").read_text())
    assert kept == json.loads(second.read_text())  # the uploaded file is kept with the project


def _peak_resident_mb(pid: int) -> float:
    status = open(f"/proc/{pid}/status").read()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


def test_an_uploaded_mask_far_outside_its_image_is_refused_in_bounded_memory(browser, one_detector, tmp_path):
    """A results file of a few kB whose one triangle has a vertex at 3e7 px grew a running server from 0.3 to 3.7 GB
    and ended in std::bad_alloc; now it is refused by its geometry before anything is drawn."""
    from browser_support import SERVED, idle

    project, _, second = one_detector
    found = json.loads(second.read_text())
    far = dict(found[0], segmentation=[[0, 0, 10, 0, 3e7, 10]])
    upload = tmp_path / "far.json"
    upload.write_text(json.dumps([far, *found[1:]]))
    with serving(project) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        open_app(page, url)
        before = _peak_resident_mb(SERVED[url].pid)
        page.get_by_text("Add another model's results on").first.click()
        page.get_by_label("Model name").fill("far")
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            {"name": upload.name, "mimeType": "application/json", "buffer": upload.read_bytes()})
        page.get_by_text(upload.name).wait_for(timeout=30_000)
        idle(page)
        page.get_by_role("button", name="Add the model").click()
        said = shown(page, "far outside its image", timeout=120_000).inner_text()
        assert "results[0]" in said and "segmentation" in said
        grew = _peak_resident_mb(SERVED[url].pid) - before
        assert grew < 300, f"the server grew by {grew:.0f} MB"
    assert not (project / "results" / "far-val.json").exists()
