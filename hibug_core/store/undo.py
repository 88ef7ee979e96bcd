"""Undo from the audit log: a tag correction or an attribute edit is reversed by a new, logged edit, refused when
someone changed the same thing since."""
from __future__ import annotations

import json

from sqlalchemy import text

from hibug_core.errors import HibugError
from hibug_core.store.db import read_connection

UNDOABLE = ("correct tag", "confirm tag", "withdraw tag", "save attributes", "choose tag source")


class UndoError(HibugError):
    """An audit entry that cannot be undone (not an edit of tags or attributes, or nothing to go back to)."""


def undo(project, entry_id: int, *, author: str | None = None) -> str:
    """Reverse audit entry `entry_id` and say what was done. Tags go back to the corrections they had before (a
    sample without one has its correction withdrawn); attributes go back to the version before, saved as a new one."""
    from hibug_core.store.attribute_versions import load_schema, save_schema
    from hibug_core.store.tag_store import AUTO, choose_source, chosen_sources, correct_tags, latest_corrections

    with read_connection(project.engine) as connection:
        row = connection.execute(text("SELECT action, entity, before_json, after_json FROM audit_log WHERE id = :i"),
                                 {"i": entry_id}).first()
    if row is None:
        raise UndoError(f"no audit entry #{entry_id}")
    action, entity, before, after = row[0], row[1], json.loads(row[2] or "null"), json.loads(row[3] or "null")
    if action not in UNDOABLE:
        raise UndoError(f"entry #{entry_id} ({action}) cannot be undone; only tag corrections, tag source choices and "
                        "attribute edits can")
    if action == "save attributes":
        if before is None:
            raise UndoError(f"entry #{entry_id} saved the first attributes; there is no earlier version to go back to")
        version = save_schema(project, load_schema(project, before["version"]), author=author,
                              note=f"undo of entry #{entry_id}: back to version {before['version']}",
                              base_version=after["version"])
        return f"attributes back to version {before['version']} (saved as version {version})"
    attribute = entity.split(":", 1)[1]
    if action == "choose tag source":
        now = chosen_sources(project).get(attribute, AUTO)
        if now != after["source"]:
            raise UndoError(f"the tag source of '{attribute}' was changed after entry #{entry_id} (now '{now}'); "
                            "undo that change first")
        choose_source(project, attribute, before["source"], author=author)
        return f"'{attribute}' back to the tag source '{before['source']}' (entry #{entry_id} undone)"
    samples = [int(s) for s in after["samples"]]
    done_tag = after["tag"]
    by_tag: dict = {}
    for s in samples:
        by_tag.setdefault(before.get(str(s)), []).append(s)
    # Check every sample first, so an undo is refused whole rather than half done; each write checks again.
    with read_connection(project.engine) as connection:
        current = latest_corrections(connection, attribute, samples)
    changed = [s for s in samples if current.get(s) != done_tag]
    if changed:
        raise UndoError(f"'{attribute}' of sample {changed[0]} was changed after entry #{entry_id} (now "
                        f"'{current.get(changed[0]) or 'no correction'}'); undo that change first, "
                        "or correct it by hand")
    for tag, ids in by_tag.items():
        correct_tags(project, attribute, ids, tag, kind="correct", author=author, seen={s: done_tag for s in ids})
    return f"'{attribute}' of {len(samples)} image(s) back to the tags before entry #{entry_id}"
