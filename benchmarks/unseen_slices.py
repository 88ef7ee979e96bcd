"""Benchmark: HiBug2's Table 1 on the bundled demos: how much worse the model does on the slices predicted to fail
than on the whole held-out split, for both ways of predicting them; with --found, HiBug's Table 3 (do the slices found
on val hold on the test split?) and with --thresholds, HiBug's Fig. 3 (bugs found per accuracy threshold).

Per demo (classification, detection, pose; each built offline, or reused from --dir): its error slices on val (default
settings, the tags in force), the unseen slices predicted by substitution (similar tags swapped in; offline) and, with
--llm, by instruction (a language model asked in the task's words; the key from OPENAI_API_KEY). Each
predicted slice is scored on the test split where it holds at least the minimum size; the table gives their mean test
score against the whole test split's, and how many were scored.
--found: each bug found on val (one row per bug, trusted), scored on test where it holds at least the minimum size;
it holds when it is still an error slice there (below the test split's score by the same gap C).
--thresholds T ...: the bugs found on val when an error slice is one scoring below T (an absolute score, as HiBug's
Fig. 3 sweeps accuracy), per demo.
Usage: python benchmarks/unseen_slices.py [--dir /tmp/hibug-unseen] [--tasks classification detection pose]
       [--llm --llm-base-url URL --llm-model NAME] [--encoder SPEC] [--found] [--thresholds 0.3 0.5 0.7]
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import pandas as pd

from hibug_core.cli.command import llm_from, model_arguments
from hibug_core.demo import DEMOS, demo_folder
from hibug_core.llm.client import LLMConfig
from hibug_core.metrics import points
from hibug_core.slices.report import error_slices, one_row_per_bug
from hibug_core.slices.search import SliceConfig
from hibug_core.slices.unseen import (
    UNSEEN_METHODS,
    found_slices_hold,
    how_they_fail,
    matching_data_scores,
    predict_unseen,
)
from hibug_core.tasks import task_of


def holding(report, name: str) -> dict:
    """HiBug's Table 3 on one demo: how many of the bugs found on val are still error slices on test."""
    found = found_slices_hold(report)
    scored = found.dropna(subset=["check_score"])
    return {"demo": name, "bugs found on val": len(found), "scored on test": len(scored),
            "hold on test": int(scored["holds"].sum()),
            "share holding": scored["holds"].mean() if len(scored) else None,
            "mean val score": scored["eval_score"].mean(), "mean test score": scored["check_score"].mean(),
            "test cut": found.attrs["cut"]}


def per_threshold(project, name: str, thresholds: list[float]) -> list[dict]:
    """HiBug's Fig. 3 on one demo: the bugs found on val at each absolute score threshold, and HiBug's own count,
    every slice under it."""
    rows = []
    for threshold in thresholds:
        report = error_slices(project, config=SliceConfig(threshold=threshold))
        bugs = one_row_per_bug(report.slices)
        rows.append({"demo": name, "threshold": threshold, "bugs (trusted)": int(bugs["trusted"].sum()),
                     "bugs (all)": len(bugs), "slices before folding": len(report.slices),
                     # HiBug's own count: every slice (of at least M samples) scoring under the threshold
                     "every slice under it (HiBug's)": len(report.slices_below(threshold))})
    return rows


def measure(folder: Path, name: str, methods: list[str], llm: LLMConfig | None, found: list, thresholds: list,
            sweep: list[float], matching: list, encoder: str | None = None) -> list[dict]:
    project = DEMOS.build(name, folder=folder / demo_folder(name))
    try:
        report = error_slices(project)
        if found is not None:
            found.append(holding(report, name))
            matching.extend({"demo": name, **row} for row in matching_data_scores(report).to_dict("records"))
        if sweep:
            thresholds.extend(per_threshold(project, name, sweep))
        rows = []
        for method in methods:
            start = time.perf_counter()
            predicted = predict_unseen(project, report, method, task=task_of(project), llm_config=llm,
                                       encoder=encoder)
            measured = how_they_fail(predicted, report)
            rows.append({"demo": name, "method": method, "predicted": measured["predicted"],
                         "unseen (under M in val)": int(predicted["unseen"].sum()),
                         "scored on test": measured["scored"],
                         "mean test score": measured["mean_score"], "whole test split": measured["overall_score"],
                         "difference": measured["points"], "relative change": measured["relative_change"],
                         "dropped answers": len(predicted.attrs.get("dropped", [])),
                         "seconds": round(time.perf_counter() - start, 1)})
        return rows
    finally:
        project.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/hibug-unseen", help="where the demos are built (reused when there)")
    parser.add_argument("--tasks", nargs="+", default=DEMOS.names(), choices=DEMOS.names())
    model_arguments(parser, llm=True)  # --llm adds the instruction arm
    parser.add_argument("--encoder", default=None, help="whose text side measures tag similarity for substitution "
                        "(HiBug2's: a CLIP; default: the offline MiniLM)")
    parser.add_argument("--found", action="store_true", help="also HiBug's Table 3: do the bugs found on val hold on "
                                                             "test?")
    parser.add_argument("--thresholds", type=float, nargs="*", default=[],
                        help="also HiBug's Fig. 3: bugs found at each absolute score threshold")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    llm = llm_from(args)
    methods = UNSEEN_METHODS.names() if llm else ["substitution"]
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    found: list | None = [] if args.found else None
    thresholds: list = []
    matching: list = []
    rows = [row for name in args.tasks for row in measure(folder, name, methods, llm, found, thresholds,
                                                           args.thresholds, matching, args.encoder)]
    table = pd.DataFrame(rows)
    for column in ("mean test score", "whole test split"):
        table[column] = table[column].map("{:.1%}".format)
    table["difference"] = table["difference"].map(points)  # in points
    table["relative change"] = table["relative change"].map("{:+.1%}".format)  # HiBug2's Table 1 figure
    print(table.to_string(index=False))
    if not llm:
        print("\ninstruction: not run (give --llm with --llm-base-url and --llm-model, the key in OPENAI_API_KEY)")
    if found is not None:
        held = pd.DataFrame(found)
        for column in ("share holding", "mean val score", "mean test score", "test cut"):
            held[column] = held[column].map(lambda v: "-" if v is None or v != v else f"{v:.1%}")
        print("\nHiBug's Table 3: the bugs found on val, scored on test (held: still below the test split's score by "
              "the gap C)")
        print(held.to_string(index=False))
        scored = pd.DataFrame(matching)
        scored["score"] = scored["score"].map("{:.1%}".format)
        print("\nHiBug's Table 3, the paper's way: the score on test data matching HiBug's slices (every slice of the "
              "minimum size at or below the val score less each gap)")
        print(scored.to_string(index=False))
    if thresholds:
        print("\nHiBug's Fig. 3: bugs found on val per absolute score threshold")
        print(pd.DataFrame(thresholds).to_string(index=False))


if __name__ == "__main__":
    main()
