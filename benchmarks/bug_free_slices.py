"""Benchmark: error slices reported on data with no bug, by the slice test as it is (Fisher's exact test for a small
slice of 0/1 errors) and by the normal approximation everywhere (as before 6 Dec 2026).

Each of --sets seeded data sets: --rows rows, eight attributes of four random tags, errors at 10% independent of every
tag; hibug's search at its defaults (depth 3, minimum size 10, false discovery rate 5%). Any slice reported is false.
Prints, for each test, the data sets with a slice and the slices in all.
Usage: python benchmarks/bug_free_slices.py [--sets 200] [--rows 800]
"""
from __future__ import annotations

import argparse
from unittest import mock

import numpy as np
import pandas as pd

import hibug_core.stats as stats
from hibug_core.slices.search import TagMatrix, find_error_slices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=200)
    parser.add_argument("--rows", type=int, default=800)
    args = parser.parse_args()
    found = {"exact for small slices (hibug's)": [], "normal approximation everywhere": []}
    for seed in range(args.sets):
        rng = np.random.default_rng(seed)
        frame = pd.DataFrame({f"a{i}": rng.choice([f"t{j}" for j in range(4)], args.rows) for i in range(8)})
        errors = (rng.random(args.rows) < 0.1).astype(float)
        tags = TagMatrix.from_frame(frame)
        found["exact for small slices (hibug's)"].append(len(find_error_slices(tags, errors)))
        with mock.patch.object(stats, "EXACT_BELOW", 0.0):
            found["normal approximation everywhere"].append(len(find_error_slices(tags, errors)))
    for test, counts in found.items():
        counts = np.asarray(counts)
        print(f"{test}: a slice on {int((counts > 0).sum())} of {args.sets} bug-free data sets, "
              f"{int(counts.sum())} slices in all")


if __name__ == "__main__":
    main()
