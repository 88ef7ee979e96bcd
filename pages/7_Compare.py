"""Compare models: which slices got better or worse between a baseline and other models on the samples they share,
with a paired test per slice, and the samples where two models disagree."""
import plotly.express as px
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.metrics import points
from hibug_core.operations import CompareModels
from hibug_core.review.board import add_comment, ensure_review
from hibug_core.review.views import save_view
from hibug_core.slices.compare import IMPROVEMENT, REGRESSION, UNCHANGED, pair_matrix
from hibug_core.slices.search import CLASS
from hibug_ui.comparisons import IN_BACKGROUND_FROM, compare_in_background, needs_job
from hibug_ui.fields import field_input
from hibug_ui.page import open_page
from hibug_ui.state import error_shifts, load_samples, model_comparison
from hibug_ui.widgets import image_grid, keep_setting, label_key, paged, percent_column, short_labels, url_setting

project, task, _, user, editing = open_page("Compare", picks_model=False)  # it picks its own models
nouns = task.nouns

st.title("Compare models")
models = project.models()
if len(models) < 2:
    st.info(f"This project holds one model. Record another to compare: retrain it on the Repair page (the repaired "
            f"models are recorded), or {task.another_model}.")
    st.stop()

linked = [m for m in url_setting("models", "").split(",") if m in models]
with st.form("compare_settings"):
    chosen = st.multiselect("Models (the first is the baseline)", models, default=linked if len(linked) >= 2 else
                            models[:2], key="compare_models", help="Compared on the labelled samples every one of them "
                            "predicts; each other model against the first")
    cells = st.columns([1, 1, 1, 1, 1.2])
    splits = [s for s in ("val", "test", "train") if project.split_counts().get(s)] or ["val"]
    split = cells[0].selectbox("Split", splits, index=splits.index(url_setting("split", splits[0]))
                               if url_setting("split", splits[0]) in splits else 0, key="compare_split")
    depth = field_input(cells[1], CompareModels, "max_depth", "Depth", key="compare_depth",
                        value=url_setting("depth", CompareModels.default("max_depth"), int))
    support = field_input(cells[2], CompareModels, "min_support", "Minimum size", key="compare_support",
                          value=url_setting("support", CompareModels.default("min_support"), int))
    alpha = field_input(cells[3], CompareModels, "alpha", "False discovery rate", key="compare_alpha", step=0.01,
                        value=url_setting("alpha", CompareModels.default("alpha"), float))
    tag_source = field_input(cells[4], CompareModels, "tags", "Tags", key="compare_tags",
                             value=url_setting("tags", CompareModels.default("tags")))
    if st.form_submit_button("Compare", type="primary", key="compare_submit"):
        keep_setting(models=",".join(chosen), split=split, depth=str(depth), support=str(support), alpha=str(alpha),
                     tags=tag_source)
        st.query_params.pop("slice", None)
        st.query_params.pop("candidate", None)
        linked = chosen

chosen = linked if len(linked) >= 2 else models[:2]
try:
    op = CompareModels.build(models=chosen, split=split, max_depth=depth, min_support=support, alpha=alpha,
                             tags=tag_source)
    if needs_job(project, op):  # a big project's first comparison: made by a job, read here once it is kept
        st.info(f"Comparing {', '.join(plain(m) for m in op.models)} on the {project.split_counts()[op.split]:,} "
                f"{nouns.samples} of '{op.split}' in the background: about a minute at ten million. The page shows "
                "the comparison when the job has made it; every later visit reads it at once.")
        compare_in_background(project, op, user, key="compare_job")
        st.stop()
    comparison = model_comparison(project, tuple(op.models), op.split, op.slice_config(), op.compare_config(), op.tags)
except HibugError as error:
    st.error(plain(error))
    st.stop()

baseline = comparison.baseline
candidate = url_setting("candidate", comparison.candidates[0])
if candidate not in comparison.candidates:
    candidate = comparison.candidates[0]
if len(comparison.candidates) > 1:
    picked = st.segmented_control("Against the baseline", comparison.candidates, default=candidate,
                                  key="compare_candidate")
    if picked and picked != candidate:
        candidate = picked
        keep_setting(candidate=candidate)
st.caption(f"{nouns.count(comparison.shared)} of the '{op.split}' split that every model predicts · "
           f"{comparison.test} per slice, Benjamini-Hochberg q-values over the slices compared (significant at "
           f"{op.alpha:g}) · figures: {nouns.figure} ({nouns.score_help}) · where one model is right and another "
           f"wrong: {nouns.score} {comparison.config.right_from:g} or more")

