"""Benchmark: hibug's slice enumeration against `sliceline`, a tree without pruning and a naive scan, planted slices.

For each configuration (rows x attributes x depth, minimum support M=10) it generates tagged data (4 tags per
attribute, 10% base error) with three planted error slices, then times in separate processes (so peak memory is
each one's own): hibug's enumeration + scoring (median of 3), sliceline's Slicefinder (same depth and support, top
10, once, with a time and memory limit), a tree without pruning (HiBug2's baseline: each slice's rows found among
its parent's, every child expanded whatever its size) and a naive scan (every candidate slice checked against all
rows); the last two timed on a sample and extrapolated when they would run past their budget. It checks that every
slice both report has identical counts and mean errors, that every planted slice ranks in hibug's top 10, and
measures the machine's popcount rate and memory bandwidth to show how far the engine is from them.
With --rows N (1,000,000 or 10,000,000) it runs hibug alone at N rows x --attributes (50) attributes, depth 3,
recounts a sample of its slices with boolean masks over every row and says whether the issues' targets at that size
are met; --scores makes the errors continuous, as a detection project's IoU-based ones are (1 for a missed object,
1 - IoU, up to 0.4, for a found one), which the engine sums as floats instead of counting bits; --threads 1,2 runs
it once per thread count (numba's threads) so the figures say what the threads bring.
With --ablation, HiBug2's Fig. 5 ("runtime increases linearly with the data volume, while remaining feasible even in
cases where tasks involve up to 72 attributes"): hibug alone at depth 3 over 25,000 to 200,000 rows (50 attributes)
and over 18 to 72 attributes (100,000 rows).
Usage: python benchmarks/slices.py [--quick | --rows 1000000 [--scores] [--threads 1,2] | --ablation]
       [--sliceline-timeout 150]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

CONFIGS = [(10_000, 20, 2), (10_000, 20, 3), (10_000, 20, 4), (10_000, 50, 2), (10_000, 50, 3),
           (100_000, 20, 2), (100_000, 20, 3), (100_000, 20, 4), (100_000, 50, 2), (100_000, 50, 3)]
QUICK = [(10_000, 20, 2), (10_000, 20, 3), (100_000, 50, 3), (100_000, 20, 4)]
TAGS = 4
SUPPORT = 10
TARGETS = {1_000_000: (10, 4), 10_000_000: (60, 16)}  # rows: (seconds, GB) the search with scoring must stay under
PLANTED = [((3, 1),), ((5, 2), (11, 0)), ((0, 3), (8, 1), (14, 2))]  # (attribute, tag) pairs


def make_data(rows: int, attributes: int, seed: int = 0, scores: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Tag codes and errors, 10% of rows wrong and the planted slices more; with `scores`, a wrong row's error is 1
    (a missed object) and a right row's 1 - IoU, drawn up to 0.4, as a detection project's outcomes are."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, TAGS, size=(rows, attributes)).astype(np.int16)
    errors = rng.random(rows) < 0.1
    for planted, rate in zip(PLANTED, (0.45, 0.6, 0.8)):
        mask = np.all([codes[:, a] == t for a, t in planted], axis=0)
        errors[mask] = rng.random(mask.sum()) < rate
    if scores:
        return codes, np.where(errors, 1.0, np.round(rng.uniform(0, 0.4, rows), 3))
    return codes, errors.astype(np.float64)


def peak_rss_mb() -> float:
    """Peak resident memory since the last reset_peak() (VmHWM)."""
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def reset_peak() -> None:
    """Start the peak over (Linux: writing 5 to clear_refs resets VmHWM), so warm-up and compilation do not count."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def current_rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2 ** 20


