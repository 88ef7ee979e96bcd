"""Embedding map: every image on a 2-D map (UMAP of its embedding), coloured by correctness, class, prediction or
any attribute; select points with the box or lasso to see their images and the tags over-represented among them."""
import numpy as np
import streamlit as st

from hibug_core.embeddings.map_selection import inside_box
from hibug_core.embeddings.registry import DEFAULT_ENCODER
from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.operations import EmbeddingMap
from hibug_core.review.board import ensure_review, members
from hibug_core.slices.selection import over_represented
from hibug_core.tagging.sources import too_poor
from hibug_ui.jobs import built, job_status, start_job
from hibug_ui.map_data import colour_options, density_map, map_colour, map_points, selection_tags
from hibug_ui.page import open_page
from hibug_ui.plots import MAP_POINTS_LIMIT, map_figure, map_view, selection_mask
from hibug_ui.state import load_samples, source_ranking
from hibug_ui.widgets import as_percent, image_grid, paged, percent_column, url_setting

project, task, model, user, editing = open_page("Embedding map")
nouns, caption_of = task.nouns, task.outcome  # the task's words; a sample's caption in them
st.title("Embedding map")

cells = st.columns([2, 1, 2])
encoder = cells[0].text_input("Encoder", value=url_setting("encoder", DEFAULT_ENCODER), key="map_encoder")
layouts = EmbeddingMap.choices("method")
method = cells[1].selectbox("Layout", layouts, key="map_method",
                            index=layouts.index(url_setting("method", layouts[0]))
                            if url_setting("method", layouts[0]) in layouts else 0)
frame = map_points(project, model, encoder, method)
if frame is None:
    st.info(f"No {method.upper()} map of these {nouns.samples} with {plain(encoder)} yet. Computing it embeds the "
            f"{nouns.samples} not embedded yet, then lays them out (a few minutes for 100,000); it runs in the "
            "background.")
    if st.button("Compute the map", type="primary", key="map_compute", disabled=not editing):
        if start_job(project, built(EmbeddingMap, encoder=encoder, method=method), user) is not None:
            st.rerun()
    job_status(project, EmbeddingMap.kind, user, key="map_job")
    st.stop()

options = colour_options(project)
default = url_setting("color", "outcome")
colour = cells[2].selectbox("Colour by", options, index=options.index(default) if default in options else 0,
                            key="map_colour")
if colour != url_setting("color", "outcome"):
    st.query_params["color"] = colour
frame[colour] = map_colour(project, model, encoder, method, colour)
samples = load_samples(project, model)

x, y, ids = frame["x"].to_numpy(), frame["y"].to_numpy(), frame.index.to_numpy()
zoom = st.session_state.get("map_zoom")
view = zoom["view"] if zoom and zoom["map"] == (encoder, method) else None
in_view = inside_box(x, y, *view) if view else np.ones(len(frame), dtype=bool)
dense = int(in_view.sum()) > MAP_POINTS_LIMIT
if dense:
    figure = density_map(project, model, encoder, method, colour, frame[in_view] if view else frame,
                         view or map_view(x, y))
else:
    figure = map_figure(frame[in_view] if view else frame, colour, view)
event = st.plotly_chart(figure, width="stretch", key="map_chart", on_select="rerun",
                        selection_mode=("points", "box", "lasso"))
shown = f"{int(in_view.sum()):,} of {nouns.count(len(frame))} in this view" if view else nouns.count(len(frame))
st.caption(f"{shown} · " + (f"more than {MAP_POINTS_LIMIT:,} points: a density image drawn by datashader; "
                            "box or lasso selects every image under the shape; zoom into a selection to see and "
                            "click single points"
                            if dense else
                            "click a point to see its image, or box or lasso to select many"))

selected = selection_mask((event or {}).get("selection") or {}, x, y, ids)
n_chosen = int(selected.sum())  # the ids made only for the board: a lasso holds millions
zooming = st.columns([2, 1, 3])  # wide enough for "Zoom to the selection" on one line
if zooming[0].button("Zoom to the selection", key="map_zoom_in", disabled=not n_chosen,
                     help=f"Shows the selected {nouns.samples}' region alone: their points, when few enough to draw"):
    low, high = map_view(x[selected], y[selected])
    st.session_state["map_zoom"] = {"map": (encoder, method), "view": (low, high)}
    st.rerun()
if view and zooming[1].button("Whole map", key="map_zoom_out"):
    st.session_state.pop("map_zoom", None)
    st.rerun()
if n_chosen:
    st.subheader(f"{nouns.count(n_chosen)} selected")
    left, right = st.columns([3, 2])
    with right:
        st.markdown("**Tags over-represented in the selection**")
        table, overall = selection_tags(project, model, encoder, method)
        found = over_represented(table, selected, overall=overall, poor=too_poor(source_ranking(project))).head(20)
        if found["trust"].ne("").any():
            st.caption("⚠: tags of an attribute too poor to trust (Tagging → Tag sources; why, in the last column); "
                       "read those rows as the tagger's habits, not the images'.")
        found["attribute"] = [("⚠ " if why else "") + a for a, why in zip(found["attribute"], found["trust"])]
        st.dataframe(as_percent(found, "share", "share_overall"), hide_index=True, width="stretch",
                     column_config={"share": percent_column("share"), "share_overall": percent_column("overall"),
            "lift": st.column_config.NumberColumn("lift", format="%.1f×"),
            "p_value": st.column_config.NumberColumn("p", format="%.1e"),
            "q_value": st.column_config.NumberColumn("q", format="%.1e")})
    with left:
        inside = np.flatnonzero(selected)
        inside = inside[np.argsort(frame["shown_order"].to_numpy()[inside], kind="stable")]  # failures first
        positions = inside if frame.index.equals(samples.index) else \
            samples.index.get_indexer(ids[inside])  # the map of these very samples, in their order
        image_grid(project, paged(samples, key="map_page", among=positions[positions >= 0], noun=nouns.samples),
                   columns=6, details="map", user=user,
                   caption=lambda r: caption_of(r) if "prediction" in r else f"{r['label']}")
    with st.form("map_review_selection", clear_on_submit=True):
        name = st.text_input("Name this selection for the review board", placeholder="e.g. dark triangles, top left")
        if st.form_submit_button("Put it on the review board", key="map_review_submit", disabled=not editing):
            try:
                ids_chosen = ids[selected].tolist()
                made = ensure_review(project, kind="selection", key=name.strip(), members=ids_chosen, author=user)
                if set(members(project, made.id)) != set(ids_chosen):
                    st.error(f"A selection named “{plain(made.title)}” is already on the board with other "
                             f"{nouns.samples}; choose another name.")
                else:
                    st.success(f"On the board as “{plain(made.title)}” with {nouns.count(n_chosen)} "
                               "(Review page).")
            except HibugError as error:
                st.error(plain(error))
