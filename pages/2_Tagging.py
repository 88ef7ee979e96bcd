"""Tagging: run a tagger as a background job, see the tags by correctness and class, check uncertain images, audit
tags with one click per image, and teach a tag by example."""
import json
from functools import partial

import numpy as np
import pandas as pd
import plotly.express as px
import streamlit as st

from hibug_core.embeddings.registry import DEFAULT_ENCODER, ENCODERS
from hibug_core.errors import HibugError
from hibug_core.llm.client import LLMConfig
from hibug_core.markdown import plain
from hibug_core.metrics import outcome
from hibug_core.operations import Tag, Teach
from hibug_core.store import tag_store
from hibug_core.store.attribute_versions import latest_version, load_schema
from hibug_core.tagging.run import TAGGERS, audit
from hibug_core.tagging.sources import too_poor, trust_message
from hibug_ui.fields import chosen_or_typed
from hibug_ui.jobs import built, job_status, start_job
from hibug_ui.page import open_page
from hibug_ui.plots import literal_values, plotly_literal
from hibug_ui.state import (
    flagged_attribute,
    load_samples,
    secret,
    source_ranking,
    tag_table,
)
from hibug_ui.widgets import as_percent, image_grid, paged, percent_column, url_setting

project, task, model, user, editing = open_page("Tagging")
nouns = task.nouns
st.title("Tagging")
if latest_version(project) is None:
    st.info("No attributes yet: propose or write them on the Attributes page first.")
    st.page_link("pages/1_Attributes.py", label="Go to Attributes", icon="🏷️")
    st.stop()
schema = load_schema(project)
names = [a.name for a in schema.attributes]
job_status(project, Tag.kind, user, key="tagging")  # at the top: where the eye is while a run goes
job_status(project, Teach.kind, user, key="teaching")

run, sources, explore, uncertain, review, teach = st.tabs(["Run", "Tag sources", "Tags by class and correctness",
                                                           f"Uncertain {nouns.samples}", "Audit", "Teach by example"])
with run:
    with st.form("tag_run"):
        backend = st.radio("Tagger", ["vision-language encoder", "multimodal LLM"], horizontal=True,
                           key="tag_run_backend")
        encoder = st.selectbox("Encoder", [*ENCODERS.names(), "other…"], key="tag_run_encoder",
                               help=ENCODERS.help_text())
        other = st.text_input("Other encoder", key="tag_run_other_encoder",
                              placeholder="open_clip:ViT-B-32:/models/clip.bin or transformers:/models/clip",
                              help="Typed here, it is used whatever the Encoder box says")
        chosen = st.multiselect("Attributes", names, default=[a.name for a in schema.enabled()],
                                key="tag_run_attributes")
        splits = st.multiselect("Splits", ["train", "val", "test", "pool"], default=[], key="tag_run_splits",
                                help=f"Leave empty to tag every {nouns.sample}")
        llm_model = st.text_input("LLM model", value="", placeholder=f"{LLMConfig.from_env().model} (the server's "
                                  "setting: HIBUG_LLM_MODEL)", key="tag_run_llm_model", help=Tag.help("llm_model"))
        llm_url = st.text_input("LLM server URL", value="", placeholder="http://localhost:8000/v1 (empty: OpenAI)",
                                key="tag_run_llm_url",
                                help="The API key comes from OPENAI_API_KEY or Streamlit secrets, never from here.")
        if st.form_submit_button("Start tagging", type="primary", key="tag_run_submit", disabled=not editing):
            params = {"attributes": chosen, "splits": splits or None}
            secrets = None
            if backend == "multimodal LLM":
                params.update(llm=True, llm_model=llm_model.strip() or None, llm_base_url=llm_url.strip() or None)
                key = secret("OPENAI_API_KEY")
                secrets = {"OPENAI_API_KEY": key} if key else None
            else:
                params["encoder"] = chosen_or_typed(encoder, other, "other…", "encoder")
            if params.get("encoder") != "" and start_job(project, built(Tag, **params), user, secrets) is not None:
                st.rerun()
    st.markdown("**Tagging runs**")
    runs = tag_store.runs(project)
    if runs.empty:
        st.caption("No tagging runs yet: start one above. Until then the tags in force are the imported ones.")
    else:
        runs = runs.assign(attributes=[", ".join(json.loads(raw)) for raw in runs["attributes_json"]],
                           encoder=runs["encoder"].fillna("—"), finished_at=runs["finished_at"].fillna("—"))
        runs = runs[["id", "method", "encoder", "status", "n_samples", "attributes", "author", "created_at",
                     "finished_at"]].sort_values("id", ascending=False)
        st.dataframe(runs, hide_index=True, width="stretch", key="tag_runs_table", column_config={
            "id": st.column_config.NumberColumn("run", format="#%d"), "n_samples": nouns.samples,
            "method": st.column_config.TextColumn("method", help=TAGGERS.help_text()),
            "attributes": st.column_config.TextColumn("attributes", width="large")})

