"""What every page opens with: its config, the project chosen in the sidebar, its task, the model under test, who is
acting and whether they may edit: one call instead of the same lines on every page."""
from __future__ import annotations

from typing import NamedTuple

import streamlit as st

from hibug_core.store.project import Project
from hibug_core.tasks import Task
from hibug_ui.state import current_model, current_project, current_task, current_user, required_model
from hibug_ui.visitor import may_edit


class PageContext(NamedTuple):
    project: Project
    task: Task
    model: str | None  # the model under test (None: the project holds none, where the page allows that)
    user: str
    editing: bool  # whether the visitor may change what is stored


def open_page(title: str, *, needs_model: bool = False, picks_model: bool = True) -> PageContext:
    """Set the page up and read its context: the model under test is picked in the sidebar (unless not `picks_model`:
    a page that chooses its own models); a page that `needs_model` stops with what to do when there is none."""
    st.set_page_config(page_title=f"hibug · {title}", page_icon="🐞", layout="wide")
    project = current_project()
    task = current_task(project)
    model = required_model(project) if needs_model else current_model(project) if picks_model else None
    return PageContext(project, task, model, current_user(), may_edit(project))
