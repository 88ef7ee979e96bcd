"""Repaired models are named once (repair.names) and grouped under the model they repair, in the picker and reports."""
from __future__ import annotations

from hibug_core.repair.names import families, grouped, parent_of, repair_label, repaired_name


def test_repaired_models_follow_their_parent_and_orphans_come_last():
    first = [repaired_name("cnn", 3, "hibug", s) for s in (0, 1)]
    other = repaired_name("vit", 4, "random", 0)
    orphan = repaired_name("gone", 1, "hibug2", 2)
    models = ["cnn", first[0], "vit", orphan, other, first[1]]
    assert first[0] == "cnn · repair 3 hibug s0" and parent_of(first[0]) == "cnn" and parent_of("cnn") is None
    assert repair_label(first[0]) == "repair 3 hibug s0" and repair_label("cnn") is None
    assert grouped(models) == ["cnn", *first, "vit", other, orphan]
    assert families(models) == {"cnn": first, "vit": [other], "gone": [orphan]}
    assert grouped([]) == [] and families(["a"]) == {"a": []}


def test_the_model_picker_lists_repairs_under_their_parent(monkeypatch, demo_project, tmp_path):
    import shutil

    import numpy as np

    from hibug_core.store.project import Project

    from page_support import open_page

    shutil.copytree(demo_project, tmp_path / "demo")
    with Project.open(tmp_path / "demo") as project:
        parent = project.models()[0]
        ids = project.samples().index.to_numpy()
        classes = project.model_classes(parent)
        project.add_predictions(repaired_name(parent, 7, "hibug", 0), ids,
                                np.full((len(ids), len(classes)), 1 / len(classes)), classes)
    at = open_page(monkeypatch, "app.py", tmp_path / "demo")
    assert not at.exception
    picker = at.sidebar.selectbox(key="hibug_model")
    assert picker.options == [parent, "   ↳ repair 7 hibug s0"] and picker.value == parent
