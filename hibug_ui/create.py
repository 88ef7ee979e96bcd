"""Creating a project from the browser: a manifest uploaded or named by its path on the server."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.ingest import load_manifest
from hibug_core.ingest.manifest import load_uploaded_manifest
from hibug_core.markdown import plain
from hibug_core.store.project import Project
from hibug_ui.state import NEXT_PROJECT_KEY


def create_project_form(user: str) -> None:
    """A form that validates the manifest (every problem listed at once) and creates the project."""
    with st.form("create_project"):
        st.markdown("**Create a project** from a manifest (CSV or Parquet: image, label, prediction, split, attr:…)")
        folder = st.text_input("New project folder", placeholder="/data/projects/birds")
        upload = st.file_uploader("Upload the manifest", type=["csv", "parquet", "pq", "tsv"])
        base = st.text_input("Folder its image paths are relative to (for an upload)", placeholder="/data/images")
        path = st.text_input("…or the manifest's path on this server", placeholder="/data/images/manifest.csv")
        model_name = st.text_input("Name of the model in the 'prediction' column", value="model")
        if not st.form_submit_button("Create project", type="primary", key="create_submit"):
            return
    if not folder:
        st.error("Name the new project folder.")
        return
    try:
        with st.spinner("Checking the manifest and its images…"):
            if upload is not None:
                if not base:
                    raise HibugError("say which folder the uploaded manifest's image paths are relative to")
                manifest = load_uploaded_manifest(upload.getvalue(), upload.name, base, default_model=model_name)
            elif path:
                manifest = load_manifest(path, default_model=model_name)
            else:
                raise HibugError("upload a manifest or give its path")
            Project.create_from_manifest(folder, manifest, author=user).close()
    except HibugError as error:
        st.error(plain(error))
        return
    st.session_state[NEXT_PROJECT_KEY] = str(Path(folder).resolve())
    st.rerun()
