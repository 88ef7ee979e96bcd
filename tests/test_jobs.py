"""Background jobs in their own process: progress in the store, one live job per kind, cancel, failure, a killed
worker seen as interrupted, and resume."""
from __future__ import annotations

import os
import signal
import time

import pytest

from hibug_core.errors import HibugError
from hibug_core.jobs import store as job_store
from hibug_core.jobs.store import JobBusyError, create_job, get_job, jobs_frame, request_cancel
from hibug_core.jobs.worker import main as worker_main
from hibug_core.jobs.worker import resume, submit

from job_helpers import job_op, register_in_workers, wait_for
from waiting import wait_until


@pytest.fixture(autouse=True)
def helpers_importable(monkeypatch):
    register_in_workers(monkeypatch)


@pytest.mark.slow
def test_an_embedding_job_runs_in_its_own_process_and_stores_its_result(colour_project):
    from hibug_core.embeddings.compute import stored_embeddings

    job_id = submit(colour_project, job_op("embed", {"encoder": "tiny-open_clip"}), author="ana")
    job = wait_for(colour_project, job_id, {"done", "failed"})
    assert job.status == "done", job.error
    assert job.result == {"encoder": "tiny-open_clip", "samples": 12, "dimension": 64,
                          "summary": "12 images embedded with tiny-open_clip (dimension 64)."}
    assert job.author == "ana" and job.finished_at is not None
    assert len(stored_embeddings(colour_project, "tiny-open_clip").sample_ids) == 12
    log = colour_project.audit_log()
    assert (log["action"] == "start job").any() and (log["actor"] == "ana").any()


@pytest.mark.slow
def test_progress_is_stored_and_a_second_job_of_the_kind_is_refused_until_cancelled(colour_project):
    job_id = submit(colour_project, job_op("count slowly", {"steps": 400}), author="ben")
    wait_for(colour_project, job_id, {"running"})
    wait_until(lambda: get_job(colour_project, job_id).done > 0, 30, what="the first progress")
    running = get_job(colour_project, job_id)
    assert running.stage == "counting" and 0 < running.done < 400 and running.total == 400
    with pytest.raises(JobBusyError, match=r"already running on this project \(job \d+, started by ben"):
        submit(colour_project, job_op("count slowly", {}), author="cleo")
    request_cancel(colour_project, job_id, author="cleo")
    job = wait_for(colour_project, job_id, {"cancelled", "done", "failed"}, timeout=30)
    assert job.status == "cancelled" and "resume" in job.message
    assert job.done < 400
    frame = jobs_frame(colour_project)
    assert frame.loc[frame["job"] == job_id, "status"].item() == "cancelled"
    again = resume(colour_project, job_id, author="cleo")
    assert get_job(colour_project, again).resumed_from == job_id
    request_cancel(colour_project, again)
    wait_for(colour_project, again, {"cancelled", "done"}, timeout=60)


def test_a_failing_job_keeps_its_message_and_an_unknown_kind_fails_at_once(colour_project):
    job_id = submit(colour_project, job_op("fail clearly", {}))
    job = wait_for(colour_project, job_id, {"failed", "done"})
    assert job.status == "failed"
    assert job.error == "the model server at http://127.0.0.1:9 refused the connection; start it and resume"
    with pytest.raises(HibugError, match="unknown job kind 'umbrella'; known: embed, tag, "):
        submit(colour_project, job_op("umbrella", {}))
    with pytest.raises(HibugError, match="unknown job kind 'slices'; known: "):  # not a long operation: no job
        from hibug_core.operations import FindSlices

        submit(colour_project, FindSlices.build({}))
    with pytest.raises(HibugError, match=r"^count slowly: steps = 'many': Input should be a valid integer, unable to "
                                         r"parse string as an integer; pauses: Extra inputs are not permitted$"):
        submit(colour_project, job_op("count slowly", {"steps": "many", "pauses": 1}))


def test_the_worker_runs_only_registered_kinds_never_what_a_row_names(colour_project):
    """A row in the shared jobs table (anyone with database access can write one) names a module:function; the
    worker refuses it instead of importing and running it."""
    job_id = create_job(colour_project, "job_helpers:leave_a_mark", {})
    assert worker_main([str(colour_project.folder), str(job_id)]) == 0
    job = get_job(colour_project, job_id)
    assert job.status == "failed" and job.error.startswith("unknown job kind 'job_helpers:leave_a_mark'")
    assert not (colour_project.folder / "MARK").exists()


