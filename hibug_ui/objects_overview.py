"""The Overview's part for detectors and pose models: COCO's AP as imported, AP per class, TIDE's error types and the
object confusion matrix whose cells open their objects."""
from __future__ import annotations

import uuid

import pandas as pd
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.objects.summary import evaluated_objects, keypoint_table
from hibug_core.tasks import task_of
from hibug_ui.plots import error_type_figure, literal_values
from hibug_ui.state import confusion_cell, object_figures
from hibug_ui.widgets import image_grid


def headline(nouns) -> dict[str, tuple[str, str]]:
    """COCO's figures the Overview shows first: summary key -> (its name in the task's words, what it is)."""
    overlap, ap = nouns.score, nouns.ap
    return {"AP": (ap, f"{ap} at {overlap} .50:.95, COCO's main number"), "AP50": (f"{ap}50", f"{ap} at {overlap} .50"),
            "AP75": (f"{ap}75", f"{ap} at {overlap} .75"),
            "AR100": ("AR100", f"recall at {overlap} .50:.95 with up to 100 detections per image"),
            "AR": ("AR", f"recall at {overlap} .50:.95")}


def object_overview(project, model: str, samples: pd.DataFrame, split: str, user: str) -> None:
    task = task_of(project)
    nouns = task.nouns
    evaluation = project.object_evaluation(model, split)
    if evaluation is None:
        st.info(f"{plain(model)} has no COCO evaluation on the {split} split (it was not imported with a results "
                "file).")
        return
    another_model(project, split, user)
    settings = evaluation["settings"]
    st.markdown(f"**COCO evaluation** of import #{evaluation['import_id']} ({', '.join(evaluation['splits'])}; "
                f"faster-coco-eval, equal to pycocotools); {nouns.a_sample} is found at {nouns.score} "
                f"{settings['iou_threshold']:.2f} or more")
    figures = headline(nouns)
    shown = [name for name in figures if name in evaluation["summary"]]
    for cell, name in zip(st.columns(len(shown)), shown):
        value = evaluation["summary"][name]
        title, meaning = figures[name]
        cell.metric(title, "none to find" if value < 0 else f"{value:.3f}",  # COCO's -1: no object of that kind
                    help=meaning if value >= 0 else f"{meaning}: the split holds no {nouns.samples} to find")
    _other_imports(project, model, split, evaluation, nouns)
    matrix, breakdown = object_figures(project, model, split)  # over every object: kept between runs
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**AP per class**")
        st.dataframe(evaluation["per_class"].rename(columns={"objects": nouns.samples}), hide_index=True,
                     width="stretch",
                     column_config={"AP": st.column_config.NumberColumn(format="%.3f"),
                                    "AP50": st.column_config.NumberColumn(format="%.3f")})
        # One chart per kind of failure: a missed person's keypoint error types and box error types are not one
        # axis, and false positives are measured apart from the true samples. A kind some found samples have too (an
        # object outlined badly) counts them beside the missed.
        charts = []
        for group in task.error_groups:
            typed = breakdown.loc[list(group.types)]
            whose = f"missed {nouns.samples}" + (f" and {nouns.samples} found" if typed["found objects"].any() else "")
            charts.append((f"**{whose.capitalize()} by {group.title}**",
                           typed["missed objects"] + typed["found objects"], "#ea8c00"))
        charts.append(("**False positives by error type** (TIDE; measured apart)", breakdown["false positives"],
                       "#dc2626"))
        for number, (title, counts, colour) in enumerate(charts):
            st.markdown(title)
            counts = counts[counts > 0]
            if counts.empty:
                st.caption("None.")
                continue
            st.plotly_chart(error_type_figure(counts, "count", colour), width="stretch",
                            key=f"overview_error_types_{number}")
    with right:
        _confusion(project, model, matrix, samples, split, nouns)
    if evaluation.get("fixes") is not None:
        _fixes(evaluation, samples, split, settings, task)


def _other_imports(project, model: str, split: str, evaluation: dict, nouns) -> None:
    """Where the split came in several imports, each evaluated by COCO on its own: say that the figures above are one
    import's, and show every import's."""
    per_import = project.evaluations_per_import(model, split)
    if len(per_import) < 2:
        return
    aps = per_import["AP"][per_import["AP"] >= 0]
    spread = f": {nouns.ap} {aps.min():.3f} to {aps.max():.3f}" if len(aps) else ""
    newest = evaluation["import_id"]
    st.caption(f"The {split} split came in {len(per_import)} imports and COCO evaluated each on its own (an AP is not "
               f"a sum of parts){spread}. The figures above and the AP per class are import #{newest}'s; the error "
               f"types and the confusion matrix count every import's {nouns.samples}.")
    with st.expander(f"COCO evaluation of each import ({len(per_import)})"):
        titles = {name: title for name, (title, _) in headline(nouns).items()}
        shown = [c for c in ("import", "splits", "objects", *titles) if c in per_import.columns]
        st.dataframe(per_import[shown].rename(columns={"objects": nouns.samples, **titles}), hide_index=True,
                     width="stretch", key="overview_coco_per_import")


