"""The review board: a status, an assignee and a comment thread per error slice (or saved selection of images),
written with optimistic concurrency so a stale edit is refused with the newer value, never silently lost."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import text

from hibug_core.errors import HibugError
from hibug_core.slices.search import describe, slice_id
from hibug_core.store.audit import COMMENT, OPEN_REVIEW, UPDATE_REVIEW, author_name, now, record
from hibug_core.store.db import read_connection, write_transaction
from hibug_core.values import normalise_name, normalise_prose

STATUSES = ("open", "confirmed bug", "fixed", "won't fix", "not a bug")
KINDS = ("slice", "selection")
MAX_COMMENT = 10_000


class ReviewError(HibugError):
    """A review edit that cannot be made (unknown status, empty comment, no such review)."""


@dataclass(frozen=True)
class Review:
    id: int
    target_kind: str
    target_key: str
    title: str
    definition: tuple | None
    status: str
    assignee: str | None
    version: int
    updated_by: str
    updated_at: str


class StaleReviewError(ReviewError):
    """Someone changed the review after the version an edit started from; nothing was written."""

    def __init__(self, mine: int, current: Review):
        self.current = current
        super().__init__(f"{current.updated_by} changed this review at {current.updated_at} (version "
                         f"{current.version}; you edited version {mine}): status '{current.status}', assignee "
                         f"'{current.assignee or 'nobody'}'. Nothing was overwritten; look at their change and "
                         "edit again.")


_COLUMNS = "id, target_kind, target_key, title, definition_json, status, assignee, version, updated_by, updated_at"


def _review(row) -> Review:
    definition = json.loads(row[4]) if row[4] else None
    return Review(int(row[0]), row[1], row[2], row[3], tuple(tuple(p) for p in definition) if definition else None,
                  row[5], row[6], int(row[7]), row[8], row[9])


def _select(connection, where: str, params: dict):
    """The one review matching `where`, as a row, or None."""
    return connection.execute(text(f"SELECT {_COLUMNS} FROM reviews WHERE {where}"), params).first()


def get_review(project, review_id: int) -> Review:
    with read_connection(project.engine) as connection:
        row = _select(connection, "id = :i", {"i": review_id})
    if row is None:
        raise ReviewError(f"no review #{review_id} in this project")
    return _review(row)


def ensure_review(project, definition=None, *, kind: str = "slice", key: str | None = None, title: str | None = None,
                  members=None, author: str | None = None) -> Review:
    """The review of a slice (by definition) or a named selection of images (`members`: their sample ids), created
    "open" the first time."""
    if kind not in KINDS:
        raise ReviewError(f"a review is of a {' or a '.join(KINDS)}, not '{kind}'")
    if kind == "slice":
        definition = tuple(tuple(pair) for pair in definition)
        key, title = slice_id(definition), title or describe(definition)
    elif not key:
        raise ReviewError("a selection's review needs a key (the saved view's name)")
    author, title = author_name(author), normalise_name(title, "the review's title") if title else None
    with write_transaction(project.engine) as connection:
        target = {"k": kind, "t": key}
        row = _select(connection, "target_kind = :k AND target_key = :t", target)
        if row is not None:
            return _review(row)
        stamp = now()
        connection.execute(
            text("INSERT INTO reviews (target_kind, target_key, title, definition_json, members_json, status, "
                 "assignee, version, created_by, created_at, updated_by, updated_at) "
                 "VALUES (:k, :t, :ti, :d, :m, 'open', NULL, "
                 "1, :a, :at, :a, :at)"),
            {"k": kind, "t": key, "ti": title or key, "d": json.dumps(definition) if definition else None,
             "m": json.dumps([int(m) for m in members]) if members is not None else None, "a": author, "at": stamp})
        row = _select(connection, "target_kind = :k AND target_key = :t", target)
        record(connection, author, OPEN_REVIEW, f"review:{row[0]}", None, {"title": row[3], "status": "open"})
    return _review(row)


def update_review(project, review_id: int, *, version: int, status: str | None = None,
                  assignee: str | None | bool = False, author: str | None = None) -> Review:
    """Change status and/or assignee (assignee=None unassigns; False leaves it) if the review is still at `version`;
    otherwise StaleReviewError carries the newer review."""
    if status is not None and status not in STATUSES:
        raise ReviewError(f"unknown status '{status}'; use one of {', '.join(STATUSES)}")
    author = author_name(author)
    if assignee:
        assignee = normalise_name(assignee, "the assignee")
    with write_transaction(project.engine) as connection:
        row = _select(connection, "id = :i", {"i": review_id})
        if row is None:
            raise ReviewError(f"no review #{review_id} in this project")
        before = _review(row)
        if before.version != version:
            raise StaleReviewError(version, before)
        after = {"status": status or before.status,
                 "assignee": before.assignee if assignee is False else (assignee or None)}
        stamp = now()
        changed = connection.execute(
            text("UPDATE reviews SET status = :s, assignee = :as, version = version + 1, updated_by = :a, "
                 "updated_at = :at WHERE id = :i AND version = :v"),
            {"s": after["status"], "as": after["assignee"], "a": author, "at": stamp, "i": review_id, "v": version})
        if changed.rowcount != 1:  # another writer got in between the read and the update
            raise StaleReviewError(version, _review(_select(connection, "id = :i", {"i": review_id})))
        record(connection, author, UPDATE_REVIEW, f"review:{review_id}",
               {"status": before.status, "assignee": before.assignee, "version": before.version},
               {**after, "version": version + 1})
    return get_review(project, review_id)


def add_comment(project, review_id: int, body: str, *, author: str | None = None) -> int:
    """Append a comment (stored and shown as plain text) and return its id."""
    body = normalise_prose(body, "the comment") or ""
    if not body:
        raise ReviewError("the comment is empty")
    if len(body) > MAX_COMMENT:
        raise ReviewError(f"the comment has {len(body):,} characters; keep it under {MAX_COMMENT:,}")
    author = author_name(author)
    with write_transaction(project.engine) as connection:
        if connection.execute(text("SELECT 1 FROM reviews WHERE id = :i"), {"i": review_id}).first() is None:
            raise ReviewError(f"no review #{review_id} in this project")
        connection.execute(text("INSERT INTO review_comments (review_id, author, body, created_at) "
                                "VALUES (:r, :a, :b, :t)"), {"r": review_id, "a": author, "b": body, "t": now()})
        comment_id = int(connection.execute(text("SELECT MAX(id) FROM review_comments WHERE review_id = :r"),
                                            {"r": review_id}).scalar_one())
        record(connection, author, COMMENT, f"review:{review_id}", None, {"comment": comment_id, "body": body})
    return comment_id


def members(project, review_id: int) -> list[int]:
    """The sample ids of a reviewed selection (empty for a slice)."""
    with read_connection(project.engine) as connection:
        raw = connection.execute(text("SELECT members_json FROM reviews WHERE id = :i"), {"i": review_id}).scalar()
    return json.loads(raw) if raw else []


def comments(project, review_id: int | None = None) -> pd.DataFrame:
    """Comments, oldest first (all, or one review's)."""
    query = "SELECT id, review_id, author, body, created_at FROM review_comments"
    params = {}
    if review_id is not None:
        query += " WHERE review_id = :r"
        params["r"] = review_id
    with read_connection(project.engine) as connection:
        return pd.read_sql_query(text(query + " ORDER BY id"), connection, params=params)


def reviews(project, *, status: str | None = None, person: str | None = None) -> pd.DataFrame:
    """The board: one row per review with its comment count, filtered by status and by a person (assignee, or who
    changed or commented on it)."""
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(text(
            "SELECT r.id, r.target_kind, r.target_key, r.title, r.definition_json, r.status, r.assignee, r.version, "
            "r.created_by, r.created_at, r.updated_by, r.updated_at, COUNT(c.id) AS comments FROM reviews r "
            "LEFT JOIN review_comments c ON c.review_id = r.id GROUP BY r.id, r.target_kind, r.target_key, r.title, "
            "r.definition_json, r.status, r.assignee, r.version, r.created_by, r.created_at, r.updated_by, "
            "r.updated_at ORDER BY r.updated_at DESC, r.id DESC"), connection)
        commenters = pd.read_sql_query(text("SELECT DISTINCT review_id, author FROM review_comments"), connection)
    if status:
        frame = frame[frame["status"] == status]
    if person:
        talked = set(commenters.loc[commenters["author"] == person, "review_id"])
        frame = frame[(frame["assignee"] == person) | (frame["updated_by"] == person) | (frame["created_by"] == person)
                      | frame["id"].isin(talked)]
    frame["definition"] = frame.pop("definition_json").map(
        lambda raw: tuple(tuple(p) for p in json.loads(raw)) if isinstance(raw, str) else None)
    return frame.reset_index(drop=True)


def with_slice_state(board: pd.DataFrame, report) -> pd.DataFrame:
    """Add each slice review's state against a slice report: "error slice" (reported now, with its rank and score),
    "not an error slice now" (its tags exist but it is not reported), or "stale" (a tag of its definition is gone, e.g.
    after re-tagging or an attribute edit). Selections are "selection"."""
    ranks = {sid: rank for rank, sid in enumerate(report.slices["slice_id"])}
    scores = dict(zip(report.slices["slice_id"], report.slices["score"]))
    known = {a: set(tags) for a, tags in zip(report.tags.attributes, report.tags.tags)}
    states, rank, score = [], [], []
    for kind, key, definition in zip(board["target_kind"], board["target_key"], board["definition"]):
        if kind != "slice":
            states.append("selection")
        elif key in ranks:
            states.append("error slice")
        elif definition and all(t in known.get(a, ()) for a, t in definition):
            states.append("not an error slice now")
        else:
            states.append("stale")
        rank.append(ranks[key] + 1 if key in ranks else None)
        score.append(scores.get(key))
    return board.assign(state=states, rank=pd.array(rank, dtype="Int64"), score=score)
