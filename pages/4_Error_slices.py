"""Error slices: settings, the ranked table, and for the chosen slice its evidence and images (failures first)."""
import pandas as pd
import plotly.express as px
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.llm.client import LLMConfig
from hibug_core.markdown import plain
from hibug_core.metrics import points, share
from hibug_core.operations import FindSlices, PredictUnseen
from hibug_core.review.board import ensure_review
from hibug_core.review.views import save_view
from hibug_core.slices.report import TAG_SOURCES
from hibug_core.slices.report import tag_source as read_tags
from hibug_core.slices.search import RANKINGS
from hibug_core.slices.unseen import UNSEEN_METHODS
from hibug_core.tagging.sources import ADVICE, trust_message
from hibug_ui.fields import field_input, in_words
from hibug_ui.jobs import built, job_status, latest_job, start_job
from hibug_ui.page import open_page
from hibug_ui.plots import error_type_figure, literal_values
from hibug_ui.state import (
    false_positives_apart,
    load_samples,
    secret,
    slice_report,
    slice_view,
    source_ranking,
)
from hibug_ui.widgets import (
    as_percent,
    grid_filters,
    image_grid,
    keep_setting,
    link_to,
    paged,
    percent_column,
    url_setting,
)

project, task, model, user, editing = open_page("Error slices", needs_model=True)
nouns, outcome = task.nouns, task.outcome  # the task's words; a sample's caption in them

st.title("Error slices")
with st.form("slices_settings"):
    cells = st.columns([1, 1, 1, 1, 1, 1.4])
    depth = field_input(cells[0], FindSlices, "max_depth", "Depth (attributes per slice)", key="slices_depth",
                        value=url_setting("depth", FindSlices.default("max_depth"), int))
    support = field_input(cells[1], FindSlices, "min_support", "Minimum size M", key="slices_support",
                          value=url_setting("support", FindSlices.default("min_support"), int))
    gap = field_input(cells[2], FindSlices, "gap", "Gap C", key="slices_gap", step=0.05,
                      value=url_setting("gap", FindSlices.default("gap"), float),
                      help="An error slice scores below the overall score minus C")
    rank_by = field_input(cells[3], FindSlices, "rank_by", "Rank by", key="slices_rank_by",
                          value=url_setting("rank", FindSlices.default("rank_by")), help=RANKINGS.help_text(),
                          format_func=in_words)  # a ranking's name, not an identifier
    splits = [s for s in ("val", "test", "train") if project.split_counts().get(s)] or ["val"]
    split = cells[4].selectbox("Split", splits, index=splits.index(url_setting("split", splits[0]))
                               if url_setting("split", splits[0]) in splits else 0, key="slices_split")
    tag_source = field_input(cells[5], FindSlices, "tags", "Tags", key="slices_tags",
                             value=url_setting("tags", FindSlices.default("tags")),
                             help=f"Which tags to slice by: {TAG_SOURCES.help_text()}. Tagging → Tag sources shows "
                                  "how good each is")
    below = st.columns([1, 5], vertical_alignment="bottom")
    alpha = field_input(below[0], FindSlices, "alpha", "False discovery rate", key="slices_alpha", step=0.01,
                        value=url_setting("alpha", FindSlices.default("alpha"), float))
    by_class = field_input(below[1], FindSlices, "by_class", "Slice by the class too", key="slices_by_class",
                           value=url_setting("by_class", "1" if FindSlices.default("by_class") else "0") == "1",
                           help="Adds the label as an attribute: finds bugs of one class, such as a rare kind of one "
                           "class (on by default, as in the planted-bug benchmark)")
    if st.form_submit_button("Find error slices", type="primary", key="slices_settings_submit"):
        keep_setting(depth=str(depth), support=str(support), gap=str(gap), rank=rank_by, split=split,
                     tags=tag_source, by_class="1" if by_class else "0", alpha=str(alpha))
        st.query_params.pop("slice", None)
        st.session_state.pop("kept_slice", None)

try:
    search = FindSlices.build(model=model, split=split, max_depth=depth, min_support=support, gap=gap, rank_by=rank_by,
                              alpha=alpha, tags=tag_source, by_class=by_class)
    config = search.slice_config()
    report = slice_report(project, model, split, config, search.tags)
except HibugError as error:
    st.error(plain(error))
    st.stop()
slices = report.slices
st.caption(plain(report.headline(nouns)))
apart_count = report.false_positives()
if apart_count:  # an object model's false positives: their own measure, beside the slices
    with st.expander(f"False positives, measured apart ({apart_count:,})",
                     icon=":material/crop_free:"):
        apart = false_positives_apart(project, model, split, config, search.tags)
        st.markdown(plain(apart.headline()))
        if len(apart.slices):
            st.dataframe(apart.slices[["description", "count", "score", "q_value"]].rename(
                columns={"count": "detections", "score": "found an object"}), hide_index=True, width="stretch",
                column_config={"found an object": percent_column("found an object")}, key="false_positive_slices")
