"""Slice reports kept beside the database: a new process reads the same report, a change or damage computes it again."""
from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest

from hibug_core.slices import report_files
from hibug_core.slices.report import ENUMERATIONS, error_slices
from hibug_core.slices.report_files import kept_error_slices
from hibug_core.slices.search import SliceConfig
from hibug_core.store.project import IMPORT_TABLES, Project
from hibug_core.tasks import load_manifest


def new_process(folder, **options) -> Project:
    """The project as a new process sees it: nothing of it in memory."""
    ENUMERATIONS.clear()
    IMPORT_TABLES.clear()
    return Project.open(folder, **options)


def assert_same_report(kept, computed) -> None:
    pd.testing.assert_frame_equal(kept.slices, computed.slices)
    assert kept.slices.attrs == computed.slices.attrs
    for name in ("rare_classes", "evaluation", "samples", "all_tags"):
        pd.testing.assert_frame_equal(getattr(kept, name), getattr(computed, name))
    assert (kept.model, kept.split, kept.overall_score, kept.enumerated, kept.config, kept.model_column) == \
        (computed.model, computed.split, computed.overall_score, computed.enumerated, computed.config,
         computed.model_column)
    assert kept.tags.attributes == computed.tags.attributes and kept.tags.tags == computed.tags.tags
    np.testing.assert_array_equal(kept.tags.codes, computed.tags.codes)
    np.testing.assert_array_equal(kept.tags.sample_ids, computed.tags.sample_ids)
    one, other = kept.enumeration, computed.enumeration
    assert len(one.levels) == len(other.levels)
    for mine, theirs in zip(one.levels, other.levels):
        for field in dataclasses.fields(mine):
            np.testing.assert_array_equal(getattr(mine, field.name), getattr(theirs, field.name), strict=True)
    for name in ("feature_attribute", "feature_tag", "total_errors"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name), strict=True)
    assert (one.n_rows, one.min_support, one.candidates) == (other.n_rows, other.min_support, other.candidates)
    pd.testing.assert_frame_equal(kept.every_slice(), computed.every_slice())


def test_a_new_process_reads_the_kept_report_equal_to_a_computed_one(demo_copy, monkeypatch):
    config = SliceConfig(max_depth=2)
    with Project.open(demo_copy) as project:
        model = project.models()[0]
        first = kept_error_slices(project, model, config=config)
    assert {p.name.rsplit("-", 1)[-1] for p in (demo_copy / "columns").glob("slice-report-*")} == {
        "levels.arrow", "rare.arrow", "slices.arrow", "summary.arrow"}
    with new_process(demo_copy) as project:
        computed = error_slices(project, model, config=config)
        with monkeypatch.context() as patched:  # nothing is computed again
            patched.setattr(report_files, "error_slices", lambda *args, **kwargs: pytest.fail("computed again"))
            kept = kept_error_slices(project, model, config=config)
    assert_same_report(first, computed)
    assert_same_report(kept, computed)
    assert kept.slices["definition"].iat[0] == computed.slices["definition"].iat[0] and \
        isinstance(kept.slices["definition"].iat[0][0], tuple)
    assert list(kept.sample_ids(kept.slices["slice_id"].iat[0])) == \
        list(computed.sample_ids(computed.slices["slice_id"].iat[0]))


def test_other_settings_or_a_change_compute_the_report_again(slice_project):
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs["config"])
        return error_slices(*args, **kwargs)

    folder = slice_project.folder
    slice_project.close()
    with new_process(folder) as project, pytest.MonkeyPatch.context() as patched:
        patched.setattr(report_files, "error_slices", counted)
        before = kept_error_slices(project, "model", config=SliceConfig(max_depth=1))
        kept_error_slices(project, "model", config=SliceConfig(max_depth=1))
        assert len(calls) == 1
        kept_error_slices(project, "model", config=SliceConfig(max_depth=1, gap=0.2))  # other settings
        assert len(calls) == 2
        more = folder.parent / "more.csv"  # a second import: five more validation images
        pd.DataFrame({"id": [f"n-{i}" for i in range(5)], "image": "x.png", "label": "a", "split": "val",
                      "prediction": "a", "attr:color": "green", "attr:shape": "circle"}).to_csv(more, index=False)
        project.import_manifest(load_manifest(more))
        after = kept_error_slices(project, "model", config=SliceConfig(max_depth=1))
        assert len(calls) == 3
    assert len(after.evaluation) == len(before.evaluation) + 5


