"""The audit log: every change to a project is recorded with who, when, and the value before and after."""
from __future__ import annotations

import datetime as dt
import getpass
import os

from sqlalchemy import Connection, text

from hibug_core.access import acting_identity
from hibug_core.redaction import redact_json


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def default_actor() -> str:
    """Who is acting when nobody said: the HIBUG_USER variable, else the login name."""
    try:
        return os.environ.get("HIBUG_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def record(connection: Connection, actor: str, action: str, entity: str, before, after) -> None:
    """Add one entry inside the caller's transaction, so the change and its record land together. On a served
    dashboard the entry names the person acting there (their sign-in), whatever name was passed along."""
    actor = acting_identity(actor)
    connection.execute(
        text("INSERT INTO audit_log (at, actor, action, entity, before_json, after_json) "
             "VALUES (:at, :actor, :action, :entity, :b, :a)"),
        {"at": now(), "actor": actor, "action": action, "entity": entity,
         "b": None if before is None else redact_json(before),
         "a": None if after is None else redact_json(after)})
