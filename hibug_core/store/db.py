"""Database engines for a project: SQLite in the project folder by default, any SQLAlchemy URL otherwise."""
from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path
from typing import Iterator

import numpy as np
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError

from hibug_core.config import StoreConfig
from hibug_core.errors import ProjectError


def sqlite_url(path: Path, *, read_only: bool = False) -> str:
    """The URL of a SQLite file; read-only opens never write (on a read-only mount, not even WAL's shared memory)."""
    if not read_only:
        return f"sqlite:///{path}"
    immutable = "&immutable=1" if not os.access(path.parent, os.W_OK) else ""
    return f"sqlite:///file:{path}?mode=ro{immutable}&uri=true"


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
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One atomic write: everything inside commits together or not at all. Writers to a project take turns (on
    SQLite through BEGIN IMMEDIATE, on PostgreSQL through a transaction-scoped advisory lock), so a check made inside
    (a version, a newest row) still holds when the write lands."""
    if "mode=ro" in str(engine.url):
        raise ProjectError("this project is open read-only (its folder cannot be written, or only reading was "
                           "asked for); nothing was changed. Copy it somewhere writable to edit it")
    try:
        with engine.connect() as connection:
            connection.execution_options(hibug_write=True)
            with connection.begin():
                if connection.dialect.name == "postgresql":
                    connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
                yield connection
    except OperationalError as error:
        if "readonly" in str(error.orig):
            raise ProjectError(f"the project's database cannot be written ({error.orig}); nothing was changed. "
                               "Check the folder's permissions, or copy it somewhere writable") from None
        if "full" in str(error.orig):
            raise ProjectError(f"the disk holding the project is full ({error.orig}); nothing was changed. Free "
                               "some space and run again") from None
        raise


def insert_rows(connection: Connection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Many rows by driver-level executemany, 200 rows to a statement (PostgreSQL: one COPY): plain tuples of Python
    values, none of SQLAlchemy's per-row parameter handling (what keeps a million-row import near a bare to_sql)."""
    if not rows:
        return
    if connection.dialect.name == "postgresql":  # COPY: several times faster than INSERTs on PostgreSQL
        with connection.connection.cursor() as cursor:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        return
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    one_row = f"({', '.join([marker] * len(columns))})"
    # Many rows per statement (within SQLite's oldest limit of 999 parameters): half the time of one row each.
    per_statement = max(1, min(200, 999 // len(columns)))
    full = len(rows) // per_statement * per_statement
    if full:
        values = list(itertools.chain.from_iterable(rows[:full]))
        width = per_statement * len(columns)
        connection.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                                   f"{', '.join([one_row] * per_statement)}",
                                   [tuple(values[i : i + width]) for i in range(0, len(values), width)])
    if full < len(rows):
        connection.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES {one_row}", rows[full:])


def read_columns(connection: Connection, sql: str, params: tuple = ()) -> dict[str, np.ndarray]:
    """A query's result as one object array per column, fetched through the driver's cursor (a million rows without
    a Python row object each from SQLAlchemy). `sql` uses ? for parameters."""
    if connection.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    result = connection.exec_driver_sql(sql, params)
    names = list(result.keys())
    rows = result.cursor.fetchall()
    result.close()
    if not rows:
        return {name: np.empty(0, dtype=object) for name in names}
    table = np.array(rows, dtype=object)  # (rows, columns): numpy transposes 2-3x faster than zip(*rows)
    return {name: np.ascontiguousarray(table[:, i]) for i, name in enumerate(names)}


def nullable(values) -> list:
    """A float array as Python values with None for NaN (SQL NULL)."""
    array = np.asarray(values, dtype=float)
    out = array.astype(object)
    out[np.isnan(array)] = None
    return out.tolist()


@contextlib.contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A consistent snapshot for reading."""
    with engine.connect() as connection:
        with connection.begin():
            yield connection