def test_a_damaged_report_file_is_computed_again_and_rewritten(slice_project, caplog):
    folder = slice_project.folder
    first = kept_error_slices(slice_project, "model")
    slice_project.close()
    damaged = next((folder / "columns").glob("slice-report-*-slices.arrow"))
    damaged.write_bytes(b"ARROW1 cut short")
    with new_process(folder) as project, caplog.at_level("WARNING"):
        assert_same_report(kept_error_slices(project, "model"), first)
    assert "cannot be read" in caplog.text
    with new_process(folder) as project, pytest.MonkeyPatch.context() as patched:
        patched.setattr(report_files, "error_slices", lambda *args, **kwargs: pytest.fail("computed again"))
        assert_same_report(kept_error_slices(project, "model"), first)


def test_only_the_newest_reports_are_kept_and_a_read_only_project_keeps_none(slice_project, monkeypatch):
    monkeypatch.setattr(report_files, "KEPT_REPORTS", 2)
    folder = slice_project.folder
    for gap in (0.1, 0.2, 0.3):
        kept_error_slices(slice_project, "model", config=SliceConfig(gap=gap))
    reports = {p.name.split("-")[2] for p in (folder / "columns").glob("slice-report-*.arrow")}
    assert len(reports) == 2 and len(list((folder / "columns").glob("slice-tags-*.arrow"))) == 1
    slice_project.close()
    shutil.rmtree(folder / "columns")
    with new_process(folder, read_only=True) as project:
        report = kept_error_slices(project, "model")
        assert "color = blue" in report.slices["description"].tolist()
    assert not (folder / "columns").exists()


def test_false_positives_measured_apart_are_kept_and_read_back_whole(detection_demo, tmp_path, monkeypatch):
    from hibug_core.slices.false_positives import false_positive_slices
    from hibug_core.slices.report_files import kept_false_positives

    folder = tmp_path / "detection"
    shutil.copytree(detection_demo, folder)
    for kept in folder.glob("columns/false-positives-*"):  # what the session's pages kept in the shared demo
        kept.unlink()
    config = SliceConfig(max_depth=2)
    with Project.open(folder) as project:
        model = project.models()[0]
        computed = false_positive_slices(project, model, config=config)
        first = kept_false_positives(project, model, config=config)
    assert len(computed.slices) and computed.false  # the demo's false positives gather in slices
    assert len(list((folder / "columns").glob("false-positives-*-slices.arrow"))) == 1
    with new_process(folder) as project, monkeypatch.context() as patched:  # nothing is computed again
        patched.setattr(report_files, "false_positive_slices", lambda *a, **k: pytest.fail("computed again"))
        kept = kept_false_positives(project, model, config=config)
    for found in (first, kept):
        assert (found.model, found.split, found.detections, found.false) == \
            (computed.model, computed.split, computed.detections, computed.false)
        pd.testing.assert_frame_equal(found.slices.reset_index(drop=True), computed.slices.reset_index(drop=True))
    assert kept.headline() == computed.headline()
    assert isinstance(kept.slices["definition"].iat[0][0], tuple)
    calls = []
    with new_process(folder) as project, monkeypatch.context() as patched:  # other settings: computed
        patched.setattr(report_files, "false_positive_slices",
                        lambda *a, **k: calls.append(k["config"]) or false_positive_slices(*a, **k))
        kept_false_positives(project, model, config=SliceConfig(max_depth=1))
    assert calls == [SliceConfig(max_depth=1)]
    shutil.rmtree(folder / "columns")
    with new_process(folder, read_only=True) as project:  # a read-only project computes and writes nothing
        assert kept_false_positives(project, model, config=config).false == computed.false
    assert not list(folder.glob("columns/false-positives-*"))
