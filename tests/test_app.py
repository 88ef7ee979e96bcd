"""The Overview page (app.py) under Streamlit's AppTest."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def run_app(monkeypatch, folder) -> AppTest:
    monkeypatch.setenv("HIBUG_PROJECT", str(folder))
    return AppTest.from_file(APP, default_timeout=120).run()


def test_overview_of_the_demo(monkeypatch, demo_project):
    at = run_app(monkeypatch, demo_project)
    assert not at.exception
    assert at.title[0].value == "easy-vqa shapes demo"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Images"] == "3,866"
    assert (metrics["train"], metrics["val"], metrics["test"], metrics["pool"]) == ("1,378", "888", "800", "800")
    assert metrics["val score"] == "89.0%"
    assert at.sidebar.selectbox[0].value == "shape-cnn"
    assert any("of 98 images" in c.value for c in at.caption)  # val errors


def test_switching_split_and_showing_all(monkeypatch, demo_project):
    at = run_app(monkeypatch, demo_project)
    at.radio(key="overview_split").set_value("test").run()
    assert not at.exception
    at.segmented_control(key="overview_show").set_value("all").run()
    at.slider(key="overview_count").set_value(8).run()
    assert any(c.value.startswith("8 of 800 images") for c in at.caption)


def test_no_project_explains_how_to_open_one(monkeypatch):
    monkeypatch.delenv("HIBUG_PROJECT", raising=False)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert "hibug demo" in at.info[0].value


@pytest.mark.parametrize("make_folder", [False, True])
def test_bad_folder_is_a_clear_error(monkeypatch, tmp_path, make_folder):
    folder = tmp_path / "nowhere"
    if make_folder:
        folder.mkdir()
    at = run_app(monkeypatch, folder)
    assert not at.exception
    expected = "is not a hibug project" if make_folder else "Folder not found"
    assert expected in at.error[0].value
