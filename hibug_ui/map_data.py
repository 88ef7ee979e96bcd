"""The embedding map's points with what they are coloured by, kept once per process until the project changes: at ten
million points a page run rebuilds none of them (only the drawing and a selection are per run)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from hibug_core.embeddings.projection import MapConfig, stored_map
from hibug_core.metrics import outcome
from hibug_core.store.tag_store import project_state
from hibug_ui.state import load_samples, open_project, tag_table

PLAIN_COLOURS = ("outcome", "label", "prediction", "split")
KNOWN = "known: "  # a colouring by an imported tag


def map_points(project, model: str | None, encoder: str, method: str) -> pd.DataFrame | None:
    """x, y per sample of the stored map with its label, prediction, split, correct and outcome; None where none is
    stored for these samples."""
    points = _points(str(project.folder), model, encoder, method, project_state(project))
    return None if points is None else points.copy(deep=False)


def colour_options(project) -> list[str]:
    """What the map can be coloured by: the outcome, label, prediction and split, every attribute with a tag, every
    imported tag."""
    tagged, known = _tagged(str(project.folder), project_state(project))
    return [*PLAIN_COLOURS, *tagged, *[f"{KNOWN}{name}" for name in known]]


def selection_tags(project, model: str | None, encoder: str, method: str) -> tuple[pd.DataFrame, dict]:
    """What a selection on the map is described by, per point: the tags of every attribute with a tag (the outcome and
    label too, with a model), and how many points hold each tag (slices.selection.tag_counts), kept until the project
    changes: a lasso counts only its own points. Shared: never changed by a page."""
    return _selection_tags(str(project.folder), model, encoder, method, project_state(project))


def map_colour(project, model: str | None, encoder: str, method: str, colour: str) -> pd.Series:
    """The map's points' values of `colour` (a colour_options entry) as categories, "(none)" where a point has none."""
    return _colour(str(project.folder), model, encoder, method, colour, project_state(project))


def density_map(project, model: str | None, encoder: str, method: str, colour: str, frame: pd.DataFrame, view):
    """plots.density_figure of the map's points in `frame` (those in `view`, ((x0, x1), (y0, y1))), kept until the
    project changes: binning ten million points and encoding the image took 1-2 s of every run that drew the map, a
    lasso's included. A figure handed out is shared: never changed by a page."""
    return _density(str(project.folder), model, encoder, method, colour, view, project_state(project), frame)


@st.cache_resource(show_spinner=False, max_entries=4)
def _density(folder: str, model: str | None, encoder: str, method: str, colour: str, view, state: str, _frame):
    from hibug_ui.plots import density_figure

    del folder, model, encoder, method, state
    return density_figure(_frame, colour, view)


@st.cache_resource(show_spinner=False, max_entries=2)  # each holds every point: kept few
def _points(folder: str, model: str | None, encoder: str, method: str, state: str) -> pd.DataFrame | None:
    del state
    project = open_project(folder)
    points = stored_map(project, encoder, config=MapConfig(method=method))
    if points is None:
        return None
    frame = points.join(load_samples(project, model).reindex(columns=["label", "prediction", "split", "correct"]))
    frame["outcome"] = outcome(frame)
    for name in ("outcome", "label"):  # counted among a selection's tags on every lasso: codes, not texts
        frame[name] = frame[name].astype("category")
    correct = frame["correct"].astype("boolean")
    # how a selection's images are shown: failures first, then the right ones, then those without a label or output
    frame["shown_order"] = np.where(correct.eq(False).fillna(False), 0,
                                    np.where(correct.eq(True).fillna(False), 1, 2)).astype(np.int8)
    return frame


@st.cache_resource(show_spinner=False, max_entries=2)  # each holds every point's tags: kept few
def _selection_tags(folder: str, model: str | None, encoder: str, method: str, state: str):
    from hibug_core.slices.selection import tag_counts

    points = _points(folder, model, encoder, method, state)
    table = tag_table(open_project(folder)).tags[_tagged(folder, state)[0]].reindex(points.index)
    if model is not None:
        table = table.assign(outcome=points["outcome"], label=points["label"])
    return table, tag_counts(table)


@st.cache_resource(show_spinner=False, max_entries=4)
def _tagged(folder: str, state: str) -> tuple[list[str], list[str]]:
    del state
    project = open_project(folder)
    tags = tag_table(project).tags
    return [c for c in tags.columns if tags[c].notna().any()], list(project.known_tags().columns)


@st.cache_resource(show_spinner=False, max_entries=4)
def _colour(folder: str, model: str | None, encoder: str, method: str, colour: str, state: str) -> pd.Series:
    project = open_project(folder)
    points = _points(folder, model, encoder, method, state)
    if colour in _tagged(folder, state)[0]:  # an attribute named as a plain colouring is coloured by its tags
        values = tag_table(project).tags[colour].reindex(points.index)
    elif colour.startswith(KNOWN):
        values = project.known_tags()[colour.removeprefix(KNOWN)].reindex(points.index)
    else:
        values = points[colour]
    return pd.Series(pd.Categorical(values.astype(object).fillna("(none)").astype(str)), index=points.index,
                     name=colour)
