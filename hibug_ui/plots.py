"""Figures that must stay fast with 100,000 points: WebGL traces, compact arrays, short hover texts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from PIL import Image

from hibug_core.metrics import OUTCOMES

OUTCOME_COLOURS = dict(zip(OUTCOMES, ("#2b8a3e", "#d9480f", "#adb5bd")))


def value_colour(value) -> str | None:
    """The colour a tag names ("blue", "dark green", "teal"), as CSS; None when it names none."""
    from PIL import ImageColor

    name = str(value).strip().lower().replace(" ", "")
    if name in ("grey", "gray"):
        name = "gray"
    try:
        red, green, blue = ImageColor.getrgb(name)[:3]
    except ValueError:
        return None
    return f"rgb({red},{green},{blue})"


# Drawn as WebGL points up to this many; a density image above (benchmarks/ui.py: a lasso over
# 100,000 WebGL points takes 0.3 s per mouse move in headless Chromium, as plotly selects on every move)
MAP_POINTS_LIMIT = 20_000
MAP_HEIGHT = 620


def map_colours(values: list, colour: str) -> tuple[dict, bool]:
    """The colour of each value of the map's colouring, as CSS, and whether they are the colours the values name
    (tags such as "blue" are drawn in their colour, when every value names one)."""
    palette = px.colors.qualitative.Plotly + px.colors.qualitative.Set2
    named = {v: value_colour(v) for v in values} if colour != "outcome" else {}
    by_name = bool(named) and all(named.get(v) for v in values if v != "(none)")
    if by_name:
        return {v: named.get(v) or "#adb5bd" for v in values}, True
    return {v: OUTCOME_COLOURS.get(v, palette[i % len(palette)]) for i, v in enumerate(values)}, False


def _layout(figure: go.Figure, colour: str, view=None) -> go.Figure:
    # The legend sits below the map, so the toolbar (top right) never covers it.
    figure.update_layout(height=MAP_HEIGHT, margin=dict(l=0, r=0, t=30, b=0), dragmode="lasso",
                         legend=dict(title_text=plotly_literal(colour), orientation="h", yanchor="top", y=-0.02, x=0),
                         xaxis=dict(visible=False), yaxis=dict(visible=False))
    if view is not None:
        figure.update_xaxes(range=list(view[0]))
        figure.update_yaxes(range=list(view[1]))
    return figure



def map_figure(frame: pd.DataFrame, colour: str, view=None) -> go.Figure:
    """A WebGL scatter of frame's x, y (index: sample id), one legend entry per value of `colour`. Points carry their
    id (for selections). Hover shows "label → prediction" and the id; rather than a string per point, each
    (value, label → prediction) pair is its own trace with that text in its template, so 100,000 points travel as
    float32 coordinates and int32 ids only. (One trace coloured by codes is slower to draw: benchmarks/ui.py.)"""
    figure = go.Figure()
    hover = frame["label"].astype(object).fillna("?").astype(str)
    if "prediction" in frame:
        hover = hover + " → " + frame["prediction"].astype(object).fillna("?").astype(str)
    parts = pd.DataFrame({"value": frame[colour].astype(str), "hover": hover.to_numpy(), "row": np.arange(len(frame))})
    values = sorted(parts["value"].unique(), key=str)
    x, y, ids = frame["x"].to_numpy(np.float32), frame["y"].to_numpy(np.float32), frame.index.to_numpy(np.int32)
    colours, by_name = map_colours(values, colour)
    in_legend: set[str] = set()
    for (value, text), rows in parts.groupby(["value", "hover"], sort=True):
        where = rows["row"].to_numpy()
        figure.add_trace(go.Scattergl(
            x=x[where], y=y[where], mode="markers", name=plotly_literal(value), legendgroup=str(value),
            showlegend=str(value) not in in_legend, customdata=ids[where],
            hovertemplate=f"{plotly_literal(text)}<br>#%{{customdata}} · click for the image<extra></extra>",
            marker=dict(size=5 if by_name else 4, opacity=0.8 if by_name else 0.7, color=colours[value],
                        line=dict(width=0.5, color="#495057") if by_name else None)))
        in_legend.add(str(value))
    return _layout(figure, colour, view)


def density_figure(frame: pd.DataFrame, colour: str, view, *, width: int = 1400, seed: int = 0) -> go.Figure:
    """The map of more points than WebGL draws quickly: one image rendered server-side by datashader, each pixel
    coloured by the mix of values of the points under it (histogram-equalised, so sparse regions show too), with the
    legend and an invisible sample of points that lets box and lasso selection start; what a shape selects is
    computed over every point (map_selection). `view` is ((x0, x1), (y0, y1)); frame[colour] is categorical."""
    import datashader
    import datashader.transfer_functions as tf

    (x0, x1), (y0, y1) = view
    values = [str(v) for v in frame[colour].cat.categories]
    colours, _ = map_colours(values, colour)
    # Bins of 2 x 2 screen pixels, enlarged without smoothing: a lone point stays visible (as datashader's spread
    # would make it) and colours stay exact, without spread's numba compilation (2.5 s on a process's first map).
    height = MAP_HEIGHT - 30
    canvas = datashader.Canvas(plot_width=width // 2, plot_height=height // 2, x_range=(x0, x1), y_range=(y0, y1))
    counts = canvas.points(frame, "x", "y", datashader.count_cat(colour))
    image = tf.shade(counts, color_key=[_hex(colours[v]) for v in values], how="eq_hist", min_alpha=90).to_pil()
    image = image.resize((width, height), Image.NEAREST)
    figure = go.Figure()
    sample = np.random.default_rng(seed).choice(len(frame), min(len(frame), 500), replace=False)
    # SVG, not WebGL: the image is the drawing, and a page run that shows it then starts no WebGL context (about half
    # a second of a ten-million-point map's open in a browser drawing in software)
    figure.add_trace(go.Scatter(  # invisible: it only makes box and lasso available
        x=frame["x"].to_numpy(np.float32)[sample], y=frame["y"].to_numpy(np.float32)[sample], mode="markers",
        hoverinfo="skip", showlegend=False, marker=dict(size=6, opacity=0),
        selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0))))
    for value in values:
        figure.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=plotly_literal(value),
                                    marker=dict(size=8, color=colours[value])))
    figure.add_layout_image(source=image, xref="x", yref="y", x=x0, y=y1, sizex=x1 - x0, sizey=y1 - y0,
                            sizing="stretch", layer="below")
    figure = _layout(figure, colour, view)
    figure.update_layout(legend=dict(itemclick=False, itemdoubleclick=False))
    return figure


def _hex(css: str) -> str:
    """'rgb(0,128,128)' or '#008080' as '#008080' (what datashader takes)."""
    if css.startswith("rgb("):
        red, green, blue = (int(part) for part in css[4:-1].split(","))
        return f"#{red:02x}{green:02x}{blue:02x}"
    return css


def map_view(x: np.ndarray, y: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """The whole map's extent with a small margin: ((x0, x1), (y0, y1))."""
    if not len(x):
        return (0.0, 1.0), (0.0, 1.0)
    low_x, high_x, low_y, high_y = float(np.min(x)), float(np.max(x)), float(np.min(y)), float(np.max(y))
    pad_x, pad_y = max(high_x - low_x, 1e-6) * 0.03, max(high_y - low_y, 1e-6) * 0.03
    return (low_x - pad_x, high_x + pad_x), (low_y - pad_y, high_y + pad_y)


