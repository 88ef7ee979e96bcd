"""Job rows in the project store: submit (one live job per kind and project), progress, cancel, finish, read."""
from __future__ import annotations

import datetime as dt
import json
import socket
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import text

from hibug_core.access import AccessDenied, Role, current_actor, require
from hibug_core.errors import HibugError
from hibug_core.redaction import redact, redact_json
from hibug_core.store.audit import CANCEL_JOB, START_JOB, author_name, now, record
from hibug_core.store.db import read_connection, write_transaction

LIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled")
STALE_AFTER_S = 30.0  # a running job whose worker sent no heartbeat for this long has stopped (crash, kill, reboot)


class JobBusyError(HibugError):
    """The same kind of job is already running on this project."""


class JobCancelled(HibugError):
    """Raised inside a job when someone asked to cancel it."""


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    params: dict
    status: str  # queued, running, done, failed, cancelled, or interrupted (running but its worker is gone)
    stage: str | None
    done: int
    total: int
    message: str | None
    error: str | None
    result: dict | None
    cancel_requested: bool
    resumed_from: int | None
    author: str
    created_at: str
    started_at: str | None
    heartbeat_at: str | None
    finished_at: str | None

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 0.0

    def describe(self) -> str:
        where = f"{self.stage}: {self.done:,}/{self.total:,}" if self.stage and self.total else (self.stage or "")
        return f"job {self.id} ({self.kind}) {self.status}" + (f", {where}" if where else "")


def _age_s(timestamp: str | None) -> float:
    if not timestamp:
        return float("inf")
    return (dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(timestamp)).total_seconds()


def _job(row) -> Job:
    status = row.status
    if status == "running" and _age_s(row.heartbeat_at) > STALE_AFTER_S:
        status = "interrupted"
    elif status == "queued" and _age_s(row.heartbeat_at or row.created_at) > STALE_AFTER_S:
        status = "interrupted"  # its worker never started, or stopped while waiting for a slot
    return Job(row.id, row.kind, json.loads(row.params_json), status, row.stage, row.done, row.total, row.message,
               row.error, json.loads(row.result_json) if row.result_json else None, bool(row.cancel_requested),
               row.resumed_from, row.author, row.created_at, row.started_at, row.heartbeat_at, row.finished_at)


_SELECT = "SELECT * FROM jobs"


def create_job(project, kind: str, params: dict, *, author: str | None = None, resumed_from: int | None = None) -> int:
    """A queued job row; refused while a live job of the same kind runs on the project (one tagging at a time)."""
    require(Role.EDITOR, "start a job")
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        for row in connection.execute(text(f"{_SELECT} WHERE kind = :k AND status IN ('queued', 'running')"),
                                      {"k": kind}):
            job = _job(row)
            if job.live:
                raise JobBusyError(f"{kind} is already running on this project (job {job.id}, started by "
                                   f"{job.author} at {job.created_at}); wait for it or cancel it")
            # A job whose worker died is marked so, which frees its kind.
            connection.execute(text("UPDATE jobs SET status = 'failed', error = :e, finished_at = :t WHERE id = :i"),
                               {"e": "interrupted: its worker stopped without finishing (resume it)", "t": now(),
                                "i": job.id})
        connection.execute(
            text("INSERT INTO jobs (kind, params_json, status, author, created_at, resumed_from, host) "
                 "VALUES (:k, :p, 'queued', :a, :t, :r, :h)"),
            {"k": kind, "p": json.dumps(params), "a": author, "t": now(), "r": resumed_from,
             "h": socket.gethostname()})
        job_id = connection.execute(text("SELECT MAX(id) FROM jobs")).scalar_one()
        record(connection, author, START_JOB, f"job/{job_id}", None, {"kind": kind, "params": params})
    return int(job_id)


def get_job(project, job_id: int) -> Job:
    with read_connection(project.engine) as connection:
        row = connection.execute(text(f"{_SELECT} WHERE id = :i"), {"i": job_id}).first()
    if row is None:
        raise HibugError(f"no job {job_id} in this project")
    return _job(row)


def jobs(project, kind: str | None = None, limit: int = 50) -> list[Job]:
    """The newest jobs first."""
    where, params = ("WHERE kind = :k", {"k": kind}) if kind else ("", {})
    with read_connection(project.engine) as connection:
        rows = connection.execute(text(f"{_SELECT} {where} ORDER BY id DESC LIMIT {int(limit)}"), params).fetchall()
    return [_job(row) for row in rows]


def jobs_frame(project, limit: int = 50) -> pd.DataFrame:
    return pd.DataFrame([{"job": j.id, "kind": j.kind, "status": j.status, "progress": j.fraction,
                          "stage": j.stage, "by": j.author, "started": j.created_at, "finished": j.finished_at,
                          "error": j.error} for j in jobs(project, limit=limit)])


def mark_running(project, job_id: int, pid: int) -> None:
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE jobs SET status = 'running', pid = :p, started_at = :t, heartbeat_at = :t "
                                "WHERE id = :i"), {"p": pid, "t": now(), "i": job_id})


def report_progress(project, job_id: int, stage: str | None, done: int, total: int) -> bool:
    """Store progress and the heartbeat; returns whether someone asked to cancel."""
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE jobs SET stage = COALESCE(:s, stage), done = :d, total = :n, "
                                "heartbeat_at = :t WHERE id = :i"),
                           {"s": stage, "d": done, "n": total, "t": now(), "i": job_id})
        return bool(connection.execute(text("SELECT cancel_requested FROM jobs WHERE id = :i"),
                                       {"i": job_id}).scalar_one())


def finish_job(project, job_id: int, status: str, *, result: dict | None = None, error: str | None = None,
               message: str | None = None) -> None:
    if status not in FINISHED:
        raise ValueError(f"a job finishes as one of {FINISHED}, not {status!r}")
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE jobs SET status = :s, result_json = :r, error = :e, message = :m, "
                                "finished_at = :t, heartbeat_at = :t WHERE id = :i"),
                           {"s": status, "r": redact_json(result) if result is not None else None,
                            "e": redact(error), "m": redact(message), "t": now(), "i": job_id})


def request_cancel(project, job_id: int, *, author: str | None = None) -> None:
    """Ask a live job to stop at its next progress report (work it stored so far is kept). On a served dashboard only
    the one who started it and admins may."""
    author = author_name(author)
    actor = current_actor()
    if actor is not None and not actor.may(Role.ADMIN) and get_job(project, job_id).author != actor.identity:
        raise AccessDenied(f"job {job_id} was started by someone else; only they or an admin may cancel it")
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE jobs SET cancel_requested = 1 WHERE id = :i"), {"i": job_id})
        record(connection, author, CANCEL_JOB, f"job/{job_id}", None, None)
