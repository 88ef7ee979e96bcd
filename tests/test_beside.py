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

@pytest.mark.parametrize("layout,room", [
    ({"self/cgroup": "0::/box\n", "fs/box/memory.max": "6442450944\n", "fs/box/memory.current": "2147483648\n"},
     4 << 30),  # cgroup v2: a container's limit, less its use
    ({"self/cgroup": "0::/\n", "fs/memory.max": "max\n", "fs/memory.current": "2147483648\n"}, 16 << 30),
    ({"self/cgroup": "4:memory:/jobs/7\n3:cpu:/\n", "fs/memory/jobs/7/memory.limit_in_bytes": "3221225472\n",
      "fs/memory/jobs/7/memory.usage_in_bytes": "1073741824\n"}, 2 << 30),  # cgroup v1
    ({"self/cgroup": "4:memory:/x\n", "fs/memory/memory.limit_in_bytes": "9223372036854771712\n",
      "fs/memory/memory.usage_in_bytes": "5\n"}, 16 << 30),  # v1's "no limit", at the root a container sees
    ({}, 16 << 30),  # no control group file: the machine's figure
])
def test_the_memory_available_is_the_machines_or_less_where_a_container_limits_it(tmp_path, layout, room):
    from hibug_core.beside import available_bytes

    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 33554432 kB\nMemAvailable: 16777216 kB\n")
    for name, text in layout.items():
        path = tmp_path / ("proc/" + name if name.startswith("self/") else name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert available_bytes(tmp_path / "proc", tmp_path / "fs") == room

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
        def __init__(self, job, **options):
            super().__init__(job, **options)
            started.append(self._future is not None)

    monkeypatch.setattr(object_import, "MEASURED_BESIDE_FROM", 0)
    monkeypatch.setattr(object_import, "Beside", Watched)
    beside = load_coco(truth_file, paths, **options)
    assert started[0] and not any(started[1:])  # measured in a worker; its few images and one model checked here
    assert beside.task == here.task and beside.known_tags == here.known_tags
    assert any(name in here.known_tags for name in ("is holed", "facing"))  # the task's own measures are there
