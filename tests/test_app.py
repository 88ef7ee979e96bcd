"""The Overview page (app.py) under Streamlit's AppTest."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from page_support import open_page, serve

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def run_app(monkeypatch, folder) -> AppTest:
    return open_page(monkeypatch, "app.py", folder)


@pytest.mark.slow
def test_overview_of_the_demo(monkeypatch, demo_project):
    at = run_app(monkeypatch, demo_project)
    assert not at.exception
    assert at.title[0].value == "easy-vqa shapes demo"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Images"] == "3,866"
    assert (metrics["train"], metrics["val"], metrics["test"], metrics["pool"]) == ("1,378", "800", "888", "800")
    assert metrics["val accuracy"] == "87.9%" and metrics["test accuracy"] == "89.0%"
    assert at.sidebar.selectbox(key="hibug_model").value == "shape-cnn"
    assert any("of 97 images" in c.value for c in at.caption)  # val errors


def test_switching_split_and_showing_all(monkeypatch, demo_project):
    at = run_app(monkeypatch, demo_project)
    at.radio(key="overview_split").set_value("test").run()
    assert not at.exception
    at.segmented_control(key="overview_show").set_value("all").run()
    at.slider(key="overview_count").set_value(8).run()
    assert any(c.value.startswith("8 of 888 images") for c in at.caption)


def test_no_project_explains_how_to_open_one(monkeypatch):
    monkeypatch.delenv("HIBUG_PROJECT", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert "hibug demo" in at.info[0].value


@pytest.mark.parametrize("make_folder", [False, True])
def test_a_bad_project_to_serve_is_a_clear_error(monkeypatch, tmp_path, make_folder):
    folder = tmp_path / "nowhere"
    if make_folder:
        folder.mkdir()
    at = run_app(monkeypatch, folder)
    assert not at.exception
    expected = "is not a hibug project" if make_folder else "is not a folder"
    assert "cannot serve" in at.error[0].value and expected in at.error[0].value


def test_progress_links_to_the_next_step(monkeypatch, demo_project):
    at = run_app(monkeypatch, demo_project)
    links = at.get("page_link")
    assert [link.label for link in links] == ["Attributes", "Tags", "Error slices", "Embedding map", "Repair",
                                              "Next step: Tags — tag every image (Run), then check how good each "
                                              "source is (Tag sources)"]
    assert [link.proto.icon for link in links[:3]] == [":material/check_circle:", ":material/radio_button_unchecked:",
                                                       ":material/check_circle:"]
    assert [c.value for c in at.caption[1:6]] == ["version 1", "imported tags only", "ready to search", "optional",
                                                  "not repaired yet"]
    assert links[5].proto.page.endswith("Tagging")


def by_label(at, label):
    return next(t for t in at.text_input if t.label == label)


def create_from_path(name, manifest) -> AppTest:
    """Fill the Overview's creation form with a manifest path on the server and submit it."""
    at = AppTest.from_file(APP, default_timeout=60).run()
    by_label(at, "New project name").set_value(name)
    at.radio(key="create_source").set_value("a path on this server")
    by_label(at, "The manifest's path on this server (when giving a path)").set_value(str(manifest))
    return at.button(key="create_submit").click().run()


def write_manifest(folder, rows):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("a.png", "b.png"):
        Image.new("RGB", (8, 8), (200, 10, 10)).save(folder / name)
    (folder / "manifest.csv").write_text("image,label,prediction,split\n" + "\n".join(rows) + "\n")
    return folder / "manifest.csv"


def serve_root(monkeypatch, tmp_path):
    (tmp_path / "projects").mkdir()
    (tmp_path / "data").mkdir()
    serve(monkeypatch, projects_root=tmp_path / "projects", data_roots=(tmp_path / "data",))


def test_creating_a_project_from_a_manifest_path_opens_it(monkeypatch, tmp_path):
    serve_root(monkeypatch, tmp_path)
    manifest = write_manifest(tmp_path / "data", ["a.png,cat,cat,val", "b.png,dog,cat,val"])
    at = create_from_path("new-project", manifest)
    assert not at.exception
    assert at.title[0].value == "new-project"
    assert {m.label: m.value for m in at.metric}["val accuracy"] == "50.0%"


def test_a_bad_manifest_is_listed_and_creates_nothing(monkeypatch, tmp_path):
    serve_root(monkeypatch, tmp_path)
    manifest = write_manifest(tmp_path / "data", ["a.png,cat,cat,val", "missing.png,dog,cat,validation"])
    at = create_from_path("new-project", manifest)
    assert not at.exception
    message = at.error[0].value.replace("\\", "")  # shown as text: markup characters escaped
    assert "nothing was imported" in message and "row 2, column 'image': file not found: missing.png" in message
    assert "unknown split 'validation'" in message
    assert not (tmp_path / "projects" / "new-project").exists()


def test_the_create_form_refuses_a_pipe_or_a_device_at_once(monkeypatch, tmp_path):
    import os

    serve_root(monkeypatch, tmp_path)
    os.mkfifo(tmp_path / "data" / "pipe.csv")
    at = create_from_path("from-a-pipe", tmp_path / "data" / "pipe.csv")  # a hang would time the run out
    assert not at.exception and "is a pipe (FIFO), not a manifest" in at.error[0].value.replace("\\", "")
    os.mkfifo(tmp_path / "data" / "pipe.png")
    manifest = write_manifest(tmp_path / "data", ["a.png,cat,cat,val", "pipe.png,dog,cat,val"])
    at = create_from_path("from-a-pipe", manifest)
    assert not at.exception and "row 2, column 'image': is a pipe (FIFO), not an image file" in \
        at.error[0].value.replace("\\", "")
    assert not (tmp_path / "projects" / "from-a-pipe").exists()


