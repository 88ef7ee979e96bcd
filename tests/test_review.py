"""Team review in the core: the board with optimistic concurrency, comments, filters, stale slices, saved views,
stale tag corrections refused, and undo from the audit log."""
from __future__ import annotations

import json

import pytest

from hibug_core.attributes import Attribute, AttributeSchema
from hibug_core.review.board import (
    ReviewError,
    StaleReviewError,
    add_comment,
    comments,
    ensure_review,
    get_review,
    reviews,
    update_review,
    with_slice_state,
)
from hibug_core.review.views import save_view, saved_views
from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema
from hibug_core.store.tag_store import StaleTagError, correct_tags, corrections
from hibug_core.store.undo import UndoError, undo

BLUE = (("color", "blue"),)


def test_a_slice_review_is_created_once_and_edited_with_versions(colour_project):
    first = ensure_review(colour_project, BLUE, author="ana")
    assert (first.title, first.status, first.assignee, first.version) == ("color = blue", "open", None, 1)
    assert ensure_review(colour_project, [["color", "blue"]], author="bo").id == first.id  # same slice, same review
    moved = update_review(colour_project, first.id, version=1, status="confirmed bug", assignee="bo", author="ana")
    assert (moved.status, moved.assignee, moved.version, moved.updated_by) == ("confirmed bug", "bo", 2, "ana")
    with pytest.raises(StaleReviewError,
                       match="ana changed this review .* status 'confirmed bug', assignee 'bo'") as error:
        update_review(colour_project, first.id, version=1, status="not a bug", author="cy")
    assert error.value.current.version == 2
    assert get_review(colour_project, first.id).status == "confirmed bug"  # the stale write changed nothing
    kept = update_review(colour_project, first.id, version=2, assignee=None, author="bo")
    assert (kept.status, kept.assignee, kept.version) == ("confirmed bug", None, 3)
    log = colour_project.audit_log()
    entry = log[log["action"] == "update review"].iloc[0]
    assert json.loads(entry["before_json"]) == {"status": "open", "assignee": None, "version": 1}
    assert json.loads(entry["after_json"]) == {"status": "confirmed bug", "assignee": "bo", "version": 2}
    with pytest.raises(ReviewError, match="unknown status 'done'"):
        update_review(colour_project, first.id, version=3, status="done")


def test_comments_and_filters(colour_project):
    blue = ensure_review(colour_project, BLUE, author="ana")
    red = ensure_review(colour_project, (("color", "red"),), author="ana")
    picked = ensure_review(colour_project, kind="selection", key="odd circles", author="bo")
    assert add_comment(colour_project, blue.id, "  <script>alert(1)</script> [link](http://x)  ", author="cy") > 0
    add_comment(colour_project, blue.id, "second", author="ana")
    thread = comments(colour_project, blue.id)
    assert thread["body"].tolist() == ["<script>alert(1)</script> [link](http://x)", "second"]  # stored verbatim
    assert thread["author"].tolist() == ["cy", "ana"]
    update_review(colour_project, red.id, version=1, status="fixed", assignee="dee", author="ana")
    board = reviews(colour_project)
    assert set(board["title"]) == {"color = blue", "color = red", "odd circles"}
    assert board.set_index("title").loc["color = blue", "comments"] == 2
    assert reviews(colour_project, status="fixed")["title"].tolist() == ["color = red"]
    assert reviews(colour_project, person="cy")["title"].tolist() == ["color = blue"]  # a commenter
    assert reviews(colour_project, person="dee")["title"].tolist() == ["color = red"]  # the assignee
    assert set(reviews(colour_project, person="bo")["title"]) == {"odd circles"}
    with pytest.raises(ReviewError, match="empty"):
        add_comment(colour_project, picked.id, "   ")
    with pytest.raises(ReviewError, match="no review #999"):
        add_comment(colour_project, 999, "hello")


