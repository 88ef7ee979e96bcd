"""Attributes: propose them (language model or built-in library), edit them in a table, see every version and
restore one. Every save is a new version; an edit based on an old version is refused, never lost."""
import json

import streamlit as st

from hibug_core.attributes.diff import proposal_note, proposed_version, schema_diff
from hibug_core.attributes.schema import GROUPS, MAX_ATTRIBUTES, AttributeSchema
from hibug_core.attributes.table import COLUMNS, schema_to_table, table_to_schema
from hibug_core.errors import HibugError
from hibug_core.llm.client import LLMConfig
from hibug_core.markdown import plain
from hibug_core.operations import ProposeAttributes, SuggestTags
from hibug_core.store.attribute_versions import (
    StaleSchemaError,
    latest_version,
    load_schema,
    save_schema,
    schema_history,
)
from hibug_core.tagging.project_proposal import PROPOSAL_METHODS
from hibug_core.tagging.suggest import added_note, added_tags
from hibug_ui.page import open_page
from hibug_ui.state import secret
from hibug_ui.widgets import in_words

project, _, model, user, editing = open_page("Attributes")
st.title("Attributes")

BASE = "attributes_base_version"  # the version this session's edits start from (optimistic concurrency)
newest = latest_version(project)
st.session_state.setdefault(BASE, newest)
version = st.session_state[BASE]
if newest != version:
    by = schema_history(project).iloc[0]
    st.warning(f"Version {newest} was saved by {plain(by['author'])} {in_words(by['created_at'])} since you opened "
               f"version {version}. Your edits here are based on version {version}; saving them will be refused.")
    if st.button(f"Load version {newest} (drops your unsaved edits)", key="attributes_reload"):
        st.session_state[BASE] = newest
        st.rerun()
schema = load_schema(project, version) if version is not None else AttributeSchema(attributes=(), task=project.name)
described = plain(schema.task) if schema.task else "(not described)"
st.caption(f"version {version} · {len(schema.attributes)} attributes · task: {described}"
           if version is not None else "No attributes yet: propose them below, or add rows to the table.")
DRAFT = "attributes_draft"  # a proposal waiting to be saved: (schema JSON, notes, source)


def save(new: AttributeSchema, note: str) -> None:
    try:
        saved = save_schema(project, new, author=user, note=note, base_version=version)
    except StaleSchemaError as error:
        st.error(plain(error))
        newer = load_schema(project, error.newest)
        st.markdown(f"**Version {error.newest}** (by {plain(error.author)}) has: "
                    + ", ".join(map(plain, newer.names())))
        return
    st.session_state.pop(DRAFT, None)
    st.session_state[BASE] = saved
    st.toast(f"Saved version {saved}")
    st.rerun()


