"""Long operations for the job tests, registered when this module is imported (the worker imports it through
HIBUG_JOB_MODULES, as an extension would)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import ClassVar

from hibug_core.errors import HibugError
from hibug_core.jobs.kinds import EXTENSIONS_ENV, load_extensions
from hibug_core.jobs.store import get_job
from hibug_core.operations import Operation, Result, register_operation

from waiting import wait_until

TESTS = str(Path(__file__).resolve().parent)


def register_in_workers(monkeypatch) -> None:
    """The test kinds are registered here and, through HIBUG_JOB_MODULES, in every worker started from now on."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv(EXTENSIONS_ENV, "job_helpers")
    monkeypatch.syspath_prepend(TESTS)
    load_extensions()


def job_op(kind: str, params: dict | None = None):
    """The long operation a job kind names, built from `params` (what submit takes)."""
    from hibug_core.jobs.kinds import job_operation

    return job_operation(kind).build(params or {})


def wait_for(project, job_id, statuses, timeout=120.0):
    """The job once its status is one of `statuses` (its log is shown when it never gets there)."""
    def reached():
        job = get_job(project, job_id)
        return job if job.status in statuses else None

    return wait_until(reached, timeout, what=lambda: f"job {job_id} to be {statuses}; its log: " + (
        Path(project.folder) / "jobs" / f"job-{job_id}.log").read_text()[-2000:])


@register_operation
class CountSlowly(Operation):
    kind: ClassVar[str] = "count slowly"
    summary: ClassVar[str] = "count, pausing between steps (tests)"
    background: ClassVar[bool] = True
    steps: int = 400
    pause: float = 0.05

    def run(self, project, *, progress, author=None) -> Result:
        for i in range(self.steps + 1):
            progress("counting", i, self.steps)
            time.sleep(self.pause)
        return Result("", {"counted": self.steps, "author": author})


@register_operation
class FailClearly(Operation):
    kind: ClassVar[str] = "fail clearly"
    summary: ClassVar[str] = "fail with a clear message (tests)"
    background: ClassVar[bool] = True

    def run(self, project, *, progress, author=None) -> Result:
        progress("starting", 0, 1)
        raise HibugError("the model server at http://127.0.0.1:9 refused the connection; start it and resume")


def leave_a_mark(project, params, progress):
    """Never registered: a job row naming it must not run it."""
    (project.folder / "MARK").write_text("ran")
    return {}
