"""Saved views: a named page with its URL query (slice, settings, filters) that teammates open from a link."""
from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pandas as pd
from sqlalchemy import text

from hibug_core.review.board import ReviewError
from hibug_core.store.audit import SAVE_VIEW, author_name, now, record
from hibug_core.store.db import read_connection, write_transaction
from hibug_core.values import normalise_name

PAGE_PATH = re.compile(r"^[A-Za-z0-9_]{0,64}$")  # a page's URL path ("Error_slices"; "" is the front page)


def save_view(project, name: str, page: str, query: dict[str, str], *, author: str | None = None) -> int:
    """Store a view under a new name; a name already taken is refused (naming who took it)."""
    if not str(name).strip():
        raise ReviewError("a view needs a name")
    name = normalise_name(name, "the view's name")
    if not PAGE_PATH.match(page):
        raise ReviewError(f"'{page}' is not a page of the dashboard: use its URL path, e.g. Error_slices")
    author = author_name(author)
    query = {str(k): str(v) for k, v in query.items()}
    with write_transaction(project.engine) as connection:
        taken = connection.execute(text("SELECT author, created_at FROM saved_views WHERE name = :n"),
                                   {"n": name}).first()
        if taken is not None:
            raise ReviewError(f"a view named '{name}' was saved by {taken[0]} at {taken[1]}; choose another name")
        connection.execute(text("INSERT INTO saved_views (name, page, query_json, author, created_at) "
                                "VALUES (:n, :p, :q, :a, :t)"),
                           {"n": name, "p": page, "q": json.dumps(query, sort_keys=True), "a": author, "t": now()})
        view_id = int(connection.execute(text("SELECT id FROM saved_views WHERE name = :n"), {"n": name}).scalar_one())
        record(connection, author, SAVE_VIEW, f"view:{view_id}", None, {"name": name, "page": page, "query": query})
    return view_id


def saved_views(project) -> pd.DataFrame:
    """Every view, newest first, with its link path ("/Error_slices?slice=...")."""
    with read_connection(project.engine) as connection:
        frame = pd.read_sql_query(text("SELECT id, name, page, query_json, author, created_at FROM saved_views "
                                       "ORDER BY id DESC"), connection)
    frame["query"] = frame.pop("query_json").map(json.loads)
    frame["link"] = [view_path(p, q) for p, q in zip(frame["page"], frame["query"])]
    return frame


def view_path(page: str, query: dict[str, str]) -> str:
    return f"/{page}" + (f"?{urlencode(query)}" if query else "")
