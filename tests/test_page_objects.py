"""The dashboard on the detection demo under AppTest: the Overview's COCO evaluation, error types and confusion
matrix whose cells open their objects, and an error slice of objects with its error-type mix and crops."""
from __future__ import annotations

from page_support import bars, charts, open_page


def test_overview_shows_coco_ap_error_types_and_the_confusion_of_objects(monkeypatch, detection_demo):
    at = open_page(monkeypatch, "app.py", detection_demo)
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # the 12,667 ground-truth objects of the three labelled splits; the detector's false positives (at confidence
    # >= 0.5) and its 17,863 detections in the unlabelled pool counted apart
    assert metrics["Objects"] == "12,667" and metrics["pool detections"] == "17,863"
    assert any(c.value.startswith("Beside them, the models' ") and "and 17,863 detections in unlabelled images are "
               "samples too, counted apart." in c.value for c in at.caption)
    assert float(metrics["AP50"]) > 0.6 and float(metrics["AP"]) > 0.4
    assert any("COCO evaluation** of import #2 (val" in m.value for m in at.markdown)
    per_class, confusion = at.dataframe[0].value, at.dataframe[1].value
    assert per_class["class"].tolist() == ["circle", "rectangle", "triangle"]
    assert list(confusion.index) == ["circle", "rectangle", "triangle", "(background)"]
    assert list(confusion.columns) == ["circle", "rectangle", "triangle", "(missed)"]
    assert confusion.to_numpy()[:3].sum() == 2096  # every ground-truth object of val, once
    # Selecting a cell lists its objects: the missed triangles.
    at.session_state["overview_object_confusion"] = {"selection": {"rows": [], "columns": [],
                                                                   "cells": [[2, "(missed)"]]}}
    at.run()
    assert not at.exception
    missed_triangles = int(confusion.loc["triangle", "(missed)"])
    assert any(m.value.startswith(f"**{missed_triangles:,} objects**: true triangle, predicted \\(missed\\)")
               for m in at.markdown)
    assert any("the true box" in c.value for c in at.caption)  # the crops' legend


def test_an_error_slice_of_objects_shows_its_error_types_and_crops(monkeypatch, detection_demo):
    from hibug_core.slices.search import slice_id

    chosen = slice_id((("color", "green"), ("class", "triangle")))
    at = open_page(monkeypatch, "pages/4_Error_slices.py", detection_demo, slice=chosen)
    assert not at.exception
    apart = [e for e in at.expander if e.label.startswith("False positives, measured apart (")]
    assert len(apart) == 1 and apart[0].label.endswith("(134)")  # beside the slices, not in their baseline
    table = next(d.value for d in at.dataframe if "description" in d.value and "found an object" not in d.value)
    assert "color = green & class = triangle" in table["description"].tolist()  # the planted conjunction
    assert at.subheader[0].value == "color = green \\& class = triangle"  # Markdown-escaped
    assert any("its failures\\: missed 98%" in m.value for m in at.markdown)  # the planted bug: green triangles missed
    assert any("the true box" in c.value for c in at.caption)
    assert "**Its failures by box error type (TIDE)**" in [m.value for m in at.markdown]
    typed = bars(charts(at)[0])  # the slice's failures: true objects only, so no false positive's type
    assert typed["missed"] / sum(typed.values()) > 0.95 and "duplicate" not in typed and "background" not in typed
    assert len(at.get("image")) == 24  # the first page of its objects, as crops with their boxes


def test_a_pose_project_is_told_what_failure_search_cannot_do_and_its_details_say_oks(monkeypatch, pose_demo):
    from hibug_core.slices.search import slice_id

    at = open_page(monkeypatch, "pages/5_Repair.py", pose_demo, user="ana")
    assert not at.exception
    refusal = [i.value for i in at.info if "search for failures with generated images" in i.value]
    assert refusal and refusal[0].startswith("Hibug cannot search for failures with generated images for a project "
                                             "of people")
    assert not [b for b in at.button if b.key == "repair_search_submit"]  # no form to start what cannot run
    assert at.selectbox(key="repair_retrain_how").options == ["fine-tune"]
    at = open_page(monkeypatch, "pages/4_Error_slices.py", pose_demo, slice=slice_id((("facing", "back"),)))
    assert not at.exception
    # The people seen from behind fail by their keypoints (found, inverted), on a chart of their own; box error types
    # (people no prediction went with) on another.
    titles = [m.value for m in at.markdown if m.value.startswith("**Its failures by ")]
    assert titles[0] == "**Its failures by keypoint error type (Ronchi and Perona)**"
    typed = [bars(figure) for figure in charts(at)[:len(titles)]]
    assert max(typed[0], key=typed[0].get) == "inversion" and set(typed[0]) <= {"jitter", "inversion", "swap", "miss"}
    assert titles[1:] in ([], ["**Its failures by box error type (TIDE)**"])
    assert all(set(t) <= {"classification", "localization", "both", "duplicate", "background", "missed"}
               for t in typed[1:])
    shown = [b for b in at.button if b.key and b.key.startswith("slice_detail_")]
    shown[0].click().run()
    assert not at.exception
    # The slice's first person was found with its sides mirrored: said so, not "missed", with its OKS
    outcome = next(m.value for m in at.markdown if m.value.startswith("**found, keypoints inverted**"))
    assert outcome.startswith("**found, keypoints inverted** (inversion error) · OKS 0.") and "IoU" not in outcome
    assert any(m.value.startswith("**label** person · **prediction** found, keypoints inverted") for m in at.markdown)
