"""Reusable dashboard widgets: image grids with captions, paging, and settings kept in the URL."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from hibug_core.markdown import plain
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
            label = caption(row) if caption else str(sample_id)
            try:
                if not row["image_path"]:
                    raise FileNotFoundError("outside the project's data roots")
                path = ensure_thumbnail(project.folder, row["image_path"], row["content_hash"],
                                        original_size=(int(row["width"]), int(row["height"])))
                cell.image(str(path), caption=label, width="stretch")
            except (OSError, ValueError):  # missing, unreadable, or refused: the grid goes on
                cell.caption(f"{plain(label)} (image not available)")


def paged(rows: pd.DataFrame, key: str, per_page: int = 24) -> pd.DataFrame:
    """One page of `rows`, with a page picker when there is more than one page."""
    pages = max((len(rows) - 1) // per_page + 1, 1)
    page = 1
    if pages > 1:
        page = st.number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=1, step=1, key=key)
    start = (int(page) - 1) * per_page
    st.caption(f"images {start + 1 if len(rows) else 0}–{min(start + per_page, len(rows))} of {len(rows):,}")
    return rows.iloc[start : start + per_page]


def url_setting(name: str, default, cast=str):
    """A setting read from the URL query (so a link reproduces the view), else `default`."""
    raw = st.query_params.get(name)
    if raw is None:
        return default
    try:
        return cast(raw)
    except (TypeError, ValueError):
        return default
