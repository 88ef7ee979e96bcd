"""The audit log: every change to a project is recorded with who, when, and the value before and after."""
from __future__ import annotations

import datetime as dt
import getpass
import os

from sqlalchemy import Connection, text

from hibug_core.access import acting_identity
from hibug_core.redaction import redact_json
from hibug_core.values import normalise_name

# What the team's board, saved views and the jobs' bookkeeping record. They change no sample, tag, schema or model, so
# the version every cache of project data is keyed by (Project.data_version) does not move with them: at ten million
# objects, putting the error slices on the board used to make the next page compute the slices again (ten minutes).
OPEN_REVIEW, UPDATE_REVIEW, COMMENT = "open review", "update review", "comment"
SAVE_VIEW, START_JOB, CANCEL_JOB = "save view", "start job", "cancel job"
NOT_DATA = (OPEN_REVIEW, UPDATE_REVIEW, COMMENT, SAVE_VIEW, START_JOB, CANCEL_JOB)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_actor() -> str:
    """Who is acting when nobody said: the HIBUG_USER variable, else the login name."""
    try:
        return os.environ.get("HIBUG_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def author_name(author: str | None = None) -> str:
    """The name a change is recorded under, in the stored form every imported value takes (no control characters,
    direction overrides or escapes reach a report): the acting person's sign-in where there is one, else the name
    given, else default_actor(). Raises ValueRefused for a name that cannot be stored."""
    return normalise_name(acting_identity(author or default_actor()), "the name of the person acting")


def record(connection: Connection, actor: str, action: str, entity: str, before, after) -> None:
    """Add one entry inside the caller's transaction, so the change and its record land together. On a served
    dashboard the entry names the person acting there (their sign-in), whatever name was passed along."""
    actor = author_name(actor)
    connection.execute(
        text("INSERT INTO audit_log (at, actor, action, entity, before_json, after_json) "
             "VALUES (:at, :actor, :action, :entity, :b, :a)"),
        {"at": now(), "actor": actor, "action": action, "entity": entity,
         "b": None if before is None else redact_json(before),
         "a": None if after is None else redact_json(after)})
