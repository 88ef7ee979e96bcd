"""Checks that a project's database is one hibug can open, before anything is written, naming what was found."""
from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DatabaseError

from hibug_core.errors import ProjectError
from hibug_core.store.migrations import MIGRATIONS

logger = logging.getLogger(__name__)
SQLITE_HEADER = b"SQLite format 3\x00"
RESTORE = "restore the folder from a backup, or create the project again with `hibug new`"


def check_sqlite_file(path: Path, *, writable: bool = False) -> None:
    """ProjectError when `path` is not a whole SQLite database: a folder, an empty or junk file, or one cut short
    (the header's page count says how long it must be) that its write-ahead log does not make whole. writable: a
    checkpoint a full disk stopped is finished now where it can be."""
    if path.is_dir():
        raise ProjectError(f"{path} is a folder, not a database: this is not a hibug project (or its database was "
                           f"replaced); {RESTORE}")
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        size = path.stat().st_size
    except OSError as error:
        raise ProjectError(f"cannot read {path}: {error.strerror or error}; check its permissions") from None
    if size == 0:
        raise ProjectError(f"{path} is empty (0 bytes): the project's database is lost; {RESTORE}. Nothing was "
                           "written to it.")
    if not header.startswith(SQLITE_HEADER):
        raise ProjectError(f"{path} is not a SQLite database (it starts with {header[:16]!r}); {RESTORE}")
    if len(header) == 100:
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        valid = header[24:28] == header[92:96]  # the page count is trustworthy only when this matches
        if valid and pages and size < pages * page_size and not _whole_with_its_log(path, writable):
            raise ProjectError(f"{path} is cut short ({size:,} of {pages * page_size:,} bytes): the database is "
                               f"damaged; {RESTORE} (`sqlite3 {path.name} .recover` may save part of it)")


def write_ahead_log(path: Path) -> Path:
    """The write-ahead log beside a SQLite database: changes committed but not yet copied into the file itself."""
    return path.with_name(path.name + "-wal")


def _whole_with_its_log(path: Path, writable: bool) -> bool:
    """Whether a database file shorter than its header says is whole once read with its write-ahead log: a
    checkpoint (copying the log into the file) stopped by a full disk leaves it so, and loses nothing, since a
    commit is whole in the log. SQLite's own quick check decides; the next write finishes the checkpoint."""
    import sqlite3

    try:
        if write_ahead_log(path).stat().st_size <= 32:  # no frames beyond the log's header: nothing to copy
            return False
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            rows = connection.execute("PRAGMA quick_check(3)").fetchall()
        finally:
            connection.close()
    except (OSError, sqlite3.Error):
        return False
    whole = [str(row[0]) for row in rows] == ["ok"]
    if whole and writable and _checkpointed(path):
        logger.info("%s: finished the checkpoint a full disk had stopped", path)
    elif whole:
        logger.warning("%s: the last checkpoint did not finish (was the disk full?); its changes are whole in %s "
                       "and are copied in by the next write", path, write_ahead_log(path).name)
    return whole


def _checkpointed(path: Path) -> bool:
    """Copy the write-ahead log into the database file (SQLite's checkpoint); False where it cannot be done now (the
    disk still full, another process reading): the log keeps everything meanwhile."""
    import sqlite3

    try:
        connection = sqlite3.connect(str(path), timeout=10)
        try:
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return busy == 0


def pending_migrations(engine: Engine) -> set[int]:
    """The migration versions a readable hibug database lacks, read without writing; ProjectError when it is not
    one (no migrations table, unreadable, or newer than this hibug)."""
    versions = {m.version for m in MIGRATIONS}
    latest = max(versions)
    try:
        tables = set(inspect(engine).get_table_names())
        if "schema_migrations" not in tables:
            if not tables:
                return versions  # a new database (a server URL): everything to create
            shown = ", ".join(sorted(tables)[:8]) + (" ..." if len(tables) > 8 else "")
            raise ProjectError(f"{engine.url.render_as_string(hide_password=True)} is a database but not a hibug "
                               f"project (its tables: {shown}); point hibug at a project folder or an empty database")
        with engine.connect() as connection:
            done = {int(v) for v in connection.execute(text("SELECT version FROM schema_migrations")).scalars()}
    except DatabaseError as error:
        if engine.dialect.name != "sqlite":
            raise  # a server that does not answer is not a damaged file: the caller names it (location.reaching)
        raise ProjectError(f"the project's database cannot be read ({error.orig or error}); it is damaged; "
                           f"{RESTORE}") from None
    if max(done, default=0) > latest:
        raise ProjectError(f"this project's database is at schema version {max(done)}, newer than this hibug "
                           f"understands ({latest}); upgrade hibug to open it")
    return versions - done
