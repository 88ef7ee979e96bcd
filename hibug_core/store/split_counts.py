"""The samples per split, kept in their own table by the writers of samples (the import, the removal) for `hibug info`
and every page that offers a split: counting them took 0.7 s at ten million objects."""
from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, text


def add_split_counts(connection: Connection, splits, sign: int = 1) -> None:
    """Add these samples' splits to the counts (sign -1: take them away), in the writer's transaction."""
    names, counts = np.unique(np.asarray(splits, dtype=object).astype(str), return_counts=True)
    if not len(names):
        return
    connection.execute(
        text("INSERT INTO split_counts (split, n) VALUES (:s, :n) "
             "ON CONFLICT (split) DO UPDATE SET n = split_counts.n + excluded.n"),
        [{"s": str(name), "n": sign * int(n)} for name, n in zip(names, counts)])


def read_split_counts(connection: Connection) -> dict[str, int]:
    """Samples per split, the splits in name order; a split with none left is not named."""
    return {str(split): int(n) for split, n in connection.execute(
        text("SELECT split, n FROM split_counts WHERE n > 0 ORDER BY split"))}


__all__ = ["add_split_counts", "read_split_counts"]
