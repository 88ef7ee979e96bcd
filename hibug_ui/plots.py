"""Figures that must stay fast with 100,000 points: WebGL traces, compact arrays, short hover texts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

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


def map_figure(frame: pd.DataFrame, colour: str) -> go.Figure:
    """A WebGL scatter of frame's x, y (index: sample id), one legend entry per value of `colour`. Points carry their
    id (for selections). Hover shows "label → prediction" and the id; rather than a string per point, each
    (value, label → prediction) pair is its own trace with that text in its template, so 100,000 points travel as
    float32 coordinates and int32 ids only. (One trace coloured by codes is slower to draw: benchmarks/ui.py.)"""
    figure = go.Figure()
    palette = px.colors.qualitative.Plotly + px.colors.qualitative.Set2
    hover = frame["label"].astype(object).fillna("?").astype(str)
    if "prediction" in frame:
        hover = hover + " → " + frame["prediction"].astype(object).fillna("?").astype(str)
    parts = pd.DataFrame({"value": frame[colour], "hover": hover.to_numpy(), "row": np.arange(len(frame))})
    values = sorted(parts["value"].unique(), key=str)
    x, y, ids = frame["x"].to_numpy(np.float32), frame["y"].to_numpy(np.float32), frame.index.to_numpy(np.int32)
    # Tags that name colours are drawn in their colour (outlined, so white shows), when every value names one.
    named = {v: value_colour(v) for v in values} if colour not in ("outcome",) else {}
    by_name = bool(named) and all(named.get(v) for v in values if v != "(none)")
    in_legend: set[str] = set()
    for (value, text), rows in parts.groupby(["value", "hover"], sort=True):
        i = values.index(value)
        where = rows["row"].to_numpy()
        fill = (named.get(value) or "#adb5bd") if by_name else OUTCOME_COLOURS.get(value, palette[i % len(palette)])
        figure.add_trace(go.Scattergl(
            x=x[where], y=y[where], mode="markers", name=str(value), legendgroup=str(value),
            showlegend=str(value) not in in_legend, customdata=ids[where],
            hovertemplate=f"{plotly_literal(text)}<br>#%{{customdata}} · click for the image<extra></extra>",
            marker=dict(size=5 if by_name else 4, opacity=0.8 if by_name else 0.7, color=fill,
                        line=dict(width=0.5, color="#495057") if by_name else None)))
        in_legend.add(str(value))
    # The legend sits below the map, so the toolbar (top right) never covers it.
    figure.update_layout(height=620, margin=dict(l=0, r=0, t=30, b=0), dragmode="lasso",
                         legend=dict(title_text=colour, orientation="h", yanchor="top", y=-0.02, x=0),
                         xaxis=dict(visible=False), yaxis=dict(visible=False))
    return figure


def plotly_literal(text) -> str:
    """People's text (class names, tags, attribute names) as literal plotly text, in labels, ticks, titles and hover
    templates: no markup (plotly draws <a href>, <b>, entities), no template fields."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("%", "&#37;")
            .replace("{", "&#123;").replace("}", "&#125;"))


def literal_values(values: pd.Series) -> pd.Series:
    """plotly_literal of every non-missing value of a column to plot."""
    return values.map(lambda v: v if pd.isna(v) else plotly_literal(v))
