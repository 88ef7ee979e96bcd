"""The image detail view: one image large, with its prediction, its tags and where each comes from, its slices, and a
tag to correct on the spot."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.image_loader import shown_as_stored
from hibug_core.markdown import plain
from hibug_core.objects.crops import ensure_object_picture, picture_of
from hibug_core.objects.keypoint_errors import TYPE_OF_CODE, keypoint_summary
from hibug_core.slices.search import CLASS
from hibug_core.store import tag_store
from hibug_core.tagging.sources import poor_flag, source_label, too_poor
from hibug_core.thumbnails import enlargement, ensure_enlarged, ensure_thumbnail
from hibug_ui.state import current_task, keypoint_skeleton, source_ranking, tag_table
from hibug_ui.visitor import may_edit


def sample_tags(project, sample_id: int, poor: dict[str, str] | None = None) -> pd.DataFrame:
    """Every tag in force of one sample: attribute, tag, its source (a person, imported, a run), its margin, and
    `trust`: why a tag from an attribute whose tags are too poor to trust (`poor`, tagging.sources.too_poor) is not
    to be believed, as the slice table flags it (a person's tag is believed)."""
    poor = poor or {}
    table = tag_table(project)
    columns = ["attribute", "tag", "source", "margin", "trust"]
    if sample_id not in table.tags.index:
        return pd.DataFrame(columns=columns)
    runs = tag_store.runs(project)
    corrected = table.corrected if table.corrected is not None else pd.DataFrame()
    rows = []
    for attribute in table.tags.columns:
        tag = table.tags.at[sample_id, attribute]
        if pd.isna(tag):
            continue
        by_person = attribute in corrected.columns and bool(corrected.at[sample_id, attribute])
        source = "a person" if by_person else source_label(table.source.get(attribute, "?"), runs)
        margin = table.margin.at[sample_id, attribute] if attribute in table.margin.columns else None
        rows.append({"attribute": attribute, "tag": str(tag), "source": source,
                     "margin": None if by_person or pd.isna(margin) else float(margin),
                     "trust": poor_flag(poor[attribute]) if attribute in poor and not by_person else ""})
    known = project.known_tags()
    for column in known.columns:
        if sample_id in known.index and pd.notna(known.at[sample_id, column]):
            rows.append({"attribute": f"known: {column}", "tag": str(known.at[sample_id, column]),
                         "source": "imported tags", "margin": None, "trust": ""})
    table = pd.DataFrame(rows, columns=columns)
    table["margin"] = pd.to_numeric(table["margin"], errors="coerce")  # a number, empty where none (never "None")
    return table


def slices_of(report, sample_id: int) -> list[str]:
    """The distinct, trusted error slices that hold the sample (by its tags in force and its label); refinements and
    slices resting on poor tags are left out."""
    if report is None or report.all_tags is None or sample_id not in report.all_tags.index:
        return []
    tags = report.all_tags.loc[sample_id]
    label = report.samples.at[sample_id, "label"] if report.samples is not None else None
    held = []
    distinct = report.slices[(report.slices.get("repeats", "") == "") & report.slices.get("trusted", True)]
    for definition, description in zip(distinct["definition"], distinct["description"]):
        if all((label if a == CLASS and a not in tags.index else tags.get(a)) == t for a, t in definition):
            held.append(description)
    return held


DETAIL_SIZE = 1024  # the largest side of the copy shown for a file browsers cannot draw
DETAIL_AT_LEAST = 320  # a smaller image is shown enlarged a whole number of times, its pixels kept sharp
OPEN_KEY = "detail_open"  # (grid key, sample id) of the image whose detail view is open


def _closed() -> None:
    st.session_state.pop(OPEN_KEY, None)


@st.dialog("Details", width="large", on_dismiss=_closed)
def show_image(project, sample_id: int, samples: pd.DataFrame, report=None, user: str = "anonymous") -> None:
    row = samples.loc[sample_id]
    left, right = st.columns([1, 1])
    with left:
        factor = 1 if pd.notna(row.get("box_x")) else enlargement(row["width"], row["height"], DETAIL_AT_LEAST)
        try:
            image = project.served_image(row["image_path"])
            if pd.notna(row.get("box_x")):  # an object: its whole image with its boxes
                picture = picture_of(row, keypoint_skeleton(project).get("limbs", ()))
                image = ensure_object_picture(project.pictures_folder, image, row["content_hash"], picture, size=512,
                                              whole=True)
            elif factor > 1:  # a small image: its own pixels, each a block, so it is not lost in the dialog
                image = ensure_enlarged(project.pictures_folder, image, row["content_hash"], factor)
            elif not shown_as_stored(image):  # a format browsers do not draw (TIFF...): the loader's copy
                image = ensure_thumbnail(project.pictures_folder, image, row["content_hash"], size=DETAIL_SIZE)
            st.image(str(image), width="content", output_format="PNG")  # as large as it is, at most the column's width
        except (OSError, ValueError, TypeError, HibugError):
            st.caption("image not available")
        shown = f" · shown {factor}× larger" if factor > 1 else ""
        task = current_task(project)
        st.caption(f"{plain(task.nouns.sample_name(row['sample_key']))} · split {row['split']} · "
                   f"{int(row['width'])}×{int(row['height'])} px{shown}")
    with right:
        predicted = task.prediction_words(row) if pd.notna(row.get("prediction")) else None
        if pd.notna(row.get("outcome")):
            said = predicted != row.get("prediction")  # the task's own words: a person found inverted, an object
            # found with an outline error (which names its error type itself)
            error = (f" ({plain(row['error_type'])} error)" if row.get("error_type") not in (None, "", "missed")
                     and not (said and str(row["error_type"]) in predicted) else "")
            iou = f" · {task.nouns.score} {row['iou']:.2f}" if pd.notna(row.get("iou")) else ""  # 0: no overlap
            outcome = predicted if said else row["outcome"]
            st.markdown(f"**{plain(outcome)}**{error}{iou}")
        if isinstance(row.get("keypoint_types"), str):
            _keypoints(row, keypoint_skeleton(project).get("names", []))
        if pd.notna(row.get("prediction")):
            correct = row.get("correct")
            verdict = "unlabelled" if pd.isna(correct) else "right" if bool(correct) else "wrong"
            confidence = f" ({row['confidence']:.0%} confident)" if pd.notna(row.get("confidence")) else ""
            st.markdown(f"**label** {plain(row['label'])} · **prediction** {plain(predicted)}{confidence} · "
                        f"**{verdict}**")
        else:
            st.markdown(f"**label** {plain(row['label'])}")
        held = slices_of(report, sample_id)
        if held:
            more = f" and {len(held) - 5} more" if len(held) > 5 else ""
            st.markdown("**In the error slices** " + "; ".join(plain(h) for h in held[:5]) + more)
        tags = sample_tags(project, sample_id, too_poor(source_ranking(project)))
        if tags["trust"].ne("").any():
            st.caption("⚠ marks tags from attributes whose tags are too poor to trust (measured against the known "
                       "tags and audits): read them as guesses.")
        rows_shown = min(len(tags), 24)  # every tag in view, the flagged ones too, without scrolling inside the box
        st.dataframe(tags, hide_index=True, width="stretch", height=38 + 35 * rows_shown, column_config={
            "margin": st.column_config.NumberColumn("margin", format="%.2f",
                                                    help="how sure the tagger was (empty: set by a person, or "
                                                         "imported)"),
            "trust": st.column_config.TextColumn("trust", help="why this tag is not to be believed, if it is not")})
        editable = [a for a in tags["attribute"] if not a.startswith("known: ")]
        if editable:
            _correct_here(project, sample_id, tags.set_index("attribute")["tag"], editable, user)


def _keypoints(row, names: list[str]) -> None:
    """A person's keypoints: each one's similarity to the prediction (OKS's per-keypoint term) and its type."""
    codes = row["keypoint_types"]
    similarity = json.loads(row["keypoint_similarity_json"]) if isinstance(row.get("keypoint_similarity_json"),
                                                                          str) else [None] * len(codes)
    names = names if len(names) == len(codes) else [f"keypoint {i + 1}" for i in range(len(codes))]
    table = pd.DataFrame({"keypoint": names, "type": [TYPE_OF_CODE.get(c, "not labelled") for c in codes],
                          "similarity": similarity})
    with st.expander(f"Keypoints: {keypoint_summary(codes)}"):
        st.dataframe(table, hide_index=True, width="stretch", key=f"detail_keypoints_{row.name}",
                     column_config={"similarity": st.column_config.NumberColumn(format="%.2f")})


def _correct_here(project, sample_id: int, current: pd.Series, editable: list[str], user: str) -> None:
    from hibug_core.store.attribute_versions import load_schema

    schema = load_schema(project)
    attribute = st.selectbox("Correct a tag", editable, key=f"detail_attribute_{sample_id}")
    choices = list(schema[attribute].tags) if attribute in schema.names() else [current[attribute]]
    tag = st.selectbox("to", choices, key=f"detail_tag_{sample_id}_{attribute}",
                       index=choices.index(current[attribute]) if current[attribute] in choices else 0)
    # The person's tag as first shown: a teammate's change in between is refused, not overwritten.
    people = tag_store.corrections(project, attribute).set_index("sample_id")["tag"]
    seen_key = f"detail_seen_{sample_id}_{attribute}"
    seen = st.session_state.setdefault(seen_key, people.get(sample_id))
    if st.button("Save this tag", key=f"detail_save_{sample_id}", type="primary", disabled=not may_edit(project)):
        try:
            kind = "confirm" if tag == current[attribute] else "correct"
            tag_store.correct_tags(project, attribute, [sample_id], tag, kind=kind, author=user,
                                   seen={sample_id: seen})
        except HibugError as error:
            st.error(plain(error))
            return
        finally:
            st.session_state.pop(seen_key, None)
        st.rerun()
