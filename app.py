"""hibug dashboard: the navigation between pages, and the Overview page (open or create a project, see how its model
does per split and per class, and what has been done so far with a link to the next step)."""
import plotly.express as px
import streamlit as st

from hibug_core import metrics
from hibug_core.access import Role
from hibug_core.checklist import checklist, next_step
from hibug_core.markdown import plain
from hibug_core.tasks.base import COCO_EVALUATION, PER_CLASS
from hibug_ui.create import create_project_form, delete_project_button
from hibug_ui.navigation import PAGES, STEP_PAGES
from hibug_ui.objects_overview import object_overview
from hibug_ui.plots import literal_values
from hibug_ui.predict import predict_panel
from hibug_ui.removal_panel import removal_panel
from hibug_ui.state import (
    chosen_folder,
    current_model,
    current_project,
    current_task,
    current_user,
    drawn_sample_of,
    load_samples,
    sample_counts_of,
    score_summary,
    shown_as_messages,
    source_ranking,
)
from hibug_ui.visitor import may, server_policy
from hibug_ui.widgets import as_percent, image_grid, percent_column


def overview() -> None:
    st.set_page_config(page_title="hibug · Overview", page_icon="🐞", layout="wide")

    folder = chosen_folder()
    if not folder:
        st.title("hibug")
        user = current_user()
        if server_policy().projects_root is None:
            current_project(folder)  # says how to serve a project, and stops
        st.info("Choose a project in the sidebar." + (" Or create one here from a manifest." if may(Role.ADMIN)
                                                       else ""))
        create_project_form(user)
        st.stop()
    project = current_project(folder)
    task = current_task(project)
    model = current_model(project)  # the sidebar in every page's order: project, model, then who you are
    user = current_user()  # the signed-in identity, or the name field in the sidebar
    samples = load_samples(project, model)

    st.title(plain(project.name))
    st.caption(f"{project.folder.name if server_policy().shared else project.folder} · "
               f"schema v{project.schema_version()}")
    delete_project_button(project)

    nouns = task.nouns
    counts = sample_counts_of(project, model)
    cells = st.columns(5)
    apart = ""
    if counts.detections:
        apart = (f" Beside them, the models' {counts.false_positives:,} false positives and "
                 f"{counts.detections - counts.false_positives:,} detections in unlabelled images are samples too, "
                 "counted apart.")
    cells[0].metric(nouns.Samples, f"{counts.samples:,}", help=nouns.explain + "." + apart)
    for cell, split in zip(cells[1:], ("train", "val", "test", "pool")):
        if split == "pool" and not counts.per_split.get(split) and counts.detections is not None:  # unlabelled pool
            cell.metric("pool detections", f"{counts.pool_detections:,}")
        else:
            cell.metric(split, f"{int(counts.per_split.get(split, 0)):,}")
    if apart:
        st.caption(apart.strip())

    st.subheader("Progress")
    steps = checklist(project, lambda: source_ranking(project))
    cells = st.columns(len(steps))
    for cell, step in zip(cells, steps):
        cell.page_link(STEP_PAGES[step.name], label=step.name,
                       icon=":material/check_circle:" if step.done else ":material/radio_button_unchecked:")
        cell.caption(step.detail)
    upcoming = next_step(steps)
    if upcoming is not None:
        st.page_link(STEP_PAGES[upcoming.name], label=f"Next step: {upcoming.name} — {upcoming.advice}",
                     icon=":material/arrow_forward:")
    for step in steps:
        if step.warning:
            st.warning(step.warning, icon=":material/warning:")

    predict_panel(project, user, expanded=model is None)
    removal_panel(project)
    if model is None:
        st.warning(f"This project has no model outputs yet: run your model on its {nouns.samples} (above), or import a "
                   "manifest with a 'prediction' column.")
        st.stop()

    by_split, held_out_score = score_summary(project, model)
    st.subheader(f"How {plain(model)} does")
    cells = st.columns(len(by_split) + 1)
    cells[0].metric(f"Held-out {nouns.figure}", f"{held_out_score:.1%}",
                    help=f"{nouns.figure.capitalize()} over the labelled {nouns.samples} outside the training split")
    for cell, (split, row) in zip(cells[1:], by_split.iterrows()):
        cell.metric(f"{split} {nouns.figure}", f"{row['score']:.1%}",
                    help=f"{nouns.count(int(row['count']))}, {row['errors']} errors")

    split_options = [s for s in ("val", "test", "train", "pool") if s in by_split.index] or ["val"]
    split = st.radio("Split", split_options, horizontal=True, key="overview_split")
    OVERVIEW_PANELS[task.overview](project, model, samples, split, user)

    st.subheader(f"Sample {nouns.samples}")
    choice = st.segmented_control("Show", ["errors", "all"], default="errors", key="overview_show")
    count = st.slider("How many", 8, 64, 24, step=8, key="overview_count")
    drawn, among, apart = drawn_sample_of(project, model, split, choice == "errors", count)
    shown = samples.loc[drawn]
    st.caption(f"{len(shown)} of {nouns.count(among - apart)}"
               + (f" and {apart:,} false positives" if apart else "") + " · caption: label → prediction")
    image_grid(project, shown, caption=task.outcome)


def classifier_overview(project, model: str, samples, split: str, user: str) -> None:
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**Per class**")
        table = metrics.per_class(samples, split).rename(columns={"score": "accuracy"})
        st.dataframe(as_percent(table, "accuracy"),
                     column_config={"accuracy": percent_column("accuracy", progress=True)},
                     width="stretch")
    with right:
        st.markdown("**Confusion matrix** (rows: label, columns: prediction)")
        matrix = metrics.confusion(samples, split)
        matrix.index = literal_values(matrix.index.to_series())
        matrix.columns = literal_values(matrix.columns.to_series())
        figure = px.imshow(matrix, text_auto=True, color_continuous_scale="Oranges", aspect="auto",
                           labels={"x": "prediction", "y": "label", "color": "images"})
        figure.update_layout(margin=dict(l=0, r=0, t=10, b=0), height=320)
        st.plotly_chart(figure, width="stretch", key="overview_confusion")


OVERVIEW_PANELS = {PER_CLASS: classifier_overview, COCO_EVALUATION: object_overview}  # the panel each task asks for

page = st.navigation([st.Page(overview, title="Overview", icon=":material/home:", default=True),
                      *(st.Page(path, title=title, icon=icon) for path, title, icon in PAGES)])
with shown_as_messages():
    page.run()
