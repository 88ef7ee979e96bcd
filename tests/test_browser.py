"""The dashboard served by `hibug serve`, opened in real headless Chromium (Debian's package, via Playwright)."""
from __future__ import annotations

import urllib.request

import pytest

from browser_support import ARTIFACTS, idle, open_app, serve, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(demo_project):
    yield from serve(demo_project)


def test_health_answers_ok(server):
    with urllib.request.urlopen(f"{server}/_stcore/health", timeout=5) as response:
        assert response.read().decode() == "ok"


def test_overview_renders_without_exception(server, browser, demo_project):
    from hibug_core import Project

    with Project.open(demo_project) as project:  # float sums differ across CPUs: a borderline image may flip
        samples = project.samples("shape-cnn")
        failures = int((~samples.loc[samples["split"] == "test", "correct"].astype(bool)).sum())
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    open_app(page, server)
    shown(page, "Confusion matrix", timeout=90_000)
    page.get_by_role("heading", name="easy-vqa shapes demo").wait_for(timeout=30_000)
    idle(page)
    page.locator("[data-testid='stImage'] img").first.wait_for(timeout=30_000)
    assert page.locator("[data-testid='stException']").count() == 0
    assert errors == []
    page.get_by_test_id("stRadioGroup").get_by_text("test", exact=True).click()  # switch the split
    idle(page)
    shown(page, f"of {failures} images", timeout=30_000)  # the sample grid shows the split's failures
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)
    assert page.locator("[data-testid='stException']").count() == 0
    page.close()
