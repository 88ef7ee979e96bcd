"""Comparing models in real headless Chromium on a copy of the demo: the demo network against a column of predictions
imported with `hibug import --models-only` (made worse on green shapes and better on blue ones) and against the model
that "Retrain and compare" records. The regressions and improvements the page lists are those the library computes;
the images where the models disagree are drawn."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from urllib.parse import quote

import pytest

from browser_support import first_picture, idle, open_app, serve, shot, shown

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SETTINGS = {"split": "val", "depth": 2, "support": 30}


@pytest.fixture(scope="module")
def compare_project(demo_project, tmp_path_factory):
    """The demo with a second model imported as a prediction column: wrong on the green images of val that the
    network gets right, right on the blue ones it gets wrong (the demo's planted bug), the network's answer
    elsewhere."""
    import pandas as pd

    from hibug_core.store.project import Project

    folder = tmp_path_factory.mktemp("compare") / "demo"
    shutil.copytree(demo_project, folder)
    with Project.open(folder, read_only=True) as project:
        samples = project.samples("shape-cnn")
        color = project.known_tags()["color"].reindex(samples.index)
    rows = samples[samples["label"].notna()]
    classes = sorted(rows["label"].unique())
    planted = rows["prediction"].copy()
    green = (color.reindex(rows.index) == "green") & (rows["split"] == "val") & (rows["prediction"] == rows["label"])
    blue = (color.reindex(rows.index) == "blue") & (rows["split"] == "val") & (rows["prediction"] != rows["label"])
    planted[green] = [classes[(classes.index(label) + 1) % len(classes)] for label in rows.loc[green, "label"]]
    planted[blue] = rows.loc[blue, "label"]
    manifest = folder.parent / "planted.csv"
    pd.DataFrame({"id": rows["sample_key"], "image": rows["image_path"], "label": rows["label"], "split": rows["split"],
                  "pred:planted": planted}).to_csv(manifest, index=False)
    run = subprocess.run([sys.executable, "-m", "hibug_core.cli", "import", str(folder), "--manifest", str(manifest),
                          "--models-only"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return folder


@pytest.fixture(scope="module")
def compare_server(compare_project):
    yield from serve(compare_project)


@pytest.fixture
def page(browser, compare_server):
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    assert errors == [], errors
    page.close()


def expected_headlines(folder, models: list[str]) -> list[str]:
    """What the page must list: the distinct regressions and improvements the library finds, as the page words them."""
    from hibug_core.slices.compare import IMPROVEMENT, REGRESSION, compare_models
    from hibug_core.slices.search import SliceConfig
    from hibug_core.store.project import Project

    with Project.open(folder, read_only=True) as project:
        settings = SliceConfig(max_depth=SETTINGS["depth"], min_support=SETTINGS["support"])
        table = compare_models(project, models, split="val", slices=settings).against()
    lines = []
    for change, title in ((REGRESSION, "Worse"), (IMPROVEMENT, "Better")):
        named = table[(table["change"] == change) & (table["repeats"] == "")]
        if len(named):
            lines.append(f"{title} ({len(named)}): " + " · ".join(
                f"{'⚠ ' if r['tag_warning'] else ''}{r['description']} {100 * r['difference']:+.1f} pts"
                for _, r in named.head(6).iterrows())
                + (" · …" if len(named) > 6 else ""))
    return lines


def headlines(page) -> list[str]:
    found = []
    for title in ("Worse", "Better"):
        line = page.locator("[data-testid='stMarkdownContainer'] p", has_text=re.compile(rf"^{title} \(")).first
        if line.count():
            found.append(line.inner_text())
    return found


def open_compare(page, server: str, models: list[str]) -> None:
    open_app(page, f"{server}/Compare?models={','.join(models)}")
    shown(page, "of the 'val' split that every model predicts", timeout=120_000)
    idle(page)


def test_an_imported_column_and_a_repaired_model_compared_with_the_network(page, compare_server, compare_project):
    from hibug_core.store.project import Project

    # 1. The imported column: worse on green, better on red, exactly as the library says.
    open_compare(page, compare_server, ["shape-cnn", "planted"])
    lines = headlines(page)
    assert lines == expected_headlines(compare_project, ["shape-cnn", "planted"])
    assert lines[0].startswith("Worse (1): color = green -") and lines[1].startswith("Better (1): color = blue +")
    heading = page.get_by_role("heading", level=3).first
    assert heading.inner_text() == "color = green"
    # the disagreements are drawn after the heading: wait for them, as a person would (a race under load)
    idle(page)
    page.get_by_text(re.compile(r"shape-cnn right, planted wrong \(\d+ images")).first.wait_for(timeout=60_000)
    picture = first_picture(page)
    assert picture.evaluate("img => img.naturalWidth") > 0
    shot(page, "compare-1-imported-column")

    # Choosing a row of the table opens that slice; a link opens the improvement, its images the other way round.
    with Project.open(compare_project, read_only=True) as project:
        from hibug_core.slices.compare import compare_models
        from hibug_core.slices.search import SliceConfig

        table = compare_models(project, ["shape-cnn", "planted"], slices=SliceConfig(max_depth=2, min_support=30)
                               ).against()
    grid = page.get_by_test_id("stDataFrame").first
    grid.locator("canvas").first.wait_for()
    page.evaluate("window.scrollTo(0, 0)")
    grid.scroll_into_view_if_needed()
    area = grid.bounding_box()
    page.mouse.click(area["x"] + 12, area["y"] + 35 + 35 * 1 + 17)  # the row marker of the second row
    page.wait_for_url(re.compile(r"slice="), timeout=30_000)
    idle(page)
    page.get_by_role("heading", name=table["description"].iat[1], exact=True).wait_for(timeout=60_000)
    blue = table.loc[table["description"] == "color = blue", "slice_id"].iat[0]
    open_app(page, f"{compare_server}/Compare?models=shape-cnn,planted&slice={blue}")
    page.get_by_role("heading", name="color = blue", exact=True).wait_for(timeout=60_000)
    gained = int(table.loc[table["description"] == "color = blue", "candidate_only"].iat[0])
    idle(page)
    page.get_by_text(f"planted right, shape-cnn wrong ({gained} images").first.wait_for(timeout=60_000)

    # 2. Retrain and compare on the Repair page (one seed), then compare the repaired model with the network.
    open_app(page, f"{compare_server}/Repair")
    page.get_by_role("tab", name="Retrain and compare").click()
    seeds = page.get_by_role("spinbutton", name="Seeds")
    seeds.fill("1")
    seeds.press("Tab")
    idle(page)
    page.get_by_role("button", name="Retrain and compare").click()
    shown(page, "Accuracy after repair on the held-out split", timeout=300_000)
    with Project.open(compare_project, read_only=True) as project:
        repaired = next(m for m in project.models() if " · repair " in m)  # the chosen method's, recorded first
    open_compare(page, compare_server, ["shape-cnn", repaired])
    assert headlines(page) == expected_headlines(compare_project, ["shape-cnn", repaired])
    shot(page, "compare-2-repaired-model")

    # 3. All three: each against the network, and the overlap matrices of every pair.
    open_app(page, f"{compare_server}/Compare?models=shape-cnn,planted,{quote(repaired)}")
    shown(page, "Against the baseline", timeout=120_000)
    assert headlines(page) == expected_headlines(compare_project, ["shape-cnn", "planted"])
    page.get_by_role("tab", name="Every pair").click()
    plots = page.get_by_role("tabpanel", name="Every pair").locator(".js-plotly-plot")
    plots.nth(1).wait_for(timeout=60_000)
    assert plots.count() == 2
    shot(page, "compare-3-three-models")