@pytest.mark.slow
def test_a_killed_worker_is_seen_as_interrupted_frees_its_kind_and_resumes(colour_project, monkeypatch):
    job_id = submit(colour_project, job_op("count slowly", {"steps": 2000}), author="dee")
    wait_for(colour_project, job_id, {"running"})
    wait_until(lambda: get_job(colour_project, job_id).done > 0, 30, what="the first progress")
    with colour_project.engine.connect() as connection:
        pid = connection.exec_driver_sql(f"SELECT pid FROM jobs WHERE id = {job_id}").scalar_one()
    os.kill(pid, signal.SIGKILL)
    monkeypatch.setattr(job_store, "STALE_AFTER_S", 1.0)
    job = wait_for(colour_project, job_id, {"interrupted"}, timeout=20)
    assert job.done > 0  # its progress so far is kept
    resumed = resume(colour_project, job_id, author="dee")  # frees the kind: the dead job is marked failed
    assert get_job(colour_project, job_id).status == "failed"
    assert "interrupted" in get_job(colour_project, job_id).error
    monkeypatch.setattr(job_store, "STALE_AFTER_S", 30.0)
    request_cancel(colour_project, resumed)
    assert wait_for(colour_project, resumed, {"cancelled", "done"}, timeout=60).status == "cancelled"


def test_a_queued_job_whose_worker_never_started_does_not_block(colour_project, monkeypatch):
    stuck = create_job(colour_project, "embed", {})
    monkeypatch.setattr(job_store, "STALE_AFTER_S", 0.0)
    time.sleep(1.1)
    assert get_job(colour_project, stuck).status == "interrupted"
    fresh = create_job(colour_project, "embed", {})
    assert get_job(colour_project, stuck).status == "failed" and fresh > stuck


def test_a_job_trusts_the_whole_check_of_the_process_that_started_it(colour_project, monkeypatch):
    """A server checks a database whole (quick_check) before its first write; the jobs it starts write for it and
    trust that check (20 s each at ten million objects) rather than make it again; a damage mark still stops them."""
    from hibug_core.jobs import worker
    from hibug_core.store import db

    url = str(colour_project.engine.url)
    monkeypatch.setattr(db, "_CHECKED", set())
    with db.write_transaction(colour_project.engine) as connection:  # this process's first write: checked whole
        connection.exec_driver_sql("SELECT 1")
    assert db.checked_environment() == {db.CHECKED_ENV: f'["{url}"]'}
    started = {}

    class Started:
        pid = 0

        def __init__(self, arguments, **options):
            started.update(options["env"])

    monkeypatch.setattr(worker.subprocess, "Popen", Started)
    submit(colour_project, job_op("count slowly", {"steps": 1}), author="ana")
    assert started[db.CHECKED_ENV] == f'["{url}"]'
    # in the job's process: the database counts as checked, and its first write makes no check
    monkeypatch.setattr(db, "_CHECKED", set())
    for junk in ("not json", '{"a": 1}', '[1, null]'):  # a junk value is ignored, not trusted
        monkeypatch.setenv(db.CHECKED_ENV, junk)
        db.trust_checked_databases()
        assert db._CHECKED == set()
    monkeypatch.setenv(db.CHECKED_ENV, started[db.CHECKED_ENV])
    db.trust_checked_databases()
    checks = []
    monkeypatch.setattr(db, "integrity_problems", lambda *a, **k: checks.append(1) or [])
    with db.write_transaction(colour_project.engine) as connection:
        connection.exec_driver_sql("SELECT 1")
    assert checks == []
    db.damage_mark(colour_project.engine).write_text("found by a whole check\n")
    with pytest.raises(db.StoreDamaged, match="found by a whole check"):
        with db.write_transaction(colour_project.engine):
            pass
    db.damage_mark(colour_project.engine).unlink()


def test_the_check_before_a_first_write_is_made_ahead_once_and_what_it_finds_stops_the_write(colour_project,
                                                                                             monkeypatch):
    """The dashboard checks a writable project's database while people look (a minute at ten million objects), so that
    the first change waits for nothing; a write while it runs waits for that check rather than make a second one,
    and damage it found refuses the write with what it found."""
    import threading

    from hibug_core.store import db

    monkeypatch.setattr(db, "_CHECKED", set())
    monkeypatch.setattr(db, "_FOUND", {})
    checking, checks = threading.Event(), []

    def slow_check(engine, **options):
        checks.append(options)
        checking.set()
        time.sleep(0.5)
        return []

    monkeypatch.setattr(db, "integrity_problems", slow_check)
    ahead = db.check_ahead(colour_project.engine)
    assert checking.wait(10)
    with db.write_transaction(colour_project.engine) as connection:  # while the check runs: it waits for it
        connection.exec_driver_sql("SELECT 1")
    ahead.join(10)
    assert checks == [{"whole": False, "limit": 3}] and not ahead.is_alive()
    assert db.check_ahead(colour_project.engine) is None  # checked: nothing more to do

    monkeypatch.setattr(db, "_CHECKED", set())
    monkeypatch.setattr(db, "integrity_problems", lambda engine, **options: ["Page 7: never used"])
    db.check_ahead(colour_project.engine).join(10)
    with pytest.raises(db.StoreDamaged, match=r"damaged \(Page 7: never used\); nothing was written"):
        with db.write_transaction(colour_project.engine):
            pass
    read_only = db.make_engine(db.sqlite_url(colour_project.folder / "hibug.sqlite", read_only=True))
    assert db.check_ahead(read_only) is None  # nothing is written through it
    read_only.dispose()
