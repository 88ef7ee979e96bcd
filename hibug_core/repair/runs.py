"""The record of repair work in the project: one row per selection, generation or retraining run, with its result."""
from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import text

from hibug_core.store.audit import default_actor, now, record as record_audit
from hibug_core.store.db import read_connection, write_transaction


def start_run(project, kind: str, params: dict, *, author: str | None = None) -> int:
    author = author or default_actor()
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
        record_audit(connection, author or default_actor(), "finish repair", f"repair:{run_id}", None,
                     {k: v for k, v in result.items() if not isinstance(v, (list, dict))})


def repair_runs(project, kind: str | None = None) -> pd.DataFrame:
    """Every run (newest first) with its parameters and result decoded."""
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(text("SELECT * FROM repair_runs ORDER BY id DESC"), connection)
    if kind is not None:
        frame = frame[frame["kind"] == kind]
    frame["params"] = frame.pop("params_json").map(json.loads)
    frame["result"] = frame.pop("result_json").map(lambda raw: json.loads(raw) if raw else None)
    return frame.reset_index(drop=True)
