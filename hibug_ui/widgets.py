"""Reusable dashboard widgets: image grids with captions."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from hibug_core.store.project import Project
from hibug_core.thumbnails import ensure_thumbnail


def image_grid(project: Project, rows: pd.DataFrame, *, columns: int = 8, caption=None) -> None:
    """Thumbnails of the given sample rows (index: sample id), `columns` per line, captioned by caption(row)."""
    if rows.empty:
        st.caption("No images to show.")
        return
    for start in range(0, len(rows), columns):
        cells = st.columns(columns)
        for cell, (sample_id, row) in zip(cells, rows.iloc[start : start + columns].iterrows()):
            path = ensure_thumbnail(project.folder, row["image_path"], row["content_hash"],
                                    original_size=(int(row["width"]), int(row["height"])))
            cell.image(str(path), caption=caption(row) if caption else str(sample_id), width="stretch")