if read_tags(search.tags).in_force:
    ranking = source_ranking(project)
    warning = trust_message(ranking, attributes=report.all_tags.columns, text=plain)
    if warning:
        st.warning(warning, icon=":material/warning:")
        link_to("pages/2_Tagging.py", "See every tag source on the Tagging page", icon=":material/sell:")
if slices.attrs.get("untrusted"):
    st.caption(f"{slices.attrs['untrusted']} slice(s) rest on tags measured below "
               f"{config.min_tag_precision:.0%} right; they are flagged ⚠ and ranked after the others.")

found, unseen = st.tabs(["Error slices", "Unseen slices (predicted)"])
with found:
    if slices.empty:
        st.info(plain(report.empty_verdict()), icon=":material/info:")
    else:
        table = slices.assign(
            rank=range(1, len(slices) + 1),
            interval=[f"{lo:.0%}–{hi:.0%}" for lo, hi in zip(slices["score_low"], slices["score_high"])],
            description=[("⚠ " if not ok else "") + d for d, ok in zip(slices["description"], slices["trusted"])],
            tags_right=[f"{p:.0%} of {n:,}" if n else "not checked"
                        for p, n in zip(slices["tag_precision"], slices["tag_checked"])])
        table["part_of"] = slices["repeats"]
        table = as_percent(table, "score")
        columns = ["rank", "description", "count", "score", "interval", "q_value", "bug_type", "tags_right", "part_of"]
        chosen_id = url_setting("slice", None)
        event = st.dataframe(
            table[columns], key="slices_table", on_select="rerun", selection_mode="single-row", hide_index=True,
            width="stretch", height=min(38 + 35 * len(table), 420),
            column_config={"rank": st.column_config.NumberColumn("#", width=36),
                           "description": st.column_config.TextColumn("slice", width="medium"),
                           "count": st.column_config.NumberColumn(nouns.samples, width=60),
                           "score": percent_column(nouns.figure, progress=True, width=110),
                           "interval": st.column_config.TextColumn("95% interval", width=90),
                           "q_value": st.column_config.NumberColumn("q", format="%.0e", width=60,
                                                                    help="false discovery rate (Benjamini-Hochberg)"),
                           "bug_type": st.column_config.TextColumn("bug type", width=150),
                           "tags_right": st.column_config.TextColumn(
                               "tags right", width=95, help=f"share of the slice's {nouns.samples} whose true tags "
                               "(imported or audited) match all its tags"),
                           "part_of": st.column_config.TextColumn(
                               "part of", width="small", help="the slice that stands for it: the broader one its "
                               "failures are spread over, the narrower one that holds most of them, or one with the "
                               "same failures; listed after the distinct slices")})
        picked = event.selection.rows if event and event.selection else []
        if picked:
            chosen_id = slices["slice_id"].iat[picked[0]]
            keep_setting(slice=chosen_id)
        if chosen_id not in set(slices["slice_id"]):
            chosen_id = slices["slice_id"].iat[0]
        row = slices[slices["slice_id"] == chosen_id].iloc[0]

        st.subheader(plain(row["description"]))
        st.markdown(f"**{row['bug_type']}**: {plain(row['reason'])}")
        review_cell, view_cell, _ = st.columns([1, 1, 4])
        if review_cell.button("Review this slice", key="slices_review", disabled=not editing):
            made = ensure_review(project, row["definition"], author=user)
            st.switch_page("pages/6_Review.py", query_params={"review": str(made.id)})
        with view_cell.popover("Save this view"):
            view_name = st.text_input("View name", key="slices_view_name")
            if st.button("Save view", key="slices_save_view", disabled=not editing):
                try:
                    save_view(project, view_name, "Error_slices", dict(st.query_params), author=user)
                    st.success("Saved: teammates find it under Review → Saved views.")
                except HibugError as error:
                    st.error(plain(error))
        if row["tag_checked"]:
            precision = (f"Its tags are right on {row['tag_precision']:.0%} of the {nouns.count(row['tag_checked'])} "
                         "whose "
                         f"true tags are known (95% interval {row['tag_precision_low']:.0%}–"
                         f"{row['tag_precision_high']:.0%}; checked: {row['tag_checked_attributes']}).")
            if row["trusted"]:
                st.caption(precision)
            else:
                st.warning(f"{precision} Too poor to trust this slice: {ADVICE}.", icon=":material/warning:")
        else:
            st.caption("Its tags are not checked: no true tags (imported or audited) for its attributes. Audit them "
                       "on the Tagging page to know how far to trust it.")
        cells = st.columns(5)
        cells[0].metric(nouns.Samples, f"{row['count']:,}")
        cells[1].metric(nouns.figure.capitalize(), f"{row['score']:.1%}", f"{points(-row['gap'])} vs overall")
        cells[2].metric("Share of evaluation", share(row["eval_share"]))
        cells[3].metric("Share of training",
                        "–" if row["train_count"] is None or row["train_count"] != row["train_count"]
                        else share(row["train_share"]), help=f"{row['train_count']} training {nouns.samples}")
        cells[4].metric("Share of all failures", f"{row['coverage']:.1%}")
        left, right = st.columns([2, 3])
        samples = load_samples(project, model)  # objects: with their boxes and outcomes
        # what the charts and filters read of the slice's rows; the rows of the grid's page are taken whole
        view = slice_view(project, model, report, chosen_id)
        shown = view.rows
        with left:
            if view.error_types is not None:  # failures with an error type, a chart per kind (a box's, a keypoint's)
                typed = view.error_types
                for number, group in enumerate(task.error_groups):
                    counts = typed.loc[list(group.types)]
                    if counts.any():
                        st.markdown(f"**Its failures by {group.title}**")
                        st.plotly_chart(error_type_figure(counts[counts > 0], nouns.samples, "#ea8c00", 240),
                                        width="stretch", key=f"slice_error_types_{number}")
            else:
                counts = shown["prediction"].value_counts().rename_axis("prediction").reset_index(
                    name=nouns.samples)
                counts["prediction"] = literal_values(counts["prediction"])
                figure = px.bar(counts, x="prediction", y=nouns.samples, title="Predictions in the slice")
                figure.update_layout(height=260, margin=dict(l=0, r=0, t=40, b=0))
                st.plotly_chart(figure, width="stretch", key="slice_predictions")
        with right:
            related = report.related(chosen_id)
            st.markdown("**Parent and child slices**")
            if related.empty:
                st.caption("A slice of one condition has no parent, and no reported child.")
            else:
                st.dataframe(as_percent(related, "score", "gap"), hide_index=True, width="stretch",
                             column_config={"score": percent_column("score"), "gap": percent_column("gap")})
        st.markdown(f"**{nouns.Samples}** (failures first; caption: label → prediction)")
        rows = grid_filters(shown, report.all_tags, key="slice_filter", poor=report.poor, choices=view.choices)
        page_rows = paged(rows, key=f"slice_page_{chosen_id}", noun=nouns.samples)
        image_grid(project, samples.loc[page_rows.index], details="slice", report=report, user=user, caption=outcome)

