"""Database engines for a project: SQLite in the project folder by default, any SQLAlchemy URL otherwise."""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DatabaseError, OperationalError

from hibug_core.access import Role, require
from hibug_core.config import StoreConfig
from hibug_core.errors import ProjectError


def sqlite_url(path: Path, *, read_only: bool = False) -> str:
    """The URL of a SQLite file; read-only opens never write (on a read-only mount, not even WAL's shared memory)."""
    if not read_only:
        return f"sqlite:///{path}"
    immutable = "&immutable=1" if not os.access(path.parent, os.W_OK) else ""
    return f"sqlite:///file:{path}?mode=ro{immutable}&uri=true"


PAGE_SIZE = 16_384
DAMAGE_SIGNS = ("malformed", "not a database")  # SQLite's words for SQLITE_CORRUPT and SQLITE_NOTADB
_DAMAGED: set[str] = set()  # databases (by URL) found damaged in this process: never written to again
_CHECKED: set[str] = set()  # databases checked whole before this process first wrote to them
# The databases the process that started this one (a server starting a job) had checked whole: it writes for that
# process, with its trust (at ten million objects the check takes 20 s, which every job paid again).
CHECKED_ENV = "HIBUG_CHECKED_DATABASES"
_CHECKING: dict[str, threading.Lock] = {}  # per database: held while this process checks it, so it is checked once
_CHECKING_GUARD = threading.Lock()
_FOUND: dict[str, list[str]] = {}  # what each check before a first write found wrong


class StoreDamaged(ProjectError):
    """The project's database is damaged: what was read could not be, and nothing more is written to it."""

    def __init__(self, detail: str):
        super().__init__(f"the project's database is damaged ({detail}); nothing was written to it. Restore the "
                         "folder from a backup (`sqlite3 hibug.sqlite .recover` may save part of it), or create the "
                         "project again with `hibug new`; `hibug info PROJECT --check` lists what is damaged")


def is_damage(error: BaseException) -> bool:
    """Whether a database error says the file itself is damaged (not busy, locked or full); pandas' readers wrap
    the driver's error in one of their own, which is looked through."""
    if _pandas_wrapped(error):
        error = error.__cause__
    if not isinstance(error, (DatabaseError, sqlite3.DatabaseError)):  # a raw cursor's own error is sqlite3's
        return False
    return any(sign in _driver_words(error) for sign in DAMAGE_SIGNS)


def _pandas_wrapped(error: BaseException) -> bool:
    return type(error).__module__.startswith("pandas") and isinstance(error.__cause__, (DatabaseError,
                                                                                         sqlite3.DatabaseError))


def _driver_words(error: BaseException) -> str:
    """What the database driver said, without SQLAlchemy's SQL and parameters."""
    return str(getattr(error, "orig", None) or error)


def _damaged(engine: Engine, error: BaseException) -> StoreDamaged:
    _DAMAGED.add(str(engine.url))
    return StoreDamaged(_driver_words(error))


def integrity_problems(engine: Engine, *, whole: bool = True, limit: int = 20) -> list[str]:
    """What SQLite's own check finds wrong with the database (integrity_check, or quick_check, which skips matching
    indexes to their tables); [] when it is whole, and always [] on a server database, which checks itself."""
    if engine.dialect.name != "sqlite":
        return []
    try:
        with engine.connect() as connection:
            rows = connection.exec_driver_sql(f"PRAGMA {'integrity_check' if whole else 'quick_check'}({limit})").all()
    except DatabaseError as error:
        if not is_damage(error):
            raise
        rows = [(_driver_words(error),)]
    problems = [line for row in rows for line in str(row[0]).splitlines()
                if line != "ok" and not line.startswith("***")]  # "*** in database main ***": a heading
    if problems:
        _DAMAGED.add(str(engine.url))
    if whole:
        mark_damage(engine, problems)
    return problems


