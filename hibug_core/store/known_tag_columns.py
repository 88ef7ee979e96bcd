"""Imported tags stored as columns: per import and attribute one row holding the samples that have a tag (runs of
consecutive ids) and each one's tag as a small integer code into the attribute's values. Ten million objects with
fifty tags each are fifty rows of a few megabytes, not five hundred million rows of one tag."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection, text

if TYPE_CHECKING:
    import pandas as pd

TABLE = """CREATE TABLE known_tag_columns (
    import_id INTEGER NOT NULL REFERENCES imports(id), attribute TEXT NOT NULL, id_runs {blob} NOT NULL,
    codes {blob} NOT NULL, code_bytes INTEGER NOT NULL, values_json TEXT NOT NULL,
    PRIMARY KEY (import_id, attribute))"""
_IDS = np.dtype("<i8")
_CODES = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4")}


def blob_type(connection: Connection) -> str:
    return "BLOB" if connection.dialect.name == "sqlite" else "BYTEA"


def id_runs(ids: np.ndarray) -> np.ndarray:
    """Increasing ids as (first, count) pairs of consecutive ids, one after the other: an import's samples take
    consecutive ids, so its tags' ids are a few pairs whatever their number."""
    if not len(ids):
        return np.zeros(0, dtype=_IDS)
    starts = np.r_[0, np.flatnonzero(np.diff(ids) != 1) + 1]
    counts = np.diff(np.r_[starts, len(ids)])
    return np.column_stack([ids[starts], counts]).astype(_IDS).ravel()


def ids_of_runs(runs: np.ndarray) -> np.ndarray:
    """The ids that id_runs made its pairs of."""
    first, count = runs[0::2], runs[1::2]
    if not len(first):
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(first - np.r_[0, np.cumsum(count)[:-1]], count)
    return (np.arange(int(count.sum()), dtype=np.int64) + offsets).astype(np.int64)


def write(connection: Connection, import_id: int, attribute: str, sample_ids: np.ndarray, tags) -> None:
    """Store one attribute's tags of one import's samples (None, NaN or '' is no tag: nothing stored for that sample):
    a column of texts or a pandas Categorical (its codes are used as they are)."""
    import pandas as pd

    values = tags if isinstance(tags, pd.Categorical) else pd.Categorical(
        pd.Series(np.asarray(tags, dtype=object)).replace("", None))
    given = values.codes >= 0
    if not given.any():
        return
    ids = np.asarray(sample_ids, dtype=np.int64)[given]
    order = np.argsort(ids, kind="stable")
    used, codes = np.unique(values.codes[given][order], return_inverse=True)  # only the values some sample has
    width = next(b for b, t in _CODES.items() if len(used) <= np.iinfo(t).max + 1)
    connection.execute(
        text("INSERT INTO known_tag_columns (import_id, attribute, id_runs, codes, code_bytes, values_json) "
             "VALUES (:i, :a, :r, :c, :b, :v)"),
        {"i": int(import_id), "a": attribute, "r": id_runs(ids[order]).tobytes(),
         "c": codes.astype(_CODES[width]).tobytes(), "b": width,
         "v": json.dumps([str(v) for v in np.asarray(values.categories, dtype=object)[used]])})


def read(connection: Connection) -> pd.DataFrame:
    """Every stored tag: one categorical column per attribute (sorted by name), indexed by sample id (sorted), NaN
    where a sample has none; samples removed since their import are left out."""
    import pandas as pd

    rows = connection.execute(text("SELECT attribute, id_runs, codes, code_bytes, values_json FROM known_tag_columns "
                                   "ORDER BY import_id")).all()
    parts: dict[str, list[tuple[np.ndarray, np.ndarray, list[str]]]] = {}
    for name, runs, codes, width, values in rows:
        parts.setdefault(name, []).append((np.frombuffer(runs, dtype=_IDS),
                                           np.frombuffer(codes, dtype=_CODES[int(width)]), json.loads(values)))
    # The samples each attribute tags, known by its runs: the attributes mostly share one set, whose ids are made once
    # (ten million ids per attribute held at once were gigabytes).
    tagged = {name: b"".join(runs.tobytes() for runs, _, _ in part) for name, part in parts.items()}
    first: dict[bytes, str] = {}
    for name, key in tagged.items():
        first.setdefault(key, name)
    ids_of = {key: np.concatenate([ids_of_runs(runs) for runs, _, _ in parts[name]]) for key, name in first.items()}
    index = np.unique(np.concatenate(list(ids_of.values()))) if ids_of else np.zeros(0, dtype=np.int64)
    positions = {key: np.searchsorted(index, ids) for key, ids in ids_of.items()}
    del ids_of
    placed = {}
    for name in sorted(parts):
        categories = sorted(set().union(*(values for _, _, values in parts[name])))
        position = {value: k for k, value in enumerate(categories)}
        small = np.min_scalar_type(-len(categories))  # codes of a few values: a byte each
        full = np.full(len(index), -1, dtype=small)
        full[positions[tagged[name]]] = np.concatenate([np.array([position[v] for v in values], dtype=small)[codes]
                                                        for _, codes, values in parts[name]])
        placed[name] = pd.Categorical.from_codes(full, categories)
    frame = pd.DataFrame(placed, index=pd.Index(index.astype(np.int64), name="sample_id"), copy=False)
    if len(frame) and connection.execute(text("SELECT 1 FROM imports WHERE kind = 'removal' LIMIT 1")).first():
        kept = np.array(connection.execute(text("SELECT id FROM samples")).scalars().all(), dtype=np.int64)
        frame = frame[frame.index.isin(kept)]
    return frame


def attributes(connection: Connection) -> set[str]:
    """The attributes some import gave tags of."""
    return set(connection.execute(text("SELECT DISTINCT attribute FROM known_tag_columns")).scalars())


def any_stored(connection: Connection) -> bool:
    return connection.execute(text("SELECT 1 FROM known_tag_columns LIMIT 1")).first() is not None


def from_rows(connection: Connection) -> None:
    """Migration: the tags of the table of one row per tag (schema versions 1 to 15) moved into columns, per import
    and attribute; the old table dropped. Applied again (its record lost), it changes nothing."""
    import pandas as pd
    from sqlalchemy import inspect

    connection.execute(text(TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS").format(
        blob=blob_type(connection))))
    if not inspect(connection).has_table("known_tags"):
        return
    rows = pd.read_sql_query(text("SELECT k.attribute, k.sample_id, k.tag, s.import_id FROM known_tags k "
                                  "JOIN samples s ON s.id = k.sample_id"), connection)
    for (import_id, attribute), group in rows.groupby(["import_id", "attribute"], sort=True):
        write(connection, int(import_id), str(attribute), group["sample_id"].to_numpy(np.int64),
              group["tag"].to_numpy(object))
    connection.execute(text("DROP TABLE known_tags"))