def test_slice_reviews_survive_re_slicing_and_turn_stale_when_their_tags_go(demo_project, tmp_path):
    import shutil

    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    shutil.copytree(demo_project, tmp_path / "demo")
    with Project.open(tmp_path / "demo") as project:
        for definition in (BLUE, (("color", "red"),), (("color", "purple"),),
                           (("shape", "rectangle"), ("color", "blue"))):
            ensure_review(project, definition, author="ana")
        board = with_slice_state(reviews(project), error_slices(project))
    state = dict(zip(board["title"], zip(board["state"], board["rank"])))
    assert state["color = blue"] == ("error slice", 1)
    assert state["shape = rectangle & color = blue"] == ("error slice", 3)  # a refinement, after the distinct ones
    assert state["color = red"][0] == "not an error slice now"
    assert state["color = purple"][0] == "stale"


def test_saved_views_have_links_and_unique_names(colour_project):
    save_view(colour_project, "blue failures", "Error_slices", {"slice": "abc", "gap": 0.2}, author="ana")
    views = saved_views(colour_project)
    assert views[["name", "page", "author"]].values.tolist() == [["blue failures", "Error_slices", "ana"]]
    assert views["link"].iat[0] == "/Error_slices?gap=0.2&slice=abc"  # keys sorted: one link per view
    with pytest.raises(ReviewError, match="was saved by ana"):
        save_view(colour_project, "blue  failures", "Repair", {}, author="bo")
    with pytest.raises(ReviewError, match="is not a page of the dashboard: use its URL path"):
        save_view(colour_project, "x", "../../admin?x=", {})


def test_a_stale_tag_correction_is_refused_with_the_newer_value(colour_project):
    correct_tags(colour_project, "color", [1], "red", author="ana", seen={1: None})
    with pytest.raises(StaleTagError, match="ana set 'color' of sample 1 to 'red'.*you saw 'no correction'"):
        correct_tags(colour_project, "color", [1, 2], "green", author="bo", seen={1: None, 2: None})
    assert corrections(colour_project)["tag"].tolist() == ["red"]  # sample 2 was not written either
    correct_tags(colour_project, "color", [1], "green", author="bo", seen={1: "red"})
    assert corrections(colour_project)["tag"].tolist() == ["green"]


def test_undo_a_tag_correction_and_an_attribute_edit_from_the_log(colour_project):
    correct_tags(colour_project, "color", [1], "red", author="ana")
    correct_tags(colour_project, "color", [1, 2], "blue", author="bo")
    entry = int(colour_project.audit_log()["id"].iat[-1])
    assert "back to the tags before" in undo(colour_project, entry, author="cy")
    now = corrections(colour_project).set_index("sample_id")["tag"].to_dict()
    assert now == {1: "red"}  # sample 1 back to ana's tag, sample 2 back to no correction
    log = colour_project.audit_log()
    assert log["actor"].iat[-1] == "cy"
    with pytest.raises(UndoError, match="changed after entry"):
        undo(colour_project, entry)  # the undo itself changed those tags since

    base = latest_version(colour_project)
    schema = load_schema(colour_project)
    save_schema(colour_project, AttributeSchema(attributes=schema.attributes + (
        Attribute(name="texture", tags=("flat", "shiny")),)), author="ana", note="add texture")
    entry = int(colour_project.audit_log()["id"].iat[-1])
    message = undo(colour_project, entry, author="bo")
    assert message == f"attributes back to version {base} (saved as version {base + 2})"
    assert load_schema(colour_project).names() == schema.names()
    first_save = int(colour_project.audit_log().query("action == 'save attributes'")["id"].iat[0])
    with pytest.raises(UndoError, match="no earlier version"):
        undo(colour_project, first_save)
    import_entry = int(colour_project.audit_log().query("action == 'import'")["id"].iat[0])
    with pytest.raises(UndoError, match="cannot be undone"):
        undo(colour_project, import_entry)


