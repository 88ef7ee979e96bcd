"""Running jobs in their own process: `submit` starts `python -m hibug_core.jobs.worker PROJECT JOB`, which runs the
job's kind with a progress callback that stores progress (throttled), beats a heartbeat and honours cancel."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from hibug_core.access import Role, current_reach, require
from hibug_core.errors import HibugError
from hibug_core.jobs.queue import JobQueue
from hibug_core.jobs.store import JobCancelled, create_job, finish_job, get_job, mark_running, report_progress
from hibug_core.safe_files import folder_within, open_for_append
from hibug_core.store.audit import author_name
from hibug_core.store.db import checked_environment, trust_checked_databases

logger = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
REPORT_EVERY_S = 0.5
LOG_DIR = "jobs"


def _checked(project, op) -> dict:
    """The parameters of a long operation (one a job may run), checked against what the project's task can do, with
    every default filled in."""
    from hibug_core.jobs.kinds import job_operation
    from hibug_core.tasks import task_of

    job_operation(op.kind)  # only long operations run as jobs; any other is refused here, in the caller
    op.check_task(task_of(project))
    op.check_data(project)  # an empty pool is said here, not by a job that fails at once
    return op.params()


def submit(project, op, *, author: str | None = None, resumed_from: int | None = None,
           secrets: dict[str, str] | None = None, queue: JobQueue | None = None) -> int:
    """Start a built operation (hibug_core.operations; a long one) as a job in a new process (it outlives the page,
    the session and the tab); returns its id.

    secrets: environment variables for the job's process only (an API key from Streamlit secrets); they are never
    stored with the job or written to its log. queue: a server's queue, which admits the job (or refuses it with
    ServerBusy) and gives it a slot; its process waits for that slot, and runs at a lower priority than the server."""
    require(Role.EDITOR, "start a job")
    params = _checked(project, op)  # a refusal fails here, in the caller, not in a process nobody watches
    author = author_name(author)
    ticket = queue.admit(author, project.folder) if queue is not None else None
    try:
        job_id = create_job(project, op.kind, params, author=author, resumed_from=resumed_from)
        log_dir = folder_within(project.folder, Path(project.folder) / LOG_DIR)  # never through a link
        reach = current_reach()  # a job typed on a shared dashboard reaches what its starter may, and no more
        environment = {**os.environ, **(secrets or {}), **(queue.worker_environment(ticket) if queue else {}),
                       **(reach.with_roots(project.folder).to_environment() if reach is not None else {}),
                       **checked_environment()}
        with open_for_append(log_dir / f"job-{job_id}.log") as log:
            process = subprocess.Popen([sys.executable, "-m", "hibug_core.jobs.worker", str(project.folder),
                                        str(job_id)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, cwd=str(project.folder), env=environment)
    except BaseException:
        if ticket is not None:
            queue.release(ticket)
        raise
    if ticket is not None:
        queue.attach(ticket, job_id, process.pid)
    return job_id


def resume(project, job_id: int, *, author: str | None = None, queue: JobQueue | None = None) -> int:
    """Run a stopped (cancelled, failed or interrupted) job again with the same settings. Work it stored is reused:
    embeddings and measures are cached per image, and LLM tagging asks only for the images it has no answer for."""
    job = get_job(project, job_id)
    if job.live:
        raise HibugError(f"job {job_id} is still {job.status}; cancel it first")
    from hibug_core.jobs.kinds import job_operation

    return submit(project, job_operation(job.kind).build(job.params), author=author, resumed_from=job_id, queue=queue)


class _Reporter:
    """The progress callback handed to a job: stores progress at most every REPORT_EVERY_S, raises JobCancelled."""

    def __init__(self, project, job_id: int):
        self.project, self.job_id = project, job_id
        self.last = 0.0
        self.lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        moment = time.monotonic()
        if moment - self.last < REPORT_EVERY_S and done < total:
            return
        self.last = moment
        with self.lock:
            cancel = report_progress(self.project, self.job_id, stage, done, total)
        if cancel:
            raise JobCancelled("cancelled by request")

    def beat(self, stop: threading.Event) -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                with self.lock:
                    job = get_job(self.project, self.job_id)
                    report_progress(self.project, self.job_id, None, job.done, job.total)
            except Exception:
                logger.exception("heartbeat of job %d failed", self.job_id)


def _wait_in_queue(project, job_id: int) -> Callable[[], None]:
    """Wait for this job's slot in its server's queue (cancel honoured meanwhile); returns what gives it back."""
    queued = JobQueue.from_worker_environment()
    if queued is None:
        return lambda: None
    queue, ticket = queued

    def waiting(ahead: int) -> None:
        if report_progress(project, job_id, f"waiting for a free slot ({ahead} ahead)", 0, 0):
            raise JobCancelled("cancelled while waiting for a free slot")

    queue.wait_for_slot(ticket, waiting)
    return lambda: queue.release(ticket)


def run_job(project, job_id: int) -> None:
    """Run one queued job in this process (after its server's queue gave it a slot) and record how it ended."""
    job = get_job(project, job_id)
    try:
        release = _wait_in_queue(project, job_id)
    except JobCancelled:
        finish_job(project, job_id, "cancelled", message="cancelled before it started")
        return
    try:
        _run(project, job, release)
    finally:
        release()  # also when the process is interrupted (giving a slot back twice is harmless)


def _run(project, job, release: Callable[[], None]) -> None:
    job_id = job.id
    mark_running(project, job_id, os.getpid())
    reporter = _Reporter(project, job_id)
    stop = threading.Event()
    heartbeat = threading.Thread(target=reporter.beat, args=(stop,), daemon=True)
    heartbeat.start()
    try:
        from hibug_core.jobs.kinds import run_kind  # the operations and their libraries: after step_aside

        result = run_kind(project, job.kind, job.params, reporter, author=job.author)
        ending = ("done", {"result": result})
    except JobCancelled:
        ending = ("cancelled", {"message": "cancelled; what was stored is kept, resume to finish"})
    except HibugError as error:
        ending = ("failed", {"error": str(error)})
    except Exception as error:  # noqa: BLE001 (the job's log keeps the traceback; the row says what happened)
        traceback.print_exc()
        ending = ("failed", {"error": f"{type(error).__name__}: {error} (see jobs/job-{job_id}.log)"})
    finally:
        stop.set()
    release()  # the slot is free before anyone can see the job ended: an ended job never holds one
    finish_job(project, job_id, ending[0], **ending[1])


def step_aside() -> None:
    """A job started from a dashboard runs only on the CPU time its pages leave over (Linux's idle scheduling class;
    elsewhere the lowest priority), from before it imports its libraries: the pages stay quick while jobs run."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def main(argv: list[str] | None = None) -> int:
    queued = JobQueue.from_worker_environment()
    if queued is not None and queued[0].step_aside:
        step_aside()
    from hibug_core.jobs.kinds import load_extensions
    from hibug_core.store.project import Project

    load_extensions()
    trust_checked_databases()  # checked whole by the process that started this job
    folder, job_id = (argv or sys.argv[1:])[:2]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with Project.open(folder) as project:
        run_job(project, int(job_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
