"""How a tool's answer is bounded: tables as JSON rows a page at a time behind a cursor, every page within a budget of
characters, and pictures as they are stored."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hibug_core.errors import HibugError

MAX_ANSWER_CHARS = 60_000  # one answer's text (about 15,000 tokens: under the 20,000 an assistant's context spares)
MAX_PAGE_CHARS = 40_000  # the rows of one page, leaving room for what is said beside them
MAX_PAGE_ROWS = 50


class BadCursor(HibugError):
    """A cursor that no page of this server handed out."""


@dataclass
class Answer:
    """A tool's answer: JSON-able values (said as text and as structured content) and pictures (PNG or JPEG bytes)."""

    values: dict
    pictures: list[tuple[bytes, str]] = field(default_factory=list)  # (bytes, MIME type)

    def text(self) -> str:
        said = json.dumps(self.values, ensure_ascii=False, default=str)
        if len(said) > MAX_ANSWER_CHARS:  # pages keep under it; a long free text (a reason, a comment) is cut, said so
            raise HibugError(f"the answer would be {len(said):,} characters, over the {MAX_ANSWER_CHARS:,} an "
                             "assistant can take: ask for fewer rows (page_size) or one slice")
        return said


def records(frame: pd.DataFrame) -> list[dict]:
    """A table as JSON rows: numbers as numbers, a missing value as null."""
    return json.loads(frame.to_json(orient="records", date_format="iso", default_handler=str))


def offset(cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    if not str(cursor).isdigit():
        raise BadCursor(f"cursor {str(cursor)[:40]!r} is not one this server handed out: pass the next_cursor of the "
                        "previous page, or none for the first")
    return int(cursor)


def page(rows: list[dict], cursor: str | None, size: int, budget: int = MAX_PAGE_CHARS) -> dict:
    """One page of `rows` from `cursor`: at most `size` rows and `budget` characters (at least one row), the total,
    and the cursor of the next page (None after the last)."""
    start = offset(cursor)
    taken, used = [], 0
    for row in rows[start:start + max(1, min(size, MAX_PAGE_ROWS))]:
        length = len(json.dumps(row, ensure_ascii=False, default=str))
        if taken and used + length > budget:
            break
        taken.append(row)
        used += length
    end = start + len(taken)
    return {"rows": taken, "total": len(rows), "next_cursor": str(end) if end < len(rows) else None}


def picture(path: Path) -> tuple[bytes, str]:
    """A stored thumbnail or crop as (bytes, MIME type)."""
    data = Path(path).read_bytes()
    return data, "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg"