def test_findings_report_in_html_markdown_and_csv_escapes_text_and_says_how_to_reproduce(demo_project, tmp_path,
                                                                                        monkeypatch):
    import shutil

    import pandas as pd

    from hibug_core.review.findings import findings, report_csv, report_html, report_markdown
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-in-a-report")
    shutil.copytree(demo_project, tmp_path / "demo")
    with Project.open(tmp_path / "demo") as project:
        report = error_slices(project)
        review = ensure_review(project, report.slices["definition"].iat[0], author="ana")
        update_review(project, review.id, version=1, status="confirmed bug", assignee="bo", author="ana")
        add_comment(project, review.id, "<script>alert(1)</script> | [x](http://evil.example)", author="ana")
        table = findings(project, report)
        page = report_html(project, report, table, thumbnails=4)
        markdown = report_markdown(project, report, table)
        csv = report_csv(table).decode()
    # One row per bug: the blue refinement is folded under "color = blue", not ranked after it.
    assert table["slice"].tolist() == ["color = blue", "shape = triangle & size = small"]
    assert table["also"].tolist() == ["shape = rectangle & color = blue", ""]
    assert table["trust"].tolist() == ["", ""]
    assert table["review_status"].tolist() == ["confirmed bug", "not reviewed"]
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("data:image/png;base64,") == 2 * 4  # four thumbnails for each of the two bugs
    assert "Also the same bug: shape = rectangle &amp; color = blue</" in page
    assert "Also the same bug: shape = rectangle \\& color = blue" in markdown
    assert '"attribute_version": 1' in page and '"min_support": 10' in page and '"model": "shape-cnn"' in page
    assert "\\<script\\>" in markdown and "](http" not in markdown and "\\| \\[x\\]" in markdown
    assert "Attribute version 1" in markdown and "| 1 | color = blue | 90 | 38.9% |" in markdown
    back = pd.read_csv(__import__("io").StringIO(csv))
    assert back["slice"].tolist() == table["slice"].tolist() and back["review_status"].iat[0] == "confirmed bug"
    for text in (page, markdown, csv):
        assert "sk-test-never-in-a-report" not in text


def test_the_reproduce_block_writes_characters_not_escapes(demo_project, monkeypatch):
    from hibug_core.review.findings import findings, report_html
    from hibug_core.slices.report import error_slices
    from hibug_core.store import tag_store
    from hibug_core.store.project import Project

    monkeypatch.setattr(tag_store, "tags_version", lambda project: "run 1 · measured")
    with Project.open(demo_project, read_only=True) as project:
        report = error_slices(project)
        page = report_html(project, report, findings(project, report, top=1), thumbnails=0)
    assert '"tags": "run 1 · measured"' in page and "\\u00b7" not in page


def test_the_board_views_and_jobs_leave_the_data_version_and_its_caches_alone(colour_project):
    from hibug_core.jobs.store import create_job, request_cancel
    from hibug_core.store.audit import NOT_DATA
    from hibug_core.store.tag_store import project_state

    before, state = colour_project.data_version(), project_state(colour_project)
    review = ensure_review(colour_project, (("color", "red"),), author="ana")
    update_review(colour_project, review.id, version=1, status="confirmed bug", author="ana")
    add_comment(colour_project, review.id, "red fails", author="bo")
    save_view(colour_project, "reds", "Error_slices", {"slice": "x"}, author="bo")
    request_cancel(colour_project, create_job(colour_project, "embed", {}, author="ana"), author="ana")
    log = colour_project.audit_log()
    assert log["action"].iloc[-6:].tolist() == list(NOT_DATA)  # each recorded, none a change of the data
    assert colour_project.data_version() == before and project_state(colour_project) == state
    correct_tags(colour_project, "color", [1], "blue", author="ana")  # a change of the data moves both
    assert colour_project.data_version() == int(colour_project.audit_log()["id"].max()) > before
    assert project_state(colour_project) != state
