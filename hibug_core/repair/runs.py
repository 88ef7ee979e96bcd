"""The record of repair work in the project: one row per selection, generation or retraining run, with its result."""
from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import text

from hibug_core.store.audit import author_name, now
from hibug_core.store.audit import record as record_audit
from hibug_core.store.db import read_connection, write_transaction


def start_run(project, kind: str, params: dict, *, author: str | None = None) -> int:
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        connection.execute(text("INSERT INTO repair_runs (kind, params_json, author, created_at) "
                                "VALUES (:k, :p, :a, :t)"),
                           {"k": kind, "p": json.dumps(params), "a": author, "t": now()})
        run_id = int(connection.execute(text("SELECT MAX(id) FROM repair_runs")).scalar_one())
        record_audit(connection, author, f"start {kind}", f"repair:{run_id}", None, params)
    return run_id


def finish_run(project, run_id: int, result: dict, *, author: str | None = None) -> None:
    with write_transaction(project.engine) as connection:
        connection.execute(text("UPDATE repair_runs SET result_json = :r WHERE id = :i"),
                           {"r": json.dumps(result), "i": run_id})
        record_audit(connection, author_name(author), "finish repair", f"repair:{run_id}", None,
                     {k: v for k, v in result.items() if not isinstance(v, (list, dict))})


def repair_runs(project, kind: str | None = None, *, finished: bool = False, limit: int | None = None) -> pd.DataFrame:
    """Runs (newest first; of one kind, only finished ones, at most `limit`) with parameters and result decoded."""
    query, params = _where(kind, finished)
    query += " ORDER BY id DESC"
    if limit is not None:
        query += " LIMIT :n"
        params["n"] = int(limit)
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(text(f"SELECT * FROM repair_runs{query}"), connection, params=params)
    frame["params"] = frame.pop("params_json").map(json.loads)
    frame["result"] = frame.pop("result_json").map(lambda raw: json.loads(raw) if raw else None)
    return frame


def run_count(project, kind: str | None = None, *, finished: bool = True) -> int:
    """How many runs there are (of one kind; finished ones only by default), without reading their results."""
    query, params = _where(kind, finished)
    with read_connection(project.engine) as connection:
        return int(connection.execute(text(f"SELECT COUNT(*) FROM repair_runs{query}"), params).scalar_one())


def _where(kind: str | None, finished: bool) -> tuple[str, dict]:
    conditions, params = [], {}
    if kind is not None:
        conditions.append("kind = :k")
        params["k"] = kind
    if finished:
        conditions.append("result_json IS NOT NULL")
    # no ORDER BY here: PostgreSQL refuses one beside an aggregate (run_count's COUNT), where SQLite ignores it
    return f" WHERE {' AND '.join(conditions)}" if conditions else "", params