with sources:
    st.caption("Every source of tags per attribute: the imported tags (attr: columns) and each tagging run, measured "
               "against the true tags the project holds (imported ones and people's audits). The one in force is "
               "the best measured, unless a person chose another; people's corrections always win over all of them.")
    ranking = source_ranking(project)
    warning = trust_message(ranking, text=plain)
    if warning:
        st.warning(warning, icon=":material/warning:")
    table = ranking.table
    shown = as_percent(table.assign(
        in_force=table["in_force"].map({True: "✓", False: ""}),
        chosen=table["chosen"].map({True: "by a person", False: ""}),
        interval=[f"{lo:.1%}–{hi:.1%}" if n else ""
                  for lo, hi, n in zip(table["low"], table["high"], table["checked"])]),
        "accuracy")
    st.dataframe(shown[["attribute", "label", "in_force", "chosen", "accuracy", "interval", "checked", "tagged",
                        "against"]], hide_index=True, width="stretch", key="tag_sources_table", column_config={
        "label": st.column_config.TextColumn("source", width="medium"), "in_force": "in force",
        "accuracy": percent_column("accuracy", progress=True), "interval": "95% interval",
        "checked": st.column_config.NumberColumn("checked", help=f"{nouns.samples} with a true tag to compare with"),
        "against": st.column_config.TextColumn("measured against", width="medium")})
    if not ranking.table.empty:
        cells = st.columns([2, 3, 1])
        attribute = cells[0].selectbox("Attribute", list(ranking.order), key="source_attribute")
        options = [tag_store.AUTO, *ranking.order[attribute]]
        labels = dict(zip(ranking.table["source"][ranking.table["attribute"] == attribute],
                          ranking.table["label"][ranking.table["attribute"] == attribute]))
        labels[tag_store.AUTO] = "the best measured source (automatic)"
        source = cells[1].selectbox("Put in force", options, format_func=labels.get, key="source_choice")
        if cells[2].button("Apply", key="source_apply", type="primary", disabled=not editing):
            tag_store.choose_source(project, attribute, source, author=user)
            st.toast(plain(f"{attribute}: {labels[source]} in force (logged in the audit log)"))
            st.rerun()

table = tag_table(project)
tagged = [n for n in names if n in table.tags.columns and table.tags[n].notna().any()]
shown_as = partial(flagged_attribute, too_poor(source_ranking(project)))  # the pickers flag poor tags
samples = load_samples(project, model)
if not tagged:
    for tab in (explore, uncertain, review, teach):
        tab.info("No tags yet: start a tagging run.")
    st.stop()


