"""A whole check of a stored project (`hibug info --check`): SQLite's integrity check of the database and every
array file read through, each problem named with what it makes unavailable and what to do."""
from __future__ import annotations

import functools
import zipfile

from sqlalchemy import inspect, text
from sqlalchemy.exc import DatabaseError

from hibug_core.store.arrays import DamagedArraysError
from hibug_core.store.db import StoreDamaged, integrity_problems, make_engine, mark_damage, read_connection


@functools.cache
def hibug_tables() -> frozenset[str]:
    """The tables a project's database holds at this hibug's schema: what the migrations make of an empty one."""
    from hibug_core.store.migrations import migrate

    engine = make_engine("sqlite://")
    try:
        migrate(engine)
        return frozenset(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def missing_tables(engine) -> list[str]:
    """The tables hibug needs that the database lacks (dropped by hand or by another program)."""
    try:
        present = set(inspect(engine).get_table_names())
    except DatabaseError as error:
        return [f"its tables cannot be listed ({getattr(error, 'orig', None) or error})"]
    return sorted(hibug_tables() - present)


def project_problems(project) -> list[str]:
    """Everything found wrong with `project`'s store, one line each; [] when it is whole."""
    problems = [f"database: {line}" for line in integrity_problems(project.engine)]
    missing = [f"database: the table {name} hibug keeps is missing" for name in missing_tables(project.engine)]
    if missing:
        problems += missing
        mark_damage(project.engine, problems)  # refused by every later write, as damage SQLite finds is
    if problems:
        return problems + ["the database is damaged: restore the folder from a backup, or create the project again "
                           "with `hibug new` (`sqlite3 hibug.sqlite .recover` may save part of it)"]
    try:
        with read_connection(project.engine) as connection:
            finished = [int(r) for r in connection.execute(
                text("SELECT id FROM tag_runs WHERE status = 'finished' ORDER BY id")).scalars()]
    except StoreDamaged as error:
        return [f"database: {error}"]
    for run_id in finished:
        name = f"tags/run-{run_id}"
        try:
            project.arrays.load(name)
        except DamagedArraysError as error:
            problems.append(f"tagging run #{run_id}: {error}; only this run's tags are unavailable (tag again to "
                            "replace them)")
    for name in project.arrays.names():
        if name.startswith("tags/run-"):
            continue
        path = project.arrays.path(name)
        try:
            with zipfile.ZipFile(path) as archive:
                broken = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            broken = str(error) or type(error).__name__
        if broken:
            problems.append(f"arrays {name}: {path} is damaged ({broken}); what it holds is computed again where it "
                            "can be (maps, embeddings), else import or run it again")
    return problems
