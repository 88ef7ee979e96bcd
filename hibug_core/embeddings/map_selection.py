"""Which points of the map fall inside a box or lasso drawn on it, as a boolean mask over every point: a selection of a
million points is computed where the points are, never sent through the browser."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _edge_bands(polygon_y, low_y, height, bands):  # pragma: no cover - compiled
    """The polygon's edges by horizontal band of the bounding box (CSR: band b's edges are
    edges[starts[b]:starts[b + 1]]); an edge is listed in every band its y-extent meets."""
    corners = len(polygon_y)
    first, last = np.empty(corners, dtype=np.int64), np.empty(corners, dtype=np.int64)  # each edge's bands
    counts = np.zeros(bands + 1, dtype=np.int64)
    for k in range(corners):
        first[k] = _band(min(polygon_y[k], polygon_y[k - 1]), low_y, height, bands)
        last[k] = _band(max(polygon_y[k], polygon_y[k - 1]), low_y, height, bands)
        counts[first[k] + 1:last[k] + 2] += 1
    starts = np.cumsum(counts)
    edges, filled = np.empty(starts[-1], dtype=np.int64), starts[:-1].copy()
    for k in range(corners):
        for b in range(first[k], last[k] + 1):
            edges[filled[b]] = k
            filled[b] += 1
    return starts, edges


@numba.njit(cache=True)
def _band(y, low_y, height, bands):  # pragma: no cover - compiled
    return min(max(int((y - low_y) / height), 0), bands - 1) if height > 0 else 0


@numba.njit(cache=True)
def _inside_polygon(x, y, polygon_x, polygon_y, out):  # pragma: no cover - compiled
    """Even-odd ray casting; points outside the polygon's bounding box are rejected first, and a point is tested
    against the edges of its horizontal band only (a hand-drawn lasso has hundreds of corners: testing every edge
    for every one of ten million points took most of a lasso's run)."""
    low_x, high_x = polygon_x.min(), polygon_x.max()
    low_y, high_y = polygon_y.min(), polygon_y.max()
    corners = len(polygon_x)
    bands = corners
    height = (high_y - low_y) / bands
    starts, edges = _edge_bands(polygon_y, low_y, height, bands)
    for i in range(len(x)):
        px, py = x[i], y[i]
        if px < low_x or px > high_x or py < low_y or py > high_y:
            continue
        inside = False
        b = _band(py, low_y, height, bands)
        for e in range(starts[b], starts[b + 1]):
            k = edges[e]
            j = k - 1 if k > 0 else corners - 1
            xk, yk, xj, yj = polygon_x[k], polygon_y[k], polygon_x[j], polygon_y[j]
            if (yk > py) != (yj > py) and px < (xj - xk) * (py - yk) / (yj - yk) + xk:
                inside = not inside
        out[i] = inside


def inside_polygon(x: np.ndarray, y: np.ndarray, polygon_x, polygon_y) -> np.ndarray:
    """True for each point (x[i], y[i]) inside the closed polygon with these corners (a lasso's path); none for a
    polygon with a corner not a finite number."""
    polygon_x, polygon_y = np.asarray(polygon_x, np.float64), np.asarray(polygon_y, np.float64)
    if polygon_x.shape != polygon_y.shape or polygon_x.ndim != 1:
        raise ValueError("a polygon needs as many x as y coordinates")
    out = np.zeros(len(x), dtype=bool)
    if len(polygon_x) >= 3 and np.isfinite(polygon_x).all() and np.isfinite(polygon_y).all():
        _inside_polygon(np.asarray(x, np.float64), np.asarray(y, np.float64), polygon_x, polygon_y, out)
    return out


def inside_box(x: np.ndarray, y: np.ndarray, x_range, y_range) -> np.ndarray:
    """True for each point inside the box [x0, x1] × [y0, y1] (corners in either order, edges included)."""
    (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