SUGGESTED = "attributes_suggested_tags"  # (base version, schema JSON, note, tags added, notes) of the last suggestion
SUGGESTERS = {"representative images": False, "refinement pass over validation images": True}  # choice: op.refine
LIBRARY_PROPOSER = "built-in library"
PROPOSERS = {LIBRARY_PROPOSER: None, **{f"language model ({e.name} flow)": e.name for e in PROPOSAL_METHODS}}
propose, from_data, edit, history = st.tabs(["Propose", "Tags from the data", "Edit", "History"])
with propose:
    with st.form("propose_form"):
        purpose = st.text_area("What does the model do?", value=schema.task or "", key="propose_task",
                               placeholder="classify the species of birds in photos taken by hikers")
        source = st.radio("Proposed by", list(PROPOSERS), horizontal=True, key="propose_source")
        st.caption("The language model's flows: " + "; ".join(f"{e.name}, {e.help}" for e in PROPOSAL_METHODS)
                   + f" (of {plain(model) if model else 'the model under test'}).")
        kinds = ["chosen from the task", *ProposeAttributes.choices("library")]
        kind = st.selectbox("Library entry", kinds, key="propose_library")
        llm_model = st.text_input("LLM model", value="", key="propose_llm_model",
                                  help=ProposeAttributes.help("llm_model"),
                                  placeholder=f"{LLMConfig.from_env().model} (the server's setting: HIBUG_LLM_MODEL)")
        llm_url = st.text_input("LLM server URL", value="", key="propose_llm_url",
                                placeholder="http://localhost:8000/v1 "
                                            "(empty: OpenAI; key from OPENAI_API_KEY or secrets)")
        if st.form_submit_button("Propose", type="primary", key="propose_submit", disabled=not editing):
            try:
                flow = {"method": PROPOSERS[source]} if PROPOSERS[source] else {}
                op = ProposeAttributes.build(
                    purpose=purpose, library=None if kind == kinds[0] else kind, llm=PROPOSERS[source] is not None,
                    llm_model=llm_model.strip() or None, llm_base_url=llm_url.strip() or None, **flow)
                with st.spinner(f"Asking {op.llm_config().describe()}…" if op.llm else "Proposing…"):
                    result = op.proposal(project, model=model, api_key=secret("OPENAI_API_KEY"))
                st.session_state[DRAFT] = (result.schema.to_json(), result.notes, result.source)
            except HibugError as error:
                st.error(plain(error))
    draft = st.session_state.get(DRAFT)
    if draft:
        proposal = AttributeSchema.from_json(draft[0])
        st.markdown(f"**Proposal** ({plain(draft[2])}): {len(proposal.attributes)} attributes")
        for note in draft[1]:
            st.caption(note)
        with st.expander("The proposal as proposed", expanded=version is None):
            st.dataframe(schema_to_table(proposal), hide_index=True, width="stretch")
        if version is None:
            if st.button("Save as version 1", type="primary", key="propose_save", disabled=not editing):
                save(proposal, proposal_note(None, draft[2]))
        else:
            how = st.radio("Saving it", ["merge", "replace"], horizontal=True, key="propose_how",
                           format_func={"merge": f"adds its new attributes to version {version} (keeps all yours)",
                                        "replace": f"replaces version {version} with it"}.get,
                           help=ProposeAttributes.help("replace"))
            result, left_out = proposed_version(schema, proposal, replace=how == "replace")
            if left_out:
                st.caption(f"{left_out} proposed attributes left out: a schema holds at most {MAX_ATTRIBUTES}.")
            changes = schema_diff(schema, result)
            removed = int((changes["change"] == "removed").sum())
            st.markdown(f"**Against version {version}**: {len(changes)} change(s)"
                        + (f", **{removed} of your attributes removed**" if removed else ""))
            if changes.empty:
                st.caption(f"Nothing new: version {version} already has every attribute proposed.")
            else:
                st.dataframe(changes, hide_index=True, width="stretch", key="propose_diff")
            if st.button("Save as a new version", type="primary", key="propose_save",
                         disabled=changes.empty or not editing):
                save(result, proposal_note(version, draft[2], replace=how == "replace"))

