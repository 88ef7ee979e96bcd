"""Tags over-represented in a selection of images (a lasso on the map, a cluster): which (attribute = tag) pairs are
far more common in it than in the rest, with a hypergeometric test."""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit

from hibug_core.stats import benjamini_hochberg
from hibug_core.tagging.sources import poor_flag


def over_represented(tags: pd.DataFrame, selected: np.ndarray, *, min_count: int = 2,
                     poor: dict[str, str] | None = None, overall: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """One row per (attribute, tag) seen at least `min_count` times in the selection and more often than overall:
    its count and share in the selection, its share overall, the lift, and p (chance of at least that many under
    random selection) with BH q-values; most significant first. `trust`: why the tags of an attribute in `poor`
    (tagging.sources.too_poor) are not to be believed, "" for the others. `overall`: tag_counts(tags), where the
    caller keeps it (counting every row of fifty attributes at ten million rows took 2 s of each lasso)."""
    from scipy.stats import hypergeom

    selected = np.asarray(selected, dtype=bool)
    n_all, n_selected = len(tags), int(selected.sum())
    columns = ["attribute", "tag", "count", "share", "share_overall", "lift", "p_value"]
    rows = []
    poor = poor or {}
    if n_selected == 0:
        return pd.DataFrame(columns=[*columns, "q_value", "trust"])
    positions = np.flatnonzero(selected)
    overall = tag_counts(tags) if overall is None else overall
    for attribute in tags.columns:
        codes, values = _codes(tags[attribute])  # counted as codes: a million rows in milliseconds
        inside = counts_at(codes, positions, len(values))
        for position in np.argsort(-inside, kind="stable"):
            count, total = int(inside[position]), int(overall[attribute][position])
            share, share_all = count / n_selected, total / n_all
            if count < min_count or share <= share_all:
                continue
            rows.append({"attribute": attribute, "tag": values[position], "count": count, "share": share,
                         "share_overall": share_all, "lift": share / share_all,
                         "p_value": float(hypergeom.sf(count - 1, n_all, total, n_selected))})
    frame = pd.DataFrame(rows, columns=columns)
    frame["q_value"] = benjamini_hochberg(frame["p_value"].to_numpy())
    frame["trust"] = [poor_flag(poor[a]) if a in poor else "" for a in frame["attribute"]]
    return frame.sort_values(["p_value", "lift"], ascending=[True, False], kind="stable").reset_index(drop=True)


def tag_counts(tags: pd.DataFrame) -> dict[str, np.ndarray]:
    """How many rows hold each tag of each attribute, in the order of its codes (what over_represented compares a
    selection with)."""
    counted = {}
    for attribute in tags.columns:
        codes, values = _codes(tags[attribute])
        counted[attribute] = _counts(np.ascontiguousarray(codes), len(values))
    return counted


def filter_choices(rows: pd.DataFrame, tags: pd.DataFrame | None, at: np.ndarray | None = None) -> tuple[list[str],
                                                                                                       list[str]]:
    """What an image grid's filters offer for some sample rows: their classes and their "attribute = tag" options,
    sorted (`at`: the rows' positions among the tags' rows, where the caller knows them)."""
    # distinct values first, then text: a million rows made text once per attribute took seconds at every rerun
    classes = sorted({str(v) for v in rows["label"].dropna().unique()}) if "label" in rows else []
    options = []
    if tags is not None:
        positions = tags.index.get_indexer(rows.index) if at is None else at
        positions = positions[positions >= 0]
        for attribute in tags.columns:
            options += [f"{attribute} = {t}" for t in present_values(tags[attribute], positions)]
    return classes, sorted(options)


def present_values(column: pd.Series, positions: np.ndarray) -> set[str]:
    """The distinct values of `column` at `positions`, as text: a categorical's counted by code (a slice of millions
    of rows took a second a page run when its tags were taken row by row)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        used = counts_at(column.cat.codes.to_numpy(), positions, len(column.cat.categories)) > 0
        return {str(v) for v in column.cat.categories[used]}
    return {str(v) for v in column.iloc[positions].dropna().unique()}


def counts_at(codes: np.ndarray, positions: np.ndarray, n: int) -> np.ndarray:
    """How many of the rows at `positions` hold each of the `n` codes (-1, no value, is not counted): one pass over
    the positions, the rows never copied out."""
    return _counts_at(np.ascontiguousarray(codes), np.asarray(positions, dtype=np.int64), n)


@njit(cache=True)
def _counts(codes, n):
    out = np.zeros(n, dtype=np.int64)
    for code in codes:
        if code >= 0:
            out[code] += 1
    return out


@njit(cache=True)
def _counts_at(codes, positions, n):
    out = np.zeros(n, dtype=np.int64)
    for position in positions:
        code = codes[position]
        if code >= 0:
            out[code] += 1
    return out


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column's values as integer codes (-1: none) and the values they stand for; a categorical's own codes (ten
    million rows of a few tags: nothing hashed)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), np.asarray(column.cat.categories, dtype=object)
    return pd.factorize(column)
