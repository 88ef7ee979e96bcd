"""The Review page under AppTest: the board filled from the error slices, a status change with its author, the conflict
message for a stale edit, comments and names shown as text, undo from the audit log, and saved views."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from hibug_core.review.board import add_comment, ensure_review, get_review, reviews, update_review
from hibug_core.review.views import saved_views
from hibug_core.store.project import Project
from hibug_core.store.tag_store import correct_tags, corrections

from page_support import labelled
from page_support import open_page as open_any

SCRIPT = "<script>alert('x')</script> see [this link](http://evil.example) **now**"


def open_page(monkeypatch, folder, user: str = "ana", **query) -> AppTest:
    return open_any(monkeypatch, "pages/6_Review.py", folder, user=user, **query)


def test_the_board_is_filled_from_the_error_slices_and_a_status_change_is_signed(monkeypatch, demo_copy):
    at = open_page(monkeypatch, demo_copy)
    assert not at.exception
    assert "Nothing on the board yet" in at.info[0].value
    # one per bug: the two refinements of "color = blue" that repeat it stay with it
    next(b for b in at.button if b.label == "Put the 2 current error slices on the board (one per bug)").click().run()
    assert not at.exception
    board = at.dataframe[0].value
    assert board["title"].tolist()[:2] == ["color = blue", "shape = triangle & size = small"]  # in rank order
    assert len(board) == 2
    assert all(at_ == "just now" or at_.endswith("ago") for at_ in board["updated_at"])  # times in words
    # the chosen slice shows its evidence, a link back to it and its images
    assert at.markdown[0].value.startswith("**spurious correlation**: in training, 97% of those with its tags")
    link = next(m.value for m in at.markdown if "Open this slice" in m.value)  # a plain link outside the navigation
    assert link == "[Open this slice on the Error slices page](/Error_slices?slice=5a46b88dc60b)"
    assert any(c.value.startswith("images 1–16 of 90") for c in at.caption)
    assert set(board["state"]) == {"error slice"} and set(board["status"]) == {"open"}
    labelled(at.selectbox, "Status").set_value("confirmed bug")
    labelled(at.text_input, "Assignee").set_value("bo")
    labelled(at.button, "Save").click().run()
    assert not at.exception
    with Project.open(demo_copy) as project:
        changed = reviews(project, status="confirmed bug")
        assert len(changed) == 1 and changed["assignee"].iat[0] == "bo" and changed["updated_by"].iat[0] == "ana"
        assert changed["version"].iat[0] == 2


def test_a_stale_edit_shows_the_newer_value_and_overwrites_nothing(monkeypatch, demo_copy):
    with Project.open(demo_copy) as project:
        review = ensure_review(project, (("color", "blue"),), author="ana")
    at = open_page(monkeypatch, demo_copy)  # ana opens version 1
    with Project.open(demo_copy) as project:
        update_review(project, review.id, version=1, status="not a bug", assignee="cy", author="bo")
    labelled(at.selectbox, "Status").set_value("fixed")
    labelled(at.button, "Save").click().run()
    assert not at.exception
    message = at.error[0].value
    assert "bo changed this review" in message and "not a bug" in message and "Nothing was overwritten" in message
    with Project.open(demo_copy) as project:
        kept = get_review(project, review.id)
    assert (kept.status, kept.assignee, kept.version) == ("not a bug", "cy", 2)


def test_comments_and_names_with_markup_render_as_text(monkeypatch, demo_copy):
    with Project.open(demo_copy) as project:
        review = ensure_review(project, kind="selection", key=SCRIPT, author="[ana](http://evil.example)")
        add_comment(project, review.id, SCRIPT, author="<b>bo</b>")
    at = open_page(monkeypatch, demo_copy)
    assert not at.exception
    assert at.text[0].value == SCRIPT  # st.text: shown verbatim, never parsed
    assert at.subheader[0].value.startswith("\\<script\\>") and "\\[this link\\]\\(http\\:" in at.subheader[0].value
    author_line = next(c.value for c in at.caption if "bo" in c.value)
    assert author_line.startswith("\\<b\\>bo\\</b\\>")
    labelled(at.text_area, "Add a comment").set_value("[click](javascript:alert(1))")
    labelled(at.button, "Comment").click().run()
    assert [t.value for t in at.text] == [SCRIPT, "[click](javascript:alert(1))"]
    for element in (*at.markdown, *at.caption, *at.subheader):
        assert "](http://evil" not in element.value and "<script>" not in element.value


def test_undo_a_tag_correction_from_the_audit_log(monkeypatch, demo_copy):
    with Project.open(demo_copy) as project:
        correct_tags(project, "color", [1, 2], "green", author="bo")
    at = open_page(monkeypatch, demo_copy)
    at.checkbox(key="review_log_undoable").check().run()
    log = at.tabs[2].dataframe[0].value
    assert log["action"].tolist()[0] == "correct tag"  # newest first; the demo's attribute save follows
    labelled(at.button, "Undo").click().run()
    assert not at.exception
    assert "back to the tags before entry" in at.success[0].value
    with Project.open(demo_copy) as project:
        assert corrections(project).empty
        assert project.audit_log()["actor"].iat[-1] == "ana"


def test_a_saved_view_is_listed_with_its_link(monkeypatch, demo_copy):
    at = open_page(monkeypatch, demo_copy)
    labelled(at.text_input, "Name").set_value("blue [failures]")
    labelled(at.selectbox, "Page").set_value("Error_slices")
    labelled(at.text_input, "URL query").set_value("slice=5a46b88dc60b&gap=0.1")
    labelled(at.button, "Save view").click().run()
    assert not at.exception
    with Project.open(demo_copy) as project:
        views = saved_views(project)
    assert views["link"].tolist() == ["/Error_slices?gap=0.1&slice=5a46b88dc60b"]
    link = next(m.value for m in at.markdown if "Error_slices?" in m.value)
    assert link.startswith("[blue \\[failures\\]](/Error_slices?gap=0.1&slice=5a46b88dc60b)")


def test_review_this_slice_from_the_error_slices_page(monkeypatch, demo_copy):
    at = open_any(monkeypatch, "app.py", demo_copy, user="ana")  # the navigation, so one page can open another
    at.switch_page("pages/4_Error_slices.py").run()
    labelled(at.button, "Review this slice").click().run()
    assert not at.exception
    assert at.title[0].value == "Review" and at.subheader[0].value == "color = blue"
    with Project.open(demo_copy) as project:
        board = reviews(project)
    assert board["title"].tolist() == ["color = blue"] and board["created_by"].iat[0] == "ana"


def test_the_report_tab_lists_the_findings_with_three_downloads(monkeypatch, demo_copy):
    with Project.open(demo_copy) as project:
        ensure_review(project, (("color", "blue"),), author="ana")
    at = open_page(monkeypatch, demo_copy)
    table = at.tabs[1].dataframe[0].value
    assert table["slice"].tolist() == ["color = blue", "shape = triangle & size = small"]  # one row per bug
    assert table["also"].tolist()[0] == "shape = rectangle & color = blue"
    assert table["review_status"].tolist()[0] == "open"
    assert [b.label for b in at.tabs[1].get("download_button")] == ["HTML report", "Markdown", "CSV"]


def test_a_server_with_authentication_shows_nothing_before_sign_in(monkeypatch, demo_project):
    monkeypatch.setenv("HIBUG_PROJECT", str(demo_project))
    at = AppTest.from_file(str(__import__("page_support").REPO / "pages/6_Review.py"), default_timeout=120)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
                          "client_id": "hibug", "client_secret": "s", "server_metadata_url":
                          "https://login.example/.well-known/openid-configuration"}
    at.secrets["hibug"] = {"roles": {"editor": ["*@example.com"]}}
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign in"] and at.info[0].value == "Sign in to open this dashboard."
    assert not at.text_input and not at.sidebar.selectbox  # no name to type, no project, no data
