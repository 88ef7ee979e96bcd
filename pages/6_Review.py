"""Review: the team board of slice reviews (status, assignee, comments), the audit log with undo, and saved views."""
from functools import partial

import pandas as pd
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.metrics import points
from hibug_core.review.board import (
    STATUSES,
    StaleReviewError,
    add_comment,
    comments,
    ensure_review,
    get_review,
    members,
    reviews,
    update_review,
    with_slice_state,
)
from hibug_core.review.findings import COLUMNS as REPORT_COLUMNS
from hibug_core.review.findings import findings, report_csv, report_html, report_markdown
from hibug_core.review.views import save_view, saved_views
from hibug_core.slices.report import one_row_per_bug
from hibug_core.slices.search import SliceConfig
from hibug_core.store.undo import UNDOABLE, undo
from hibug_ui.navigation import URL_PATHS
from hibug_ui.page import open_page
from hibug_ui.state import load_samples, slice_places, slice_report
from hibug_ui.widgets import as_percent, image_grid, in_words, link_to, paged, percent_column, url_setting

project, task, model, user, editing = open_page("Review")
nouns, outcome = task.nouns, task.outcome  # the task's words; a sample's caption in them
st.title("Review")
PAGE_LABELS = {p: p.replace("_", " ") or "Overview" for p in URL_PATHS}
SEEN_KEY = "review_seen_version"  # {review id: the version this session's form was filled from}


def show_slice(review, report) -> None:
    """A slice item: its evidence, a link back to it on the Error slices page, and its images (failures first)."""
    rows = report.slices[report.slices["slice_id"] == review.target_key] if report is not None else None
    if rows is None or rows.empty:
        return
    row = rows.iloc[0]
    st.markdown(f"**{row['bug_type']}**: {plain(row['reason'])}")
    precision = (f"tags right on {row['tag_precision']:.0%} of {nouns.count(row['tag_checked'])} checked"
                 if row["tag_checked"] else "tags not checked")
    st.caption(f"{nouns.count(row['count'])} · score {row['score']:.1%} ({points(-row['gap'])} vs overall) · q "
               f"{row['q_value']:.1e} · {precision}" + ("" if row["trusted"] else " · ⚠ tags too poor to trust"))
    link_to("pages/4_Error_slices.py", "Open this slice on the Error slices page", icon=":material/bug_report:",
            query_params={"slice": review.target_key})
    samples, places = load_samples(project, model), slice_places(project, model, report, review.target_key)
    if places is None:  # some of its samples are not in the table: looked up by id
        samples, places = samples.loc[report.sample_ids(review.target_key)], None
    image_grid(project, paged(samples, key=f"review_slice_{review.id}", per_page=16, among=places,
                              noun=nouns.samples), columns=8,
               details=f"review_{review.id}", report=report, user=user,
               caption=outcome)


def show_review(board: pd.DataFrame, report=None) -> None:
    """The chosen review: its state, a status and assignee form, and its comment thread."""
    shown = [c for c in ("title", "status", "assignee", "state", "rank", "score", "comments", "updated_by",
                         "updated_at") if c in board.columns]
    board = board.assign(updated_at=board["updated_at"].map(in_words)) if "updated_at" in board else board
    event = st.dataframe(as_percent(board[shown], "score"), key="review_board", on_select="rerun",
                         selection_mode="single-row", hide_index=True, width="stretch",
                         column_config={"score": percent_column("score"),
                                        "updated_by": "changed by", "updated_at": "changed at"})
    picked = event.selection.rows if event and event.selection else []
    chosen_id = int(board["id"].iat[picked[0]]) if picked else url_setting("review", int(board["id"].iat[0]), int)
    if chosen_id not in set(board["id"]):
        chosen_id = int(board["id"].iat[0])
    st.query_params["review"] = str(chosen_id)
    review = get_review(project, chosen_id)
    seen = st.session_state.setdefault(SEEN_KEY, {})
    seen.setdefault(review.id, review.version)

    st.subheader(plain(review.title))
    state = board.loc[board["id"] == review.id, "state"].iat[0] if "state" in board.columns else None
    if state == "stale":
        st.warning("Stale: a tag of this slice no longer exists after re-tagging or an attribute edit. The review "
                   "and its comments are kept.")
    elif state:
        st.caption(f"Now: {state}")
    with st.form(f"review_edit_{review.id}"):
        cells = st.columns(2)
        status = cells[0].selectbox("Status", STATUSES, index=STATUSES.index(review.status))
        assignee = cells[1].text_input("Assignee", value=review.assignee or "", placeholder="nobody")
        if st.form_submit_button("Save", type="primary", key="review_status_submit", disabled=not editing):
            try:
                saved = update_review(project, review.id, version=seen[review.id], status=status,
                                      assignee=assignee.strip() or None, author=user)
                seen[review.id] = saved.version
                st.toast(f"Saved (version {saved.version})")
                st.rerun()
            except StaleReviewError as error:
                seen[review.id] = error.current.version  # the next save starts from what is shown now
                st.error(plain(error))
    if review.target_kind == "slice":
        show_slice(review, report)
    chosen_images = members(project, review.id)
    if chosen_images:
        st.caption(f"{nouns.count(len(chosen_images))} in this selection")
        rows = load_samples(project, model).reindex(chosen_images).dropna(
            subset=["image_path"])
        image_grid(project, paged(rows, key=f"review_members_{review.id}", noun=nouns.samples), columns=8,
                   caption=lambda r: outcome(r) if "prediction" in r else str(r.name))
    thread = comments(project, review.id)
    st.markdown(f"**Comments** ({len(thread)})")
    for _, comment in thread.iterrows():
        with st.container(border=True):
            st.caption(f"{plain(comment['author'])} · {in_words(comment['created_at'])}")
            st.text(comment["body"])
    with st.form(f"review_comment_{review.id}", clear_on_submit=True):
        body = st.text_area("Add a comment", placeholder="Plain text")
        if st.form_submit_button("Comment", key="review_comment_submit", disabled=not editing):
            try:
                add_comment(project, review.id, body, author=user)
                st.rerun()
            except HibugError as error:
                st.error(plain(error))


