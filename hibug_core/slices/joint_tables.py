"""Every slice's count and error sums to depth 3 read off joint tables of attribute parts: one pass over the rows per
table, about C(parts, depth) passes where the histogram of each parent's rows is C(attributes, depth).

The attributes are packed into parts of a few whose tags (with a slot for "no tag" where a row lacks one) multiply
to at most PART_CELLS; a part's code is its attributes' tags in mixed radix. Every `depth` parts have one
joint table, counted over all rows (a block of rows at a time, so that the rows stay in the cache while every table
reads them); a slice of `depth` conditions or fewer lies within the parts of some table, and its count and sums are
the sum of that table's cells that hold its tags. Counts are exact; error sums are the same numbers added in another
order than the histogram's, so they differ from it in the last bits only (0/1 errors: not at all).
"""
from __future__ import annotations

from itertools import combinations
from math import comb

import numba
import numpy as np
from numba import njit, prange

PART_CELLS = 16  # a part's tags multiply to at most this (4 x 4): a table of three parts is 4,096 cells, in L2
MAX_TABLE_CELLS = 2 ** 18  # a part of many tags (a class of 80) makes big tables; beyond this, none are used
BLOCK_ROWS = 2 ** 18  # rows counted into every table before the next block: their codes and errors stay in L3


def dealt_to_threads(items: int, threads: int) -> np.ndarray:
    """0..items-1 in the order a prange over them gives each of `threads` threads every n-th item (prange hands each
    thread one run of the loop): work that shrinks along the items is then shared evenly."""
    return np.concatenate([np.arange(t, items, threads) for t in range(threads)]).astype(np.int64)


def packed_parts(slots: np.ndarray) -> list[list[int]]:
    """Attributes packed into as few parts as first-fit decreasing finds, each part's slots multiplying to at most
    PART_CELLS (an attribute of more slots is a part of its own): fewer parts, C(parts, 3) fewer passes. A part's
    attributes in their order, the parts by their first (a table's cells are in that order)."""
    parts: list[list[int]] = []
    cells: list[int] = []
    for attribute in sorted(range(len(slots)), key=lambda a: (-int(slots[a]), a)):
        size = int(slots[attribute])
        fits = next((p for p, c in enumerate(cells) if c * size <= PART_CELLS), None)
        if fits is None:
            parts.append([attribute])
            cells.append(size)
        else:
            parts[fits].append(attribute)
            cells[fits] *= size
    return sorted(sorted(part) for part in parts)


@njit(cache=True)
def _part_codes(codes, rows, n_tags, part_of, slots, n_parts, out):
    """Each of `rows`' code in each part: its attributes' tags in mixed radix (a missing tag is the slot after the
    tags)."""
    attributes = codes.shape[1]
    for i in range(rows.shape[0]):
        row = rows[i]
        for p in range(n_parts):
            out[p, i] = 0
        for a in range(attributes):
            tag = codes[row, a]
            slot = tag if tag >= 0 else n_tags[a]
            p = part_of[a]
            out[p, i] = out[p, i] * slots[a] + slot


@njit(cache=True)
def _count_block(leading, codes_k, cells_k, errors, size, count, sums, base):
    """Add a block of rows to one table at `base` of count and sums: `leading`, each row's cell in the table's first
    parts (made once for every table that shares them), and codes_k its code in the last part; through a local table
    (fresh arrays the compiler knows nothing else writes: a third faster). The rows are counted from 0: from an
    offset, every index is checked for being negative (numba's wraparound), which made each row 3x slower."""
    models = errors.shape[1]
    ck = np.uint64(cells_k)  # unsigned cells: a signed index is checked for being negative too
    if models == 1:  # the common case: one model's sums in an array of their own (a strided view is 3x slower)
        local_count = np.zeros(size, dtype=np.int32)
        local_sums = np.zeros(size, dtype=np.float64)
        for r in range(leading.shape[0]):
            cell = np.uint64(leading[r]) * ck + np.uint64(codes_k[r])
            local_count[cell] += 1
            local_sums[cell] += errors[r, 0]
        for cell in range(size):
            count[base + cell] += local_count[cell]
            sums[base + cell, 0] += local_sums[cell]
        return
    # Two models or more: a cell's count (as a float: exact below 2 ** 53) and sums side by side, one cache line a row
    # where three arrays took three (12% faster for two).
    local_all = np.zeros((size, models + 1), dtype=np.float64)
    if models == 2:  # the error slices of a project with two, unrolled: a loop over the models is 4x slower
        for r in range(leading.shape[0]):
            cell = np.uint64(leading[r]) * ck + np.uint64(codes_k[r])
            local_all[cell, 0] += 1.0
            local_all[cell, 1] += errors[r, 0]
            local_all[cell, 2] += errors[r, 1]
    else:
        for r in range(leading.shape[0]):
            cell = np.uint64(leading[r]) * ck + np.uint64(codes_k[r])
            local_all[cell, 0] += 1.0
            for q in range(models):
                local_all[cell, q + 1] += errors[r, q]
    for cell in range(size):
        count[base + cell] += np.int64(local_all[cell, 0])
        for q in range(models):
            sums[base + cell, q] += local_all[cell, q + 1]


