"""HiBug2's slice enumeration: breadth-first by depth, candidates joined from surviving parents that share all but
one pair, every parent required to survive, support counted on row bitsets.

Features are (attribute = tag) pairs numbered attribute by attribute, so a slice is a sorted tuple of features with
at most one per attribute. A slice is packed into a uint64 key (16 bits per feature, depth <= 4) so parents are
found by binary search. Children of one parent are counted either by AND + popcount of the parent's bitset with each
feature's bitset (rows and errors in one pass; the last tag of a fully tagged attribute as the parent's count less
its other tags'), or, when the parent holds few rows, by one histogram pass over its rows; the kernel picks the
cheaper per parent, and both give identical counts and error sums. Scores (not 0/1) over many rows, to depth 3, are
read off joint tables of attribute parts instead (joint_tables: the same slices, their sums added in another order).
"""
from __future__ import annotations

import types
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from hibug_core.slices.bitsets import feature_bitsets, pack_rows, popcount64, trailing_zeros64
from hibug_core.slices.joint_tables import dealt_to_threads, joint_table_levels, table_layout
from hibug_core.stats import zero_one

MAX_DEPTH = 4
KEY_BITS = 16
MAX_FEATURES = 2 ** KEY_BITS - 2
# One histogram update over a row costs about this many AND+popcount words (measured on x86-64, 2 cores).
ROW_COST_FACTOR = 32


@dataclass
class Level:
    """All slices of one depth that reached the minimum support, in key order."""

    features: np.ndarray  # (m, depth) int32, ascending
    keys: np.ndarray  # (m,) uint64, ascending
    count: np.ndarray  # (m,) int64
    errors: np.ndarray  # (m, models) float64: sum of per-sample errors (1 - score) per model


@dataclass
class Enumeration:
    """Every slice up to `depth` with support >= min_support, for one table of tags; reusable across models."""

    levels: list[Level]
    feature_attribute: np.ndarray  # (F,) attribute index of each feature
    feature_tag: np.ndarray  # (F,) tag index within its attribute
    n_rows: int
    min_support: int
    candidates: int  # candidate slices counted (before the support cut)
    total_errors: np.ndarray  # (models,) sum of errors over all rows
    binary_errors: np.ndarray  # (models,) True where the model's errors are all 0 or 1 (then tested exactly when few)

    @property
    def n_slices(self) -> int:
        return sum(len(level.keys) for level in self.levels)


def pack_keys(features: np.ndarray) -> np.ndarray:
    """(m, k) ascending feature ids -> uint64 keys that sort like the tuples."""
    keys = np.zeros(len(features), dtype=np.uint64)
    for position in range(features.shape[1]):
        shift = np.uint64(KEY_BITS * (MAX_DEPTH - 1 - position))
        keys |= (features[:, position].astype(np.uint64) + np.uint64(1)) << shift
    return keys


@njit(cache=True, inline="always")
def _key_without(parent, new_feature, skip):
    """Key of the candidate parent + new_feature with the feature at position `skip` left out."""
    key = np.uint64(0)
    slot = 0
    depth = parent.shape[0]
    for position in range(depth + 1):
        if position == skip:
            continue
        feature = parent[position] if position < depth else new_feature
        key |= np.uint64(feature + 1) << np.uint64(16 * (3 - slot))
        slot += 1
    return key


@njit(cache=True, inline="always")
def _parents_survive(parent, new_feature, keys):
    # The two parents that made the candidate exist; check the others (one feature of the shared prefix left out).
    for skip in range(parent.shape[0] - 1):
        key = _key_without(parent, new_feature, skip)
        at = np.searchsorted(keys, key)
        if at >= keys.shape[0] or keys[at] != key:
            return False
    return True


def _count_candidates(features, keys, feature_attribute, block_end):
    m = features.shape[0]
    last = features.shape[1] - 1
    out = np.zeros(m, dtype=np.int64)
    for i in prange(m):
        own = feature_attribute[features[i, last]]
        total = 0
        for j in range(i + 1, block_end[i]):
            new_feature = features[j, last]
            if feature_attribute[new_feature] != own and _parents_survive(features[i], new_feature, keys):
                total += 1
        out[i] = total
    return out