def _fixes(evaluation: dict, samples: pd.DataFrame, split: str, settings: dict, task) -> None:
    """The AP each error type costs (its errors fixed as TIDE's oracles fix them, the AP computed again); a pose
    model's also per keypoint."""
    left, right = st.columns([2, 3])
    with left:
        st.markdown(f"**AP if each error type were fixed** ({' and '.join(g.source for g in task.error_groups)}'s "
                    "types; each error of a type corrected as TIDE's oracles correct it, the AP computed again)")
        st.dataframe(evaluation["fixes"], hide_index=True, width="stretch", key="overview_fixes",
                     column_config={"AP if fixed": st.column_config.NumberColumn(format="%.3f"),
                                    "AP gain": st.column_config.NumberColumn(format="%+.3f")})
    if "keypoint_names" not in settings:
        return
    with right:
        evaluated = evaluated_objects(samples, split)
        people = evaluated[evaluated["object_kind"] == "object"]
        table = keypoint_table(people, settings["keypoint_names"])
        st.markdown("**Per keypoint** (people a prediction went with; shares of the labelled keypoints)")
        st.dataframe(table, hide_index=True, width="stretch", key="overview_keypoint_table",
                     column_config={c: st.column_config.NumberColumn(format="%.2f") for c in table.columns[2:]})


def _confusion(project, model: str, matrix: pd.DataFrame, samples: pd.DataFrame, split: str, nouns) -> None:
    st.markdown("**Confusion matrix** (rows: true class, columns: predicted; "
                f"select a cell to see its {nouns.samples})")
    if matrix.empty:
        st.caption(f"No {nouns.samples} in this split.")
        return
    shown = matrix.copy()
    shown.index = literal_values(shown.index.to_series())
    shown.columns = literal_values(shown.columns.to_series())
    event = st.dataframe(shown, width="stretch", on_select="rerun", selection_mode="single-cell",
                         key="overview_object_confusion")
    st.caption(f"(background): false positives no {nouns.sample} is confused by (on nothing, duplicates, misplaced "
               f"detections); (missed): {nouns.samples} not found at the threshold (their crops say why: missed, or a "
               f"detection that came close). A false positive that names another class on {nouns.a_sample} counts "
               f"once, in that {nouns.sample}'s row.")
    cells = event.selection.get("cells", []) if event is not None else []
    if not cells:
        return
    row, column = cells[0]
    true, predicted = matrix.index[row], matrix.columns[list(shown.columns).index(column)]
    chosen = confusion_cell(project, model, split, true, predicted)
    st.markdown(f"**{nouns.count(len(chosen))}**: true {plain(true)}, predicted {plain(predicted)}")
    image_grid(project, samples.loc[chosen[:24]], columns=6, caption=lambda r: f"{r['outcome']}"  # a missed one: once
               + (f" ({r['error_type']})" if r["error_type"] and r["error_type"] != r["outcome"] else ""),
               details="overview_confusion")


def another_model(project, split: str, user: str) -> None:
    """For editors: another model's COCO results on the split, matched against the project's own ground truth as its
    models were, added beside them (to compare on the Compare page)."""
    from hibug_core.safe_files import folder_within, write_new
    from hibug_core.tasks.object_results import add_results
    from hibug_core.values import normalise_name
    from hibug_ui.comparisons import compare_ahead
    from hibug_ui.visitor import may_edit

    if not may_edit(project):
        return
    nouns = task_of(project).nouns
    with st.expander(f"Add another model's results on {split}", icon=":material/upload_file:"):
        fields = {"box": "bbox", "keypoints": "keypoints", "mask": "segmentation (its mask)"}
        drawn = ", ".join(fields[shape] for shape in task_of(project).shapes[::-1] if shape in fields)
        st.caption(f"A COCO results file of the same {split} images (a list of detections with image_id, category_id, "
                   f"score and {drawn}): matched against this "
                   f"project's ground truth exactly as its models were; its false positives become {nouns.samples} of "
                   "their own. Then compare the two on the Compare page.")
        with st.form("another_model_form"):
            name = st.text_input("Model name", key="another_model_name", placeholder="detector-v2")
            upload = st.file_uploader("Results file", type=["json"], key="another_model_file")
            if not st.form_submit_button("Add the model", type="primary", key="another_model_submit"):
                return
        try:
            if upload is None:
                raise HibugError("choose the model's COCO results file to upload")
            name = normalise_name(name, "the model's name")
            folder = folder_within(project.folder, project.folder / "results")  # never through a link
            kept = folder / f"{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}-{split}.json"
            arriving = write_new(folder / f".{uuid.uuid4().hex}.part", upload.getvalue())  # kept with the project
            # once added: where its outputs came from
            try:
                with st.spinner("Matching the results against the ground truth…"):
                    add_results(project, name, arriving, split, author=user)
                arriving.replace(kept)
            finally:
                arriving.unlink(missing_ok=True)
        except HibugError as error:
            st.error(plain(error))
            return
        evaluation = project.object_evaluation(name, split)
        ahead = compare_ahead(project, user)  # a big project's comparison made now, not when Compare is opened
        st.success(f"Added {plain(name)}: AP {evaluation['summary']['AP']:.3f} on {split}. Compare it with the others "
                   "on the Compare page" + (f" (job {ahead} is comparing the first two models for it now)."
                                            if ahead is not None else "."), icon=":material/check:")
