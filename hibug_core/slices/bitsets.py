"""Bitsets of rows and the numba kernels that AND and count them (one popcnt instruction per 64 rows)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def popcount64(typingctx, value):
    """The CPU's population count of a uint64 (llvm.ctpop compiles to popcnt)."""
    signature = types.uint64(types.uint64)

    def codegen(context, builder, sig, args):
        function = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(function, args)

    return signature, codegen


def pack_rows(mask: np.ndarray) -> np.ndarray:
    """Boolean rows (n,) or (k, n) -> uint64 words (.., ceil(n / 64)), row i at bit i % 64 of word i // 64."""
    mask = np.atleast_2d(mask)
    words = (mask.shape[1] + 63) // 64
    packed = np.packbits(mask, axis=1, bitorder="little")
    padded = np.zeros((mask.shape[0], words * 8), dtype=np.uint8)
    padded[:, :packed.shape[1]] = packed
    return padded.view(np.uint64)


@intrinsic
def trailing_zeros64(typingctx, value):
    """Index of the lowest set bit of a non-zero uint64 (llvm.cttz compiles to tzcnt)."""
    signature = types.uint64(types.uint64)

    def codegen(context, builder, sig, args):
        function = builder.module.declare_intrinsic("llvm.cttz", [ir.IntType(64), ir.IntType(1)])
        return builder.call(function, [args[0], ir.Constant(ir.IntType(1), 1)])

    return signature, codegen


@njit(cache=True)
def feature_bitsets(feature_of, n_features):
    """(n_features, words) bitsets from the feature id of every (row, attribute); ids >= n_features are skipped."""
    words = (feature_of.shape[0] + 63) // 64
    bits = np.zeros((n_features, words), dtype=np.uint64)
    for row in range(feature_of.shape[0]):
        mask = np.uint64(1) << np.uint64(row & 63)
        for a in range(feature_of.shape[1]):
            feature = feature_of[row, a]
            if feature < n_features:
                bits[feature, row >> 6] |= mask
    return bits


def unpack_rows(words: np.ndarray, n: int) -> np.ndarray:
    """Inverse of pack_rows for one bitset: a boolean mask of n rows."""
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), count=n, bitorder="little").view(bool)


def count_rows(words: np.ndarray) -> int:
    """How many rows a bitset holds."""
    return int(np.bitwise_count(words).sum())


@njit(cache=True)
def masked_sum(words, values):
    """The sum of values[i] over the rows i the bitset holds, in row order: what values[mask].sum() gives without
    a mask of every row."""
    total = 0.0
    for w in range(words.shape[0]):
        word = words[w]
        while word:
            total += values[(w << 6) + trailing_zeros64(word)]
            word &= word - np.uint64(1)
    return total


@njit(cache=True)
def masked_counts(words, codes, bins):
    """How many of the rows the bitset holds have each code 0..bins-1 (codes below 0 are not counted)."""
    counts = np.zeros(bins, dtype=np.int64)
    for w in range(words.shape[0]):
        word = words[w]
        while word:
            code = codes[(w << 6) + trailing_zeros64(word)]
            if code >= 0:
                counts[code] += 1
            word &= word - np.uint64(1)
    return counts
