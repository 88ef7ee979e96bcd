"""Two people on one review in real headless Chromium: the second, stale save is refused with the newer value shown;
a comment with a script tag and a Markdown link shows as text."""
from __future__ import annotations

import shutil

import pytest

from browser_support import ARTIFACTS, idle, open_app, serving, shown
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COMMENT = "<script>document.title='owned'</script> [click me](http://evil.example)"


@pytest.fixture(scope="module")
def review_project(demo_project, tmp_path_factory):
    from hibug_core.review.board import ensure_review
    from hibug_core.store.project import Project

    folder = tmp_path_factory.mktemp("review") / "demo"
    shutil.copytree(demo_project, folder)
    with Project.open(folder) as project:
        review = ensure_review(project, (("color", "blue"),), author="setup")
    return folder, review.id


def status_box(page):
    return page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Status", exact=True))


def set_status(page, status: str) -> None:
    status_box(page).click()
    page.get_by_role("option", name=status, exact=True).click()
    page.get_by_role("button", name="Save", exact=True).click()


def test_two_people_edit_one_review_and_the_second_sees_the_conflict(browser, review_project):
    from hibug_core.review.board import get_review
    from hibug_core.store.project import Project

    folder, review_id = review_project
    with serving(folder) as url:
        ana, bo = browser.new_context(), browser.new_context()
        pages = []
        for context, name in ((ana, "ana"), (bo, "bo")):
            page = context.new_page()
            open_app(page, f"{url}/Review?review={review_id}")
            page.get_by_role("button", name="Save", exact=True).wait_for(timeout=90_000)
            page.get_by_role("textbox", name="Your name").fill(name)
            page.get_by_role("textbox", name="Your name").press("Enter")
            idle(page)
            pages.append(page)
        first, second = pages
        # Landing on a deep link, the sidebar is the dashboard's own navigation.
        assert first.get_by_test_id("stSidebarNav").get_by_text("Overview", exact=True).is_visible()
        set_status(first, "confirmed bug")
        with Project.open(folder) as project:
            wait_until(lambda: get_review(project, review_id).version >= 2, 60, what="ana's save", every=0.2)
        idle(first)
        set_status(second, "not a bug")  # bo's form still shows version 1
        shown(second, "ana changed this review", timeout=30_000)
        assert "Nothing was overwritten" in second.get_by_test_id("stAlert").first.inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        second.screenshot(path=str(ARTIFACTS / "review-conflict.png"), full_page=True)
        with Project.open(folder) as project:
            kept = get_review(project, review_id)
        assert (kept.status, kept.version, kept.updated_by) == ("confirmed bug", 2, "ana")

        # A comment with markup is shown as the text it is.
        idle(second)  # while a run redraws, the last run's form is still on the page beside the new one
        second.get_by_role("textbox", name="Add a comment").fill(COMMENT)
        second.get_by_role("button", name="Comment").click()
        shown(second, COMMENT, timeout=30_000)
        assert second.title() != "owned"
        assert second.locator("a[href='http://evil.example']").count() == 0
        for context in (ana, bo):
            context.close()


def test_the_name_is_entered_once_per_browser(browser, review_project):
    folder, review_id = review_project
    with serving(folder) as url:
        context = browser.new_context()
        page = context.new_page()
        open_app(page, f"{url}/Review")
        name = page.get_by_role("textbox", name="Your name")
        name.wait_for(timeout=90_000)
        name.fill('Ana "<b>" Ng')
        name.press("Enter")
        page.wait_for_function("() => document.cookie.includes('hibug_user=')", timeout=30_000)
        other = context.new_page()  # a new tab of the same browser: a new session
        other.goto(f"{url}/Error_slices")
        idle(other)
        other.get_by_role("textbox", name="Your name").wait_for(timeout=90_000)
        assert other.get_by_role("textbox", name="Your name").input_value() == 'Ana "<b>" Ng'
        stranger = browser.new_context().new_page()  # another browser knows nothing of it
        stranger.goto(f"{url}/Error_slices")
        idle(stranger)
        stranger.get_by_role("textbox", name="Your name").wait_for(timeout=90_000)
        assert stranger.get_by_role("textbox", name="Your name").input_value() != 'Ana "<b>" Ng'
        context.close()
        stranger.context.close()
