"""The Error slices page under AppTest: the ranked table, choosing a slice, its evidence and images, deep links."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from page_support import open_page as open_any


def open_page(monkeypatch, folder, **query) -> AppTest:
    return open_any(monkeypatch, "pages/4_Error_slices.py", folder, **query)


def test_ranked_slices_of_the_demo_with_the_first_one_explained(monkeypatch, demo_project):
    at = open_page(monkeypatch, demo_project)
    assert not at.exception
    caption = at.caption[0].value
    assert caption.startswith("shape-cnn on val: score 89.0% over 888 images") and "4 error slices" in caption
    table = at.dataframe[0].value
    assert table["description"].tolist()[:3] == ["shape = triangle & color = blue", "shape = rectangle & color = blue",
                                                 "color = blue"]
    assert at.subheader[0].value == "shape = triangle & color = blue"
    assert "spurious correlation" in at.markdown[0].value and "97% of the images with its tags are 'circle'" in \
        at.markdown[0].value
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Images"] == "34" and metrics["Score"] == "14.7%"
    related = at.dataframe[1].value
    assert set(related["description"]) == {"shape = triangle", "color = blue"}
    assert any(c.value.startswith("images 1–24 of 34") for c in at.caption)


def test_a_link_opens_a_slice_with_its_settings(monkeypatch, demo_project):
    from hibug_core.slices.search import slice_id

    chosen = slice_id((("color", "blue"),))
    at = open_page(monkeypatch, demo_project, slice=chosen, gap="0.3", depth="2")
    assert not at.exception
    assert at.number_input[0].value == 2 and at.number_input[2].value == 0.3
    assert at.subheader[0].value == "color = blue"
    assert {m.label: m.value for m in at.metric}["Images"] == "109"
    children = at.dataframe[1].value
    assert set(children["relation"]) == {"child"}


def test_settings_change_the_table_and_are_kept_in_the_url(monkeypatch, demo_project):
    at = open_page(monkeypatch, demo_project)
    at.number_input[2].set_value(0.5)
    at.button[0].click().run()
    assert not at.exception
    assert at.query_params["gap"] == "0.5"
    assert at.caption[0].value.endswith("2 error slices (score below 39.0%)")
    assert at.dataframe[0].value["description"].tolist() == ["shape = triangle & color = blue",
                                                              "shape = rectangle & color = blue"]
