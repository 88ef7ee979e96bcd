"""hibug dashboard: the navigation between pages, and the Overview page (open or create a project, see how its model
does per split and per class, and what has been done so far with a link to the next step)."""
import plotly.express as px
import streamlit as st

from hibug_core import metrics
from hibug_core.markdown import plain
from hibug_core.repair.runs import run_count
from hibug_core.store import tag_store
from hibug_core.store.attribute_versions import latest_version
from hibug_ui.create import create_project_form
from hibug_ui.state import (chosen_folder, current_model, current_project, current_user, load_samples,
                            source_ranking)
from hibug_ui.widgets import as_percent, image_grid, percent_column

# Material icons: drawn by Streamlit's own font, so they show in any browser (emoji need a system emoji font).
PAGES = [("pages/1_Attributes.py", "Attributes", ":material/label:"),
         ("pages/2_Tagging.py", "Tagging", ":material/sell:"),
         ("pages/3_Embedding_map.py", "Embedding map", ":material/scatter_plot:"),
         ("pages/4_Error_slices.py", "Error slices", ":material/bug_report:"),
         ("pages/5_Repair.py", "Repair", ":material/build:"),
         ("pages/6_Review.py", "Review", ":material/forum:")]


def overview() -> None:
    st.set_page_config(page_title="hibug · Overview", page_icon="🐞", layout="wide")

    folder = chosen_folder()
    if not folder:
        st.title("hibug")
        st.info("Open a project: enter its folder in the sidebar, or start the demo with `hibug demo`. "
                "Or create one here from a manifest.")
        create_project_form(current_user())
        st.stop()
    project = current_project(folder)
    current_user()  # the name field in the sidebar
    model = current_model(project)
    samples = load_samples(str(project.folder), model, project.data_version())

    st.title(plain(project.name))
    st.caption(f"{project.folder} · schema v{project.schema_version()}")

    counts = samples["split"].value_counts()
    cells = st.columns(5)
    cells[0].metric("Images", f"{len(samples):,}")
    for cell, split in zip(cells[1:], ("train", "val", "test", "pool")):
        cell.metric(split, f"{int(counts.get(split, 0)):,}")

    st.subheader("Progress")
    version = latest_version(project)
    runs = tag_store.runs(project)
    finished = runs[runs["status"] == "finished"] if not runs.empty else runs
    maps = project.arrays.names("maps/")
    sliceable = not finished.empty or not project.known_tags().columns.empty
    repaired = run_count(project, "retrain")
    trust = None
    if version is not None and not finished.empty:
        from hibug_core.tagging.sources import untrusted

        poor = untrusted(source_ranking(str(project.folder), tag_store.tags_version(project)))
        trust = f"{len(poor)} too poor to trust" if len(poor) else "measured, none below the floor"
    tags_detail = (f"{len(finished)} tagging runs · {trust}" if trust else
                   "imported tags only" if sliceable else "not tagged yet")
    steps = [
        ("Attributes", version is not None, f"version {version}" if version else "none yet", "pages/1_Attributes.py",
         "propose them from the task (built-in library or a language model), then edit"),
        ("Tags", not finished.empty, tags_detail, "pages/2_Tagging.py",
         "tag every image (Run), then check how good each source is (Tag sources)"),
        ("Error slices", sliceable, "ready to search" if sliceable else "needs tags", "pages/4_Error_slices.py",
         "find, rank and explain where the model fails"),
        ("Embedding map", bool(maps), "computed" if maps else "optional", "pages/3_Embedding_map.py",
         "see the images on a map and select groups"),
        ("Repair", repaired > 0, f"{repaired} comparisons" if repaired else "not repaired yet",
         "pages/5_Repair.py", "select or generate data for the worst slices, retrain, compare with random"),
    ]
    cells = st.columns(len(steps))
    required = [step for step in steps if step[0] != "Embedding map"]
    next_step = next((step for step in required if not step[1]), None)
    for cell, (name, done, detail, page, _) in zip(cells, steps):
        cell.page_link(page, label=name,
                       icon=":material/check_circle:" if done else ":material/radio_button_unchecked:")
        cell.caption(detail)
    if next_step is not None:
        st.page_link(next_step[3], label=f"Next step: {next_step[0]} — {next_step[4]}",
                     icon=":material/arrow_forward:")
    if trust and not trust.startswith("measured"):
        st.warning("Some tags in force are too poor to trust; slices that use them are flagged and ranked down. "
                   "See Tagging → Tag sources.", icon=":material/warning:")

    if model is None:
        st.warning("This project has no model outputs yet; import a manifest with a 'prediction' column.")
        st.stop()

    by_split = metrics.score_by(samples, "split")
    st.subheader(f"How {plain(model)} does")
    cells = st.columns(len(by_split) + 1)
    held_out = metrics.labelled(samples[samples["split"] != "train"])
    cells[0].metric("Held-out score", f"{held_out['score'].mean():.1%}",
                    help="Mean per-sample score over labelled images outside the training split")
    for cell, (split, row) in zip(cells[1:], by_split.iterrows()):
        cell.metric(f"{split} score", f"{row['score']:.1%}", help=f"{int(row['count'])} images, {row['errors']} errors")

    split_options = [s for s in ("val", "test", "train", "pool") if s in by_split.index] or ["val"]
    split = st.radio("Split", split_options, horizontal=True, key="overview_split")
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**Per class**")
        table = metrics.per_class(samples, split).rename(columns={"score": "accuracy"})
        st.dataframe(as_percent(table, "accuracy"), column_config={"accuracy": percent_column("accuracy", progress=True)},
                     width="stretch")
    with right:
        st.markdown("**Confusion matrix** (rows: label, columns: prediction)")
        matrix = metrics.confusion(samples, split)
        figure = px.imshow(matrix, text_auto=True, color_continuous_scale="Oranges", aspect="auto",
                           labels={"x": "prediction", "y": "label", "color": "images"})
        figure.update_layout(margin=dict(l=0, r=0, t=10, b=0), height=320)
        st.plotly_chart(figure, width="stretch", key="overview_confusion")

    st.subheader("Sample images")
    choice = st.segmented_control("Show", ["errors", "all"], default="errors", key="overview_show")
    rows = samples[samples["split"] == split]
    if choice == "errors":
        rows = rows[rows["correct"] == False]  # noqa: E712 (pandas nullable boolean)
    count = st.slider("How many", 8, 64, 24, step=8, key="overview_count")
    shown = rows.sample(n=min(count, len(rows)), random_state=0) if len(rows) else rows
    st.caption(f"{len(shown)} of {len(rows):,} images · caption: label → prediction")
    image_grid(project, shown, caption=lambda r: f"{r['label']} → {r['prediction']}")


st.navigation([st.Page(overview, title="Overview", icon=":material/home:", default=True),
               *(st.Page(path, title=title, icon=icon) for path, title, icon in PAGES)]).run()
