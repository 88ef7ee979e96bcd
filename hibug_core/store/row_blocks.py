"""Query results read a block of rows at a time into typed columns (through a server-side cursor on PostgreSQL), so a
read of ten million rows never holds them all as Python row objects."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection

if TYPE_CHECKING:
    import pandas as pd

BLOCK_ROWS = 200_000


def read_columns(connection: Connection, sql: str, params: tuple = ()) -> dict[str, np.ndarray]:
    """A query's result as one array per column: int64 or float64 where every value is a number (NULL as NaN), else
    objects, each distinct text held once. `sql` uses ? for parameters."""
    if connection.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    result = connection.exec_driver_sql(sql, params, execution_options={"yield_per": BLOCK_ROWS})
    names = list(result.keys())
    blocks: list[dict[str, np.ndarray]] = []
    try:
        for rows in result.partitions(BLOCK_ROWS):
            blocks.append(_typed_block(rows, names))
    finally:
        result.close()
    columns = {}
    for name in names:  # one column at a time, each block's part dropped once joined: never two copies of the result
        parts = [block.pop(name) for block in blocks]
        columns[name] = np.concatenate(parts) if parts else np.empty(0, dtype=object)
    return columns


def read_frame(connection: Connection, sql: str, params: tuple = (), *, index_col: str | None = None
               ) -> pd.DataFrame:
    """read_columns as a DataFrame, indexed by `index_col` where given."""
    import pandas as pd

    columns = read_columns(connection, sql, params)
    index = pd.Index(columns.pop(index_col), name=index_col) if index_col else None
    return pd.DataFrame(columns, index=index, copy=False)


def _typed_block(rows, names: list[str]) -> dict[str, np.ndarray]:
    import pandas as pd

    table = np.array([tuple(row) for row in rows], dtype=object).reshape(len(rows), len(names))
    block = {}
    for i, name in enumerate(names):
        column = table[:, i]
        inferred = pd.api.types.infer_dtype(column, skipna=True)  # "empty" (all NULL) stays None: text may follow
        if inferred == "integer" and not pd.isna(column).any():
            block[name] = column.astype(np.int64)
        elif inferred in ("integer", "floating", "mixed-integer-float"):
            block[name] = column.astype(np.float64)
        else:
            block[name] = _shared_text(column)
    return block


def _shared_text(column: np.ndarray) -> np.ndarray:
    """Objects with each distinct value held once where values repeat (an outcome, a class, a split: ten million
    copies of a few words would be gigabytes)."""
    import pandas as pd

    codes, distinct = pd.factorize(column)
    if not len(distinct) or len(distinct) * 2 > len(column):
        return np.ascontiguousarray(column)
    shared = np.asarray(distinct, dtype=object)[codes]
    shared[codes < 0] = None
    return shared
