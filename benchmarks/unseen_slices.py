"""Benchmark: HiBug2's Table 1 on the bundled demos: how much worse the model does on the slices predicted to fail
than on the whole held-out split, for both ways of predicting them.

Per demo (classification, detection, pose; each built offline, or reused from --dir): its error slices on val (default
settings, the tags in force), the unseen slices predicted by substitution (similar tags swapped in; offline) and, with
--llm-base-url, by instruction (a language model asked in the task's words; the key from OPENAI_API_KEY). Each
predicted slice is scored on the test split where it holds at least the minimum size; the table gives their mean test
score against the whole test split's, and how many were scored.
Usage: python benchmarks/unseen_slices.py [--dir /tmp/hibug-unseen] [--tasks classification detection pose]
       [--llm-base-url URL --llm-model NAME]
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import pandas as pd

from hibug_core.demo import DEMO_FOLDERS, DEMOS
from hibug_core.llm.client import LLMConfig
from hibug_core.slices.report import error_slices
from hibug_core.slices.unseen import UNSEEN_METHODS, how_they_fail, predict_unseen
from hibug_core.tasks import task_of


def measure(folder: Path, name: str, methods: list[str], llm: LLMConfig | None) -> list[dict]:
    project = DEMOS.build(name, folder=folder / DEMO_FOLDERS[name])
    try:
        report = error_slices(project)
        rows = []
        for method in methods:
            start = time.perf_counter()
            predicted = predict_unseen(project, report, method, task=task_of(project), llm_config=llm)
            measured = how_they_fail(predicted, report)
            rows.append({"demo": name, "method": method, "predicted": measured["predicted"],
                         "unseen (under M in val)": int(predicted["unseen"].sum()),
                         "scored on test": measured["scored"],
                         "mean test score": measured["mean_score"], "whole test split": measured["overall_score"],
                         "difference": measured["mean_score"] - measured["overall_score"],
                         "dropped answers": len(predicted.attrs.get("dropped", [])),
                         "seconds": round(time.perf_counter() - start, 1)})
        return rows
    finally:
        project.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/hibug-unseen", help="where the demos are built (reused when there)")
    parser.add_argument("--tasks", nargs="+", default=list(DEMO_FOLDERS), choices=list(DEMO_FOLDERS))
    parser.add_argument("--llm-base-url", default=None, help="an OpenAI-compatible server: adds the instruction arm")
    parser.add_argument("--llm-model", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    llm = LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url) if args.llm_base_url else None
    methods = list(UNSEEN_METHODS) if llm else ["substitution"]
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [row for name in args.tasks for row in measure(folder, name, methods, llm)]
    table = pd.DataFrame(rows)
    for column in ("mean test score", "whole test split"):
        table[column] = table[column].map("{:.1%}".format)
    table["difference"] = table["difference"].map("{:+.1%}".format)
    print(table.to_string(index=False))
    if not llm:
        print("\ninstruction: not run (give --llm-base-url and --llm-model, the key in OPENAI_API_KEY)")


if __name__ == "__main__":
    main()