# Overall: each model's score on the shared samples, the change against the baseline; AP where the task has one.
overall = comparison.overall.set_index("model")
cells = st.columns(len(comparison.models))
for cell, model in zip(cells, comparison.models):
    row = overall.loc[model]
    delta = None if model == baseline else points(row["difference"])
    cell.metric(plain(model) + (" (baseline)" if model == baseline else ""), f"{row['score']:.1%}", delta,
                help=None if model == baseline else f"{row['change']}, p = {row['p_value']:.2g}; "
                f"{nouns.count(int(row['evaluated']))} of this split evaluated in all")
    cell.caption(f"{int(row['error_slices']):,} error slices (HiBug2's count: below its score by "
                 f"{comparison.config.error_gap:g})")
    evaluation = project.object_evaluation(model, op.split)
    if evaluation is not None:
        cell.caption(f"AP {evaluation['summary'].get('AP', float('nan')):.3f} (COCO, as recorded)")

slices_tab, classes_tab, *more = st.tabs(["Slices", "Per class"] + (["Error types"] if task.error_types else []) +
                                         (["Every pair"] if len(comparison.models) > 2 else []))
CHANGE_ICONS = {REGRESSION: "▼ worse", IMPROVEMENT: "▲ better", UNCHANGED: "no significant change"}


def change_table(frame, key: str, *, selectable: bool):
    if "tag_warning" in frame:
        frame = frame.assign(description=[("⚠ " if w else "") + d for d, w in zip(frame["description"],
                                                                                  frame["tag_warning"])])
    shown = frame.assign(change=frame["change"].map(CHANGE_ICONS),
                         baseline_score=frame["baseline_score"] * 100, candidate_score=frame["candidate_score"] * 100,
                         difference=frame["difference"] * 100)
    columns = ["change", "description", "count", "baseline_score", "candidate_score", "difference", "q_value"]
    if "repeats" in shown:
        columns.append("repeats")
    return st.dataframe(
        shown[columns], key=key, hide_index=True, width="stretch", height=min(38 + 35 * len(shown), 420),
        **({"on_select": "rerun", "selection_mode": "single-row"} if selectable else {}),
        column_config={"change": st.column_config.TextColumn("change", width=110),
                       "description": st.column_config.TextColumn("slice", width="medium"),
                       "count": st.column_config.NumberColumn(nouns.samples, width=70),
                       "baseline_score": percent_column(baseline[:24], width=90),
                       "candidate_score": percent_column(candidate[:24], width=90),
                       "difference": st.column_config.NumberColumn("difference", format="%+.1f pts", width=90),
                       "q_value": st.column_config.NumberColumn("q", format="%.0e", width=60,
                                                                help="false discovery rate (Benjamini-Hochberg)"),
                       "repeats": st.column_config.TextColumn("part of", width="small", help="the listed slice whose "
                                                              "change this one repeats (mostly the same samples)")})


