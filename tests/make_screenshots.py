"""Regenerate the docs' screenshots (assets/screenshots/) from the demo projects in headless Chromium.

Not a test: it builds the demo and follows a newcomer's journey (attributes proposed from the built-in library and
merged into the demo's, tags from the default ConSE encoder), lays out the map, runs a repair, a generation and a
failure search, then serves the dashboard and photographs each page once its content is drawn; then the detection
demo's Overview (a confusion cell opened) and its planted conjunction on the Error slices page.
Takes a few minutes. Usage: python tests/make_screenshots.py [--dir screenshot-demo]
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hibug_core.tasks import task_of

from browser_support import CHROMIUM, CHROMIUM_ARGS, serve

OUT = Path(__file__).resolve().parents[1] / "assets" / "screenshots"
VIEWPORT = {"width": 1400, "height": 1000}


def prepare(folder: Path) -> None:
    from hibug_core.attributes.diff import proposed_version
    from hibug_core.attributes.library import library_schema
    from hibug_core.demo.build import ensure_demo
    from hibug_core.jobs.kinds import run_kind
    from hibug_core.store.attribute_versions import load_schema, save_schema
    from hibug_core.tagging.run import tag_project

    project = ensure_demo(folder)
    if project.meta().get("screenshots") == "ready":
        return
    current = load_schema(project)
    proposal = library_schema(current.task, project.model_classes(project.models()[0]), None)
    save_schema(project, proposed_version(current, proposal)[0], author="screenshots",  # merged, as saving does
                note="version 1 with the new attributes of a proposal by the built-in library")
    tag_project(project, encoder="conse", author="screenshots", views=task_of(project).views)
    quiet = lambda *_: None  # noqa: E731
    run_kind(project, "repair", {"seeds": [0, 1, 2]}, quiet, author="screenshots")
    run_kind(project, "generate", {"images": 48}, quiet, author="screenshots")
    run_kind(project, "failure search", {"label": "triangle", "captions": 4}, quiet, author="screenshots")
    run_kind(project, "map", {"encoder": "conse", "method": "umap"}, quiet)  # last: every image is on it
    project.set_meta("screenshots", "ready")
    project.close()


def review(folder: Path) -> None:
    """A board with the error slices, one triaged with a comment (idempotent)."""
    from hibug_core.review.board import add_comment, ensure_review, reviews, update_review
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(folder) as project:
        if len(reviews(project)):
            return
        for definition in error_slices(project).slices["definition"]:
            ensure_review(project, definition, author="ana")
        first = ensure_review(project, (("color", "blue"),), author="ana")
        update_review(project, first.id, version=first.version, status="confirmed bug", assignee="bo", author="ana")
        add_comment(project, first.id, "Blue shapes are called circles: the training set has almost no blue "
                    "rectangles or triangles. Repair with hibug selection fixed it (see Repair).", author="ana")
        add_comment(project, first.id, "Agreed; adding 86 blue non-circles from the pool.", author="bo")


def blue_review(folder: Path) -> int:
    from hibug_core.review.board import ensure_review
    from hibug_core.store.project import Project

    with Project.open(folder) as project:
        return ensure_review(project, (("color", "blue"),)).id


def repaired_model(folder: Path) -> str:
    """The model the repair recorded first (its chosen method, first seed)."""
    from urllib.parse import quote

    from hibug_core.store.project import Project

    with Project.open(folder, read_only=True) as project:
        models = project.models()
    return quote(models[0]) + "," + quote(next(m for m in models if " · repair " in m))


def photograph(url: str, folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)

        def settle(path: str, text: str, *, tab: str | None = None, images: bool = False) -> None:
            page.goto(f"{url}/{path}")
            page.get_by_text(text).first.wait_for(timeout=180_000)
            if tab:
                page.get_by_role("tab", name=tab).click()
            if images:
                page.locator("[data-testid='stImage'] img:visible").first.wait_for(timeout=120_000)
            page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')",
                                   timeout=120_000)
            page.wait_for_timeout(1500)  # charts finish their transitions

        for name, path, text, tab, images in (
                ("overview", "", "Confusion matrix", None, True),
                ("attributes", "Attributes", "History", "Edit", False),
                ("tagging", "Tagging", "Tagging runs", "Tag sources", False),
                ("embedding-map", "Embedding_map", "Colour by", None, False),
                ("error-slices", "Error_slices", "Parent and child slices", None, True),
                ("repair", "Repair", "Select pool images", "Retrain and compare", False),
                ("compare", f"Compare?models={repaired_model(folder)}", "slices worse, ", None, True),
                ("review", f"Review?review={blue_review(folder)}", "Comments", None, False)):
            settle(path, text, tab=tab, images=images)
            page.screenshot(path=str(OUT / f"{name}.png"))
            print(f"wrote {OUT / name}.png")
            if name == "error-slices":  # the image detail view of the slice's first image
                page.get_by_role("button", name="Details").first.click()
                page.get_by_role("dialog").get_by_text("Correct a tag").first.wait_for(timeout=60_000)
                page.wait_for_timeout(1500)
                page.screenshot(path=str(OUT / "image-detail.png"))
                print(f"wrote {OUT / 'image-detail'}.png")
                page.keyboard.press("Escape")
        browser.close()


def photograph_detection(folder: Path) -> None:
    """The detection demo: the Overview with its missed triangles opened from the confusion matrix (one click), and
    the planted green triangles on the Error slices page with their crops."""
    from playwright.sync_api import sync_playwright

    from hibug_core.demo.detection import build_detection_demo
    from hibug_core.slices.search import slice_id

    if not (folder / "hibug.sqlite").exists():
        shutil.rmtree(folder, ignore_errors=True)
        build_detection_demo(folder).close()
    server = serve(folder)
    url = next(server)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            page.goto(url)
            grid = page.locator(".st-key-overview_object_confusion")
            grid.locator("canvas").first.wait_for(timeout=180_000)
            grid.scroll_into_view_if_needed()
            page.wait_for_timeout(1500)
            area = grid.bounding_box()
            page.mouse.click(area["x"] + area["width"] * 0.9, area["y"] + 35 * 3 + 17)  # triangle → (missed)
            page.get_by_text("objects: true triangle, predicted (missed)").first.wait_for(timeout=60_000)
            page.locator("[data-testid='stImage'] img:visible").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(OUT / "detection-overview.png"), full_page=True)
            print(f"wrote {OUT / 'detection-overview'}.png")
            page.goto(f"{url}/Error_slices?slice={slice_id((('color', 'green'), ('class', 'triangle')))}")
            page.get_by_text("Its failures by ").first.wait_for(timeout=180_000)
            page.locator("[data-testid='stImage'] img:visible").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(OUT / "detection-error-slices.png"))
            print(f"wrote {OUT / 'detection-error-slices'}.png")
            browser.close()
    finally:
        next(server, None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default="screenshot-demo")
    parser.add_argument("--fresh", action="store_true", help="rebuild the demos and the demo's tags")
    args = parser.parse_args()
    folder = Path(args.dir).resolve()
    if args.fresh:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder.with_name(folder.name + "-detection"), ignore_errors=True)
    prepare(folder)
    review(folder)
    server = serve(folder)
    url = next(server)
    try:
        photograph(url, folder)
    finally:
        next(server, None)
    photograph_detection(folder.with_name(folder.name + "-detection"))


if __name__ == "__main__":
    main()
