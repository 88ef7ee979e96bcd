"""A job run in a worker process beside the caller gives what it gives in the caller, errors included, and a large
import's true-shape measures made beside its matching equal those made in the process."""
from __future__ import annotations

import functools
import math

import pytest
from test_segmentation import _scene

from hibug_core.beside import Beside


@pytest.mark.parametrize("in_process", [True, False])
def test_a_job_gives_the_same_result_and_error_in_a_worker_as_in_the_caller(in_process):
    values = [0.1] * 10 + [1e16, 1.0, -1e16]
    with Beside(functools.partial(math.fsum, values), in_process=in_process) as job:
        assert job.result() == 2.0
    with Beside(functools.partial(int, "not a number"), in_process=in_process) as job, \
            pytest.raises(ValueError, match="invalid literal"):
        job.result()


def test_a_worker_let_go_unasked_leaves_nothing_running():
    with Beside(functools.partial(math.fsum, [1.0]), in_process=False) as job:
        pool = job._pool
    assert job._pool is None and pool._shutdown_thread


def test_a_job_runs_in_the_caller_where_the_machine_has_too_little_memory_for_it_beside(monkeypatch):
    from hibug_core import beside

    monkeypatch.setattr(beside, "available_bytes", lambda: 8 << 30)
    with Beside(functools.partial(math.fsum, [1.0, 2.0]), in_process=False, needs_bytes=9 << 30) as job:
        assert job._future is None and job.result() == 3.0  # in the caller, when asked
    with Beside(functools.partial(math.fsum, [1.0, 2.0]), in_process=False, needs_bytes=7 << 30) as job:
        assert job._future is not None and job.result() == 3.0
    monkeypatch.undo()
    free = beside.available_bytes()
    assert free is not None and 0 < free < 1 << 50

def _mask_files(folder):
    from test_objects import _write

    truth, results, _ = _scene()
    truth_file, paths = _write(folder, truth, {"m": results})
    return truth_file, paths, {}


def _people_files(folder):
    import json

    from PIL import Image
    from test_keypoint_errors import _coco_people

    from hibug_core.objects.matching import MatchConfig

    truth, results = _coco_people()
    folder.mkdir()
    for i in (1, 2, 3, 4):
        Image.new("RGB", (400, 300), (200, 200, 200)).save(folder / f"{i}.png")
    (folder / "people.json").write_text(json.dumps(truth.dataset))
    (folder / "m.json").write_text(json.dumps(results.records))
    return folder / "people.json", [folder / "m.json"], {"match_config": MatchConfig(keypoint_sigmas=(0.1,) * 5)}


@pytest.mark.parametrize("files", [_mask_files, _people_files], ids=["masks", "people"])
def test_true_shapes_measured_beside_the_matching_equal_those_measured_in_the_process(tmp_path, monkeypatch, files):
    from hibug_core.tasks import load_coco, object_import

    truth_file, paths, options = files(tmp_path / "data")
    here = load_coco(truth_file, paths, **options)
    started = []

    class Watched(Beside):
        def __init__(self, job, *, in_process):
            super().__init__(job, in_process=in_process)
            started.append(self._future is not None)

    monkeypatch.setattr(object_import, "MEASURED_BESIDE_FROM", 0)
    monkeypatch.setattr(object_import, "Beside", Watched)
    beside = load_coco(truth_file, paths, **options)
    assert started == [True]  # measured in a worker process
    assert beside.task == here.task and beside.known_tags == here.known_tags
    assert any(name in here.known_tags for name in ("is holed", "facing"))  # the task's own measures are there