def tag_counts(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Images per (tag, `by` value), both as literal plotly text, for a grouped bar chart."""
    counts = frame.groupby(["tag", by], observed=True).size().rename(nouns.samples).reset_index()
    return counts.assign(tag=literal_values(counts["tag"].astype(object)),
                         **{by: literal_values(counts[by].astype(object))})


with explore:
    linked = url_setting("attribute", tagged[0])
    attribute = st.selectbox("Attribute", tagged, key="tagging_hist_attribute", format_func=shown_as,
                             index=tagged.index(linked) if linked in tagged else 0)
    frame = pd.DataFrame({"tag": table.tags[attribute]}).join(samples[["label", "split", "correct"]])
    frame = frame[frame["tag"].notna()]
    frame["outcome"] = outcome(frame)
    # Counted here, drawn as bars: the browser gets a few numbers per tag, not a value per image.
    by_outcome = tag_counts(frame, "outcome")
    by_class = tag_counts(frame[frame["label"].notna()], "label")
    left, right = st.columns(2)
    left.plotly_chart(px.bar(by_outcome, x="tag", y=nouns.samples, color="outcome", barmode="group",
                             title=f"{plotly_literal(attribute)}: right and wrong",
                             color_discrete_map={"right": "#2b8a3e", "wrong": "#d9480f"}),
                      width="stretch", key="tagging_hist_outcome")
    right.plotly_chart(px.bar(by_class, x="tag", y=nouns.samples, color="label", barmode="group",
                              title=f"{plotly_literal(attribute)} by class"), width="stretch", key="tagging_hist_class")
    wrong = frame.groupby("tag", observed=True)["correct"].agg(lambda c: 1 - c.dropna().astype(float).mean())
    st.caption("Error rate per tag: " + ", ".join(f"{t} {e:.0%}" for t, e in wrong.dropna().items()))

with uncertain:
    margin = st.slider("Margin below which a tag is uncertain", 0.0, 0.5, 0.1, 0.01, key="tagging_margin")
    attribute = st.selectbox("Attribute", tagged, key="tagging_uncertain_attribute", format_func=shown_as)
    flagged = table.uncertain(margin)[attribute]
    rows = samples.loc[flagged[flagged].index.intersection(samples.index)]
    rows = rows.assign(tag=table.tags.loc[rows.index, attribute].astype(object),
                       margin=table.margin.loc[rows.index, attribute]).sort_values("margin")
    tagged_count = int(table.tags[attribute].notna().sum())
    st.caption(f"{len(rows):,} of {nouns.count(tagged_count)} have an uncertain {attribute}")
    image_grid(project, paged(rows, key="tagging_uncertain_page", noun=nouns.samples),
               caption=lambda r: f"{r['tag']} (margin {r['margin']:.2f})")

with review:
    attribute = st.selectbox("Attribute", tagged, key="tagging_audit_attribute", format_func=shown_as)
    tags = (list(schema[attribute].tags) if attribute in schema.names()
            else sorted(table.tags[attribute].dropna().unique()))
    tag = st.selectbox("Model tag to audit", tags, key="tagging_audit_tag")
    estimate = audit(project, attribute)
    if not estimate.empty:
        st.dataframe(as_percent(estimate, "precision", "low", "high"), hide_index=True, width="stretch",
                     column_config={"precision": percent_column("precision", progress=True),
                                    "low": percent_column("95% low"), "high": percent_column("95% high")})
    people = tag_store.corrections(project, attribute).set_index("sample_id")["tag"]
    candidates = table.tags.index[(table.tags[attribute].astype(object) == tag) & ~table.tags.index.isin(people.index)]
    st.caption(f"{nouns.count(len(candidates))} tagged '{tag}' not reviewed yet; confirm or correct each")
    shown = samples.index.get_indexer(candidates)
    page = paged(samples, key="tagging_audit_page", per_page=12, among=shown[shown >= 0], noun=nouns.samples)

    AUDIT_ERROR = "tagging_audit_error"

    def audit_tag(attribute: str, sample_id: int, value: str | None, kind: str) -> None:
        """A click's callback: it runs before the page does again, even when the image has left the grid since."""
        value = value if value is not None else st.session_state.get(f"fix_{attribute}_{sample_id}")
        if value in (None, "…"):
            return
        try:  # shown unreviewed: refused if a teammate reviewed it meanwhile
            tag_store.correct_tags(project, attribute, [sample_id], value, kind=kind, author=user,
                                   seen={sample_id: None})
        except HibugError as error:
            st.session_state[AUDIT_ERROR] = str(error)

    if AUDIT_ERROR in st.session_state:
        st.error(plain(st.session_state.pop(AUDIT_ERROR)))
    cells = st.columns(6)
    for i, sample_id in enumerate(page.index):
        with cells[i % 6]:
            image_grid(project, page.loc[[sample_id]], columns=1, caption=lambda r: f"{r['label']}")
            st.button("✓ " + tag, key=f"confirm_{attribute}_{sample_id}", on_click=audit_tag,
                      args=(attribute, int(sample_id), tag, "confirm"), disabled=not editing)
            other_tags = [t for t in tags if t != tag]
            st.selectbox("Correct to", ["…"] + other_tags, key=f"fix_{attribute}_{sample_id}",
                         label_visibility="collapsed", on_change=audit_tag, disabled=not editing,
                         args=(attribute, int(sample_id), None, "correct"))

with teach:
    st.caption(f"Mark a few {nouns.samples} of each tag; a linear probe on the stored embeddings then tags every "
               f"{nouns.sample}.")
    attribute = st.selectbox("Attribute", [n for n in names if not schema[n].measured], key="teach_attribute")
    tags = list(schema[attribute].tags)
    tag = st.selectbox(f"Tag these {nouns.samples} as", tags, key="teach_tag")
    examples = tag_store.corrections(project, attribute)
    examples = examples[examples["kind"] == "example"]
    counts = examples["tag"].value_counts()
    st.caption("Examples so far: " + (", ".join(f"{t}: {int(counts.get(t, 0))}" for t in tags)))
    pool = np.flatnonzero(~samples.index.isin(examples["sample_id"]))
    shown = paged(samples, key="teach_page", per_page=12, among=pool, noun=nouns.samples)
    picked = []
    cells = st.columns(6)
    for i, sample_id in enumerate(shown.index):
        with cells[i % 6]:
            image_grid(project, shown.loc[[sample_id]], columns=1, caption=lambda r: f"{r['label']}")
            if st.checkbox(tag, key=f"teach_pick_{attribute}_{sample_id}", disabled=not editing):
                picked.append(sample_id)
    left, right = st.columns(2)
    if left.button(f"Add {len(picked)} example(s) of '{tag}'", disabled=not (picked and editing),
                   key="teach_add"):
        tag_store.correct_tags(project, attribute, picked, tag, kind="example", author=user)
        st.rerun()
    if right.button(f"Teach and tag every {nouns.sample}", type="primary", key="teach_run",
                    disabled=examples.empty or not editing):
        if start_job(project, built(Teach, attribute=attribute, encoder=DEFAULT_ENCODER), user) is not None:
            st.rerun()
