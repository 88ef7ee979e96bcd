"""Benchmark: does hibug find and explain bugs planted in real models? The same as `hibug bench`.

Generates problems from the easy-vqa shape world (a spurious correlation or a rare case planted in the training
split of a small CNN, at several strengths, attributes, classes and seeds; a candidate counts only when its bug
shows in the trained model), runs attributes, tagging (every tag source), slice search and diagnosis on each, and
prints Find Attr, Find Tag, bug-type accuracy and the rank of the first correct slice; results.md and
results.json are written to --out.
Usage: python benchmarks/planted.py [--quick] [--spurious 30 --rare 30] [--out bench-results]
"""
from __future__ import annotations

import sys

from hibug_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
