"""Serving the dashboard for browser tests: `hibug serve` on a free port, waited for until healthy."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVED: dict[str, subprocess.Popen] = {}  # URL -> the dashboard's process (the Streamlit server itself)
LOGS: dict[str, Path] = {}  # URL -> the file its server writes its log to


def serve(folder, *options: str, address: str = "127.0.0.1", env: dict | None = None, port: int | None = None):
    """Yield the URL of the dashboard serving `folder` (None: only what `options` say, e.g. --projects-root) on
    `address` (and `port`, else a free one); stop it afterwards. Its log is kept in LOGS[url]."""
    require_chromium()
    port = port or free_port()
    log = Path(tempfile.mkstemp(prefix="hibug-server-", suffix=".log")[1])
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "hibug_core.cli", "serve",
                                    *([str(folder)] if folder is not None else []), *options, "--port", str(port),
                                    "--address", address], stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, **(env or {})})
    url = f"http://{address}:{port}"
    deadline = time.time() + 90
    while time.time() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.read().decode() == "ok":
                    break
        except OSError:
            time.sleep(0.5)
    else:
        process.kill()
        pytest.fail(f"dashboard did not come up: {log.read_text()[-2000:]}")
    SERVED[url], LOGS[url] = process, log
    yield url
    SERVED.pop(url, None)
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:  # a server stuck on a closed browser's session
        process.kill()
        process.wait(timeout=20)


@contextlib.contextmanager
def serving(folder, *options: str, address: str = "127.0.0.1", env: dict | None = None, port: int | None = None):
    """The dashboard on `folder` for the length of a with-block (stopped even when the test fails)."""
    running = serve(folder, *options, address=address, env=env, port=port)
    try:
        yield next(running)
    finally:
        next(running, None)


SETTLED = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    const settled = app && app.dataset.testScriptState === 'notRunning'
        && app.dataset.testConnectionState === 'CONNECTED'
        && !document.querySelector('[data-testid="stStatusWidgetRunningIcon"]');
    if (!settled) { window.__hibugSettledSince = null; return false; }
    window.__hibugSettledSince = window.__hibugSettledSince || performance.now();
    return performance.now() - window.__hibugSettledSince > 250;
}"""


def idle(page, timeout: float = 180_000) -> None:
    """Wait on the app's own signal until its script run is over: Streamlit's script-run and connection state on its
    root element (`data-test-script-state`), settled for 250 ms (a click's rerun starts a moment after the click), so
    a step waits as long as a loaded machine needs and a click is not lost to a rerun that replaces the element."""
    page.evaluate("() => { window.__hibugSettledSince = null; }")
    page.wait_for_function(SETTLED, timeout=timeout, polling=50)


def shown(page, text: str, *, timeout: float = 90_000, **match):
    """The first element showing `text`, once the app's script run is over (see idle): a loaded machine makes the
    run slower, never the wait for what it drew shorter."""
    idle(page, max(timeout, 180_000))
    found = page.get_by_text(text, **match).first
    found.wait_for(timeout=timeout)
    return found


def open_app(page, url: str, timeout: float = 180_000) -> None:
    """Open a page of the dashboard and wait until its first script run is over (see idle)."""
    page.goto(url)
    idle(page, timeout)


# What a page must never say, whatever the task and the model (issue 69's list): COCO's -1 for "nothing to find",
# a missing value or a raw field name shown as words, a count shown as a float, figures in another task's words.
WRONG_WORDS = re.compile(r"-1\.000|AP n/a|\bnan%|\bNaN\b|\bNone\b|\ban mask\b|#object-\d|\b\d+\.0 errors\b|"
                         r"first \d+ kept|cannot be measured|below -\d|confident_gap|sliceline_score|train_share")


def wrong_words(page) -> list[str]:
    """The wrong words (WRONG_WORDS) the page shows, each with the text around it."""
    text = page.locator("body").inner_text()
    return [text[max(m.start() - 60, 0):m.end() + 60].replace("\n", " ") for m in WRONG_WORDS.finditer(text)]


def shot(page, name: str) -> None:
    """A full-page screenshot into test-artifacts/<name>.png; the page must show no exception and no wrong words."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert page.locator("[data-testid='stException']").count() == 0, f"exception on {name}"
    assert not wrong_words(page), (name, wrong_words(page))


def open_slice_row(page, url: str, row: int, heading: str) -> None:
    """Open the Error slices page of the dashboard at `url`, choose the slice table's `row` by its row marker and wait
    for the chosen slice's heading."""
    open_app(page, f"{url}/Error_slices")
    page.get_by_text("error slices (").first.wait_for(timeout=90_000)
    idle(page)
    grid = page.locator("[data-testid='stDataFrame']:visible").first  # the slices table (not one folded away)
    grid.locator("canvas").first.wait_for()
    area = grid.bounding_box()
    y = area["y"] + 35 + 35 * row + 17  # header, then 35-pixel rows
    page.mouse.move(area["x"] + 12, y)
    page.mouse.click(area["x"] + 12, y)
    page.wait_for_url(re.compile(r"slice="), timeout=30_000)
    idle(page)
    page.get_by_role("heading", name=heading).wait_for(timeout=60_000)


def first_picture(page):
    """The page's first picture (a grid's), in view and loaded."""
    image = page.locator("[data-testid='stImage'] img").first
    image.wait_for(timeout=60_000)
    image.scroll_into_view_if_needed()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle(), timeout=30_000)
    return image


def add_another_model(page, name: str, results: Path) -> str:
    """On the Overview: upload a COCO results file as model `name` ("Add another model's results on ...") and return
    what the page says once it is added."""
    page.get_by_text("Add another model's results on").first.click()
    page.get_by_label("Model name").fill(name)
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        {"name": results.name, "mimeType": "application/json", "buffer": results.read_bytes()})
    page.get_by_text(results.name).wait_for(timeout=30_000)
    idle(page)
    page.get_by_role("button", name="Add the model").click()
    return shown(page, f"Added {name}: AP", timeout=180_000).inner_text()