def _candidate_features(features, keys, feature_attribute, block_end, offsets, out_features):
    """Fill the candidates of every parent row i at out_features[offsets[i]:offsets[i + 1]]: its features and the new
    one (features of another attribute whose other parents survived too)."""
    m, depth = features.shape
    for i in prange(m):
        start = offsets[i]
        if offsets[i + 1] == start:
            continue
        own = feature_attribute[features[i, depth - 1]]
        c = 0
        for j in range(i + 1, block_end[i]):
            new_feature = features[j, depth - 1]
            if feature_attribute[new_feature] != own and _parents_survive(features[i], new_feature, keys):
                for d in range(depth):
                    out_features[start + c, d] = features[i, d]
                out_features[start + c, depth] = new_feature
                c += 1


def _count_words(features, parent_count, feature_attribute, offsets, bits, error_bits, tag_columns, attribute_offsets,
                 errors, binary, row_factor, complete, attribute_tags, out_features, w0, w1, out_count, out_errors,
                 order):
    """Add to every candidate's count and error sums those of the rows in bitset words [w0, w1) (out_count and
    out_errors start at 0 and take one block of words after another, so a block's bitsets stay in cache while every
    parent reads them). Parents are taken in `order` (threads take equal runs of it)."""
    m, depth = features.shape
    words = bits.shape[1]
    span = w1 - w0
    models = errors.shape[1]
    n_attributes = tag_columns.shape[0]
    for j in prange(m):
        i = order[j]
        start = offsets[i]
        n_candidates = offsets[i + 1] - start
        if n_candidates == 0:
            continue
        chosen = out_features[start:start + n_candidates, depth].copy()
        prefix = bits[features[i, 0], w0:w1].copy()
        for d in range(1, depth):
            other = bits[features[i, d], w0:w1]
            for w in range(span):
                prefix[w] &= other[w]
        support = 0
        for w in range(span):
            support += popcount64(prefix[w])
        wanted = np.zeros(n_attributes, dtype=np.bool_)
        for c in range(n_candidates):
            wanted[feature_attribute[chosen[c]]] = True
        n_wanted = 0
        for a in range(n_attributes):
            if wanted[a]:
                n_wanted += 1
        # Cost of the two ways over every row, in memory words touched: the same choice in every block.
        bitset_cost = n_candidates * words * (1 + models)
        row_cost = words + parent_count[i] * n_wanted * row_factor
        if binary and bitset_cost <= row_cost:
            masked = np.empty((models, span), dtype=np.uint64)
            parent_wrong = np.zeros(models, dtype=np.int64)
            for q in range(models):
                error_row = error_bits[q, w0:w1]
                for w in range(span):
                    masked[q, w] = prefix[w] & error_row[w]
                    parent_wrong[q] += popcount64(masked[q, w])
            wrong = np.zeros(models, dtype=np.int64)
            sum_wrong = np.zeros(models, dtype=np.int64)
            c = 0
            while c < n_candidates:  # candidates come grouped by attribute (features are numbered by attribute)
                attribute = feature_attribute[chosen[c]]
                end = c
                while end < n_candidates and feature_attribute[chosen[end]] == attribute:
                    end += 1
                # Every row has exactly one tag of a complete attribute, so when all its tags are candidates the
                # last one's count and errors are the parent's less the others': a quarter of the work at 4 tags.
                derive_last = complete[attribute] and end - c == attribute_tags[attribute]
                last = end - 1 if derive_last else end
                sum_count = 0
                sum_wrong[:] = 0
                for k in range(c, last):
                    feature_bits = bits[chosen[k], w0:w1]
                    total = 0
                    if models == 1:  # one pass over the words counts rows and errors (the bitset is read once)
                        masked_0 = masked[0]
                        wrong_0 = 0
                        for w in range(span):
                            word = feature_bits[w]
                            total += popcount64(prefix[w] & word)
                            wrong_0 += popcount64(masked_0[w] & word)
                        wrong[0] = wrong_0
                    else:
                        wrong[:] = 0
                        for w in range(span):
                            word = feature_bits[w]
                            total += popcount64(prefix[w] & word)
                            for q in range(models):
                                wrong[q] += popcount64(masked[q, w] & word)
                    out_count[start + k] += total
                    sum_count += total
                    for q in range(models):
                        out_errors[start + k, q] += wrong[q]
                        sum_wrong[q] += wrong[q]
                if derive_last:
                    out_count[start + last] += support - sum_count
                    for q in range(models):
                        out_errors[start + last, q] += parent_wrong[q] - sum_wrong[q]
                c = end
        else:
            # One pass over the parent's rows fills a histogram over features (the last slot takes missing tags),
            # starting from the sums of the blocks before: every row is added in row order, as in one pass.
            n_features = bits.shape[0]
            histogram = np.zeros(n_features + 1, dtype=np.int64)
            sums = np.zeros((n_features + 1, models), dtype=np.float64)
            for c in range(n_candidates):
                histogram[chosen[c]] = out_count[start + c]
                for q in range(models):
                    sums[chosen[c], q] = out_errors[start + c, q]
            attributes = np.empty(n_wanted, dtype=np.int64)
            k = 0
            for a in range(n_attributes):
                if wanted[a]:
                    attributes[k] = a
                    k += 1
            rows = np.empty(support, dtype=np.int64)  # the parent's rows in this block, in order, and their errors
            row_errors = np.empty((support, models), dtype=np.float64)
            r = 0
            for w in range(span):
                word = prefix[w]
                while word:
                    row = (w0 + w) * 64 + np.int64(trailing_zeros64(word))
                    word &= word - np.uint64(1)
                    rows[r] = row
                    for q in range(models):
                        row_errors[r, q] = errors[row, q]
                    r += 1
            for k in range(n_wanted):  # an attribute at a time: its column of tags is read in row order
                a = attributes[k]
                column = tag_columns[a]
                base = attribute_offsets[a]
                if models == 1:  # the common case, without an inner loop (a third of the time at a million rows)
                    sums_0, errors_0 = sums[:, 0], row_errors[:, 0]
                    for r in range(support):
                        tag = column[rows[r]]
                        feature = base + tag if tag >= 0 else n_features
                        histogram[feature] += 1
                        sums_0[feature] += errors_0[r]
                else:
                    for r in range(support):
                        tag = column[rows[r]]
                        feature = base + tag if tag >= 0 else n_features
                        histogram[feature] += 1
                        for q in range(models):
                            sums[feature, q] += row_errors[r, q]
            for c in range(n_candidates):
                out_count[start + c] = histogram[chosen[c]]
                for q in range(models):
                    out_errors[start + c, q] = sums[chosen[c], q]