with from_data:
    st.caption("Tags each attribute's values take on the images (HiBug2): the most representative images (the "
               "centres of k-means over their embeddings), or a refinement pass over validation images, asked of a "
               "multimodal language model or, without one, the encoder choosing from a candidate vocabulary. The tags "
               "it adds are shown before anything is saved.")
    if version is None:
        st.info("Propose or write attributes first: tags are suggested for the attributes in force.")
    else:
        with st.form("suggest_form"):
            cells = st.columns([2, 1, 1])
            refine = cells[0].radio("Images", list(SUGGESTERS), horizontal=True, key="suggest_images")
            encoder = cells[1].text_input("Encoder", value=SuggestTags.default("encoder"), key="suggest_encoder",
                                          help=SuggestTags.help("encoder"))
            llm = cells[2].checkbox("Ask a multimodal language model", key="suggest_llm",
                                    help=SuggestTags.help("llm"))
            cells = st.columns(2)
            llm_model = cells[0].text_input("LLM model", value="", key="suggest_llm_model",
                                            placeholder=f"{LLMConfig.from_env().model} (HIBUG_LLM_MODEL)")
            llm_url = cells[1].text_input("LLM server URL", value="", key="suggest_llm_url",
                                          placeholder="empty: OpenAI; key from OPENAI_API_KEY or secrets")
            if st.form_submit_button("Suggest tags", type="primary", key="suggest_submit", disabled=not editing):
                try:
                    op = SuggestTags.build(encoder=encoder.strip(), refine=SUGGESTERS[refine], llm=llm,
                                           llm_model=llm_model.strip() or None, llm_base_url=llm_url.strip() or None)
                    with st.spinner("Looking at the images…"):
                        found = op.suggestion(project, schema, api_key=secret("OPENAI_API_KEY"))
                    st.session_state[SUGGESTED] = (version, found.schema.to_json(), added_note(found),
                                                   added_tags(found), found.notes)
                except HibugError as error:
                    st.error(plain(error))
        suggested = st.session_state.get(SUGGESTED)
        if suggested is not None and suggested[0] == version:
            _, suggested_schema, note, added, notes = suggested
            for line in notes:
                st.caption(plain(line))
            if not added:
                st.info(f"No new tags needed: version {version} already has every value found.")
            else:
                st.markdown(f"**Adds to version {version}**: {plain(added)}")
                if st.button("Save as a new version", type="primary", key="suggest_save", disabled=not editing):
                    st.session_state.pop(SUGGESTED, None)
                    save(AttributeSchema.from_json(suggested_schema), note)

with edit:
    st.caption("One row per attribute. Tags are separated by commas, prompt templates by '|' ({tag} and {label} are "
               "filled in). Yes/no attributes are named 'is …'.")
    edited = st.data_editor(
        schema_to_table(schema), num_rows="dynamic" if editing else "fixed", disabled=not editing, hide_index=True,
        width="stretch", key=f"attributes_editor_{version}",
        column_order=COLUMNS,
        column_config={"group": st.column_config.SelectboxColumn("group", options=list(GROUPS), required=True),
                       "kind": st.column_config.SelectboxColumn("kind", options=["descriptive", "binary"],
                                                                required=True),
                       "enabled": st.column_config.CheckboxColumn("enabled", default=True),
                       "source": st.column_config.TextColumn("source", disabled=True, default="manual"),
                       "tags": st.column_config.TextColumn("tags", width="large"),
                       "templates": st.column_config.TextColumn("templates", width="large")})
    note = st.text_input("What changed (kept with the version)", key="attributes_note")
    if st.button("Save attributes", type="primary", key="attributes_save", disabled=not editing):
        new, problems = table_to_schema(edited, schema)
        if problems:
            st.error("Nothing was saved; fix these rows:\n\n" + "\n".join(f"- {p}" for p in problems))
        elif new == schema:
            st.info("No change to save.")
        else:
            save(new, note or "edited in the dashboard")

with history:
    versions = schema_history(project)
    if versions.empty:
        st.caption("No versions yet.")
    else:
        st.dataframe(versions, hide_index=True, width="stretch")
        chosen = st.selectbox("Look at version", versions["version"].tolist(), key="history_version")
        old = load_schema(project, int(chosen))
        st.dataframe(schema_to_table(old), hide_index=True, width="stretch")
        earlier = [v for v in versions["version"].tolist() if v < int(chosen)]
        if earlier:
            against = st.selectbox("Compare with version", earlier, key="history_compare")
            changes = schema_diff(load_schema(project, int(against)), old)
            st.markdown(f"**From version {against} to {chosen}**")
            if changes.empty:
                st.caption("No difference.")
            else:
                st.dataframe(changes, hide_index=True, width="stretch",
                             column_config={"what": st.column_config.TextColumn("what", width="large")})
        if chosen != version and st.button(f"Restore version {chosen}", key="history_restore",
                                                     disabled=not editing):
            save(old, f"restored version {chosen}")
        st.download_button("Download as JSON", json.dumps(json.loads(old.to_json()), indent=2),
                           file_name=f"attributes-v{chosen}.json", key="history_download")
