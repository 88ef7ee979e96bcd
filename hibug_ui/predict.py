"""The Overview's "run your own model" panel: a predict job from a model spec, its progress and result."""
from __future__ import annotations

import streamlit as st

from hibug_core.models.registry import MODELS
from hibug_core.operations import Predict
from hibug_core.tasks import task_of
from hibug_ui.jobs import built, job_running, job_status, start_job
from hibug_ui.visitor import may_edit

STARTED = "predict_started"


def predict_panel(project, user: str, *, expanded: bool) -> None:
    """`expanded` when the project has no model; it also stays open while a run goes and after one this session
    started, so that the run's result is not folded away when the page it stored reruns."""
    if not task_of(project).capabilities.predict:  # e.g. a detector's results come as COCO files (hibug new --coco)
        return
    expanded = expanded or st.session_state.get(STARTED, False) or job_running(project, Predict.kind)
    with st.expander("Run your own model on these images", expanded=expanded, icon=":material/model_training:"):
        st.caption("Your network, loaded with its library's own code and preprocessing; its predictions and "
                   "penultimate features are stored as a model of this project (a stopped run resumes). "
                   + MODELS.help_text())
        with st.form("predict_form"):
            cells = st.columns([3, 1])
            spec = cells[0].text_input("Model", key="predict_model", help=Predict.help("model"),
                                       placeholder="timm:resnet50:/models/birds.pth")
            name = cells[1].text_input("Name", key="predict_name", help=Predict.help("name"),
                                       placeholder="from the spec")
            if st.form_submit_button("Run the model", type="primary", key="predict_submit",
                                     disabled=not may_edit(project)):
                if start_job(project, built(Predict, model=spec.strip(), name=name.strip() or None),
                             user) is not None:
                    st.session_state[STARTED] = True
                    st.rerun()
        job_status(project, Predict.kind, user, key="predict_job")