with unseen:
    st.caption("Slices the validation set barely covers, predicted to fail (HiBug2) and checked against the pool and "
               "the test split: by substitution, each tag of a top error slice swapped for its most similar tags (by "
               "text embedding, offline); by instruction, a language model asked in this task's words. It runs in "
               "the background, on the slices found with the settings above.")
    with st.form("unseen_form"):
        how = st.radio("Predicted by", PredictUnseen.choices("method"), horizontal=True, key="unseen_method",
                       format_func={e.name: f"{e.name} ({e.help})" for e in UNSEEN_METHODS}.get)
        cells = st.columns(3)
        asked = cells[0].number_input("Slices to ask for (instruction)", 1, 50, PredictUnseen.default("count"),
                                      key="unseen_count")
        llm_model = cells[1].text_input("LLM model (instruction)", value="", key="unseen_llm_model",
                                        help=PredictUnseen.help("llm_model"),
                                        placeholder=f"{LLMConfig.from_env().model} (HIBUG_LLM_MODEL)")
        llm_url = cells[2].text_input("LLM server URL (instruction)", value="", key="unseen_llm_url",
                                      placeholder="empty: OpenAI; key from OPENAI_API_KEY or secrets")
        if st.form_submit_button("Predict unseen slices", key="unseen_run", disabled=not editing):
            op = built(PredictUnseen, **search.model_dump(include=set(PredictUnseen.model_fields) - {"llm_model",
                                                                                                   "llm_base_url"}),
                       method=how, count=int(asked), llm_model=llm_model.strip() or None,
                       llm_base_url=llm_url.strip() or None)
            key = UNSEEN_METHODS.get(how).secret and secret(UNSEEN_METHODS.get(how).secret)
            if start_job(project, op, user, {UNSEEN_METHODS.get(how).secret: key} if key else None) is not None:
                st.rerun()
    job_status(project, PredictUnseen.kind, user, key="unseen_job")
    kept = latest_job(project, PredictUnseen.kind)
    if kept is not None and kept.status == "done":
        done = kept.result
        if done["dropped"]:
            st.warning(f"{len(done['dropped'])} of the language model's answers could not be used and were left out: "
                       + "; ".join(plain(d) for d in done["dropped"]))
        st.caption(f"The slices job {kept.id} predicted (by {plain(kept.author)}, from the error slices on "
                   f"{plain(kept.params['split'])} at depth {kept.params['max_depth']}, minimum size "
                   f"{kept.params['min_support']}), the split's rare ones first:")
        predicted = pd.DataFrame(done["table"])
        if not predicted.empty:
            shown = as_percent(predicted.drop(columns=["slice_id"], errors="ignore"), "predicted_score", "eval_score",
                               "check_score")
            st.dataframe(shown, hide_index=True,
                         width="stretch", column_config={
                             "predicted_score": percent_column("predicted"), "eval_score": percent_column("val score"),
                             "check_score": percent_column("test score"),
                             "unseen": st.column_config.CheckboxColumn("unseen", help="fewer than the minimum size in "
                                                                       "the split searched")})
