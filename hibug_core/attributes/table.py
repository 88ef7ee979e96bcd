"""The attribute schema as an editable table (one row per attribute; tags and templates as text) and back, with
every row's problem named so the editor can say what to fix."""
from __future__ import annotations

import pandas as pd
from pydantic import ValidationError

from hibug_core.attributes.schema import Attribute, AttributeSchema
from hibug_core.errors import validation_reasons

COLUMNS = ["name", "group", "kind", "tags", "templates", "enabled", "source", "description"]
TAG_SEPARATOR, TEMPLATE_SEPARATOR = ", ", " | "


def schema_to_table(schema: AttributeSchema) -> pd.DataFrame:
    return pd.DataFrame([{"name": a.name, "group": a.group, "kind": a.kind, "tags": TAG_SEPARATOR.join(a.tags),
                          "templates": TEMPLATE_SEPARATOR.join(a.templates), "enabled": a.enabled, "source": a.source,
                          "description": a.description} for a in schema.attributes], columns=COLUMNS)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def _split(text, separator: str) -> tuple[str, ...]:
    if text is None:
        return ()
    return tuple(part.strip() for part in str(text).split(separator.strip()) if part.strip())


def table_to_schema(table: pd.DataFrame, previous: AttributeSchema) -> tuple[AttributeSchema | None, list[str]]:
    """The edited schema, or None and one message per bad row (row numbers from 1). Per-tag prompts of attributes
    that keep their name are carried over."""
    attributes, problems = [], []
    known = {a.name: a for a in previous.attributes}
    for number, raw in enumerate(table.to_dict("records"), 1):
        row = {k: None if _missing(v) else v for k, v in raw.items()}  # a new row's empty cells come as None or NaN
        name = str(row.get("name") or "").strip()
        if not name:
            if any(str(v or "").strip() for k, v in row.items() if k in ("tags", "templates")):
                problems.append(f"row {number}: give the attribute a name")
            continue
        try:
            old = known.get(name.lower())
            attributes.append(Attribute(
                name=name, group=row.get("group") or "main object", kind=row.get("kind") or "descriptive",
                tags=_split(row.get("tags"), TAG_SEPARATOR), templates=_split(row.get("templates"), TEMPLATE_SEPARATOR),
                enabled=bool(row["enabled"]) if row.get("enabled") is not None else True,
                source=row.get("source") or "manual",
                description=str(row.get("description") or ""), tag_prompts=old.tag_prompts if old else {}))
        except ValidationError as error:
            problems.append(f"row {number} ('{name}'): {validation_reasons(error)}")
    if problems:
        return None, problems
    try:
        return AttributeSchema(attributes=tuple(attributes), task=previous.task), []
    except ValidationError as error:
        return None, [validation_reasons(error)]
