"""Figures that must stay fast with 100,000 points: WebGL traces, compact arrays, short hover texts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

OUTCOME_COLOURS = {"right": "#2b8a3e", "wrong": "#d9480f", "no label or prediction": "#adb5bd"}


def map_figure(frame: pd.DataFrame, colour: str) -> go.Figure:
    """A WebGL scatter of frame's x, y (index: sample id), one trace per value of `colour`. Points carry their id
    (for selections; shown on hover with "label → prediction"); coordinates and ids go as compact binary arrays so
    100,000 points stay small. (One trace coloured by codes is slower to draw: measured by benchmarks/ui.py.)"""
    figure = go.Figure()
    palette = px.colors.qualitative.Plotly + px.colors.qualitative.Set2
    hover = frame["label"].astype(object).fillna("?").astype(str).to_numpy()
    if "prediction" in frame:
        hover = hover + " → " + frame["prediction"].astype(object).fillna("?").astype(str).to_numpy()
    for i, (value, rows) in enumerate(frame.groupby(colour, sort=True)):
        where = frame.index.get_indexer(rows.index)
        figure.add_trace(go.Scattergl(
            x=rows["x"].to_numpy(np.float32), y=rows["y"].to_numpy(np.float32), mode="markers", name=str(value),
            customdata=rows.index.to_numpy(np.int32), text=np.asarray(hover)[where],
            hovertemplate="%{text}<br>#%{customdata}<extra></extra>",
            marker=dict(size=4, opacity=0.7, color=OUTCOME_COLOURS.get(value, palette[i % len(palette)]))))
    figure.update_layout(height=620, margin=dict(l=0, r=0, t=10, b=0), dragmode="lasso", legend_title_text=colour,
                         xaxis=dict(visible=False), yaxis=dict(visible=False))
    return figure
