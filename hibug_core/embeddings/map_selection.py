"""Which points of the map fall inside a box or lasso drawn on it, as a boolean mask over every point: a selection of a
million points is computed where the points are, never sent through the browser."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _inside_polygon(x, y, polygon_x, polygon_y, out):  # pragma: no cover - compiled
    """Even-odd ray casting; points outside the polygon's bounding box are rejected first."""
    low_x, high_x = polygon_x.min(), polygon_x.max()
    low_y, high_y = polygon_y.min(), polygon_y.max()
    corners = len(polygon_x)
    for i in range(len(x)):
        px, py = x[i], y[i]
        if px < low_x or px > high_x or py < low_y or py > high_y:
            continue
        inside = False
        j = corners - 1
        for k in range(corners):
            xk, yk, xj, yj = polygon_x[k], polygon_y[k], polygon_x[j], polygon_y[j]
            if (yk > py) != (yj > py) and px < (xj - xk) * (py - yk) / (yj - yk) + xk:
                inside = not inside
            j = k
        out[i] = inside


def inside_polygon(x: np.ndarray, y: np.ndarray, polygon_x, polygon_y) -> np.ndarray:
    """True for each point (x[i], y[i]) inside the closed polygon with these corners (a lasso's path)."""
    polygon_x, polygon_y = np.asarray(polygon_x, np.float64), np.asarray(polygon_y, np.float64)
    if polygon_x.shape != polygon_y.shape or polygon_x.ndim != 1:
        raise ValueError("a polygon needs as many x as y coordinates")
    out = np.zeros(len(x), dtype=bool)
    if len(polygon_x) >= 3:
        _inside_polygon(np.asarray(x, np.float64), np.asarray(y, np.float64), polygon_x, polygon_y, out)
    return out


def inside_box(x: np.ndarray, y: np.ndarray, x_range, y_range) -> np.ndarray:
    """True for each point inside the box [x0, x1] × [y0, y1] (corners in either order, edges included)."""
    (x0, x1), (y0, y1) = sorted(x_range), sorted(y_range)
    return (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
