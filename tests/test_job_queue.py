"""A server's one job queue: a limit on jobs running at once over all its projects, on jobs waiting and on each
person's share; first come, first served; cancel while waiting; a dead worker's slot freed; and 20 visitors starting
jobs at once (hibug_core.jobs.queue)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time

import pytest

from hibug_core.access import Actor, Role, acting_as
from hibug_core.errors import ConfigError
from hibug_core.jobs.queue import JobQueue, QueueLimits, ServerBusy
from hibug_core.jobs.store import get_job, request_cancel
from hibug_core.jobs.worker import submit

from job_helpers import job_op, register_in_workers, wait_for


@pytest.fixture(autouse=True)
def helpers_importable(monkeypatch):
    register_in_workers(monkeypatch)


def test_limits_are_ints_checked_when_built():
    with pytest.raises(ConfigError, match="max_running = 0 .must be an int of at least 1"):
        QueueLimits(max_running=0)
    with pytest.raises(ConfigError, match="max_per_person = 1.5"):
        QueueLimits(max_per_person=1.5)


def test_admission_holds_each_persons_share_and_the_waiting_limit(tmp_path):
    queue = JobQueue(tmp_path, QueueLimits(max_running=1, max_waiting=2, max_per_person=2))
    tickets = [queue.admit("ann", "p1"), queue.admit("ann", "p2")]
    with pytest.raises(ServerBusy, match="you have 2 job"):
        queue.admit("ann", "p3")
    assert queue.take_slot(tickets[0]) is None  # ann's first runs
    tickets.append(queue.admit("bob", "p1"))  # waiting: ann's second and bob's
    with pytest.raises(ServerBusy, match="this server is busy: 1 job.s. running and 2 waiting"):
        queue.admit("cy", "p1")
    assert queue.take_slot(tickets[2]) == 2  # first come, first served: ann's second is before bob's
    queue.release(tickets[0])
    assert queue.take_slot(tickets[2]) == 1 and queue.take_slot(tickets[1]) is None
    assert queue.counts() == {"running": 1, "waiting": 1}
    queue.admit("cy", "p1")  # a place is free again


def test_the_ticket_of_a_process_that_died_is_dropped(tmp_path):
    queue = JobQueue(tmp_path, QueueLimits(max_running=1, max_waiting=0, max_per_person=1))
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    ticket = queue.admit("ann", "p")
    queue.attach(ticket, 1, process.pid)
    assert queue.take_slot(queue.admit("bob", "p")) is None  # ann's ticket went with its process


@pytest.fixture
def projects(colour_project, tmp_path):
    """Ten projects to run jobs on (one live job per kind and project, so the queue is what limits them)."""
    from hibug_core.store.project import Project

    folders = [tmp_path / f"p{i}" for i in range(10)]
    colour_project.close()
    for folder in folders:
        shutil.copytree(colour_project.folder, folder)
    opened = [Project.open(folder) for folder in folders]
    yield opened
    for project in opened:
        project.close()


@pytest.mark.slow
def test_a_job_waits_for_its_slot_runs_after_and_can_be_cancelled_while_waiting(projects, tmp_path):
    queue = JobQueue(tmp_path / "queue", QueueLimits(max_running=1, max_waiting=4, max_per_person=3))
    first = submit(projects[0], job_op("count slowly", {"steps": 600, "pause": 0.05}), author="ann", queue=queue)
    wait_for(projects[0], first, {"running"}, timeout=60)
    second = submit(projects[1], job_op("count slowly", {"steps": 2, "pause": 0.01}), author="ann", queue=queue)
    third = submit(projects[2], job_op("count slowly", {"steps": 2, "pause": 0.01}), author="bob", queue=queue)
    waiting = wait_for(projects[2], third, {"queued"}, timeout=60)
    deadline = time.time() + 30
    while not (waiting.stage or "").startswith("waiting for a free slot") and time.time() < deadline:
        time.sleep(0.2)
        waiting = get_job(projects[2], third)
    assert waiting.stage == "waiting for a free slot (2 ahead)" and waiting.status == "queued"
    request_cancel(projects[2], third)
    assert wait_for(projects[2], third, {"cancelled"}, timeout=60).message == "cancelled before it started"
    assert get_job(projects[1], second).status == "queued"
    request_cancel(projects[0], first)
    assert wait_for(projects[0], first, {"cancelled"}).status == "cancelled"
    done = wait_for(projects[1], second, {"done"})
    assert done.started_at >= get_job(projects[0], first).finished_at  # it ran after the first, not beside it
    assert queue.counts() == {"running": 0, "waiting": 0}


@pytest.mark.slow
def test_twenty_visitors_starting_jobs_at_once_the_limits_hold_and_nothing_is_lost(projects, tmp_path):
    """20 people press "start" at the same moment on a server that runs 2 jobs and queues 6: 8 are taken, each of the
    others is told the server is busy, never more than 2 run at once, and every job taken finishes."""
    limits = QueueLimits(max_running=2, max_waiting=6, max_per_person=1)
    queue = JobQueue(tmp_path / "queue", limits)
    kinds = ["count slowly", "fail clearly"]  # one live job per kind and project: each visitor has their own
    outcomes: dict[int, object] = {}
    start = threading.Barrier(20)

    def visitor(i: int) -> None:
        project = projects[i % 10]
        kind = kinds[i // 10]
        params = {"steps": 10, "pause": 0.05} if kind == "count slowly" else {}
        start.wait()
        with acting_as(Actor(f"visitor{i}@example.com", Role.EDITOR)):
            try:
                outcomes[i] = (project, submit(project, job_op(kind, params), queue=queue))
            except Exception as error:  # noqa: BLE001 (each refusal is checked below)
                outcomes[i] = error

    running_seen = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            running_seen.append(queue.counts()["running"])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    taken = {i: value for i, value in outcomes.items() if isinstance(value, tuple)}
    refused = {i: value for i, value in outcomes.items() if not isinstance(value, tuple)}
    assert len(outcomes) == 20 and len(taken) == 8
    assert all(isinstance(error, ServerBusy) for error in refused.values()), refused
    finished = [wait_for(project, job, {"done", "failed"}, timeout=240) for project, job in taken.values()]
    stop.set()
    watcher.join()
    assert max(running_seen) <= 2
    assert sorted(job.status for job in finished) == sorted(
        "done" if job.kind == "count slowly" else "failed" for job in finished)
    assert all(job.error is None or "refused the connection" in job.error for job in finished)
    assert sorted(job.author for job in finished) == sorted(f"visitor{i}@example.com" for i in taken)
    assert queue.counts() == {"running": 0, "waiting": 0}