board_tab, report_tab, log_tab, views_tab = st.tabs(["Board", "Report", "Audit log", "Saved views"])
with board_tab:
    report = None
    if model is not None:
        try:
            report = slice_report(project, model, "val", SliceConfig())
        except HibugError as error:
            st.info(f"No error slices to review yet: {plain(error)}")
    bugs = one_row_per_bug(report.slices) if report is not None else None  # repeats go with the bug they repeat
    if bugs is not None and len(bugs) and st.button(
            f"Put the {len(bugs)} current error slice{'s' if len(bugs) != 1 else ''} on the board (one per bug)",
            disabled=not editing):
        for definition in bugs["definition"]:
            ensure_review(project, definition, author=user)
        st.rerun()
    cells = st.columns(2)
    status_filter = cells[0].selectbox("Filter by status", ["any", *STATUSES], key="review_status_filter")
    board = reviews(project)
    people = sorted(set(board["assignee"].dropna()) | set(board["updated_by"]) | set(board["created_by"]))
    person = cells[1].selectbox("Filter by person", ["anyone", *people], key="review_person_filter")
    board = reviews(project, status=None if status_filter == "any" else status_filter,
                    person=None if person == "anyone" else person)
    if report is not None:  # error slices in their current rank order, then the rest, last changed first
        board = with_slice_state(board, report).sort_values("rank", na_position="last", kind="stable")
    if board.empty:
        st.info("Nothing on the board yet. Put the error slices on it, or use “Review this slice” on the Error "
                "slices page.")
    else:
        show_review(board, report)

with report_tab:
    if report is None:
        st.info("No error slices to report yet.")
    else:
        top = st.number_input("Slices in the report", min_value=1, max_value=200,
                              value=min(20, max(len(report.slices), 1)))
        table = findings(project, report, top=int(top))
        st.dataframe(as_percent(table[REPORT_COLUMNS], "score", "gap", "score_low", "score_high"), hide_index=True,
                     width="stretch",
                     column_config={"score": percent_column("score"), "gap": percent_column("gap"),
                                    "score_low": percent_column("95% low"), "score_high": percent_column("95% high"),
                                    "q_value": st.column_config.NumberColumn("q", format="%.1e"),
                                    "bug_type": st.column_config.TextColumn("bug type", width="medium"),
                                    "reason": st.column_config.TextColumn("why", width="large")})
        cells = st.columns(3)
        # Built when clicked (thumbnails take a moment), not on every rerun.
        cells[0].download_button("HTML report", partial(report_html, project, report, table), "findings.html",
                                 "text/html")
        cells[1].download_button("Markdown", partial(report_markdown, project, report, table), "findings.md",
                                 "text/markdown")
        cells[2].download_button("CSV", partial(report_csv, table), "findings.csv", "text/csv")
        st.caption("The report lists the model, attribute version, tags and slice settings used, so a teammate can "
                   "reproduce it; thumbnails are embedded, so the HTML file stands alone.")

with log_tab:
    log = project.audit_log()
    cells = st.columns(3)
    actor = cells[0].selectbox("Who", ["anyone", *sorted(log["actor"].unique())], key="review_log_actor")
    action = cells[1].selectbox("Action", ["any", *sorted(log["action"].unique())], key="review_log_action")
    only_undoable = cells[2].checkbox("Only edits that can be undone", key="review_log_undoable")
    if actor != "anyone":
        log = log[log["actor"] == actor]
    if action != "any":
        log = log[log["action"] == action]
    if only_undoable:
        log = log[log["action"].isin(UNDOABLE)]
    st.dataframe(log.sort_values("id", ascending=False), hide_index=True, width="stretch",
                 column_config={"before_json": "before", "after_json": "after"})
    undoable = log[log["action"].isin(UNDOABLE)].sort_values("id", ascending=False)
    if len(undoable):
        with st.form("review_undo"):
            entry = st.selectbox("Undo entry", [f"#{i}" for i in undoable["id"]])
            if st.form_submit_button("Undo", key="review_undo_submit", disabled=not editing):
                try:
                    st.success(plain(undo(project, int(entry.lstrip("#")), author=user)))
                except HibugError as error:
                    st.error(plain(error))

with views_tab:
    views = saved_views(project)
    if views.empty:
        st.caption("No saved views yet.")
    for _, view in views.iterrows():
        st.markdown(f"[{plain(view['name'])}]({view['link']}) · {plain(view['page'] or 'Overview')} · by "
                    f"{plain(view['author'])} · {in_words(view['created_at'])}")
    with st.form("review_save_view"):
        cells = st.columns(3)
        name = cells[0].text_input("Name")
        page = cells[1].selectbox("Page", URL_PATHS, format_func=PAGE_LABELS.get, key="review_view_page")
        query = cells[2].text_input("URL query", placeholder="slice=ab12cd&gap=0.1")
        if st.form_submit_button("Save view", key="review_view_submit", disabled=not editing):
            try:
                pairs = dict(part.split("=", 1) for part in query.strip("?").split("&") if "=" in part)
                save_view(project, name, page, pairs, author=user)
                st.rerun()
            except HibugError as error:
                st.error(plain(error))
    if not views.empty:
        st.dataframe(pd.DataFrame(views[["name", "page", "link", "author", "created_at"]]), hide_index=True,
                     width="stretch")