@njit(cache=True, parallel=True)
def _count_tables(part_codes, part_cells, tables, group_start, order, offsets, errors, block_rows, count, sums):
    """Every table's cells over every row, a block of rows at a time. Tables that share their first parts (all but
    the last) are a group: each row's cell in those parts is made once per block for the group (a third fewer loads
    and multiplies a row and table than each table's own), and each group is one thread's in a block, the groups
    dealt out in `order` (every n-th to a thread: the first groups have the most tables). A table's cells take the
    blocks in row order: the sums do not depend on the threads."""
    n = errors.shape[0]
    leading_parts = tables.shape[1] - 1
    for r0 in range(0, n, block_rows):
        r1 = min(n, r0 + block_rows)
        for g in prange(order.shape[0]):
            group = order[g]
            first = group_start[group]
            leading = np.zeros(r1 - r0, dtype=np.uint32)
            for position in range(leading_parts):
                part = tables[first, position]
                cells = np.uint32(part_cells[part])
                codes = part_codes[part, r0:r1]
                for r in range(r1 - r0):
                    leading[r] = leading[r] * cells + np.uint32(codes[r])
            for t in range(first, group_start[group + 1]):
                last = tables[t, leading_parts]
                _count_block(leading, part_codes[last, r0:r1], part_cells[last], errors[r0:r1],
                             offsets[t + 1] - offsets[t], count, sums, offsets[t])


