"""hibug dashboard, Overview page: open a project and see how its model does per split and per class."""
import plotly.express as px
import streamlit as st

from hibug_core import metrics
from hibug_ui.state import current_model, current_project, load_samples
from hibug_ui.widgets import image_grid

st.set_page_config(page_title="hibug · Overview", page_icon="🐞", layout="wide")

project = current_project()
model = current_model(project)
samples = load_samples(str(project.folder), model, project.data_version())

st.title(project.name)
st.caption(f"{project.folder} · schema v{project.schema_version()}")

counts = samples["split"].value_counts()
cells = st.columns(5)
cells[0].metric("Images", f"{len(samples):,}")
for cell, split in zip(cells[1:], ("train", "val", "test", "pool")):
    cell.metric(split, f"{int(counts.get(split, 0)):,}")

if model is None:
    st.warning("This project has no model outputs yet; import a manifest with a 'prediction' column.")
    st.stop()

by_split = metrics.score_by(samples, "split")
st.subheader(f"How {model} does")
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
    st.dataframe(table, column_config={"accuracy": st.column_config.ProgressColumn(
        "accuracy", format="percent", min_value=0, max_value=1)}, width="stretch")
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
