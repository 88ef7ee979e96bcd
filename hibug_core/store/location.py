"""Where a project folder's database is: its own SQLite file, or a PostgreSQL server that a link file names."""
from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

from hibug_core.errors import ProjectError

DB_FILE = "hibug.sqlite"
LINK_FILE = "hibug.postgres"  # instead of hibug.sqlite: the URL of the project's PostgreSQL database
DIALECTS = ("postgresql", "postgresql+psycopg")


def project_file(folder: Path) -> Path | None:
    """The file that makes `folder` a project (its SQLite database, or the link to its PostgreSQL one); None when it
    has neither."""
    for name in (DB_FILE, LINK_FILE):
        if (Path(folder) / name).exists():
            return Path(folder) / name
    return None


def postgres_url(url: str) -> str:
    """A PostgreSQL URL as hibug connects with it (psycopg 3); ProjectError saying what to give otherwise."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ProjectError("the database is not a URL; give one like postgresql://user@host:5432/database") from None
    if parsed.drivername not in DIALECTS:
        raise ProjectError(f"hibug keeps a project's metadata on PostgreSQL or in the folder's own SQLite file, not on "
                           f"{parsed.drivername}; give postgresql://user@host:5432/database")
    if not parsed.database:
        raise ProjectError("the PostgreSQL URL names no database; end it with /database")
    if importlib.util.find_spec("psycopg") is None:
        raise ProjectError("a project on PostgreSQL needs its client library: pip install 'hibug[postgres]'")
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def write_link(folder: Path, url: str) -> None:
    """Name the database in the folder, without its password (that stays with the user: PGPASSWORD or ~/.pgpass,
    which PostgreSQL's client reads itself), so the folder opens as a project wherever the server can be reached."""
    from sqlalchemy.engine import make_url

    without_password = make_url(postgres_url(url))._replace(password=None).render_as_string(hide_password=False)
    (Path(folder) / LINK_FILE).write_text(without_password + "\n")


def linked_url(folder: Path) -> str | None:
    """The database a project folder names (None: the folder has no link file); ProjectError when the file is not a
    PostgreSQL URL."""
    link = Path(folder) / LINK_FILE
    if not link.is_file():
        return None
    try:
        text = link.read_text(errors="strict").strip()
    except (OSError, UnicodeDecodeError):
        raise ProjectError(f"{link} cannot be read as the URL of the project's database; write its "
                           "postgresql://user@host:5432/database URL in it") from None
    try:
        return postgres_url(text)
    except ProjectError as error:
        raise ProjectError(f"{link}: {error}") from None


@contextlib.contextmanager
def reaching(url: str) -> Iterator[None]:
    """Turn a PostgreSQL server's refusal (down, unknown database, wrong password) into a ProjectError that names the
    database without its password and says what to check."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    try:
        yield
    except OperationalError as error:
        parsed = make_url(url)
        where = f"{parsed.database} on {parsed.host or 'the local socket'}" + (f":{parsed.port}" if parsed.port else "")
        lines = str(getattr(error, "orig", None) or error).strip().splitlines()
        raise ProjectError(f"cannot reach the project's database {where}: {lines[0] if lines else 'no answer'}; check "
                           "that its server runs and PGPASSWORD or ~/.pgpass holds its password") from None
