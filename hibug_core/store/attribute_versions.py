"""Versioned attribute schemas: every edit stores a whole new version with its author, time and note."""
from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import text

from hibug_core.attributes.schema import AttributeSchema
from hibug_core.errors import ProjectError, SchemaError
from hibug_core.store.audit import author_name, now, record
from hibug_core.store.db import read_connection, write_transaction


class StaleSchemaError(ProjectError):
    """Someone saved a newer version since the one an edit started from; nothing was stored."""

    def __init__(self, base: int | None, newest: int, author: str, at: str):
        self.base, self.newest, self.author, self.at = base, newest, author, at
        super().__init__(f"the attributes changed since you started editing: version {newest} was saved by {author} "
                         f"at {at} (you edited version {base}). Nothing was overwritten: make your edit again on "
                         f"version {newest} (run the same command again, or reload the Attributes page) and save.")


def save_schema(project, schema: AttributeSchema, *, author: str | None = None, note: str = "",
                base_version: int | None | bool = False) -> int:
    """Store `schema` as the newest version and return its version number.

    base_version: the version the edit started from (None: from no schema). When given, the save is refused with
    StaleSchemaError if another version was saved in between, so no edit is lost silently.
    """
    author = author_name(author)
    schema = schema.validated()  # SchemaError before anything is stored, however the schema was built
    with write_transaction(project.engine) as connection:
        before = connection.execute(text("SELECT MAX(version) FROM attribute_schemas")).scalar()
        if base_version is not False and before != base_version:
            who, at = connection.execute(text("SELECT author, created_at FROM attribute_schemas WHERE version = :v"),
                                         {"v": before}).one()
            raise StaleSchemaError(base_version, int(before), who, at)
        connection.execute(
            text("INSERT INTO attribute_schemas (schema_json, author, created_at, note) VALUES (:s, :a, :t, :n)"),
            {"s": schema.to_json(), "a": author, "t": now(), "n": note})
        version = int(connection.execute(text("SELECT MAX(version) FROM attribute_schemas")).scalar_one())
        record(connection, author, "save attributes", "attributes",
               None if before is None else {"version": int(before)},
               {"version": version, "note": note, "attributes": schema.names()})
    return version


def latest_version(project) -> int | None:
    with read_connection(project.engine) as connection:
        value = connection.execute(text("SELECT MAX(version) FROM attribute_schemas")).scalar()
    return None if value is None else int(value)


def schema_names(project) -> list[str]:
    """The newest schema's attribute names; none before the first version."""
    return [a.name for a in load_schema(project).attributes] if latest_version(project) is not None else []


def load_schema(project, version: int | None = None) -> AttributeSchema:
    """The schema of `version`, or the newest; a clear error when the project has none yet."""
    with read_connection(project.engine) as connection:
        if version is None:
            raw = connection.execute(
                text("SELECT schema_json FROM attribute_schemas ORDER BY version DESC LIMIT 1")).scalar()
        else:
            raw = connection.execute(
                text("SELECT schema_json FROM attribute_schemas WHERE version = :v"), {"v": version}).scalar()
    if raw is None:
        if version is None:
            raise ProjectError("this project has no attributes yet; propose or add some first "
                               "(Attributes page, or `hibug attributes propose`)")
        raise ProjectError(f"no attribute schema version {version} in this project")
    try:
        return AttributeSchema.from_json(raw)
    except SchemaError as error:
        which = f"version {version}" if version is not None else "the newest version"
        raise ProjectError(f"the attributes stored as {which} are not valid ({error}); it was saved by an older "
                           "hibug. Save a corrected schema on the Attributes page or with `hibug attributes edit`"
                           ", or see the versions with `hibug attributes show --history`") from None


def schema_history(project) -> pd.DataFrame:
    """One row per stored version, newest first."""
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(
            text("SELECT version, author, created_at, note, schema_json FROM attribute_schemas ORDER BY version DESC"),
            connection)
    frame["attributes"] = [len(json.loads(raw).get("attributes", [])) for raw in frame["schema_json"]]
    return frame.drop(columns=["schema_json"])


def merge_schemas(base: AttributeSchema, mine: AttributeSchema, theirs: AttributeSchema) -> tuple[AttributeSchema,
                                                                                                 list[str]]:
    """Three-way merge by attribute: a side's change wins where the other left the attribute as in `base`; where both
    changed it differently, theirs (already stored) is kept and the conflict is listed."""
    b, m, t = ({a.name: a for a in s.attributes} for s in (base, mine, theirs))
    merged, conflicts = {}, []
    for name in list(t) + [n for n in m if n not in t] + [n for n in b if n not in t and n not in m]:
        ours, stored, original = m.get(name), t.get(name), b.get(name)
        if ours == stored:
            chosen = ours
        elif ours == original:
            chosen = stored
        elif stored == original:
            chosen = ours
        else:
            chosen = stored
            conflicts.append(f"'{name}' was changed in both edits; the stored version is kept")
        if chosen is not None:
            merged[name] = chosen
    task = mine.task if theirs.task == base.task else theirs.task
    return AttributeSchema(attributes=tuple(merged.values()), task=task), conflicts
