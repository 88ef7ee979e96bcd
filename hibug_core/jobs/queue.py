"""One job queue per dashboard server: at most `max_running` jobs run at once over all its projects, at most
`max_waiting` wait for a slot (first come, first served), and one person may have at most `max_per_person` running
or waiting. Its tickets live in a small SQLite file in the server's folder, so the page that admits a job and the
worker process that waits for its slot agree; a ticket whose process died is dropped."""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from hibug_core.errors import ConfigError, HibugError, check_fields

QUEUE_ENV = "HIBUG_JOB_QUEUE"  # a worker's ticket and the queue's limits, as JSON
QUEUE_FILE = "jobs-queue.sqlite"
POLL_S = 0.5


class ServerBusy(HibugError):
    """The server's queue, or this person's share of it, is full; nothing was started."""


@dataclass(frozen=True)
class QueueLimits:
    max_running: int = 1
    max_waiting: int = 8
    max_per_person: int = 2

    def __post_init__(self):
        check_fields(self, {
            "max_running": (type(self.max_running) is int and self.max_running >= 1, "an int of at least 1"),
            "max_waiting": (type(self.max_waiting) is int and self.max_waiting >= 0, "an int of at least 0"),
            "max_per_person": (type(self.max_per_person) is int and self.max_per_person >= 1, "an int of at least 1"),
        })


def _alive(pid: int | None) -> bool:
    """Whether a ticket's process still runs (a child that ended is reaped here, so it does not linger as a zombie)."""
    if pid is None:
        return True  # admitted, its process not started yet
    try:
        ended, _ = os.waitpid(pid, os.WNOHANG)
        return ended == 0
    except ChildProcessError:  # not our child: ask whether it exists
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a sibling that ended but was not reaped yet still answers kill(0)
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class JobQueue:
    """step_aside: its jobs run only on the CPU time the dashboard leaves over (a server shared with others, whose
    pages must stay quick for them; on one's own machine a job runs at full speed)."""

    def __init__(self, folder: str | Path, limits: QueueLimits = QueueLimits(), *, step_aside: bool = False):
        self.folder = Path(folder)
        self.limits = limits
        self.step_aside = step_aside
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY AUTOINCREMENT, person TEXT NOT NULL,"
                       " project TEXT NOT NULL, job INTEGER, pid INTEGER, state TEXT NOT NULL, since REAL NOT NULL)")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.folder / QUEUE_FILE, timeout=30, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")  # admissions and slot grants take turns: a limit checked still holds
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def _drop_dead(self, db: sqlite3.Connection) -> None:
        dead = [ticket for ticket, pid in db.execute("SELECT id, pid FROM tickets") if not _alive(pid)]
        db.executemany("DELETE FROM tickets WHERE id = ?", [(t,) for t in dead])

    # ----- the page that starts a job ----------------------------------------------------------------------------
    def admit(self, person: str, project: str | Path) -> int:
        """A ticket for one more job of `person`, or ServerBusy saying which limit is reached."""
        with self._transaction() as db:
            self._drop_dead(db)
            mine = db.execute("SELECT COUNT(*) FROM tickets WHERE person = ?", (person,)).fetchone()[0]
            if mine >= self.limits.max_per_person:
                raise ServerBusy(f"you have {mine} job(s) running or waiting on this server, the most one person may;"
                                 " wait for one to finish, or cancel one")
            running, waiting = (db.execute("SELECT COUNT(*) FROM tickets WHERE state = ?", (state,)).fetchone()[0]
                                for state in ("running", "waiting"))
            if running + waiting >= self.limits.max_running + self.limits.max_waiting:  # admitted ones all count
                raise ServerBusy(f"this server is busy: {running} job(s) running and {waiting} waiting, the most it "
                                 "queues; nothing was started. Try again when one has finished")
            cursor = db.execute("INSERT INTO tickets (person, project, state, since) VALUES (?, ?, 'waiting', ?)",
                                (person, str(project), time.time()))
            return int(cursor.lastrowid)

    def attach(self, ticket: int, job: int, pid: int) -> None:
        with self._transaction() as db:
            db.execute("UPDATE tickets SET job = ?, pid = ? WHERE id = ?", (job, pid, ticket))

    def release(self, ticket: int) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM tickets WHERE id = ?", (ticket,))

    def worker_environment(self, ticket: int) -> dict[str, str]:
        return {QUEUE_ENV: json.dumps({"folder": str(self.folder), "ticket": ticket, "step_aside": self.step_aside,
                                       **asdict(self.limits)})}

    @classmethod
    def from_worker_environment(cls, environ=os.environ) -> tuple[JobQueue, int] | None:
        text = environ.get(QUEUE_ENV)
        if not text:
            return None
        try:
            settings = json.loads(text)
            ticket, step_aside = int(settings.pop("ticket")), bool(settings.pop("step_aside", False))
            return cls(settings.pop("folder"), QueueLimits(**settings), step_aside=step_aside), ticket
        except (ValueError, KeyError, TypeError, ConfigError) as error:
            raise HibugError(f"the job's queue settings ({QUEUE_ENV}) are not valid: {error}") from None

    # ----- the worker that runs it -------------------------------------------------------------------------------
    def take_slot(self, ticket: int) -> int | None:
        """Start running `ticket` if a slot is free and it is first in line; else how many wait before it."""
        with self._transaction() as db:
            self._drop_dead(db)
            running = db.execute("SELECT COUNT(*) FROM tickets WHERE state = 'running'").fetchone()[0]
            ahead = db.execute("SELECT COUNT(*) FROM tickets WHERE state = 'waiting' AND id < ?",
                               (ticket,)).fetchone()[0]
            if running < self.limits.max_running and ahead == 0:
                db.execute("UPDATE tickets SET state = 'running', pid = ?, since = ? WHERE id = ?",
                           (os.getpid(), time.time(), ticket))
                return None
            return ahead + max(0, running - self.limits.max_running + 1)

    def wait_for_slot(self, ticket: int, on_wait: Callable[[int], None]) -> None:
        """Block until `ticket` runs; on_wait(how many are ahead) is called while it waits (it may raise to stop
        waiting, e.g. when the job is cancelled: the ticket is then given back)."""
        try:
            while (ahead := self.take_slot(ticket)) is not None:
                on_wait(ahead)
                time.sleep(POLL_S)
        except BaseException:
            self.release(ticket)
            raise

    def counts(self) -> dict[str, int]:
        with self._transaction() as db:
            self._drop_dead(db)
            rows = dict(db.execute("SELECT state, COUNT(*) FROM tickets GROUP BY state").fetchall())
        return {"running": rows.get("running", 0), "waiting": rows.get("waiting", 0)}
