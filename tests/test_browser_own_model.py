"""Your own model in real headless Chromium: a project made from a manifest with no predictions, "run your own model"
on the Overview (a background predict job), then "retrain and compare" on the Repair page fine-tunes that network
and offers the repaired checkpoint. Screenshots go to test-artifacts/; no page may show an exception."""
from __future__ import annotations

import shutil

import pytest

from browser_support import idle, open_app, serve, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_project(demo_project, tmp_path_factory):
    """The demo's images and labels as a team would bring them (no model outputs), its attributes saved as `hibug
    attributes` would, and the demo network's checkpoint copied out as "their" file."""
    from hibug_core.demo.attributes import demo_attribute_schema
    from hibug_core.store.attribute_versions import save_schema
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    root = tmp_path_factory.mktemp("own")
    shutil.copy(demo_project / "models" / "shape-cnn.pt", root / "my-cnn.pt")
    with Project.create_from_manifest(root / "project", load_manifest(demo_project / "data" / "manifest.csv")) as made:
        save_schema(made, demo_attribute_schema(), author="ana")
        assert made.models() == []
    return root


@pytest.fixture(scope="module")
def own_server(own_project):
    yield from serve(own_project / "project")


def test_predict_with_your_model_then_repair_it_from_the_pages(browser, own_server, own_project):
    from pathlib import Path

    import torch

    from hibug_core.jobs.store import jobs
    from hibug_core.repair.selection import SelectionConfig
    from hibug_core.store.project import Project

    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_app(page, own_server)
    shown(page, "This project has no model outputs yet", timeout=90_000)
    page.get_by_label("Model", exact=True).fill(f"shape-cnn:{own_project / 'my-cnn.pt'}")
    page.get_by_label("Name", exact=True).fill("my-cnn")
    page.get_by_role("button", name="Run the model").click()
    shown(page, "my-cnn: predictions for 3,866 images", timeout=180_000)
    page.reload()
    shown(page, "How my-cnn does", timeout=90_000)
    shot(page, "own-model-1-predicted")

    open_app(page, f"{own_server}/Repair")
    shown(page, "Repairing my-cnn", timeout=90_000)
    page.get_by_role("tab", name="Retrain and compare").click()
    idle(page)
    seeds = page.get_by_role("spinbutton", name="Seeds")
    seeds.fill("1")
    seeds.press("Tab")
    page.get_by_role("button", name="Retrain and compare").click()
    shown(page, "Accuracy after repair on the held-out split", timeout=300_000)
    shown(page, "Repaired checkpoints", timeout=30_000)
    download = page.get_by_role("button", name=f"Download the {SelectionConfig().method} checkpoint (seed 0)")
    assert download.is_visible()
    shot(page, "own-model-2-repaired")
    with page.expect_download() as downloading:
        download.click()
    saved = torch.load(downloading.value.path(), weights_only=True)
    assert saved["classes"] == ["circle", "rectangle", "triangle"] and saved["spec"].startswith("shape-cnn:")
    with Project.open(own_project / "project") as project:
        job = jobs(project, "repair")[0]
        assert job.status == "done" and job.params["model"] == "my-cnn" and job.params["seeds"] == [0]
        repaired = [m for m in project.models() if m.startswith("my-cnn · repair")]
        assert len(repaired) == 3  # hibug, its random baseline, the no-new-data control
    assert all(Path(p).is_file() for p in Path(own_project / "project" / "models" / "tuning").glob("*/best.pt"))
    assert errors == [], errors
    page.close()
