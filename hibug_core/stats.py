"""Statistics of slices: Wilson intervals, a one-sided test against the rest, Benjamini-Hochberg q-values."""
from __future__ import annotations

import numpy as np
from scipy.special import ndtr


def wilson_interval(successes: np.ndarray, n: np.ndarray, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (successes may be a sum of scores in [0, 1])."""
    successes, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = successes / n
        denominator = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denominator
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def zero_one(errors: np.ndarray) -> np.ndarray:
    """Whether every error is 0 or 1 (right or wrong outcomes, which the exact test below needs): per column of a
    table, or one answer for a vector."""
    return np.isin(errors, (0.0, 1.0)).all(axis=0)


# Below this expected count of a slice's rarer outcome (errors or successes), 0/1 errors are tested exactly: there the
# normal approximation makes a small slice's few errors look rarer than they are (a false slice on bug-free data).
EXACT_BELOW = 20.0


def worse_than_rest_p_values(slice_errors: np.ndarray, slice_n: np.ndarray, total_errors, total_n,
                             error_variance, *, binary: bool = False) -> np.ndarray:
    """One-sided p-value that the slice's mean error exceeds the rest's: a z-test with the pooled per-sample error
    variance. For 0/1 errors (binary) this is the pooled two-proportion test, the normal approximation of Fisher's
    exact test, which it is replaced by where the slice expects fewer than EXACT_BELOW errors or successes: its errors
    against a draw of its size from all rows (hypergeometric). For scores in [0, 1], passing mean * (1 - mean) (the
    Bhatia-Davis bound on the variance) keeps the test conservative. total_errors, total_n and error_variance may be
    per slice (a slice against its parent)."""
    slice_errors, slice_n = np.asarray(slice_errors, dtype=float), np.asarray(slice_n, dtype=float)
    total_errors, total_n = np.broadcast_to(np.asarray(total_errors, dtype=float), slice_n.shape), \
        np.broadcast_to(np.asarray(total_n, dtype=float), slice_n.shape)
    rest_n = total_n - slice_n
    with np.errstate(invalid="ignore", divide="ignore"):
        difference = slice_errors / slice_n - (total_errors - slice_errors) / rest_n
        spread = np.sqrt(error_variance * (1 / slice_n + 1 / rest_n))
        z = difference / spread
    p = ndtr(-z)
    p[(rest_n <= 0) | ~np.isfinite(z)] = 1.0
    if binary:
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = total_errors / total_n
        few = slice_n * np.minimum(rate, 1 - rate) < EXACT_BELOW
        exact = few & (rest_n > 0) & (difference > 0)  # a slice no worse than the rest keeps p >= 1/2 either way
        if exact.any():
            from scipy.stats import hypergeom

            p[exact] = hypergeom.sf(np.rint(slice_errors[exact]) - 1, np.rint(total_n[exact]),
                                    np.rint(total_errors[exact]), np.rint(slice_n[exact]))
    return p


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """q-values: the smallest false discovery rate at which each test would be called significant."""
    p_values = np.asarray(p_values, dtype=float)
    m = len(p_values)
    if m == 0:
        return p_values
    order = np.argsort(p_values, kind="stable")
    scaled = p_values[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def mcnemar_p_values(first_only: np.ndarray, second_only: np.ndarray) -> np.ndarray:
    """Two-sided exact McNemar test of paired right/wrong outcomes: `first_only` pairs where only the first model is
    right, `second_only` where only the second is. Under no difference each discordant pair goes either way with
    probability 1/2, so p = 2 P(X <= min) for X ~ Binomial(discordant, 1/2), capped at 1 (1 with no discordant pair)."""
    from scipy.stats import binom

    first_only = np.rint(np.asarray(first_only, dtype=float))
    second_only = np.rint(np.asarray(second_only, dtype=float))
    discordant = first_only + second_only
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2 * binom.cdf(np.minimum(first_only, second_only), discordant, 0.5))
    return np.where(discordant > 0, p, 1.0)


def paired_t_p_values(sum_difference: np.ndarray, sum_squared_difference: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Two-sided paired t-test of mean difference 0, from each group's sum of differences, sum of squared
    differences and size (so an enumeration's per-slice sums are enough). A group whose differences are all equal
    gets 1 when they are 0 and 0 otherwise; fewer than two pairs, 1."""
    from scipy.stats import t as student_t

    total, squares, n = (np.asarray(a, dtype=float) for a in (sum_difference, sum_squared_difference, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
        variance = np.maximum(squares - n * mean * mean, 0.0) / (n - 1)
        statistic = mean / np.sqrt(variance / n)
        p = 2 * student_t.sf(np.abs(statistic), n - 1)
    constant = variance <= 1e-12 * np.maximum(squares / n, 1e-300)
    p = np.where(constant, np.where(np.abs(mean) > 1e-12, 0.0, 1.0), p)
    return np.where(n >= 2, p, 1.0)