@njit(cache=True)
def _first_level(codes, offsets, n_features, errors, with_features):
    """The feature id of every (row, attribute) (missing tags: n_features, a slot no slice uses; none kept unless
    with_features) and each feature's row count and error sums, in one pass over the rows: no (rows x attributes)
    temporaries, which at ten million rows of fifty attributes were gigabytes each. Sums run in row order, as a
    histogram's would."""
    n, attributes = codes.shape
    feature_of = np.empty((n if with_features else 0, attributes), dtype=np.int32)
    count = np.zeros(n_features, dtype=np.int64)
    sums = np.zeros((n_features, errors.shape[1]), dtype=np.float64)
    for row in range(n):
        for a in range(attributes):
            code = codes[row, a]
            if code < 0:
                if with_features:
                    feature_of[row, a] = n_features
                continue
            feature = offsets[a] + code
            if with_features:
                feature_of[row, a] = feature
            count[feature] += 1
            for q in range(errors.shape[1]):
                sums[feature, q] += errors[row, q]
    return feature_of, count, sums


def _serial_and_threaded(kernel) -> dict:
    """The kernel compiled twice: threads pay off on big levels, but starting them costs milliseconds on small ones.
    The threaded one is a copy under its own name: numba keys its cache files by a function's name and line, not by
    `parallel`, so two compilations of one function shared a cache entry and the one saved last ran for both (every
    run after the first was serial)."""
    threaded = types.FunctionType(kernel.__code__, kernel.__globals__, f"{kernel.__name__}_threaded",
                                  kernel.__defaults__, kernel.__closure__)
    threaded.__qualname__ = f"{kernel.__qualname__}_threaded"
    return {True: njit(cache=True, parallel=True)(threaded), False: njit(cache=True)(kernel)}


