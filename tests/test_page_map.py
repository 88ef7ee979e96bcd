"""The Embedding map page under AppTest: computing the map as a job, colouring, and a lasso selection's images and
over-represented tags."""
from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from hibug_core.embeddings.compute import embed_project
from hibug_core.embeddings.projection import MapConfig, compute_map
from hibug_core.jobs.store import jobs
from hibug_core.tagging.run import tag_project
from hibug_core.tasks import task_of

from page_support import open_page as open_any


def open_page(monkeypatch, project, **query) -> AppTest:
    return open_any(monkeypatch, "pages/3_Embedding_map.py", project.folder, user="ana", timeout=60, **query)


def mapped_and_tagged(project) -> None:
    """The project's PCA map by the tiny encoder, and its "dominant colour" tagged by it."""
    embed_project(project, "tiny-open_clip")
    compute_map(project, "tiny-open_clip", config=MapConfig(method="pca"))
    tag_project(project, encoder="tiny-open_clip", attributes=["dominant colour"], views=task_of(project).views)


@pytest.mark.slow
def test_the_map_is_computed_by_a_background_job(monkeypatch, colour_project):
    at = open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca")
    assert not at.exception
    assert at.info[0].value.replace("\\", "").startswith("No PCA map of these images with tiny-open_clip yet")
    at.button(key="map_compute").click().run()
    job = jobs(colour_project, "map")[0]
    assert job.params == {"encoder": "tiny-open_clip", "method": "pca", "splits": None}  # every parameter, stored
    deadline = time.time() + 120
    while jobs(colour_project, "map")[0].live and time.time() < deadline:
        time.sleep(0.2)
    assert jobs(colour_project, "map")[0].status == "done"
    at.run()
    assert not at.exception
    assert at.caption[0].value == "12 images · click a point to see its image, or box or lasso to select many"


def test_colouring_and_a_selection_show_images_and_over_represented_tags(monkeypatch, colour_project):
    mapped_and_tagged(colour_project)
    at = open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca", color="dominant colour")
    assert not at.exception
    assert at.selectbox(key="map_colour").value == "dominant colour"
    red = [1, 4, 7, 10]  # images 0, 3, 6, 9 (ids from 1) are red
    at.session_state["map_chart"] = {"selection": {"points": [{"customdata": [i]} for i in red],
                                                   "point_indices": [], "box": [], "lasso": []}}
    at.run()
    assert not at.exception
    assert at.subheader[0].value == "4 images selected"
    table = at.dataframe[0].value
    # the imported colours (in force for "color") and the measured dominant colour agree on the red ones
    top = table.iloc[:2]
    assert set(zip(top["attribute"], top["tag"], top["count"])) == {("color", "red", 4), ("dominant colour", "red", 4)}
    assert (top["p_value"] == 1 / 495).all()  # all 4 red of 12 drawn in 4: 1 / C(12, 4)
    # their images failures first: image 6 (a square taken for a circle), then the right ones in their order
    shown = [b.key.removeprefix("map_detail_") for b in at.button if (b.key or "").startswith("map_detail_")]
    assert shown == ["7", "1", "4", "10"]

    # The selection goes on the review board with its images, and the Review page shows them.
    from hibug_core.review.board import members, reviews

    next(t for t in at.text_input if t.label.startswith("Name this selection")).set_value("the red ones")
    next(b for b in at.button if b.label == "Put it on the review board").click().run()
    assert not at.exception and "with 4 images" in at.success[0].value
    board = reviews(colour_project)
    assert board[["target_kind", "title"]].values.tolist() == [["selection", "the red ones"]]
    assert sorted(members(colour_project, int(board["id"].iat[0]))) == red
    review_page = open_any(monkeypatch, "pages/6_Review.py", colour_project.folder)
    assert not review_page.exception
    assert any(c.value == "4 images in this selection" for c in review_page.caption)
    assert len(review_page.get("image")) == 4


