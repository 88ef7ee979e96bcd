"""Rows by sample id: binary search where both sides are sorted, the hash lookup otherwise, reindex's answer always."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hibug_core.rows import positions_in, rows_by_id


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_positions_are_those_of_the_hash_lookup_with_missing_ids_at_minus_one(order):
    rng = np.random.default_rng(3)
    index = pd.Index(np.sort(rng.choice(1000, 300, replace=False)))
    ids = rng.choice(1100, 200, replace=False)  # some beyond the index, some below its first id
    ids = np.sort(ids) if order == "sorted" else ids
    got = positions_in(index, pd.Index(ids))
    assert got.dtype == np.int64
    assert np.array_equal(got, index.get_indexer(ids))
    assert (got == -1).sum() == len(set(ids) - set(index))
    assert np.array_equal(positions_in(index, index.copy()), np.arange(300))
    assert len(positions_in(index, pd.Index([], dtype=np.int64))) == 0
    words = pd.Index(["b", "a", "c"])  # not integers: the hash lookup
    assert positions_in(words, pd.Index(["c", "z", "b"])).tolist() == [2, -1, 0]


def test_rows_by_id_are_reindexs_rows():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "tag": pd.Categorical(["a", "b", None, "a"]),
                          "name": ["p", "q", "r", "s"], "points": pd.array([None, "[1]", None, None], dtype=object),
                          "count": [1, 2, 3, 4], "right": [True, False, True, True]}, index=[10, 20, 30, 40])
    for ids in ([20, 40], [40, 10], [10, 20, 30, 40], [15, 30], []):
        wanted = pd.Index(ids, dtype=np.int64)
        pd.testing.assert_frame_equal(rows_by_id(frame, wanted), frame.reindex(wanted))
    pd.testing.assert_series_equal(rows_by_id(frame["x"], pd.Index([30, 10])), frame["x"].reindex([30, 10]))