def damage_mark(engine: Engine) -> Path | None:
    """The file beside a SQLite database that says its last whole check (`hibug info --check`) found damage: every
    process then refuses to write to it, although its own quick check before a write sees less (None: a server
    database, which checks itself)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    path = Path(database.removeprefix("file:"))
    return path.with_name(path.name + ".damaged")


def mark_damage(engine: Engine, problems: list[str]) -> None:
    """Leave the damage_mark (the problems found) where a whole check found damage; remove it where none."""
    mark = damage_mark(engine)
    if mark is None:
        return
    try:
        if problems:
            mark.write_text("\n".join(problems[:20]) + "\n", encoding="utf-8")
        else:
            mark.unlink(missing_ok=True)
    except OSError:  # a read-only folder: this process knows (_DAMAGED), others check again
        pass


def checked_environment() -> dict[str, str]:
    """The environment of a process started to work for this one (a job): the databases this process checked whole
    before its first write, which that process then trusts as this one does (their damage marks still count)."""
    return {CHECKED_ENV: json.dumps(sorted(_CHECKED))} if _CHECKED else {}


def trust_checked_databases() -> None:
    """Take the databases the starting process checked (checked_environment) as checked here; junk is ignored."""
    try:
        urls = json.loads(os.environ.get(CHECKED_ENV) or "[]")
    except ValueError:
        return
    if isinstance(urls, list):
        _CHECKED.update(url for url in urls if isinstance(url, str))


def _refuse_damaged(engine: Engine) -> None:
    """Before this process first writes to a SQLite database: check it whole (quick_check), so that a write never
    lands in a damaged file just because it touched none of the damaged pages."""
    url = str(engine.url)
    mark = damage_mark(engine)
    if mark is not None and mark.exists():
        found = mark.read_text(encoding="utf-8", errors="replace").splitlines()[:2]
        raise StoreDamaged(f"found by `hibug info --check`: {'; '.join(found)}")
    problems = _check_once(engine)
    if problems:
        raise StoreDamaged("; ".join(problems))
    if url in _DAMAGED:
        raise StoreDamaged("found by an earlier read or check in this process")


def _check_once(engine: Engine) -> list[str]:
    """The check before this process's first write, made once however many threads ask (a second waits for the
    first's): what it found wrong ([] when whole, or trusted as checked)."""
    url = str(engine.url)
    if engine.dialect.name != "sqlite":
        return []
    if url not in _CHECKED:
        with _CHECKING_GUARD:
            lock = _CHECKING.setdefault(url, threading.Lock())
        with lock:
            if url not in _CHECKED:
                _FOUND[url] = integrity_problems(engine, whole=False, limit=3)
                _CHECKED.add(url)
    return _FOUND.get(url, [])


def check_ahead(engine: Engine) -> threading.Thread | None:
    """Make the check before this process's first write now, in a thread of its own, so that a person's first change
    does not wait for it (SQLite's quick check reads the whole file: a minute at ten million objects). What it finds
    damaged is refused at the write, as if found then. None where nothing is to check (read-only, a server database,
    checked already)."""
    if engine.dialect.name != "sqlite" or "mode=ro" in str(engine.url) or str(engine.url) in _CHECKED:
        return None

    def check():
        with contextlib.suppress(Exception):  # the write that needs the check makes it again, and says what failed
            _check_once(engine)

    thread = threading.Thread(target=check, name="hibug-check-before-writes", daemon=True)
    thread.start()
    return thread