_COUNT = _serial_and_threaded(_count_candidates)
_CANDIDATES = _serial_and_threaded(_candidate_features)
_COUNT_WORDS = _serial_and_threaded(_count_words)
ROUNDING = 1e-9  # errors this far outside [0, 1] are a computation's rounding (1 - IoU of equal boxes), clipped
PARALLEL_FROM_WORDS = 20_000_000  # estimated AND+popcount words of a level above which threads are used
# Rows are counted a block of bitset words at a time, every feature's block within this many bytes: at ten million
# rows a bitset is 1.25 MB and every parent streaming every feature's whole bitset from memory made the search
# bound by memory (174 s at depth 3 over 50 attributes); blocks that stay in the last-level cache are read from it.
BLOCK_BYTES = 16 * 2 ** 20
# From so many rows the slices to depth 3 are read off joint tables (slices/joint_tables.py): scores from 100,000 (the
# histogram of each parent's rows visits every row once per parent and later attribute); 0/1 errors, which ride the
# bitsets' popcount, from a million (58 attributes of 2-5 tags, 0/1 errors: 0.7 s by bitsets against 2.3 s by tables at
# 100,000 rows, 2.0 against 2.7 s at 300,000, 6.4 against 4.9 s at a million, 48 against 15 s at 4.4 million).
JOINT_TABLES_FROM_ROWS = 100_000
JOINT_TABLES_FROM_ROWS_BINARY = 1_000_000


def _block_ends(features: np.ndarray) -> np.ndarray:
    """For each row, one past the last row sharing its first depth-1 features (rows are sorted)."""
    m, depth = features.shape
    if depth == 1:
        return np.full(m, m, dtype=np.int64)
    prefix = features[:, :-1]
    starts = np.flatnonzero(np.r_[True, (prefix[1:] != prefix[:-1]).any(axis=1)])
    ends = np.r_[starts[1:], m]
    return np.repeat(ends, np.diff(np.r_[starts, m])).astype(np.int64)


def feature_table(codes: np.ndarray, n_tags: list[int]) -> tuple[np.ndarray, np.ndarray]:
    attribute = np.concatenate([np.full(t, a, dtype=np.int64) for a, t in enumerate(n_tags)])
    tag = np.concatenate([np.arange(t, dtype=np.int64) for t in n_tags])
    return attribute, tag


