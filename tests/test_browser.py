"""The dashboard served by `hibug serve`, opened in real headless Chromium (Debian's package, via Playwright)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(demo_project):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "hibug_core.cli", "serve", str(demo_project),
                                "--port", str(port), "--address", "127.0.0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode() == "ok":
                    break
        except OSError:
            time.sleep(0.5)
    else:
        process.kill()
        pytest.fail(f"dashboard did not come up: {process.stdout.read().decode()[-2000:]}")
    yield url
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def test_health_answers_ok(server):
    with urllib.request.urlopen(f"{server}/_stcore/health", timeout=5) as response:
        assert response.read().decode() == "ok"


def test_overview_renders_without_exception(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server)
    page.get_by_text("Confusion matrix").wait_for(timeout=90_000)
    page.get_by_role("heading", name="easy-vqa shapes demo").wait_for(timeout=30_000)
    page.locator("[data-testid='stImage'] img").first.wait_for(timeout=30_000)
    assert page.locator("[data-testid='stException']").count() == 0
    assert errors == []
    page.get_by_test_id("stRadioGroup").get_by_text("test", exact=True).click()  # switch the split
    page.get_by_text("of 97 images").wait_for(timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)
    assert page.locator("[data-testid='stException']").count() == 0
    page.close()
