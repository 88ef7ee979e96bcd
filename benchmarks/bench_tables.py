"""Benchmark: the planted-bug benchmark's finder tables printed again from a saved run (`hibug bench ... --out DIR`
writes DIR/results.json): who finds bugs best, and the planted bugs each finder finds per bug type and per number of
conditions. Nothing is re-run; the scoring is the one `hibug bench` uses (hibug_core.bench.ranking).
Usage: python benchmarks/bench_tables.py DIR/results.json
"""
from __future__ import annotations

import argparse
import json

import pandas as pd

from hibug_core.bench.ranking import formatted, summary_table
from hibug_core.bench.summary import markdown_table
from hibug_core.cli.slices import found_tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a run's results.json")
    args = parser.parse_args()
    with open(args.results, encoding="utf-8") as file:
        saved = json.load(file)
    bugs, problems = pd.DataFrame(saved["finder_bugs"]), pd.DataFrame(saved["finder_problems"])
    tables = {"who finds bugs best": formatted(summary_table(bugs, problems, ["tags", "method"])),
              **found_tables(bugs)}
    for title, table in tables.items():
        print(f"## {title}\n\n{markdown_table(table)}\n")


if __name__ == "__main__":
    main()
