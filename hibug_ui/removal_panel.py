"""The Overview's "Remove samples" panel: samples named by key or image path, or every sample whose image cannot be
read, removed with everything stored of them (hibug_core.store.removal), so no bad image leaves a project stuck."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.store.removal import remove_samples, samples_of_images, unreadable_samples
from hibug_ui.visitor import may_edit

FOUND = "removal_found"  # the unreadable images found by the last look, until removed


def removal_panel(project) -> None:
    if not may_edit(project):
        return
    with st.expander("Remove samples", icon=":material/delete:"):
        st.caption("A sample whose image cannot be read, or one imported by mistake, goes with its model outputs, "
                   "tags and corrections; an image's objects go with it. Recorded in the audit log.")
        if st.button("Find images that cannot be read", key="removal_find"):
            with st.spinner("Reading every image once…"):
                ids, why = unreadable_samples(project)
            st.session_state[FOUND] = (ids.tolist(), why)
        found = st.session_state.get(FOUND)
        if found is not None and not found[0]:
            st.success("Every image reads.")
        elif found is not None:
            st.warning(f"{len(found[1])} image(s) cannot be read: " + "; ".join(plain(w) for w in found[1][:5]))
            if st.button(f"Remove their {len(found[0])} sample(s)", key="removal_unreadable", type="primary"):
                _removed(project, found[0], "unreadable images")
        named = st.text_area("Or name samples (a key or an image path per line)", key="removal_named")
        if st.button("Remove the named samples", key="removal_named_submit", disabled=not named.strip()):
            samples = project.samples()
            by_key = dict(zip(samples["sample_key"], samples.index))
            by_image = dict(zip(samples["image_path"].map(lambda p: str(Path(p).resolve())), samples.index))
            lines = [line.strip() for line in named.splitlines() if line.strip()]
            chosen = [by_key.get(line, by_image.get(str(Path(line).resolve()))) for line in lines]
            if None in chosen:
                st.error(f"No sample {plain(lines[chosen.index(None)])!r} in this project; nothing was removed.")
            else:
                _removed(project, samples_of_images(project, chosen).tolist(), "named on the Overview")


def _removed(project, ids: list[int], reason: str) -> None:
    try:
        count = remove_samples(project, ids, reason=reason)
    except HibugError as error:
        st.error(plain(error))
        return
    st.session_state.pop(FOUND, None)
    st.toast(f"Removed {count} sample(s).")
    st.rerun()