def test_an_uploaded_manifest_resolves_images_against_the_folder_given(tmp_path):
    from hibug_core.tasks import load_uploaded_manifest

    write_manifest(tmp_path / "data", [])
    manifest = load_uploaded_manifest(b"image,label,prediction\na.png,cat,cat\nb.png,dog,cat\n", "upload.csv",
                                      tmp_path / "data")
    assert manifest.n_rows == 2 and manifest.source == "upload.csv"


@pytest.mark.parametrize("name, data, problem", [
    ("birds.parquet", b"not parquet at all", "not a readable Parquet file"),
    ("birds.csv", b"", "the file is empty"),
    ("birds.csv", b"image,label,label\na.png,cat,cat\n", "label"),
])
def test_an_upload_that_cannot_be_read_is_named_as_the_persons_file_never_the_servers_copy(tmp_path, name, data,
                                                                                        problem):
    import tempfile

    from hibug_core.errors import ManifestError
    from hibug_core.tasks import load_uploaded_manifest

    with pytest.raises(ManifestError) as refused:
        load_uploaded_manifest(data, name, tmp_path)
    message = str(refused.value)
    assert message.startswith(f"{name}: 1 problem found; nothing was imported.") and problem in message
    assert tempfile.gettempdir() not in message and "manifest." not in message


def test_the_form_says_which_source_it_reads_and_what_is_missing(monkeypatch, tmp_path):
    serve_root(monkeypatch, tmp_path)
    manifest = write_manifest(tmp_path / "data", ["a.png,cat,cat,val"])
    at = AppTest.from_file(APP, default_timeout=60).run()
    by_label(at, "New project name").set_value("new-project")
    by_label(at, "The manifest's path on this server (when giving a path)").set_value(str(manifest))
    at.button(key="create_submit").click().run()  # "upload it" is chosen, and nothing was uploaded
    assert at.error[0].value.replace("\\", "") == ("choose the manifest file to upload (or choose 'a path on this "
                                                   "server')")
    assert not (tmp_path / "projects" / "new-project").exists()


def test_an_admin_deletes_a_project_of_the_root_after_typing_its_name(monkeypatch, tmp_path):
    from serving_support import make_project

    serve_root(monkeypatch, tmp_path)
    make_project(tmp_path / "projects" / "old", tmp_path / "data" / "old")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["project"] = "old"
    at.run()
    assert at.title[0].value == "old"
    next(t for t in at.text_input if t.label.startswith("Type 'old'")).set_value("ol")
    at.button(key="delete_submit").click().run()
    assert "nothing was deleted" in at.error[0].value and (tmp_path / "projects" / "old").is_dir()
    next(t for t in at.text_input if t.label.startswith("Type 'old'")).set_value("old")
    at.button(key="delete_submit").click().run()
    assert not at.exception and not (tmp_path / "projects" / "old").exists()
    assert at.sidebar.selectbox(key="hibug_project").value is None


def test_a_read_only_server_shows_everything_and_offers_no_change(monkeypatch, tmp_path):
    from serving_support import make_project

    make_project(tmp_path / "projects" / "birds", tmp_path / "data" / "birds")
    serve(monkeypatch, projects_root=tmp_path / "projects", address="0.0.0.0", read_only=True)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["project"] = "birds"
    at.run()
    assert not at.exception and at.title[0].value == "birds"
    assert "This server is read-only" in " ".join(c.value for c in at.sidebar.caption)
    assert at.button(key="predict_submit").disabled and not any(t.label == "New project name" for t in at.text_input)


def test_the_overviews_counts_keep_a_detectors_own_detections_apart():
    import pandas as pd

    from hibug_core.objects.coco import BACKGROUND, DETECTION_KIND
    from hibug_core.sample_counts import SampleCounts, drawn_sample, sample_counts

    samples = pd.DataFrame({
        "split": ["train", "val", "val", "val", "val", "pool", "pool"],
        "object_kind": ["object", "object", "object", DETECTION_KIND, DETECTION_KIND, DETECTION_KIND, "object"],
        "label": ["cat", "cat", "dog", BACKGROUND, "cat", None, None],
        "correct": pd.array([True, False, True, False, None, None, None], dtype="boolean")},
        index=[10, 11, 12, 13, 14, 15, 16])
    assert sample_counts(samples) == SampleCounts(4, {"val": 2, "train": 1, "pool": 1}, 3, 1, 1)
    images = samples.drop(columns="object_kind")  # a classifier's table: every row a sample
    assert sample_counts(images) == SampleCounts(7, {"val": 4, "pool": 2, "train": 1})
    drawn, among, apart = drawn_sample(samples, "val", True, 8)  # the errors: 11 and the false positive 13
    assert sorted(drawn) == [11, 13] and (among, apart) == (2, 1)
    drawn, among, apart = drawn_sample(samples, "val", False, 2)
    assert len(drawn) == 2 and set(drawn) <= {11, 12, 13, 14} and (among, apart) == (4, 1)
    assert drawn.equals(drawn_sample(samples, "val", False, 2)[0])  # seeded: the same draw every run
    assert len(drawn_sample(samples, "test", False, 8)[0]) == 0