def make_engine(url: str, config: StoreConfig = StoreConfig()) -> Engine:
    """An engine whose transactions really are transactions, on SQLite too (DDL included)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": config.busy_timeout_ms / 1000})
    read_only = "mode=ro" in url

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection, _record):
        # Hand transaction control to SQLAlchemy (pysqlite's own handling skips DDL).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not read_only:
            # A new database's pages: 16 KiB rather than 4 (a tenth off a million-row import, mostly its index
            # builds and commit). Set before WAL, which fixes the size; a no-op for an existing database.
            cursor.execute(f"PRAGMA page_size={PAGE_SIZE}")
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
        cursor.execute(f"PRAGMA busy_timeout={int(config.busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection):
        # A writer takes the lock up front so that two writers queue instead of deadlocking.
        immediate = connection.get_execution_options().get("hibug_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


WRITE_LOCK = 7_245_311  # PostgreSQL advisory lock that writers queue on, as SQLite's BEGIN IMMEDIATE makes them


@contextlib.contextmanager
def write_transaction(engine: Engine, *, bulk: bool = False, private: bool = False) -> Iterator[Connection]:
    """One atomic write: everything inside commits together or not at all. Writers to a project take turns (on
    SQLite through BEGIN IMMEDIATE, on PostgreSQL through a transaction-scoped advisory lock), so a check made inside
    (a version, a newest row) still holds when the write lands. `bulk` (SQLite): a large write whose references are
    made by the writer itself; `private`: and no other process can open the database (see _bulk_settings)."""
    require(Role.EDITOR)  # a viewer of a served dashboard changes nothing, whichever page or call asks
    if "mode=ro" in str(engine.url):
        raise ProjectError("this project is open read-only (its folder cannot be written, or only reading was "
                           "asked for); nothing was changed. Copy it somewhere writable to edit it")
    _refuse_damaged(engine)
    try:
        with engine.connect() as connection:
            connection.execution_options(hibug_write=True)
            with _bulk_settings(connection, private) if bulk else contextlib.nullcontext():
                with connection.begin():
                    if connection.dialect.name == "postgresql":
                        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
                    yield connection
    except (DatabaseError, sqlite3.DatabaseError) as error:
        if is_damage(error):
            raise _damaged(engine, error) from None
        if not isinstance(error, OperationalError):
            raise
        if "readonly" in str(error.orig):
            raise ProjectError(f"the project's database cannot be written ({error.orig}); nothing was changed. "
                               "Check the folder's permissions, or copy it somewhere writable") from None
        if "full" in str(error.orig):
            raise ProjectError(f"the disk holding the project is full ({error.orig}); nothing was changed. Free "
                               "some space and run again") from None
        raise


BULK_CACHE_KIB = 262_144  # SQLite's page cache during a bulk write: a million-row unique index stays in memory


@contextlib.contextmanager
def _bulk_settings(connection: Connection, private: bool) -> Iterator[None]:
    """SQLite settings for one large write, restored after it (about a third off a million-row import):
    - foreign keys unchecked: the writer sets every reference from ids it has just read or inserted, and checking
      costs a B-tree lookup per row;
    - a 256 MiB page cache instead of 2 MiB;
    - when `private` (a database no other process can open, e.g. a project being created in its staging folder),
      the rollback journal instead of WAL: pages new to the file need no journal, where WAL writes every page
      twice (to the log, then at the checkpoint). Atomic either way. Not where others may connect: a connection
      opened meanwhile would wait for the write to end to switch the database back to WAL."""
    if connection.dialect.name != "sqlite":
        yield
        return
    raw = connection.connection.driver_connection  # outside SQLAlchemy's transaction: these PRAGMAs must be
    # run between transactions, where SQLite ignores foreign_keys inside one
    (cache,) = raw.execute("PRAGMA cache_size").fetchone()
    (journal,) = raw.execute("PRAGMA journal_mode").fetchone()
    raw.execute("PRAGMA foreign_keys=OFF")
    raw.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    switched = False
    if private and journal == "wal":
        try:  # refused while another connection is open (by returning "wal", or as locked)
            switched = raw.execute("PRAGMA journal_mode=DELETE").fetchone()[0] != "wal"
        except sqlite3.OperationalError:
            pass
    try:
        yield
    finally:
        if raw.in_transaction:  # a failure SQLAlchemy did not roll back yet: these PRAGMAs need it ended
            raw.rollback()
        raw.execute(f"PRAGMA cache_size={cache}")
        raw.execute("PRAGMA foreign_keys=ON")
        if switched:
            raw.execute("PRAGMA journal_mode=WAL")


@contextlib.contextmanager
def keys_checked_at_end(connection: Connection, tables: tuple[str, ...]) -> Iterator[None]:
    """PostgreSQL, inside the caller's transaction: the foreign keys of `tables` dropped while rows are loaded and
    added again at the end, which checks every row with one join instead of a trigger per row (a million-row
    import: 34 -> 11 s). Dropping a key locks its table against readers until the commit, so this is only for
    tables no one reads yet (a project's first import); a failure rolls the drop back with everything else.
    SQLite: nothing (its bulk mode turns foreign keys off and the writer checks them, see _bulk_settings)."""
    if connection.dialect.name != "postgresql":
        yield
        return
    keys = connection.exec_driver_sql(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'f' AND conrelid::regclass::text = ANY(%(tables)s) ORDER BY conname",
        {"tables": list(tables)}).all()
    for table, name, _ in keys:
        connection.exec_driver_sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    yield
    for table, name, definition in keys:
        connection.exec_driver_sql(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')


INSERT_BLOCK_ROWS = 50_000


def insert_columns(connection: Connection, table: str, columns: dict[str, object], n_rows: int) -> None:
    """`n_rows` rows given as columns: each a sequence of `n_rows` values or one value for every row; None, and NaN
    in a float array, is stored as NULL. Blocks of rows are laid out as a numpy object matrix whose reshaped rows are
    the parameters of multi-row INSERTs (PostgreSQL: COPY): none of SQLAlchemy's per-row parameter handling, no
    Python tuple per row (what keeps a million-row import near a bare to_sql)."""
    if n_rows == 0:
        return
    names = list(columns)
    arrays = [np.asarray(values, dtype=object) if isinstance(values, (list, tuple)) else values
              for values in columns.values()]
    postgres = connection.dialect.name == "postgresql"
    # Many rows per statement (within SQLite's oldest limit of 999 parameters): half the time of one row each.
    per_statement = max(1, min(200, 999 // len(names)))
    block = INSERT_BLOCK_ROWS // per_statement * per_statement  # a block's objects stay in the CPU's caches
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        parts = [values[start:stop] if isinstance(values, np.ndarray) else values for values in arrays]
        if postgres:
            _copy_rows(connection, table, names, parts, stop - start)
            continue
        matrix = np.empty((stop - start, len(names)), dtype=object)
        for j, part in enumerate(parts):
            matrix[:, j] = part  # numpy numbers become Python ints and floats, as the drivers want them
            if isinstance(part, np.ndarray) and part.dtype.kind == "f":
                matrix[np.isnan(part), j] = None
        _insert_rows(connection, table, names, matrix, per_statement)


def _copy_rows(connection: Connection, table: str, names: list[str], parts: list, n_rows: int) -> None:
    """PostgreSQL's COPY (several times faster than INSERTs there) of rows written as CSV by pyarrow: no Python call
    per row. Every value is quoted and NULL left empty, which COPY's CSV format reads as NULL."""
    import pyarrow as pa
    import pyarrow.csv

    table_data = pa.table({name: _arrow_column(part, n_rows) for name, part in zip(names, parts)})
    sink = pa.BufferOutputStream()
    pyarrow.csv.write_csv(table_data, sink, pyarrow.csv.WriteOptions(include_header=False,
                                                                      quoting_style="all_valid"))
    with connection.connection.cursor() as cursor:
        with cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT csv)") as copy:
            copy.write(sink.getvalue().to_pybytes())


