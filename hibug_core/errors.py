"""Exceptions of hibug_core: each one says what went wrong and what to fix."""
from __future__ import annotations

import difflib
import errno
from dataclasses import dataclass

from hibug_core.redaction import redact


def nearest(value: str, choices) -> str | None:
    """The choice nearest to a mistyped value, case aside (None when none is near): for a "did you mean"."""
    spelt = {str(choice).lower(): str(choice) for choice in choices}
    near = difflib.get_close_matches(str(value).lower(), list(spelt), n=1, cutoff=0.6)
    return spelt[near[0]] if near else None


def rename_hint(wanted: str, columns) -> str:
    """'; the file has 'x': rename it 'wanted'' for a missing column whose name one of `columns` looks mistyped from;
    '' when none is near."""
    found = nearest(wanted, columns)
    return f"; the file has '{found}': rename it '{wanted}'" if found else ""


class HibugError(Exception):
    """Base class of every error hibug reports to a person; its message never carries a secret (redaction)."""

    def __init__(self, *args):
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ConfigError(HibugError, ValueError):
    """A configuration refused when built; the message names every bad field and what it must be."""


def check_fields(config, rules: dict[str, tuple[bool, str]]) -> None:
    """Raise ConfigError naming each field whose rule failed: rules = {field: (ok, what it must be)}."""
    bad = [f"{name} = {getattr(config, name)!r} (must be {must})" for name, (ok, must) in rules.items() if not ok]
    if bad:
        raise ConfigError(f"invalid {type(config).__name__}: " + "; ".join(bad))


class SchemaError(HibugError, ValueError):
    """An attribute schema (or one attribute) refused when built or edited; nothing was stored."""


def validation_reasons(error) -> str:
    """A pydantic ValidationError's reasons as one line, without pydantic's prefixes."""
    return "; ".join(issue["msg"].removeprefix("Value error, ") for issue in error.errors())


class ProjectError(HibugError):
    """A project folder or store that cannot be opened, created or migrated."""


class ModelLoadError(HibugError):
    """A model (encoder, LLM, generator) that cannot be loaded or reached."""


class TaggingError(HibugError):
    """Tagging that could not be done; tags already stored are kept."""


def unreadable_images(paths: list, kept: str) -> str:
    """What to say of images a run could not read: how many, one of them, how to fix or remove them, what was kept."""
    return (f"{len(paths)} image(s) could not be read, e.g. {paths[0]}; fix the file, or remove such samples with "
            f"`hibug remove PROJECT --unreadable` (or the Overview's Remove samples), and run again ({kept} are "
            "stored)")


@dataclass(frozen=True)
class RowIssue:
    """One problem in one cell of a manifest; row is 1-based over data rows (the header is not counted). In a JSON
    file (COCO) `unit` names the array ("annotations") and `row` is the record's 0-based position in it, `column` its
    field."""

    row: int | None
    column: str | None
    message: str
    unit: str = "row"

    def __str__(self) -> str:
        where = []
        if self.unit == "row":
            if self.row is not None:
                where.append(f"row {self.row}")
            if self.column is not None:
                where.append(f"column '{self.column}'")
        else:
            where.append(self.unit if self.row is None else f"{self.unit}[{self.row}]")
            if self.column is not None:
                where.append(f"field '{self.column}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class Issues:
    """Collects the problems of one file up to a cap (the rest are not looked for)."""

    def __init__(self, cap: int):
        self.cap = cap
        self.items: list[RowIssue] = []
        self.total = 0  # every problem found, the ones past the cap counted but not kept
        self.unchecked: str | None = None  # what was not looked at because the cap was reached first

    def add(self, row_index: int | None, column: str | None, message: str, *, unit: str = "row") -> None:
        """row_index: 0-based (a manifest row is reported 1-based, a JSON record by its index)."""
        self.total += 1
        if len(self.items) < self.cap:
            row = None if row_index is None else row_index + (unit == "row")
            self.items.append(RowIssue(row, column, message, unit))

    def add_rows(self, row_indexes, column: str | None, message) -> None:
        """add() for many 0-based rows at once: every one counted, a message (message(i)) made only for those kept."""
        rows = [int(i) for i in row_indexes]
        room = max(self.cap - len(self.items), 0)
        for i in rows[:room]:
            self.add(i, column, message(i))
        self.total += max(len(rows) - room, 0)

    @property
    def full(self) -> bool:
        return len(self.items) >= self.cap


class ManifestError(HibugError):
    """A manifest that cannot be imported; nothing was written to the project."""

    max_listed = 20

    def __init__(self, source: str, issues: list[RowIssue], *, found: Issues | None = None):
        """found: the Issues the list came from, for the count of every problem and what was left unchecked."""
        self.source = source
        self.issues = list(issues)
        listed = len(self.issues)
        total = max(found.total, listed) if found is not None else listed
        shown = min(listed, self.max_listed)
        head = f"{source}: {total:,} problem{'s' if total != 1 else ''} found"
        if total > shown:
            head += f", the first {shown:,} below"
        if found is not None and found.unchecked:
            head += f"; {found.unchecked} not checked yet"
        lines = [f"  {issue}" for issue in self.issues[:shown]]
        if total > shown:
            lines.append(f"  ... and {total - shown:,} more")
        super().__init__("\n".join([f"{head}; nothing was imported.", *lines]))

    @property
    def messages(self) -> list[str]:
        return [str(issue) for issue in self.issues]


def environment_failure(error: Exception) -> str | None:
    """What to tell a person about a failure of the machine rather than of hibug (a full disk, a database that
    fails underneath), without SQL or parameters; None for anything else (a bug: its traceback is wanted)."""
    from sqlalchemy.exc import DatabaseError

    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return (f"the disk is full ({error.filename or error.strerror}); free some space and run again. Nothing "
                "half-written was kept.")
    if isinstance(error, DatabaseError):
        return (f"the project's database failed ({error.orig}); nothing half-written was kept. If this repeats, the "
                "database may be damaged: restore the project folder from a backup")
    return None
