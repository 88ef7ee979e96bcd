"""Job kinds for the job tests, registered when this module is imported (the worker imports it through
HIBUG_JOB_MODULES, as an extension would)."""
from __future__ import annotations

import time
from typing import ClassVar

from hibug_core.errors import HibugError
from hibug_core.jobs.kinds import job_kind
from hibug_core.operations import Operation


class CountSlowly(Operation):
    kind: ClassVar[str] = "count slowly"
    summary: ClassVar[str] = "count, pausing between steps (tests)"
    steps: int = 400
    pause: float = 0.05


class FailClearly(Operation):
    kind: ClassVar[str] = "fail clearly"
    summary: ClassVar[str] = "fail with a clear message (tests)"


@job_kind(CountSlowly)
def count_slowly(project, op: CountSlowly, progress, author=None):
    for i in range(op.steps + 1):
        progress("counting", i, op.steps)
        time.sleep(op.pause)
    return {"counted": op.steps, "author": author}


@job_kind(FailClearly)
def fail_clearly(project, op: FailClearly, progress, author=None):
    progress("starting", 0, 1)
    raise HibugError("the model server at http://127.0.0.1:9 refused the connection; start it and resume")


def leave_a_mark(project, params, progress):
    """Never registered: a job row naming it must not run it."""
    (project.folder / "MARK").write_text("ran")
    return {}