def _arrow_column(values, n_rows: int):
    """One column of a block for pyarrow: a value for every row repeated, NaN and None as null."""
    import pyarrow as pa

    if not isinstance(values, np.ndarray):
        values = np.full(n_rows, values, dtype=object if values is None or isinstance(values, str) else None)
    if values.dtype.kind == "f":
        return pa.array(values, mask=np.isnan(values))
    return pa.array(values, from_pandas=values.dtype == object)


def _insert_rows(connection: Connection, table: str, names: list[str], matrix: np.ndarray, per_statement: int) -> None:
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    one_row = f"({', '.join([marker] * len(names))})"
    insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES "
    full = len(matrix) // per_statement * per_statement
    if full:
        connection.exec_driver_sql(insert + ", ".join([one_row] * per_statement),
                                   list(map(tuple, matrix[:full].reshape(-1, per_statement * len(names)).tolist())))
    if full < len(matrix):
        connection.exec_driver_sql(insert + one_row, list(map(tuple, matrix[full:].tolist())))


def in_chunks(values, size: int = 500) -> Iterator[tuple[str, dict]]:
    """For a statement over many values, chunk by chunk: the list "(:v0, :v1, ...)" an `IN` names and its parameters
    (a statement's parameters stay under every driver's limit)."""
    values = [v.item() if isinstance(v, np.generic) else v for v in values]
    for start in range(0, len(values), size):
        chunk = values[start:start + size]
        yield "(" + ", ".join(f":v{k}" for k in range(len(chunk))) + ")", {f"v{k}": v for k, v in enumerate(chunk)}


@contextlib.contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A consistent snapshot for reading; StoreDamaged where the database turns out to be damaged."""
    try:
        with engine.connect() as connection:
            with connection.begin():
                yield connection
    except Exception as error:  # the driver's, SQLAlchemy's or pandas' wrapping of them
        if is_damage(error):
            raise _damaged(engine, error.__cause__ if _pandas_wrapped(error) else error) from None
        raise


def sql_values(column) -> np.ndarray:
    """A pandas column for insert_columns: floats as they are (NaN is NULL), anything else with None where missing."""
    import pandas as pd

    if column.dtype.kind == "f":
        return column.to_numpy(float)
    values = column.to_numpy(object, copy=True)
    values[pd.isna(values)] = None
    return values