with slices_tab:
    table = comparison.against(candidate)
    counts = table["change"].value_counts()
    show = st.segmented_control("Show", ["changed", "all"], default="changed", key="compare_show")
    listed = table if show == "all" else table[table["change"] != UNCHANGED]
    st.caption(f"{counts.get(REGRESSION, 0)} slices worse, {counts.get(IMPROVEMENT, 0)} better, of {len(table):,} "
               f"compared; regressions first, each group by the {nouns.samples} surely lost or gained.")
    poor = int((table["tag_warning"] != "").sum())
    if poor:
        st.caption(f"⚠ {poor} slices rest on tags measured too poor to trust (Tagging → Tag sources): their change "
                   "is real, but their names may not describe their images; each group lists them last.")
    distinct = table[(table["change"] != UNCHANGED) & (table["repeats"] == "")]
    for change, title in ((REGRESSION, "Worse"), (IMPROVEMENT, "Better")):
        named = distinct[distinct["change"] == change]
        if len(named):  # the changes that are not repeats of one another, in the table's order
            st.markdown(f"**{title}** ({len(named)}): " + " · ".join(
                f"{'⚠ ' if r['tag_warning'] else ''}{plain(r['description'])} {points(r['difference'])}"
                for _, r in named.head(6).iterrows())
                + (" · …" if len(named) > 6 else ""))
    if table.empty:
        untagged = not [a for a in comparison.tags.attributes if a != CLASS]
        st.info("No slices to compare: no attribute is tagged yet (Attributes and Tagging pages); the models are "
                "compared overall and per class." if untagged else f"No slice has {op.min_support} shared "
                f"{nouns.samples} or more: lower the minimum size.")
        chosen_id = None
    elif listed.empty:
        st.info("No slice changed significantly between these models. Show all to see every slice's figures.")
        chosen_id = None
    else:
        event = change_table(listed, "compare_table", selectable=True)
        chosen_id = url_setting("slice", None)
        picked = event.selection.rows if event and event.selection else []
        if picked:
            chosen_id = listed["slice_id"].iat[picked[0]]
            keep_setting(slice=chosen_id)
        if chosen_id not in set(table["slice_id"]):
            chosen_id = listed["slice_id"].iat[0]
    if chosen_id is not None:
        row = table[table["slice_id"] == chosen_id].iloc[0]
        st.subheader(plain(row["description"]))
        figures = (f"{row['baseline_score']:.1%} → {row['candidate_score']:.1%} "
                   f"({points(row['difference'])}, p = {row['p_value']:.2g}, q = {row['q_value']:.2g})")
        st.markdown(f"**{CHANGE_ICONS[row['change']]}** on {nouns.count(int(row['count']))}: {plain(figures)}")
        review_cell, view_cell, _ = st.columns([1, 1, 4])
        if review_cell.button("Review this slice", key="compare_review", disabled=not editing):
            made = ensure_review(project, row["definition"], author=user)
            add_comment(project, made.id, f"Compared {candidate} with {baseline} on {op.split}: {figures}.",
                        author=user)
            st.switch_page("pages/6_Review.py", query_params={"review": str(made.id)})
        with view_cell.popover("Save this view"):
            view_name = st.text_input("View name", key="compare_view_name")
            if st.button("Save view", key="compare_save_view", disabled=not editing):
                try:
                    query = {**dict(st.query_params), "models": ",".join(comparison.models), "slice": chosen_id}
                    save_view(project, view_name, "Compare", query, author=user)
                    st.success("Saved: teammates find it under Review → Saved views.")
                except HibugError as error:
                    st.error(plain(error))
        different = comparison.disagreements(row["definition"], baseline, candidate)
        samples = {m: load_samples(project, m) for m in (baseline, candidate)}
        classes = sorted(different["label"].astype(str).unique())
        only = st.multiselect("Class", classes, key="compare_class", placeholder="every class")
        if only:
            different = different[different["label"].astype(str).isin(only)]
        left, right = st.columns(2)
        short = short_labels((baseline, candidate))  # captions stay one line; the full names are in the hover help
        for cell, (winner, loser) in zip((left, right), ((baseline, candidate), (candidate, baseline))):
            with cell:
                ids = different.index[different["right"] == winner]
                st.markdown(f"**{plain(short[winner])} right, {plain(short[loser])} wrong** ({nouns.count(len(ids))}; "
                            f"drawn with {plain(short[loser])}'s prediction)", help=label_key(short) or None)
                table = samples[loser]  # a page of it taken by position: the whole slice's rows are never copied
                places = table.index.get_indexer(ids)
                image_grid(project, paged(table, key=f"compare_page_{winner}_{chosen_id}", per_page=12,
                                          among=places[places >= 0], noun=nouns.samples), columns=4,
                           caption=lambda r, w=winner, lo=loser: f"{r['label']}: {short[w]} → "
                           f"{samples[w].at[r.name, 'prediction']}, {short[lo]} → {r['prediction']}")

with classes_tab:
    per_class = comparison.classes[comparison.classes["candidate"] == candidate]
    change_table(per_class, "compare_classes", selectable=False)

if task.error_types:
    with more[0]:
        st.caption(f"Slices whose failures changed kind between {baseline} and {candidate} (error types of "
                   f"{nouns.samples}; shift: total variation distance between the two mixes; p: chi-squared).")
        asked = f"compare_error_types_{comparison.identity}_{candidate}"
        if comparison.shared >= IN_BACKGROUND_FROM and not st.session_state.get(asked):  # seconds of work: on request
            st.button(f"Count the error types in the top 200 slices ({comparison.shared:,} shared {nouns.samples}: "
                      "seconds; kept for everyone afterwards)", key="compare_error_types",
                      on_click=st.session_state.__setitem__, args=(asked, True))
        elif (shifts := error_shifts(project, comparison, candidate)).empty:
            st.info("No slice has failures of both models to compare.")
        else:
            st.dataframe(shifts.drop(columns="slice_id").head(50), hide_index=True, width="stretch",
                         column_config={"shift": st.column_config.ProgressColumn("shift", min_value=0, max_value=1,
                                                                                 format="%.2f"),
                                        "p_value": st.column_config.NumberColumn("p", format="%.0e")})

if len(comparison.models) > 2:
    with more[-1]:
        left, right = st.columns(2)
        for cell, pairs, value, title in (
                (left, comparison.worst_overlap, "jaccard",
                 f"Overlap of their worst {comparison.config.worst_share:.0%} of slices (Jaccard)"),
                (right, comparison.failure_iou, "iou", f"Overlap of the {nouns.samples} they get wrong (IoU)")):
            matrix = pair_matrix(pairs, comparison.models, value)
            figure = px.imshow(matrix, text_auto=".2f", zmin=0, zmax=1, color_continuous_scale="Blues", title=title)
            figure.update_layout(height=360, margin=dict(l=0, r=0, t=40, b=0))
            cell.plotly_chart(figure, width="stretch", key=f"compare_matrix_{value}")
