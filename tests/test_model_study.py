"""Models of other capacities added to a demo (hibug_core.demo.study): trained on the demo's own training data, loaded
back at their width, run and matched as the demo's model, and compared with it (HiBug2's error-slice counts, the
overlap of the worst slices, the failure IoU)."""
from __future__ import annotations

import shutil

import pytest

from hibug_core.demo.study import StudyConfig, StudyError, add_study_models
from hibug_core.slices.compare import compare_models
from hibug_core.slices.search import SliceConfig
from hibug_core.store.project import Project


def test_a_narrower_shape_cnn_is_trained_added_and_compared(demo_copy):
    with Project.open(demo_copy) as project:
        assert add_study_models(project, "classification", StudyConfig(widths=(4,), epochs=2)) == ["shape-cnn-w4"]
        # a second call keeps the model it added
        assert add_study_models(project, "classification", StudyConfig(widths=(4,), epochs=2)) == ["shape-cnn-w4"]
        samples = project.samples("shape-cnn-w4")
        assert samples["prediction"].notna().all() and len(samples) == len(project.samples("shape-cnn"))
        comparison = compare_models(project, ["shape-cnn", "shape-cnn-w4"], slices=SliceConfig(max_depth=2))
    from hibug_core.models.registry import load_model

    network = load_model("shape-cnn:models/shape-cnn-w4.pt", root=demo_copy).network
    assert network[0].out_channels == 4 and network[-1].in_features == 16
    counts = comparison.overall.set_index("model")["error_slices"]
    assert counts.dtype.kind == "i" and (counts >= 0).all()
    pair = comparison.failure_iou.iloc[0]
    assert 0 < pair["iou"] <= 1 and pair["failures_b"] > pair["failures_a"]  # two epochs: more failures


def test_a_study_refuses_unknown_demos_and_bad_widths(demo_copy):
    with pytest.raises(ValueError, match="widths"):
        StudyConfig(widths=(2,))
    with pytest.raises(ValueError, match="epochs"):
        StudyConfig(widths=(8,), epochs=0)
    with Project.open(demo_copy) as project, pytest.raises(StudyError, match="no model study for the 'segmentation'"):
        add_study_models(project, "segmentation", StudyConfig(widths=(8,)))


@pytest.mark.slow
def test_a_narrower_detector_is_recorded_run_and_matched(detection_demo, tmp_path):
    folder = tmp_path / "demo"
    shutil.copytree(detection_demo, folder)
    with Project.open(folder) as project:
        assert add_study_models(project, "detection", StudyConfig(widths=(8,), epochs=1)) == ["shape-fcos-w8"]
        from hibug_core.tasks.object_repair import object_model

        runner, recorded = object_model(project, "shape-fcos-w8")
        assert runner.config.width == 8 and recorded.training == object_model(project, "shape-fcos")[1].training
        evaluation = project.object_evaluation("shape-fcos-w8", "val")
        assert 0 <= evaluation["summary"]["AP"] < project.object_evaluation("shape-fcos", "val")["summary"]["AP"]
        comparison = compare_models(project, ["shape-fcos", "shape-fcos-w8"])
    assert len(comparison.evaluation) == 2096  # the val objects both are matched against