@njit(cache=True, parallel=True)
def _read_off(tables_attributes, attribute_start, slots, n_tags, offsets, count, sums, target_start,
              target_positions, target_starts, out_count, out_sums):
    """Each target (a combination of two or three attributes: their positions in the table, -1 past the last) summed
    from the cells of the one table it is read from, over the cells whose slots at its attributes are tags."""
    models = sums.shape[1]
    for t in prange(offsets.shape[0] - 1):
        first, last = attribute_start[t], attribute_start[t + 1]
        g = last - first
        size = offsets[t + 1] - offsets[t]
        # Every cell's slot of each attribute (mixed radix, the last attribute fastest), and a column of zeros that
        # stands for "no third attribute" (one tag).
        cell_slots = np.zeros((size, g + 1), dtype=np.int64)
        tags_at = np.ones(g + 1, dtype=np.int64)
        stride = 1
        for position in range(g - 1, -1, -1):
            attribute = tables_attributes[first + position]
            tags_at[position] = n_tags[attribute]
            for cell in range(size):
                cell_slots[cell, position] = (cell // stride) % slots[attribute]
            stride *= slots[attribute]
        for target in range(target_start[t], target_start[t + 1]):
            p1, p2, p3 = target_positions[target, 0], target_positions[target, 1], target_positions[target, 2]
            p3 = g if p3 < 0 else p3
            n2, n3 = tags_at[p2], tags_at[p3]
            n1 = tags_at[p1]
            at = target_starts[target]
            for cell in range(size):
                rows = count[offsets[t] + cell]
                s1, s2, s3 = cell_slots[cell, p1], cell_slots[cell, p2], cell_slots[cell, p3]
                if rows == 0 or s1 >= n1 or s2 >= n2 or s3 >= n3:  # empty, or a row without a tag of one
                    continue
                index = at + (s1 * n2 + s2) * n3 + s3
                out_count[index] += rows
                for q in range(models):
                    out_sums[index, q] += sums[offsets[t] + cell, q]


def table_layout(codes: np.ndarray, n_tags: list[int], depth: int) -> tuple | None:
    """(slots per attribute, parts, cells per part, the parts of each table, cells per table) of the joint tables of
    `depth` parts; None where the attributes make fewer parts than `depth`, a table bigger than MAX_TABLE_CELLS, or
    not half as many tables as combinations of attributes (the histogram over each parent's rows is then the way)."""
    n, attributes = codes.shape
    missing = (codes < 0).any(axis=0) if n else np.zeros(attributes, dtype=bool)
    return layout_of(np.asarray(n_tags, dtype=np.int64) + missing, depth)


def layout_of(slots: np.ndarray, depth: int) -> tuple | None:
    """table_layout of attributes of these slots (tags, and one for "no tag" where a row lacks one)."""
    parts = packed_parts(slots)
    if len(parts) < depth:
        return None
    part_cells = np.array([int(np.prod(slots[part])) for part in parts], dtype=np.int64)
    tables = np.array(list(combinations(range(len(parts)), depth)), dtype=np.int64)
    sizes = np.prod(part_cells[tables], axis=1)
    if sizes.max() > MAX_TABLE_CELLS or 2 * len(tables) > comb(len(slots), depth):
        return None
    return slots, parts, part_cells, tables, sizes


def row_groups(codes: np.ndarray, n_tags: np.ndarray, layout: tuple) -> list[tuple[np.ndarray | None, tuple]]:
    """(rows (None: all), layout) to count the tables over: where a few rows lack some tags (false positives without
    the objects' tags), their "no tag" slots make every part smaller and the tables many more (5,984 against 2,600 at
    ten million), so the rows with every tag are counted over the layout without those slots, and only the others
    over the full one, when that is less work."""
    slots = layout[0]
    if (slots == n_tags).all():
        return [(None, layout)]
    complete = _complete_rows(codes)
    lean = layout_of(n_tags, layout[3].shape[1])
    n_complete = int(complete.sum())
    if lean is None or n_complete == 0:
        return [(None, layout)]
    work = n_complete * len(lean[3]) + (len(codes) - n_complete) * len(layout[3])
    if work >= 0.8 * len(codes) * len(layout[3]):  # most rows lack some tag: one pass over all is as cheap
        return [(None, layout)]
    return [(np.flatnonzero(complete), lean), (np.flatnonzero(~complete), layout)]


@njit(cache=True)
def _complete_rows(codes):
    """Whether each row has a tag of every attribute."""
    n, attributes = codes.shape
    out = np.ones(n, dtype=np.bool_)
    for row in range(n):
        for a in range(attributes):
            if codes[row, a] < 0:
                out[row] = False
                break
    return out


def joint_table_levels(codes: np.ndarray, n_tags: list[int], errors: np.ndarray, layout: tuple, min_support: int,
                       first_count: np.ndarray) -> list[tuple]:
    """Per depth d = 2..depth (the layout's, from table_layout), (features (m, d), count (m,), error sums (m, models),
    candidates) of every slice of d conditions with at least min_support rows (in no particular order), read off
    joint tables, and how many slices of d conditions had every parent at min_support (the candidates an enumeration
    by parents counts). first_count: each feature's row count (the first level)."""
    n, attributes = codes.shape
    n_tags_array = np.asarray(n_tags, dtype=np.int64)
    depth = layout[3].shape[1]
    # 1. Every combination of 2..depth attributes (a target) and where its cells start in the sums.
    flat_targets = [c for d in range(2, depth + 1) for c in combinations(range(attributes), d)]
    target_sizes = np.array([int(np.prod(n_tags_array[list(c)])) for c in flat_targets], dtype=np.int64)
    target_offsets = np.r_[0, np.cumsum(target_sizes)].astype(np.int64)
    out_count = np.zeros(target_offsets[-1], dtype=np.int64)
    out_sums = np.zeros((target_offsets[-1], errors.shape[1]), dtype=np.float64)
    # 2. Each group of rows counted into its layout's tables, and every target read off them.
    for rows, group_layout in row_groups(codes, n_tags_array, layout):
        _add_targets(codes, rows, n_tags_array, errors if rows is None else errors[rows], group_layout, flat_targets,
                     target_offsets, out_count, out_sums)
    # 3. Per depth, the slices at min_support, their tags as feature ids (numbered attribute by attribute), and the
    # candidates: combinations whose every parent is at min_support (a count never exceeds a parent's, so the slices
    # kept are exactly those an enumeration joining surviving parents keeps).
    targets = np.full((len(flat_targets), depth), -1, dtype=np.int64)
    for t, combination in enumerate(flat_targets):
        targets[t, :len(combination)] = combination
    feature_offset = np.r_[0, np.cumsum(n_tags_array)[:-1]].astype(np.int64)
    kept_pairs = {}
    levels = []
    for d in range(2, depth + 1):
        chosen = [t for t, c in enumerate(flat_targets) if len(c) == d]
        spans = np.arange(target_offsets[chosen[0]], target_offsets[chosen[-1] + 1])  # a depth's targets are a run
        counts = out_count[spans]
        keep = counts >= min_support
        features = np.empty((len(spans), d), dtype=np.int32)
        _fill_features(targets[chosen, :d], n_tags_array, feature_offset, features)
        if d == 2:
            for t in chosen:
                kept_pairs[flat_targets[t]] = (out_count[target_offsets[t]:target_offsets[t + 1]] >= min_support
                                               ).reshape(n_tags_array[list(flat_targets[t])]).astype(np.int64)
            surviving = np.bincount(np.repeat(np.arange(attributes), n_tags_array)[first_count >= min_support],
                                    minlength=attributes)
            candidates = int((surviving.sum() ** 2 - (surviving ** 2).sum()) // 2)
        else:
            candidates = sum(int(np.einsum("ij,ik,jk->", kept_pairs[(a, b)], kept_pairs[(a, c)], kept_pairs[(b, c)]))
                             for a, b, c in (flat_targets[t] for t in chosen))
        levels.append((features[keep], counts[keep], out_sums[spans][keep], candidates))
    return levels


def _add_targets(codes: np.ndarray, rows: np.ndarray | None, n_tags: np.ndarray, errors: np.ndarray, layout: tuple,
                 flat_targets: list[tuple[int, ...]], target_offsets: np.ndarray, out_count: np.ndarray,
                 out_sums: np.ndarray) -> None:
    """Count `rows` of codes (None: all) into the layout's tables, and add each target's cells read off them to
    out_count and out_sums (at target_offsets, in flat_targets' order)."""
    attributes = codes.shape[1]
    slots, parts, part_cells, tables, sizes = layout
    depth = tables.shape[1]
    # 1. Each row's code in each part.
    part_of = np.empty(attributes, dtype=np.int64)
    for p, part in enumerate(parts):
        part_of[part] = p
    code_type = np.uint8 if part_cells.max() <= 256 else np.uint16 if part_cells.max() <= 65536 else np.int64
    rows = np.arange(len(codes), dtype=np.int64) if rows is None else rows.astype(np.int64)
    part_codes = np.empty((len(parts), len(rows)), dtype=code_type)
    _part_codes(codes, rows, n_tags, part_of, slots, len(parts), part_codes)
    # 2. Every table over every row.
    offsets = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    count = np.zeros(offsets[-1], dtype=np.int64)
    sums = np.zeros((offsets[-1], errors.shape[1]), dtype=np.float64)
    leading = [tuple(parts_of[:-1]) for parts_of in tables.tolist()]  # tables come sorted: a group is a run
    group_start = np.array([t for t in range(len(tables)) if t == 0 or leading[t] != leading[t - 1]] + [len(tables)],
                           dtype=np.int64)
    order = dealt_to_threads(len(group_start) - 1, numba.get_num_threads())
    _count_tables(part_codes, part_cells, tables, group_start, order, offsets, errors, BLOCK_ROWS, count, sums)
    del part_codes
    # 3. Each target read off one table: the table of its own parts and, to make up the number, the first others.
    table_index = {tuple(parts_of): t for t, parts_of in enumerate(tables.tolist())}
    table_attributes = [[a for p in parts_of for a in parts[p]] for parts_of in tables.tolist()]
    assigned: list[list[int]] = [[] for _ in tables]
    for target, combination in enumerate(flat_targets):
        own = sorted({int(part_of[a]) for a in combination})
        others = [p for p in range(len(parts)) if p not in own][:depth - len(own)]
        assigned[table_index[tuple(sorted(own + others))]].append(target)
    target_start = np.r_[0, np.cumsum([len(a) for a in assigned])].astype(np.int64)
    positions = np.full((len(flat_targets), 3), -1, dtype=np.int64)
    starts = np.empty(len(flat_targets), dtype=np.int64)  # where each target (in the tables' order) starts
    at = 0
    for t, targets_of in enumerate(assigned):
        where = {a: position for position, a in enumerate(table_attributes[t])}
        for target in targets_of:
            combination = flat_targets[target]
            positions[at, :len(combination)] = [where[a] for a in combination]
            starts[at] = target_offsets[target]
            at += 1
    attribute_start = np.r_[0, np.cumsum([len(a) for a in table_attributes])].astype(np.int64)
    _read_off(np.array([a for attrs in table_attributes for a in attrs], dtype=np.int64), attribute_start, slots,
              n_tags, offsets, count, sums, target_start, positions, starts, out_count, out_sums)


@njit(cache=True)
def _fill_features(attributes, n_tags, feature_offset, out):
    """The feature ids of every combination of tags of each row of `attributes`, one after another, the last
    attribute's tag fastest (the layout _read_off writes a target's cells in)."""
    d = attributes.shape[1]
    at = 0
    tags = np.zeros(d, dtype=np.int64)
    for t in range(attributes.shape[0]):
        size = 1
        for position in range(d):
            size *= n_tags[attributes[t, position]]
        tags[:] = 0
        for _ in range(size):
            for position in range(d):
                out[at, position] = feature_offset[attributes[t, position]] + tags[position]
            at += 1
            position = d - 1
            tags[position] += 1
            while position > 0 and tags[position] == n_tags[attributes[t, position]]:
                tags[position] = 0
                position -= 1
                tags[position] += 1
