"""Creating a project from the browser, inside the server's projects root: a manifest uploaded, or named by its path
inside one of the server's data roots, whose images lie inside them too."""
from __future__ import annotations

import dataclasses

import streamlit as st

from hibug_core.access import Role
from hibug_core.config import IngestConfig
from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.store.project import Project
from hibug_core.tasks import load_manifest, load_uploaded_manifest
from hibug_core.values import normalise_name
from hibug_ui.state import IMPORT_NOTES_KEY, KEPT, NEXT_PROJECT_KEY, PROJECT_KEY, open_project
from hibug_ui.visitor import may, server_policy


def create_project_form(user: str) -> None:
    """A form that validates the manifest (every problem listed at once) and creates the project; shown to admins of
    a server with a projects root."""
    policy = server_policy()
    if policy.projects_root is None or not may(Role.ADMIN):
        return
    roots = (", ".join(f"`{plain(str(root))}`" for root in policy.data_roots)
             or "none (start the server with --data-root)")
    with st.form("create_project"):
        st.markdown("**Create a project** from a manifest (CSV or Parquet: image, label, prediction, split, attr:…)")
        st.caption(f"Manifests and images are read only inside this server's data roots: {roots}.")
        name = st.text_input("New project name", placeholder="birds", max_chars=64)
        source = st.radio("The manifest", ["upload it", "a path on this server"], horizontal=True, key="create_source")
        upload = st.file_uploader("Upload the manifest (when uploading)", type=["csv", "parquet", "pq", "tsv"])
        base = st.text_input("Folder its image paths are relative to (when uploading)", placeholder="/data/images")
        path = st.text_input("The manifest's path on this server (when giving a path)",
                             placeholder="/data/images/manifest.csv")
        model_name = st.text_input("Name of the model in the 'prediction' column", value="model")
        if not st.form_submit_button("Create project", type="primary", key="create_submit"):
            return
    try:
        folder = policy.new_project_folder(name.strip())
        model_name = normalise_name(model_name, "the model's name")
        config = dataclasses.replace(IngestConfig(), image_roots=policy.data_roots)
        with st.spinner("Checking the manifest and its images…"):
            if source == "upload it":
                if upload is None:
                    raise HibugError("choose the manifest file to upload (or choose 'a path on this server')")
                if not base:
                    raise HibugError(f"say which folder the image paths in {upload.name} are relative to")
                images = policy.data_path(base, what="the image folder")
                manifest = load_uploaded_manifest(upload.getvalue(), upload.name, images, default_model=model_name,
                                                  config=config)
            else:
                if not path:
                    raise HibugError("give the manifest's path on this server (or choose 'upload it')")
                manifest = load_manifest(policy.data_path(path, instead="or upload the manifest"),
                                         default_model=model_name, config=config)
            Project.create_from_manifest(folder, manifest, author=user).close()
    except HibugError as error:
        st.error(plain(error))
        return
    st.session_state[NEXT_PROJECT_KEY] = folder.name
    st.session_state[IMPORT_NOTES_KEY] = [  # said once the new project is open
        *(f"Changed to the stored form: {note}" for note in manifest.notes),
        *(f"Warning: {warning}" for warning in manifest.warnings)]
    st.rerun()


def delete_project_button(project) -> None:
    """For admins of a server with a projects root, in the sidebar: remove the project, after its name is typed
    again."""
    if server_policy().projects_root is None or not may(Role.ADMIN):
        return
    with st.sidebar, st.expander("Delete this project", icon=":material/delete:"):
        with st.form("delete_project"):
            typed = st.text_input(f"Type '{plain(project.folder.name)}' to delete the project and everything "
                                  "stored in it (its images stay where they are)")
            if not st.form_submit_button("Delete project", key="delete_submit"):
                return
        if typed.strip() != project.folder.name:
            st.error("The name typed is not this project's; nothing was deleted.")
            return
        folder = project.folder
        open_project.clear()  # every session lets go of its database before the folder goes
        project.close()
        try:
            Project.delete(folder)
        except HibugError as error:
            st.error(plain(error))
            return
        st.session_state[KEPT + PROJECT_KEY] = None
        st.query_params.pop("project", None)
        st.rerun()
