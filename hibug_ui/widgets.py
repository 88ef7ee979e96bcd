"""Reusable dashboard widgets: image grids with captions, paging, and settings kept in the URL."""
from __future__ import annotations

import datetime
import functools
import math

import numpy as np
import pandas as pd
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.objects.crops import picture_legend
from hibug_core.pictures import sample_picture
from hibug_core.slices.selection import filter_choices
from hibug_core.store.project import Project
from hibug_ui.detail import OPEN_KEY, show_image
from hibug_ui.state import flagged_tag, keypoint_skeleton


def image_grid(project: Project, rows: pd.DataFrame, *, columns: int = 8, caption=None, details: str | None = None,
               report=None, user: str = "anonymous") -> None:
    """Thumbnails of the given sample rows (index: sample id), `columns` per line, captioned by caption(row). With
    details (a widget key prefix), each has a button that opens the image detail view (hibug_ui.detail)."""
    if rows.empty:
        st.caption("Nothing to show.")
        return
    if "box_x" in rows and rows["box_x"].notna().any():
        st.caption(f"Each with some of its surroundings; {picture_legend(rows)}. Details opens the whole image.")
    limbs = keypoint_skeleton(project).get("limbs", ())  # once a grid: each look-up asks the database its version
    for start in range(0, len(rows), columns):
        cells = st.columns(columns)
        for cell, (sample_id, row) in zip(cells, rows.iloc[start : start + columns].iterrows()):
            label = caption(row) if caption else str(sample_id)
            try:
                path = sample_picture(project, row, limbs)
                # sent as the PNG it is: thin outlines and joints keep their exact colours (no JPEG re-encoding)
                cell.image(str(path), caption=plain(label), width="stretch", output_format="PNG")
            except (OSError, ValueError, HibugError):  # missing, unreadable, or refused: the grid goes on
                cell.caption(f"{plain(label)} (image not available)")
            # no icon: in six columns beside a map the word alone still fits
            if details and cell.button("Details", key=f"{details}_detail_{sample_id}", width="stretch",
                                       help="The image large, its tags and where they come from, its slices"):
                st.session_state[OPEN_KEY] = (details, int(sample_id))
    opened = st.session_state.get(OPEN_KEY)
    if details and opened and opened[0] == details and opened[1] in rows.index:
        show_image(project, opened[1], rows, report, user)  # stays open over reruns until dismissed


OUTCOMES = {"all": None, "wrong": False, "right": True}


def grid_filters(rows: pd.DataFrame, tags: pd.DataFrame | None, key: str, poor: dict[str, str] | None = None,
                 choices: tuple[list[str], list[str]] | None = None) -> pd.DataFrame:
    """Filters above an image grid: class, outcome (right or wrong) and one tag (those of attributes too poor to
    trust, `poor`: tagging.sources.too_poor, flagged); returns the rows that pass. `choices`:
    slices.selection.filter_choices(rows, tags), where the caller keeps them."""
    cells = st.columns([2, 1, 2])
    classes, options = choices if choices is not None else filter_choices(rows, tags)
    chosen = cells[0].multiselect("Class", classes, key=f"{key}_class", placeholder="every class")
    outcome = cells[1].segmented_control("Outcome", list(OUTCOMES), default="all", key=f"{key}_outcome")
    tag = cells[2].selectbox("Tag", ["any tag", *options], key=f"{key}_tag",
                             format_func=functools.partial(flagged_tag, dict(poor or {})))
    if chosen:
        rows = rows[rows["label"].astype(str).isin(chosen)]
    if OUTCOMES.get(outcome) is not None and "correct" in rows:
        rows = rows[rows["correct"] == OUTCOMES[outcome]]
    if tag != "any tag":
        attribute, value = tag.split(" = ", 1)
        rows = rows[tags[attribute].reindex(rows.index).astype(str) == value]
    return rows


def paged(rows: pd.DataFrame, key: str, per_page: int = 24, among: np.ndarray | None = None, *,
          noun: str) -> pd.DataFrame:
    """One page of `rows` (or of the rows at positions `among`, so that a million-row table is never copied to show
    one page), with a page picker when there is more than one page; `noun` names what the rows are ("images",
    "objects": the task's samples)."""
    count = len(rows) if among is None else len(among)
    pages = max((count - 1) // per_page + 1, 1)
    page = 1
    if pages > 1:
        page = st.number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=1, step=1, key=key)
    start = (int(page) - 1) * per_page
    st.caption(f"{noun} {start + 1 if count else 0}–{min(start + per_page, count)} of {count:,}")
    return rows.iloc[start : start + per_page] if among is None else rows.iloc[among[start : start + per_page]]


