"""Database engines for a project: SQLite in the project folder by default, any SQLAlchemy URL otherwise."""
from __future__ import annotations

import contextlib
from typing import Iterator

from sqlalchemy import Connection, Engine, create_engine, event

from hibug_core.config import StoreConfig


def make_engine(url: str, config: StoreConfig = StoreConfig()) -> Engine:
    """An engine whose transactions really are transactions, on SQLite too (DDL included)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": config.busy_timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection, _record):
        # Hand transaction control to SQLAlchemy (pysqlite's own handling skips DDL).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
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
    with engine.connect() as connection:
        connection.execution_options(hibug_write=True)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            yield connection


@contextlib.contextmanager
def read_connection(engine: Engine) -> Iterator[Connection]:
    """A consistent snapshot for reading."""
    with engine.connect() as connection:
        with connection.begin():
            yield connection
