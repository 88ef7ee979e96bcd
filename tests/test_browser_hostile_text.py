"""Labels that are Markdown or HTML, shown in real headless Chromium: everything a manifest writes stays text (no
image fetched from a stranger's server, no live link, no entity decoded), in captions, tables and charts."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from browser_support import idle, open_app, serving, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]


class Tracker:
    """A web server that counts the requests a viewer's browser makes to it (none is the right answer)."""

    def __init__(self):
        self.requests: list[str] = []
        tracker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                tracker.requests.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_labels_written_as_markup_are_shown_as_text(tmp_path, browser):
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    tracker = Tracker()
    hostile = [f"![t]({tracker.url}/pixel.png)", "[click](https://example.com/phish)", "&lt;b&gt;bold&lt;/b&gt;",
               f"<img src='{tracker.url}/html.png'>"]
    data = tmp_path / "data"
    data.mkdir()
    rows = ["image,label,prediction,split"]
    for i in range(8):
        Image.new("RGB", (24, 24), (30 * i, 90, 160)).save(data / f"{i}.png")
        label = hostile[i % len(hostile)]
        quoted = '"' + label.replace('"', '""') + '"'
        rows.append(f"{i}.png,{quoted},{quoted if i % 2 else 'cat'},val")
    (data / "manifest.csv").write_text("\n".join(rows) + "\n")
    Project.create_from_manifest(tmp_path / "project", load_manifest(data / "manifest.csv")).close()

    with serving(tmp_path / "project") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        open_app(page, url)
        shown(page, "Confusion matrix", timeout=90_000)
        page.locator("[data-testid='stImage'] img").first.wait_for(timeout=30_000)
        idle(page)
        page.wait_for_timeout(1500)
        text = page.locator("body").inner_text()
        assert "&lt;b&gt;bold&lt;/b&gt;" in text, "an entity must not be decoded"
        assert "[click](https://example.com/phish)" in text, "a Markdown link must stay text"
        assert page.locator("a[href*='example.com']").count() == 0
        assert page.locator(f"img[src*='127.0.0.1:{tracker.httpd.server_address[1]}']").count() == 0
        assert page.locator("[data-testid='stException']").count() == 0
        page.close()
    tracker.httpd.shutdown()
    assert tracker.requests == [], f"the viewer's browser fetched {tracker.requests}"