def in_words(stamp, now: datetime.datetime | None = None) -> str:
    """A stored time (ISO 8601, UTC) as people read it: "just now", "5 minutes ago", "3 hours ago", else its day and
    time ("27 Nov 2026, 18:20 UTC"); as given when it is not a time."""
    try:
        when = datetime.datetime.fromisoformat(str(stamp))
    except ValueError:
        return str(stamp)
    when = when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)
    seconds = ((now or datetime.datetime.now(datetime.timezone.utc)) - when).total_seconds()
    if 0 <= seconds < 60:
        return "just now"
    if 0 <= seconds < 3600:
        return f"{int(seconds // 60)} minute{'s' if seconds >= 120 else ''} ago"
    if 0 <= seconds < 86400:
        return f"{int(seconds // 3600)} hour{'s' if seconds >= 7200 else ''} ago"
    return when.astimezone(datetime.timezone.utc).strftime("%-d %b %Y, %H:%M UTC")


def short_labels(names, width: int = 16) -> dict[str, str]:
    """Each name as a caption can hold it: itself when it fits in `width` characters, else its start and end around
    an ellipsis (a repaired model's method and seed are at its end); letters (A, B, ...) where those would clash."""
    def shortened(name: str) -> str:
        if len(name) <= width:
            return name
        tail = (width - 1) * 2 // 3
        return f"{name[:width - 1 - tail].rstrip()}…{name[-tail:].lstrip()}"

    names = list(dict.fromkeys(str(n) for n in names))
    labels = {n: shortened(n) for n in names}
    if len(set(labels.values())) < len(labels):
        labels = {n: n if len(n) <= width else f"model {chr(65 + i)}" for i, n in enumerate(names)}
    return labels


def label_key(labels: dict[str, str]) -> str:
    """What each shortened label stands for, one per line (for a heading's hover help); empty when none is shortened."""
    return "\n\n".join(f"{label}: {name}" for name, label in labels.items() if label != name)


def url_setting(name: str, default, cast=str):
    """A setting read from the URL query (so a link reproduces the view), else the value this session last kept with
    keep_setting (so it survives moving between pages), else `default`."""
    raw = st.query_params.get(name)
    if raw is None:
        raw = st.session_state.get(f"kept_{name}")
    if raw is None:
        return default
    try:
        value = cast(raw)
    except (TypeError, ValueError, OverflowError):
        return default
    return default if isinstance(value, float) and not math.isfinite(value) else value


def keep_setting(**settings: str) -> None:
    """Put settings in the URL (a link reproduces the view) and keep them for this session (url_setting)."""
    st.query_params.update(settings)
    for name, value in settings.items():
        st.session_state[f"kept_{name}"] = value


def link_to(page: str, label: str, *, icon: str | None = None, query_params: dict | None = None) -> None:
    """A link to another page of the dashboard (st.page_link); a plain link when this page runs outside the
    navigation (a page script opened on its own)."""
    from urllib.parse import urlencode

    from streamlit.errors import StreamlitAPIException

    try:
        st.page_link(page, label=label, icon=icon, query_params=query_params)
    except StreamlitAPIException:
        path = page.rsplit("/", 1)[-1].removesuffix(".py").split("_", 1)[-1]
        query = f"?{urlencode(query_params)}" if query_params else ""
        st.markdown(f"[{plain(label)}](/{path}{query})")


def as_percent(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """`columns` (shares in [0, 1]) times 100, for percent_column: one number format (38.9%) on every page."""
    return frame.assign(**{c: frame[c].astype(float) * 100 for c in columns if c in frame.columns})


def percent_column(label: str | None = None, *, progress: bool = False, **options):
    """The column config of a share made by as_percent: "38.9%", or a bar from 0 to 100% with progress."""
    if progress:
        return st.column_config.ProgressColumn(label, format="%.1f%%", min_value=0, max_value=100, **options)
    return st.column_config.NumberColumn(label, format="%.1f%%", **options)
