"""Benchmark: the planted-bug benchmark's finder tables printed again from saved runs (`hibug bench ... --out DIR`
writes DIR/results.json): who finds bugs best, the planted bugs each finder finds per bug type and per number of
conditions, and the bug-free twins each finder reported a slice on; with ObjectLab's flags per object pooled, where
the runs have them. Several runs of other seeds (e.g. a seed re-run on its own) are stacked and scored together.
Nothing is re-run; the scoring is the one `hibug bench` uses (hibug_core.bench.ranking).
Usage: python benchmarks/bench_tables.py DIR/results.json [OTHER/results.json ...]
"""
from __future__ import annotations

import argparse
import json

import pandas as pd

from hibug_core.bench.ranking import formatted, summary_table
from hibug_core.bench.summary import markdown_table
from hibug_core.cli.slices import found_tables

OBJECTLAB = "ObjectLab's flags per object"


def stacked_runs(paths: list[str]) -> dict[str, pd.DataFrame]:
    """The runs' finder rows (and ObjectLab's), one table each; SystemExit when two runs hold the same seed."""
    parts: dict[str, list[pd.DataFrame]] = {"finder_bugs": [], "finder_problems": [], OBJECTLAB: []}
    seen: dict[int, str] = {}
    for path in paths:
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        problems = pd.DataFrame(saved["finder_problems"])
        for seed in sorted(problems["seed"].unique()) if "seed" in problems else []:
            if int(seed) in seen:
                raise SystemExit(f"seed {seed} is in both {seen[int(seed)]} and {path}: give each seed once")
            seen[int(seed)] = path
        for name in parts:
            parts[name].append(pd.DataFrame(saved.get(name, [])))
    return {name: pd.concat(frames, ignore_index=True) for name, frames in parts.items()}


def objectlab_pooled(lab: pd.DataFrame) -> pd.DataFrame:
    """ObjectLab's per-object figures over every problem of the runs (from each seed's pooled row)."""
    seeds = lab[lab["problem"] == "all"]
    flagged = (seeds["precision"] * seeds["flags"]).sum()
    return pd.DataFrame([{"problems": int((lab["problem"] != "all").sum()), "flags": int(seeds["flags"].sum()),
                          "planted objects": int(seeds["planted objects"].sum()),
                          "precision": flagged / max(seeds["flags"].sum(), 1),
                          "recall": (seeds["recall"] * seeds["planted objects"]).sum()
                          / max(seeds["planted objects"].sum(), 1),
                          "bug-free twin: flags": int(seeds.get("bug-free twin: flags", pd.Series(dtype=int)).sum())}])


def bug_free_twins(problems: pd.DataFrame) -> pd.DataFrame:
    """Per tag source and finder: its bug-free twins, those on which it reported a slice, and the slices in all."""
    twins = problems[problems["bug_free"].astype(bool) & ~problems["failed"].astype(bool)]
    return twins.groupby(["tags", "method"], sort=False)["reported"].agg(
        twins="size", **{"with a slice": lambda v: int((v > 0).sum()), "slices": "sum"}).reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="runs' results.json (each seed in one of them)")
    args = parser.parse_args()
    runs = stacked_runs(args.results)
    bugs, problems = runs["finder_bugs"], runs["finder_problems"]
    tables = {"who finds bugs best": formatted(summary_table(bugs, problems, ["tags", "method"])),
              **found_tables(bugs), "bug-free twins": bug_free_twins(problems)}
    if len(runs[OBJECTLAB]):
        tables[OBJECTLAB + ", pooled"] = objectlab_pooled(runs[OBJECTLAB]).round(4)
    for title, table in tables.items():
        print(f"## {title}\n\n{markdown_table(table)}\n")


if __name__ == "__main__":
    main()