def enumerate_slices(codes: np.ndarray, n_tags: list[int], errors: np.ndarray, *, max_depth: int = 3,
                     min_support: int = 10) -> Enumeration:
    """Every slice of depth 1..max_depth with at least `min_support` rows, with its count and error sums.

    codes: (n, A) tag index per row and attribute, -1 where the row has no tag. errors: (n,) or (n, models) in [0, 1].
    """
    if not 1 <= max_depth <= MAX_DEPTH:
        raise ValueError(f"max_depth must be between 1 and {MAX_DEPTH}")
    codes = np.ascontiguousarray(codes, dtype=np.int16)
    errors = np.asarray(errors, dtype=np.float64)
    errors = np.ascontiguousarray(errors[:, None] if errors.ndim == 1 else errors)
    if len(codes) != len(errors):
        raise ValueError(f"{len(codes)} rows of tags but {len(errors)} rows of errors")
    if errors.size and (np.nanmin(errors) < -ROUNDING or np.nanmax(errors) > 1 + ROUNDING or np.isnan(errors).any()):
        raise ValueError("errors must lie in [0, 1] without gaps (1 - score per sample)")
    if errors.size and (errors.min() < 0 or errors.max() > 1):  # a float's last bits (an IoU of 1 + 2e-16)
        errors = np.clip(errors, 0.0, 1.0)
    feature_attribute, feature_tag = feature_table(codes, n_tags)
    if len(feature_attribute) > MAX_FEATURES:
        raise ValueError(f"{len(feature_attribute)} (attribute, tag) pairs; at most {MAX_FEATURES} are supported")
    offsets = np.r_[0, np.cumsum(n_tags)]
    n_features = len(feature_attribute)
    binary_errors = zero_one(errors)
    binary = bool(binary_errors.all())
    # Enough rows (JOINT_TABLES_FROM_ROWS, or _BINARY for 0/1 errors): every slice is read off joint tables of
    # attribute parts instead (one pass over the rows per table), where the attributes make enough parts.
    tables_from = JOINT_TABLES_FROM_ROWS_BINARY if binary else JOINT_TABLES_FROM_ROWS
    layout = table_layout(codes, n_tags, max_depth) if 2 <= max_depth <= 3 and len(codes) >= tables_from else None
    # Feature id of every (row, attribute) (not needed by the tables), with the first level's counts and error sums in
    # the same pass.
    feature_of, count, level_errors = _first_level(codes, offsets[:-1].astype(np.int32), n_features, errors,
                                                   layout is None)
    keep = count >= min_support
    features = np.flatnonzero(keep).astype(np.int32)[:, None]
    levels = [Level(features, pack_keys(features), count[keep], level_errors[keep])]
    if layout is not None:
        joint = joint_table_levels(codes, n_tags, errors, layout, min_support, count)
        for deeper, depth_count, depth_errors, _ in joint:
            keys = pack_keys(deeper)
            order = np.argsort(keys, kind="stable")
            levels.append(Level(deeper[order], keys[order], depth_count[order], depth_errors[order]))
        levels = [level for d, level in enumerate(levels) if d == 0 or len(levels[d - 1].keys)]
        return Enumeration(levels, feature_attribute, feature_tag, len(codes), min_support,
                           n_features + sum(candidates for *_, candidates in joint), errors.sum(axis=0),
                           binary_errors)
    bits = feature_bitsets(feature_of, n_features)
    del feature_of
    # Each attribute's tags as a column, a byte a tag where it has under 128 (-1: none): the histogram pass reads a
    # parent's rows one attribute at a time, in row order.
    tag_columns = np.ascontiguousarray((codes.astype(np.int8) if max(n_tags, default=0) <= 127 else codes).T)
    complete = (codes >= 0).all(axis=0) if len(codes) else np.ones(codes.shape[1], dtype=bool)
    attribute_tags = np.asarray(n_tags, dtype=np.int64)
    error_bits = pack_rows((errors > 0.5).T) if binary else np.zeros((errors.shape[1], bits.shape[1]), np.uint64)
    candidates = n_features
    for _ in range(2, max_depth + 1):
        parent = levels[-1]
        if len(parent.keys) == 0:
            break
        ends = _block_ends(parent.features)
        pairs = int(((ends - np.arange(len(ends))) - 1).sum())  # upper bound of the candidates
        parallel = pairs * bits.shape[1] * 2 >= PARALLEL_FROM_WORDS
        per_row = _COUNT[parallel](parent.features, parent.keys, feature_attribute, ends)
        starts = np.r_[0, np.cumsum(per_row)].astype(np.int64)
        total = int(starts[-1])
        candidates += total
        depth = parent.features.shape[1] + 1
        out_features = np.empty((total, depth), dtype=np.int32)
        out_count = np.zeros(total, dtype=np.int64)
        out_errors = np.zeros((total, errors.shape[1]), dtype=np.float64)
        _CANDIDATES[parallel](parent.features, parent.keys, feature_attribute, ends, starts, out_features)
        words = bits.shape[1]
        block = max(1, BLOCK_BYTES // (8 * max(n_features, 1)))
        # Parents come sorted, the first ones extended by the most attributes: each thread takes every n-th parent
        # (a thread's share of the loop is one run of it), where runs of the sorted parents left one thread most of
        # the work.
        threads = numba.get_num_threads() if parallel else 1
        order = dealt_to_threads(len(parent.keys), threads)
        for w0 in range(0, words, block):
            _COUNT_WORDS[parallel](parent.features, parent.count, feature_attribute, starts, bits, error_bits,
                                   tag_columns, offsets[:-1], errors, binary, ROW_COST_FACTOR, complete, attribute_tags,
                                   out_features, w0, min(w0 + block, words), out_count, out_errors, order)
        keep = out_count >= min_support
        features = out_features[keep]
        levels.append(Level(features, pack_keys(features), out_count[keep], out_errors[keep]))
    return Enumeration(levels, feature_attribute, feature_tag, len(codes), min_support, candidates, errors.sum(axis=0),
                       binary_errors)