def test_a_project_without_attributes_still_shows_its_map(monkeypatch, tmp_path):
    from PIL import Image

    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    for i in range(6):
        Image.new("RGB", (16, 16), (40 * i, 200 - 30 * i, 90)).save(tmp_path / f"{i}.png")
    (tmp_path / "m.csv").write_text("image,label,prediction\n" + "\n".join(
        f"{i}.png,{'a' if i % 2 else 'b'},a" for i in range(6)) + "\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(tmp_path / "m.csv"))
    embed_project(project, "tiny-open_clip")
    compute_map(project, "tiny-open_clip", config=MapConfig(method="pca"))
    at = open_page(monkeypatch, project, encoder="tiny-open_clip", method="pca", color="label")
    assert not at.exception
    assert at.caption[0].value == "6 images · click a point to see its image, or box or lasso to select many"


def test_above_the_points_limit_the_map_is_a_density_image_and_a_lasso_selects_under_it(monkeypatch, colour_project):
    import json

    import numpy as np

    import hibug_ui.plots

    embed_project(colour_project, "tiny-open_clip")
    points = compute_map(colour_project, "tiny-open_clip", config=MapConfig(method="pca"))
    monkeypatch.setattr(hibug_ui.plots, "MAP_POINTS_LIMIT", 5)  # 12 images: drawn as the density image
    at = open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca", color="label")
    assert not at.exception
    assert at.caption[0].value.startswith("12 images · more than 5 points: a density image drawn by datashader")
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(figure["layout"]["images"]) == 1 and figure["layout"]["images"][0]["source"].startswith(
        "data:image/png;base64,")
    assert sorted(t["name"] for t in figure["data"] if t.get("name")) == ["(none)", "circle", "square"]

    # A lasso around the left half of the map selects exactly the images whose points lie there.
    middle = float(np.median(points["x"]))
    low, high = float(points["y"].min()) - 1, float(points["y"].max()) + 1
    left = float(points["x"].min()) - 1
    lasso = {"x": [left, middle, middle, left], "y": [low, low, high, high]}
    at.session_state["map_chart"] = {"selection": {"points": [], "point_indices": [], "box": [], "lasso": [lasso]}}
    at.run()
    assert not at.exception
    expected = sorted(points.index[points["x"] <= middle])
    assert at.subheader[0].value == f"{len(expected)} images selected"
    assert len(at.get("image")) == len(expected)

    # Zooming into a selection of few enough points draws the points themselves: the leftmost point is two
    # images (the 12 images are 6 pictures twice).
    box = {"x": [left, float(points["x"].min())], "y": [low, high]}
    at.session_state["map_chart"] = {"selection": {"points": [], "point_indices": [], "box": [box], "lasso": []}}
    at.run()
    assert at.subheader[0].value == "2 images selected"
    at.button(key="map_zoom_in").click().run()
    assert not at.exception
    assert at.caption[0].value.startswith("2 of 12 images in this view · click a point")
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "images" not in figure["layout"] and sum(len(t["customdata"]["bdata"]) > 0 for t in figure["data"]) > 0
    at.button(key="map_zoom_out").click().run()
    assert at.caption[0].value.startswith("12 images · more than 5 points")


def test_a_selection_on_the_map_of_a_project_without_a_model(monkeypatch, tmp_path):
    from PIL import Image

    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    for i in range(6):
        Image.new("RGB", (16, 16), (40 * i, 200 - 30 * i, 90)).save(tmp_path / f"{i}.png")
    (tmp_path / "m.csv").write_text("image,label\n" + "\n".join(f"{i}.png,{'a' if i % 2 else 'b'}" for i in range(6))
                                    + "\n")
    project = Project.create_from_manifest(tmp_path / "p", load_manifest(tmp_path / "m.csv", config=_no_model()))
    embed_project(project, "tiny-open_clip")
    points = compute_map(project, "tiny-open_clip", config=MapConfig(method="pca"))
    at = open_page(monkeypatch, project, encoder="tiny-open_clip", method="pca", color="label")
    assert not at.exception
    box = {"x": [float(points["x"].min()) - 1, float(points["x"].max()) + 1],
           "y": [float(points["y"].min()) - 1, float(points["y"].max()) + 1]}
    at.session_state["map_chart"] = {"selection": {"points": [], "point_indices": [], "box": [box], "lasso": []}}
    at.run()
    assert not at.exception
    assert at.subheader[0].value == "6 images selected"
    assert len(at.get("image")) == 6


def _no_model():
    from hibug_core.ingest.manifest import IngestConfig

    return IngestConfig(require_model=False)


def test_the_kept_colouring_follows_a_corrected_tag_and_colours_by_an_imported_tag(monkeypatch, colour_project):
    from hibug_core.store.tag_store import correct_tags

    from page_support import _decoded, charts

    def coloured(at) -> dict[str, list[int]]:
        """The map's points by their legend entry: {value: sample ids}."""
        out: dict[str, list[int]] = {}
        for trace in charts(at)[0]["data"]:
            out.setdefault(trace["name"], []).extend(int(i) for i in _decoded(trace["customdata"]))
        return {name: sorted(ids) for name, ids in out.items()}

    mapped_and_tagged(colour_project)
    at = open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca", color="known: color")
    assert not at.exception
    assert coloured(at) == {"blue": [3, 6, 9, 12], "green": [2, 5, 8, 11], "red": [1, 4, 7, 10]}
    before = coloured(open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca",
                                color="dominant colour"))
    corrected = "blue" if 1 in before.get("green", []) else "green"  # another tag than the one shown
    correct_tags(colour_project, "dominant colour", [1], corrected, author="ana")
    after = coloured(open_page(monkeypatch, colour_project, encoder="tiny-open_clip", method="pca",
                               color="dominant colour"))
    expected = {name: [i for i in ids if i != 1] for name, ids in before.items()}
    expected[corrected] = sorted(expected.get(corrected, []) + [1])  # the person's tag, every other point as it was
    assert after == {name: ids for name, ids in expected.items() if ids}