def selection_mask(selection: dict, x: np.ndarray, y: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which points a Streamlit plotly selection holds: every point inside any box or lasso drawn (computed over all
    points, drawn or not), and the points clicked."""
    from hibug_core.embeddings.map_selection import inside_box, inside_polygon

    mask = np.zeros(len(x), dtype=bool)
    for box in selection.get("box") or []:
        mask |= inside_box(x, y, box["x"], box["y"])
    for lasso in selection.get("lasso") or []:
        mask |= inside_polygon(x, y, lasso["x"], lasso["y"])
    clicked = [int(np.ravel(p["customdata"])[0]) for p in selection.get("points") or []
               if p.get("customdata") is not None]
    if clicked and not mask.any():
        mask |= np.isin(ids, clicked)
    return mask


def plotly_literal(text) -> str:
    """People's text (class names, tags, attribute names) as literal plotly text, in labels, ticks, titles and hover
    templates: no markup (plotly draws <a href>, <b>, entities), no template fields."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("%", "&#37;")
            .replace("{", "&#123;").replace("}", "&#125;"))


def literal_values(values: pd.Series) -> pd.Series:
    """plotly_literal of every non-missing value of a column to plot."""
    return values.map(lambda v: v if pd.isna(v) else plotly_literal(v))


def error_type_figure(counts: pd.Series, noun: str, colour: str, height: int = 220) -> go.Figure:
    """Counts of one kind of failure by error type (an ErrorGroup's types, in its order), as bars of one colour."""
    frame = counts.rename_axis("error type").reset_index(name=noun)
    figure = px.bar(frame, x="error type", y=noun, color_discrete_sequence=[colour])
    figure.update_layout(margin=dict(l=0, r=0, t=10, b=0), height=height)
    return figure
