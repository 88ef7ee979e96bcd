"""The Attributes page under AppTest: propose from the library, edit in the table (a stale edit is refused),
history and restore."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema, schema_history

from page_support import open_page as open_any


def open_page(monkeypatch, project) -> AppTest:
    return open_any(monkeypatch, "pages/1_Attributes.py", project.folder, user="ana", timeout=60)


def _diff(at):
    """The proposal's changes against the version in force, as the page shows them."""
    return next(d.value for d in at.dataframe if list(d.value.columns) == ["attribute", "change", "what"])


def test_a_proposal_shows_its_changes_and_is_merged_into_the_current_version_by_default(monkeypatch,
                                                                                         colour_project):
    at = open_page(monkeypatch, colour_project)
    assert not at.exception
    assert at.caption[0].value.startswith("version 1 · 11 attributes")
    at.text_area(key="propose_task").set_value("classify the shape of simple drawings")
    at.button(key="propose_submit").click().run()
    assert not at.exception
    assert any(m.value.replace("\\", "").startswith(
        "**Proposal** (the built-in 'objects' library (no language model): no domain of the library fits the task's "
        "words, so the generic attributes): ") for m in at.markdown)
    assert at.radio(key="propose_how").value == "merge"
    diff = _diff(at)
    assert set(diff["change"]) == {"added"} and "viewpoint" in diff["attribute"].tolist()
    assert any(m.value.startswith(f"**Against version 1**: {len(diff)} change(s)") for m in at.markdown)
    at.button(key="propose_save").click().run()
    assert not at.exception
    assert latest_version(colour_project) == 2
    history = schema_history(colour_project)
    assert history["note"].iat[0].startswith("version 1 with the new attributes of a proposal by the built-in "
                                             "'objects' library (no language model): no domain of the library fits")
    assert history["author"].iat[0] == "ana"
    names = load_schema(colour_project).names()
    assert names[:2] == ["color", "is round"] and "viewpoint" in names and names.count("brightness") == 1
    assert set(load_schema(colour_project, 1).names()) <= set(names)  # nothing of version 1 was lost


def test_replacing_the_current_version_is_a_choice_that_says_what_it_removes(monkeypatch, colour_project):
    at = open_page(monkeypatch, colour_project)
    at.button(key="propose_submit").click().run()
    at.radio(key="propose_how").set_value("replace").run()
    diff = _diff(at)
    removed_names = diff.loc[diff["change"] == "removed", "attribute"].tolist()
    assert "is round" in removed_names
    removed = int((diff["change"] == "removed").sum())
    assert any(f"**{removed} of your attributes removed**" in m.value for m in at.markdown)
    at.button(key="propose_save").click().run()
    names = load_schema(colour_project).names()
    assert "is round" not in names and "viewpoint" in names
    assert schema_history(colour_project)["note"].iat[0].startswith("version 1 replaced by a proposal by")


def test_an_edit_from_a_stale_version_is_refused_and_shows_the_newer_one(monkeypatch, colour_project):
    at = open_page(monkeypatch, colour_project)
    schema = load_schema(colour_project)
    save_schema(colour_project, schema.model_copy(update={"attributes": schema.attributes[:2]}), author="ben",
                note="only two")  # someone else saves while the page is open
    at.run()
    assert "Version 2 was saved by ben" in at.warning[0].value
    at.session_state["attributes_editor_1"] = {"edited_rows": {0: {"tags": "red, green, blue, teal"}},
                                               "added_rows": [], "deleted_rows": []}
    at.text_input(key="attributes_note").set_value("add teal")
    at.button(key="attributes_save").click().run()
    assert not at.exception
    assert "version 2 was saved by ben" in at.error[0].value and "Nothing was overwritten" in at.error[0].value
    assert latest_version(colour_project) == 2
    at.button(key="attributes_reload").click().run()
    assert not at.warning and at.caption[0].value.startswith("version 2 · 2 attributes")


def test_history_restores_an_old_version(monkeypatch, colour_project):
    schema = load_schema(colour_project)
    save_schema(colour_project, schema.model_copy(update={"attributes": schema.attributes[:2]}), author="ben")
    at = open_page(monkeypatch, colour_project)
    assert at.caption[0].value.startswith("version 2 · 2 attributes")
    at.selectbox(key="history_version").set_value(1).run()
    at.button(key="history_restore").click().run()
    assert not at.exception
    assert latest_version(colour_project) == 3 and len(load_schema(colour_project).attributes) == 11
    assert schema_history(colour_project)["note"].iat[0] == "restored version 1"


def test_table_edits_save_a_version_and_bad_rows_are_named(monkeypatch, colour_project):
    at = open_page(monkeypatch, colour_project)
    at.session_state["attributes_editor_1"] = {"edited_rows": {0: {"tags": "red"}, 1: {"name": "round"}},
                                               "added_rows": [], "deleted_rows": []}
    at.button(key="attributes_save").click().run()
    message = at.error[0].value
    assert "Nothing was saved" in message and "row 1 ('color'): an attribute needs at least two tags" in message
    assert "row 2 ('round'): binary attribute 'round' must be named 'is ...'" in message
    assert latest_version(colour_project) == 1
    at.session_state["attributes_editor_1"] = {
        "edited_rows": {0: {"tags": "red, green, blue, teal"}},
        "added_rows": [{"name": "background", "group": "background", "kind": "descriptive", "tags": "white, grey",
                        "enabled": True}], "deleted_rows": [1]}
    at.text_input(key="attributes_note").set_value("teal, a background, no roundness")
    at.button(key="attributes_save").click().run()
    assert not at.exception, at.exception
    schema = load_schema(colour_project)
    assert schema["color"].tags == ("red", "green", "blue", "teal")
    assert "is round" not in schema.names() and schema["background"].group == "background"
    assert schema_history(colour_project)["note"].iat[0] == "teal, a background, no roundness"


def test_history_shows_what_changed_between_two_versions(monkeypatch, colour_project):
    schema = load_schema(colour_project)
    changed = schema.replace(schema["color"].model_copy(update={"tags": ("red", "green", "teal")}))
    save_schema(colour_project, changed, author="bo", note="teal")
    at = open_page(monkeypatch, colour_project)
    at.selectbox(key="history_version").set_value(2).run()
    at.selectbox(key="history_compare").set_value(1).run()
    assert not at.exception
    diff = next(t for t in at.tabs if t.label == "History").dataframe[-1].value
    assert diff.values.tolist() == [["color", "changed", "+teal; −blue"]]
