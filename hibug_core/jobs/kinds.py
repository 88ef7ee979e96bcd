"""What the dashboard runs as background jobs: the long operations (Operation.background), each run by its own
Operation.run with a progress callback; what it returns is stored as the job's result."""
from __future__ import annotations

import importlib
import os

from hibug_core.errors import HibugError
from hibug_core.operations import Operation, background_kinds, operation

EXTENSIONS_ENV = "HIBUG_JOB_MODULES"  # comma-separated modules that register more operations (read by the worker)


class UnknownJobKind(HibugError):
    """A job names no long operation: only those run as jobs (a job row never names code)."""


def job_operation(kind: str) -> type[Operation]:
    """The long operation a job kind names; UnknownJobKind for anything else."""
    if kind not in background_kinds():
        raise UnknownJobKind(f"unknown job kind '{kind}'; known: {', '.join(background_kinds())}")
    return operation(kind)


def load_extensions() -> None:
    """Import the modules named in HIBUG_JOB_MODULES, which register their own operations (register_operation). The
    jobs table only names a kind: a worker never imports what a row names."""
    for name in filter(None, (part.strip() for part in os.environ.get(EXTENSIONS_ENV, "").split(","))):
        importlib.import_module(name)


def run_operation(project, op: Operation, progress, author: str | None = None) -> dict:
    """Run a built operation (Operation.execute: its task's refusal first); what a job stores of its result."""
    return op.execute(project, progress=progress, author=author).stored()


def run_kind(project, kind: str, params: dict, progress, author: str | None = None) -> dict:
    """Validate `params` as the kind's operation, then run it (what the worker does with a stored job)."""
    return run_operation(project, job_operation(kind).build(params), progress, author)
