"""The main journey in real headless Chromium on a copy of the demo project: open it, propose attributes, tag the
images in a background job, compute the map and lasso points, open an error slice and its images, correct a tag.
A screenshot of every step is saved to test-artifacts/; no page may show an exception."""
from __future__ import annotations

import re
import shutil

import pytest

from browser_support import idle, open_app, serve, shot, shown
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def journey_project(demo_project, tmp_path_factory):
    folder = tmp_path_factory.mktemp("journey") / "demo"
    shutil.copytree(demo_project, folder)
    return folder


@pytest.fixture(scope="module")
def journey_server(journey_project):
    yield from serve(journey_project)


@pytest.fixture
def page(browser, journey_server):
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    assert errors == [], errors
    page.close()


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the visible select box labelled `label`."""
    idle(page)
    page.locator("[data-testid='stSelectbox']:visible", has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    idle(page)


def test_the_main_journey(page, journey_server, journey_project):
    from hibug_core.jobs.store import jobs
    from hibug_core.store.attribute_versions import latest_version
    from hibug_core.store.project import Project
    from hibug_core.store.tag_store import corrections

    project = Project.open(journey_project)
    open_app(page, journey_server)
    shown(page, "Confusion matrix")
    navigation = page.get_by_test_id("stSidebarNav")
    assert navigation.get_by_text("Overview", exact=True).is_visible()
    assert navigation.get_by_role("link", name="Error slices").get_attribute("href").endswith("/Error_slices")
    shot(page, "journey-1-overview")

    # Attributes: propose from the built-in library and save it as a new version
    open_app(page, f"{journey_server}/Attributes")
    shown(page, "What does the model do?")
    page.get_by_role("button", name="Propose").click()
    shown(page, "Save as a new version")
    page.get_by_role("button", name="Save as a new version").click()
    shown(page, "version 2 ·")
    assert latest_version(project) == 2
    shot(page, "journey-2-attributes")

    # Tagging: a background job with a small encoder; the page follows its progress and shows the result
    open_app(page, f"{journey_server}/Tagging")
    shown(page, "Start tagging")
    choose(page, "Encoder", "other…")  # test-only encoders are typed, never offered
    page.get_by_role("textbox", name="Other encoder").fill("tiny-open_clip")
    page.get_by_role("button", name="Start tagging").click()
    shown(page, "finished", timeout=240_000)
    assert jobs(project, "tag")[0].status == "done"
    shot(page, "journey-3-tagging")

    # Embedding map: compute a PCA map in the background, then lasso a region of points
    open_app(page, f"{journey_server}/Embedding_map?encoder=tiny-open_clip&method=pca")
    shown(page, "Compute the map")
    page.get_by_role("button", name="Compute the map").click()
    shown(page, "box or lasso to select", timeout=240_000)
    plot = page.locator(".js-plotly-plot").first
    plot.wait_for(timeout=60_000)
    box = plot.locator(".nsewdrag").first.bounding_box()
    x0, y0, w, h = box["x"], box["y"], box["width"], box["height"]
    page.mouse.move(x0 + w * 0.2, y0 + h * 0.2)
    page.mouse.down()
    for fx, fy in ((0.8, 0.2), (0.8, 0.8), (0.2, 0.8), (0.2, 0.25)):
        page.mouse.move(x0 + w * fx, y0 + h * fy, steps=8)
    page.mouse.up()
    shown(page, "images selected", timeout=60_000)
    shown(page, "Tags over-represented in the selection")
    # the tiny encoder's tags (random weights) are junk: their rows are flagged, with the legend of the flag
    shown(page, "⚠: tags of an attribute too poor to trust", timeout=60_000)
    page.locator("[data-testid='stImage'] img").first.wait_for(timeout=60_000)  # the selection's images
    shot(page, "journey-4-map")

    # Error slices: click the first row of the ranked table, see its evidence and its images
    open_app(page, f"{journey_server}/Error_slices")
    shown(page, "error slices (")
    shown(page, "Parent and child slices")
    first = page.get_by_role("heading", level=3).first.inner_text()
    grid = page.get_by_test_id("stDataFrame").first
    grid.locator("canvas").first.wait_for()
    area = grid.bounding_box()
    page.mouse.move(area["x"] + 12, area["y"] + 35 + 35 + 17)
    page.mouse.click(area["x"] + 12, area["y"] + 35 + 35 + 17)  # the row marker of the second row
    page.wait_for_url(re.compile(r"slice="), timeout=30_000)
    page.wait_for_function("h => document.querySelector('h3') && document.querySelector('h3').innerText !== h",
                           arg=first, timeout=30_000)
    idle(page)
    page.locator("[data-testid='stImage'] img").first.wait_for(timeout=60_000)
    shot(page, "journey-5-error-slice")

    # Tagging audit: confirm one image's tag with one click
    open_app(page, f"{journey_server}/Tagging")
    page.get_by_role("tab", name="Audit").click()
    shown(page, "not reviewed yet")
    choose(page, "Attribute", "dominant colour")
    choose(page, "Model tag to audit", "blue")
    shown(page, "images tagged 'blue' not reviewed yet")
    before = len(corrections(project))
    page.get_by_role("button", name="✓").first.click()
    wait_until(lambda: len(corrections(project)) > before, 30, what="the confirmed tag", every=0.2)
    assert len(corrections(project)) == before + 1
    assert corrections(project)["kind"].tolist()[-1] == "confirm"
    shot(page, "journey-6-audit")
    project.close()


def test_the_repair_journey(page, journey_server, journey_project):
    """Select pool images for the worst slices, generate images for them, retrain and read the comparison."""
    from hibug_core.jobs.store import jobs
    from hibug_core.store.project import Project

    project = Project.open(journey_project)
    open_app(page, f"{journey_server}/Repair")
    shown(page, "Select pool images")
    page.get_by_role("button", name="Select pool images").click()
    shown(page, "Download CSV")
    page.locator("[data-testid='stImage'] img").first.wait_for(timeout=60_000)
    shot(page, "journey-7-repair-selection")

    page.get_by_role("tab", name="Generate images").click()
    page.get_by_role("button", name="Write prompts").click()
    idle(page)
    page.get_by_role("button", name="Generate", exact=True).wait_for(timeout=90_000)  # shown with the prompts
    page.get_by_role("button", name="Generate", exact=True).click()
    shown(page, "images from shape-world renderer", timeout=120_000)
    assert jobs(project, "generate")[0].status == "done"
    shot(page, "journey-8-repair-generated")

    page.get_by_role("tab", name="Retrain and compare").click()
    page.get_by_role("button", name="Retrain and compare").click()
    shown(page, "Accuracy after repair on the held-out split", timeout=240_000)
    assert jobs(project, "repair")[0].status == "done"
    idle(page)
    # the verdict once (the job's box says it finished, the page says what it found), in points
    assert page.get_by_text("Held-out accuracy", exact=False).count() == 1
    assert page.get_by_text(re.compile(r"[+-]\d+\.\d points")).count() >= 1
    # the chart's bars: one per bug, never a slice that repeats another one of them
    from hibug_core.slices.report import error_slices

    repeats = set(error_slices(project).slices.query("repeats != ''")["description"])
    bars = page.locator(".js-plotly-plot .ytick text").evaluate_all("texts => texts.map(t => t.textContent)")
    assert bars and not {b.removesuffix(" (planted)") for b in bars} & repeats, bars
    shot(page, "journey-9-repair-compared")
    project.close()