def run_hibug(rows: int, attributes: int, depth: int) -> dict:
    import numba

    from hibug_core.slices import enumeration as engine
    from hibug_core.slices.enumeration import enumerate_slices
    from hibug_core.slices.search import SliceConfig, TagMatrix, find_error_slices

    if os.environ.get("BENCH_THREADS"):
        numba.set_num_threads(int(os.environ["BENCH_THREADS"]))
    codes, errors = make_data(rows, attributes, scores=bool(os.environ.get("BENCH_SCORES")))
    for threshold in (0, engine.PARALLEL_FROM_WORDS):  # load (or compile) the serial and the threaded kernels
        engine.PARALLEL_FROM_WORDS = threshold
        enumerate_slices(codes[:2000, :6], [TAGS] * 6, errors[:2000], max_depth=3)
    reset_peak()
    baseline = current_rss_mb()
    tags = TagMatrix(np.arange(rows), [f"a{i}" for i in range(attributes)], [[f"t{j}" for j in range(TAGS)]] *
                     attributes, codes)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = enumerate_slices(codes, [TAGS] * attributes, errors, max_depth=depth, min_support=SUPPORT)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    ranked = find_error_slices(tags, errors, SliceConfig(max_depth=depth, min_support=SUPPORT))
    search_s = time.perf_counter() - start
    peak = peak_rss_mb()
    recount = recount_sample(codes, errors, result)
    rank = {tuple((int(a[1:]), int(t[1:])) for a, t in d): rank for rank, d in enumerate(ranked["definition"], 1)}
    summary = {"seconds": float(np.median(times)), "search_seconds": search_s, "slices": result.n_slices,
               "candidates": result.candidates, "word_ops": result.candidates * ((rows + 63) // 64) * 2,
               "peak_mb": peak, "extra_mb": peak - baseline, "recount": recount, "threads": numba.get_num_threads(),
               "planted_ranks": [rank.get(tuple(sorted(p)), "missed") if len(p) <= depth else "-" for p in PLANTED]}
    if rows >= 1_000_000:  # the whole table (over a million slices) is not sent back; the recount checks it
        return summary
    table = {}
    for level in result.levels:
        for features, count, wrong in zip(level.features, level.count, level.errors[:, 0]):
            table[json.dumps([[int(result.feature_attribute[f]), int(result.feature_tag[f])] for f in features])] = \
                [int(count), float(wrong)]
    return {**summary, "table": table}


def recount_sample(codes: np.ndarray, errors: np.ndarray, result, n: int = 300, seed: int = 0) -> dict:
    """Counts and error sums of n slices drawn from every depth, recounted one by one with boolean masks over all
    rows (the naive method the 100k configurations are checked with): how many differ."""
    rng = np.random.default_rng(seed)
    differ = checked = 0
    for level in result.levels:
        for i in rng.choice(len(level.keys), min(n // len(result.levels), len(level.keys)), replace=False):
            mask = np.ones(len(codes), dtype=bool)
            for feature in level.features[i]:
                mask &= codes[:, result.feature_attribute[feature]] == result.feature_tag[feature]
            # a float sum's last bits depend on its order; 0/1 errors must match exactly
            differ += int(mask.sum()) != int(level.count[i]) or not np.isclose(errors[mask].sum(), level.errors[i, 0],
                                                                               rtol=1e-12, atol=0)
            checked += 1
    return {"checked": checked, "differ": differ}


def run_sliceline(rows: int, attributes: int, depth: int) -> dict:
    from sliceline.slicefinder import Slicefinder

    codes, errors = make_data(rows, attributes)
    reset_peak()
    baseline = current_rss_mb()
    start = time.perf_counter()
    finder = Slicefinder(alpha=0.95, k=10, max_l=depth, min_sup=SUPPORT, verbose=False).fit(codes, errors)
    seconds = time.perf_counter() - start
    found = []
    for definition, statistics in zip(finder.top_slices_, finder.top_slices_statistics_):
        pairs = [[a, int(t)] for a, t in enumerate(definition) if t is not None and not
                 (isinstance(t, float) and np.isnan(t))]
        found.append([pairs, statistics["slice_size"], statistics["slice_average_error"]])
    return {"seconds": seconds, "peak_mb": peak_rss_mb(), "extra_mb": peak_rss_mb() - baseline, "top": found}


def run_naive(rows: int, attributes: int, depth: int, budget_s: float = 20.0) -> dict:
    codes, errors = make_data(rows, attributes)
    candidates = sum(len(list(itertools.combinations(range(attributes), k))) * TAGS ** k for k in range(1, depth + 1))
    checked, start = 0, time.perf_counter()
    rng = np.random.default_rng(1)
    while time.perf_counter() - start < budget_s and checked < candidates:
        k = int(rng.integers(1, depth + 1))
        chosen = rng.choice(attributes, k, replace=False)
        mask = np.ones(rows, dtype=bool)
        for a in chosen:
            mask &= codes[:, a] == rng.integers(0, TAGS)
        _ = mask.sum(), errors[mask].sum()
        checked += 1
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed / checked * candidates, "measured": checked, "candidates": candidates,
            "extrapolated": checked < candidates, "peak_mb": peak_rss_mb()}


def run_tree(rows: int, attributes: int, depth: int, budget_s: float = 20.0) -> dict:
    """A tree without pruning: a slice's children are counted over its own rows (one bincount per later attribute),
    and every child is expanded, however few rows it holds. First-level subtrees are timed in a random order until
    the budget runs out; the rest is extrapolated by candidate count."""
    codes, errors = make_data(rows, attributes)

    def expand(index: np.ndarray, last: int, level: int) -> int:
        visited = 0
        for attribute in range(last + 1, attributes):
            column = codes[index, attribute]
            np.bincount(column, minlength=TAGS), np.bincount(column, weights=errors[index], minlength=TAGS)
            visited += TAGS
            if level + 1 < depth:
                for tag in range(TAGS):
                    visited += expand(index[column == tag], attribute, level + 1)
        return visited

    def below(attribute: int, level: int) -> int:  # candidates under a slice whose last attribute is `attribute`
        later = attributes - attribute - 1
        return sum(len(list(itertools.combinations(range(later), k))) * TAGS ** k for k in range(1, depth - level + 1))

    candidates = sum(len(list(itertools.combinations(range(attributes), k))) * TAGS ** k for k in range(1, depth + 1))
    start = time.perf_counter()
    everything = np.arange(rows)
    for attribute in range(attributes):  # the first level: every single-tag slice
        np.bincount(codes[:, attribute], minlength=TAGS), np.bincount(codes[:, attribute], weights=errors,
                                                                      minlength=TAGS)
    first_level_s = time.perf_counter() - start
    roots = [(a, t) for a in range(attributes) for t in range(TAGS)]
    order = np.random.default_rng(1).permutation(len(roots))
    timed_s, timed_candidates = 0.0, 0
    for i in order:
        attribute, tag = roots[i]
        begin = time.perf_counter()
        visited = expand(everything[codes[:, attribute] == tag], attribute, 1) if depth > 1 else 0
        timed_s += time.perf_counter() - begin
        timed_candidates += visited
        assert visited == below(attribute, 1)
        if timed_s > budget_s:
            break
    below_first = candidates - attributes * TAGS
    seconds = first_level_s + (timed_s / timed_candidates * below_first if timed_candidates else 0.0)
    return {"seconds": seconds, "measured": timed_candidates + attributes * TAGS, "candidates": candidates,
            "extrapolated": timed_candidates < below_first, "peak_mb": peak_rss_mb()}


def machine_limits() -> dict:
    """Popcount words/s (AND + popcount of two L1-resident arrays, all cores) and memory read bandwidth."""
    from numba import njit, prange

    from hibug_core.slices.bitsets import popcount64

    @njit(parallel=True, cache=False)
    def and_popcount(a, b, repeats):
        total = 0
        for _ in prange(repeats):
            for w in range(a.shape[0]):
                total += popcount64(a[w] & b[w])
        return total

    a = np.random.default_rng(0).integers(0, 2 ** 62, 1563, dtype=np.int64).astype(np.uint64)
    b = a[::-1].copy()
    and_popcount(a, b, 10)
    start = time.perf_counter()
    and_popcount(a, b, 200_000)
    popcount_rate = 1563 * 200_000 / (time.perf_counter() - start)
    big = np.ones(2 ** 27, dtype=np.uint64)  # 1 GiB
    big.sum()
    start = time.perf_counter()
    big.sum()
    bandwidth = big.nbytes / (time.perf_counter() - start)
    return {"popcount_words_per_s": popcount_rate, "read_gb_per_s": bandwidth / 1e9}


def in_subprocess(kind: str, rows: int, attributes: int, depth: int, timeout: float, memory_gb: float,
                  env: dict | None = None) -> dict:
    command = [sys.executable, __file__, "--worker", kind, str(rows), str(attributes), str(depth)]
    limit = int(memory_gb * 2 ** 30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, preexec_fn=cap,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"failed": f"over {timeout:.0f} s"}
    if done.returncode != 0:
        reason = "out of memory" if "MemoryError" in done.stderr or done.returncode < 0 else done.stderr[-300:]
        return {"failed": f"{reason} (limit {memory_gb:.0f} GB)"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="four configurations instead of ten")
    parser.add_argument("--sliceline-timeout", type=float, default=150)
    parser.add_argument("--memory-gb", type=float, default=16)
    parser.add_argument("--rows", type=int,
                        help="hibug alone at this many rows x --attributes attributes, depth 3 (sliceline is not "
                             "run at this size)")
    parser.add_argument("--attributes", type=int, default=50, help="with --rows")
    parser.add_argument("--scores", action="store_true", help="with --rows: continuous errors (IoU-based)")
    parser.add_argument("--threads", help="with --rows: comma-separated thread counts, one run each (default: "
                                          "numba's, every core)")
    parser.add_argument("--ablation", action="store_true",
                        help="HiBug2's Fig. 5: depth 3 over rows and over attributes")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, rows, attributes, depth = args.worker[0], *map(int, args.worker[1:])
        print(json.dumps({"hibug": run_hibug, "sliceline": run_sliceline, "naive": run_naive, "tree": run_tree}[kind](
            rows, attributes, depth)))
        return
    if args.ablation:
        print("HiBug2's Fig. 5, depth 3: hibug's enumeration and scoring (median of 3, each in its own process)")
        for rows, attributes in ((25_000, 50), (50_000, 50), (100_000, 50), (200_000, 50), (100_000, 18),
                                 (100_000, 36), (100_000, 72)):
            ours = in_subprocess("hibug", rows, attributes, 3, 900, args.memory_gb)
            said = ours.get("failed") or (f"{ours['slices']:>9,} slices {ours['seconds']:7.2f} s "
                                          f"({ours['seconds'] / rows * 1e5:.2f} s per 100,000 rows), "
                                          f"peak {ours['peak_mb']:,.0f} MB")
            print(f"{rows:>8,} rows x {attributes:>2} attributes: {said}")
        return
    if args.rows:
        errors = "IoU-based scores" if args.scores else "0/1 errors"
        for threads in (args.threads.split(",") if args.threads else [""]):
            env = {"BENCH_THREADS": threads, "BENCH_SCORES": "1" if args.scores else ""}
            ours = in_subprocess("hibug", args.rows, args.attributes, 3, 1800, args.memory_gb, env)
            if "failed" in ours:
                print(f"hibug failed at {args.rows:,} x {args.attributes}, depth 3: {ours['failed']}")
                continue
            recount = ours["recount"]
            print(f"{args.rows:,} rows x {args.attributes} attributes, depth 3, {errors}, {ours['threads']} "
                  f"thread(s): {ours['slices']:,} slices in {ours['seconds']:.2f} s (median of 3; the search with "
                  f"scoring {ours['search_seconds']:.2f} s), peak {ours['peak_mb'] / 1024:.2f} GB "
                  f"({ours['extra_mb'] / 1024:.2f} GB above the process after imports); planted ranks "
                  f"{ours['planted_ranks']}; {recount['checked']} slices recounted with boolean masks: "
                  f"{recount['differ']} differ")
            seconds, gigabytes = next((t for rows, t in TARGETS.items() if args.rows <= rows), TARGETS[max(TARGETS)])
            print(f"targets: < {seconds} s {'met' if ours['search_seconds'] < seconds else 'NOT met'}, "
                  f"< {gigabytes} GB {'met' if ours['peak_mb'] < gigabytes * 1024 else 'NOT met'}, identical counts "
                  f"{'yes' if recount['differ'] == 0 else 'NO'}")
        return
    limits = machine_limits()
    print(f"machine: AND+popcount {limits['popcount_words_per_s'] / 1e9:.2f} G words/s (all cores, L1), "
          f"memory read {limits['read_gb_per_s']:.1f} GB/s")
    header = (f"{'rows':>7} {'attrs':>5} {'depth':>5} {'slices':>9} | {'hibug s':>7} {'MB':>6} | {'sliceline s':>11} "
              f"{'MB':>6} {'speed-up':>8} {'mem':>5} | {'tree s':>8} {'speed-up':>8} | {'naive s':>8} {'speed-up':>8} "
              "| "
              f"{'G words/s':>9} "
              "planted ranks        same")
    print(header)
    for rows, attributes, depth in (QUICK if args.quick else CONFIGS):
        ours = in_subprocess("hibug", rows, attributes, depth, 600, args.memory_gb)
        theirs = in_subprocess("sliceline", rows, attributes, depth, args.sliceline_timeout, args.memory_gb)
        naive = in_subprocess("naive", rows, attributes, depth, 120, args.memory_gb)
        tree = in_subprocess("tree", rows, attributes, depth, 120, args.memory_gb)
        if "failed" in ours:
            print(f"{rows:>7} {attributes:>5} {depth:>5} hibug failed: {ours['failed']}")
            continue
        same = "n/a"
        if "top" in theirs:
            mismatches = 0
            for pairs, size, mean_error in theirs["top"]:
                count, wrong = ours["table"].get(json.dumps(sorted(pairs)), [None, None])
                mismatches += count != int(size) or count is None or abs(wrong / count - mean_error) > 1e-9
            same = "yes" if mismatches == 0 else f"NO ({mismatches})"
        sliceline_text = (f"{theirs['seconds']:>11.2f} {theirs['extra_mb']:>6.0f} "
                          f"{theirs['seconds'] / ours['seconds']:>7.0f}x "
                          f"{theirs['extra_mb'] / max(ours['extra_mb'], 1):>4.0f}x"
                          if "seconds" in theirs else f"{theirs['failed']:>35}")
        naive_text, tree_text = (
            f"{peer['seconds']:>7.1f}{'*' if peer.get('extrapolated') else ' '} "
            f"{peer['seconds'] / ours['seconds']:>7.0f}x" if "seconds" in peer else f"{peer['failed']:>17}"
            for peer in (naive, tree))
        print(f"{rows:>7} {attributes:>5} {depth:>5} {ours['slices']:>9} | {ours['seconds']:>7.2f} "
              f"{ours['extra_mb']:>6.0f} | {sliceline_text} | {tree_text} | {naive_text} | "
              f"{ours['word_ops'] / ours['seconds'] / 1e9:>9.1f} {str(ours['planted_ranks']):<20} {same}")
    print("* tree or naive scan timed on a sample of candidates and extrapolated. G words/s: candidate slices x bitset "
          "words x 2 per second, the work a pure bitset engine would do; compare with the machine's AND+popcount rate "
          "above.")
    print("MB: peak resident memory above the process's size after its imports (hibug's whole process stays under "
          "the figure plus about 250 MB of libraries).")
    print("targets: 100k x 50 depth 3 < 4 s; 100k x 20 depth 4 < 5 s; peak < 2 GB; >= 100x faster and >= 10x less "
          "memory than sliceline; planted slices in the top 10.")


if __name__ == "__main__":
    main()
