"""Job kinds for the job tests (run in the worker process by 'job_helpers:<name>')."""
from __future__ import annotations

import time

from hibug_core.errors import HibugError


def count_slowly(project, params, progress):
    for i in range(params.get("steps", 400) + 1):
        progress("counting", i, params.get("steps", 400))
        time.sleep(params.get("pause", 0.05))
    return {"counted": params.get("steps", 400), "author": params["author"]}


def fail_clearly(project, params, progress):
    progress("starting", 0, 1)
    raise HibugError("the model server at http://127.0.0.1:9 refused the connection; start it and resume")
