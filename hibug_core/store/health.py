"""A whole check of a stored project (`hibug info --check`): SQLite's integrity check of the database and every
array file read through, each problem named with what it makes unavailable and what to do."""
from __future__ import annotations

import zipfile

from sqlalchemy import text

from hibug_core.store.arrays import DamagedArraysError
from hibug_core.store.db import StoreDamaged, integrity_problems, read_connection


def project_problems(project) -> list[str]:
    """Everything found wrong with `project`'s store, one line each; [] when it is whole."""
    problems = [f"database: {line}" for line in integrity_problems(project.engine)]
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
