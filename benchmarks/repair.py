"""Benchmark: which selection repairs planted bugs best, at several budgets?

On each problem (the demo: the small CNN with a planted spurious correlation, blue -> circle, and a planted rare
case, small triangles; and the same network trained with other bugs planted, below), on a fresh copy per budget,
for each seed: select that share of the training split's size from
the pool with every selection method (hibug's, HiBug2's, expected failures, and the baselines random, uncertainty,
margin, Coreset and BADGE), label it (the pool's labels stand in for an annotator), fine-tune the model on training
+ selected data, and measure the planted slices and the whole held-out test split. Also: the same with no new data
(control), and with as many images from the shape-world renderer (standing in for a diffusion model offline;
--generator names a real one, with the same specs as `hibug generate`) for each
prompt method in --prompts: the top slices' HiBug prompts, Chegini and Feizi's uncommon backgrounds (the renderer
draws no background, so offline this arm is the class names again), and the class names alone ("A photo of a
{label}", the baseline of HiBug's Table 5 and Chegini and Feizi's Random_debugging); for each, the model's error on its
generated images before retraining is printed too (HiBug's Table 5).
With --debug-sets it also prints, per method, the share of the model's failures each repair fixes on the validation
split, which found the slices and wrote the prompts (Chegini and Feizi's debug seed), and on the held-out test split,
which nothing saw (their debug held-out set).
Prints mean ± sd over seeds per budget, and per slice the paired difference (over seeds) between each of hibug's
methods and the best baseline on that slice, with its 95% t-interval.
Usage: python benchmarks/repair.py [--problems demo red green] [--seeds 0 1 2 3 4] [--budgets 0.05 0.1 0.2]
       [--methods ...] [--prompts hibug backgrounds "class names"] [--lams ...] [--ks 1 3 5] [--debug-sets]
       [--generator diffusers:FOLDER] [--dir repair-bench]
"""
from __future__ import annotations

import argparse
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.bench.summary import markdown_table
from hibug_core.cli.command import llm_from, model_arguments
from hibug_core.demo.build import DemoConfig, ensure_demo
from hibug_core.repair.generated import generate_for_prompts, generated_images
from hibug_core.repair.generators import SHAPE_RENDERER, load_generator
from hibug_core.repair.loop import CONTROL, GENERATED, RepairConfig, paired_interval, run_repair
from hibug_core.repair.prompts import FROM_FAILURES, PROMPT_METHODS, build_prompts
from hibug_core.repair.retrain import RETRAIN_METHODS, RetrainConfig
from hibug_core.repair.selection import SELECTION_METHODS, SelectionConfig, parse_budget, resolve_budget
from hibug_core.store.project import Project
from hibug_core.tasks import task_of

BASELINES = ["random", "uncertainty", "margin", "coreset", "badge"]
OURS = ["expected failures", "hibug", "hibug2", "hibug rule"]  # hibug rule: HiBug2's Table 2 arm for HiBug
PROBLEMS = {  # the demo, and the same network and splits with other bugs planted (each shows in its model)
    "demo": DemoConfig(),
    "red": DemoConfig(spurious_color="red", spurious_shape="rectangle", rare_size="large", rare_shape="circle"),
    "green": DemoConfig(spurious_color="green", spurious_shape="triangle", rare_size="small",
                        rare_shape="rectangle"),
}


def kept(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the whole held-out split and of the planted slices, named for the table."""
    rows = frame[frame["planted"] | (frame["slice_id"] == "overall")].copy()
    rows["shown"] = np.where(rows["slice_id"] == "overall", "all held-out images", rows["slice"] + " (planted)")
    return rows


def table(summary: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    out = []
    for (slice_name, n, before), group in kept(summary).groupby(["shown", "n", "before"], sort=False):
        row = {"slice": slice_name, "test images": n, "before": f"{before:.1%}"}
        for method in methods:
            hit = group[group["method"] == method]
            if len(hit):
                row[method] = f"{hit['after'].iat[0]:.1%} ± {hit['after_sd'].iat[0]:.1%}"
        out.append(row)
    return pd.DataFrame(out)


def paired(changes: pd.DataFrame, summary: pd.DataFrame, ours: list[str]) -> pd.DataFrame:
    """Per kept slice and method of ours: the best baseline there (highest mean), and the paired difference over
    seeds (mean, 95% t-interval, seeds won)."""
    out = []
    changes, summary = kept(changes), kept(summary)
    for slice_name in summary["shown"].unique():
        means = summary[(summary["shown"] == slice_name) & summary["method"].isin(BASELINES)]
        if means.empty:
            continue
        best = means.sort_values("after", ascending=False)["method"].iat[0]
        by_seed = changes[changes["shown"] == slice_name].pivot_table(index="seed", columns="method", values="after")
        for method in ours:
            if method not in by_seed:
                continue
            pair = paired_interval((by_seed[method] - by_seed[best]).dropna().to_numpy())
            mean, low, high = pair["difference"], pair["low"], pair["high"]
            verdict = "better" if low > 0 else "worse" if high < 0 else "no clear difference"
            out.append({"slice": slice_name, "method": method, "best baseline": best,
                        "difference": f"{mean:+.1%}", "95% interval": f"{low:+.1%} to {high:+.1%}",
                        "seeds won": f"{pair['won']} of {pair['seeds']}", "verdict": verdict})
    return pd.DataFrame(out)


def error_on_generated(project) -> float:
    """The model's error on the project's generated images, before any retraining (HiBug's Table 5, first column)."""
    from hibug_core.image_loader import open_image
    from hibug_core.repair.failure_search import network_predictor

    images = generated_images(project)
    predict = network_predictor(project, project.models()[0])
    predicted = predict([open_image(project.folder / path) for path in images["image_path"]])
    return float(np.mean([ranked[0] != label for ranked, label in zip(predicted, images["label"])]))


def debug_halves(project, original: str, seed: int = 0) -> tuple[pd.Index, pd.Index]:
    """Chegini and Feizi's split of one failure set: the original model's val failures in two seeded halves, (debug
    seed, debug held-out)."""
    before = project.samples(original)
    wrong = before["label"].notna() & (before["prediction"] != before["label"])
    failed = before.index[(before["split"] == "val") & wrong]
    order = np.random.default_rng(seed).permutation(len(failed))
    half = len(failed) // 2
    return failed[np.sort(order[:half])], failed[np.sort(order[half:])]


def failures_fixed(project, original: str, runs: pd.DataFrame, name: str | None = None, halves=None) -> pd.DataFrame:
    """Per repaired model of `runs` (recorded in the project): the share of the original model's failures it gets
    right, on the validation split (the debug seed: the slices and prompts came from it) and on the test split (the
    debug held-out set); or with `halves` (debug_halves), on the half of the val failures the prompts were written
    from and on the other."""
    before = project.samples(original)
    failed = before[before["label"].notna() & (before["prediction"] != before["label"])]
    sets = {"debug seed (val failures)": failed.index[failed["split"] == "val"],
            "debug held-out (test failures)": failed.index[failed["split"] == "test"]}
    if halves is not None:
        sets = {"debug seed (half of the val failures)": halves[0], "debug held-out (the other half)": halves[1]}
    rows = []
    for run in runs.itertuples():
        after = project.samples(run.model)
        rows.append({"method": name or run.method, "seed": run.seed, **{
            f"{label}, {len(ids)}": float((after.loc[ids, "prediction"] == after.loc[ids, "label"]).mean())
            for label, ids in sets.items()}})
    return pd.DataFrame(rows)


def generated_arms(source: Path, work: Path, prompts: str, budget: int, retrain: RetrainConfig, seeds: tuple,
                   lams: list, debug_sets: bool = False, generator: str = SHAPE_RENDERER,
                   k: int = 3, halves: bool = False, encoder: str = "conse", llm=None
                   ) -> tuple[list[pd.DataFrame], list[pd.DataFrame], float, int, list[pd.DataFrame]]:
    """(summaries, changes, error on the generated images, models, failures fixed) of repairs with `budget` images
    from `generator` for `prompts` (k: backgrounds per class, for Chegini and Feizi's), one per weight lambda of the
    new images' loss (None: as if added), on a fresh copy of the problem; with `halves`, the prompts are written from
    one half of the val failures and the other is held out of them (Chegini and Feizi's debug seed and held-out)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    summaries, changes, models, fixed = [], [], 0, []
    with Project.open(work) as project:
        original = project.models()[0]
        split = debug_halves(project, original) if halves else None
        written = build_prompts(project, prompts, k=k, held_out=split[1] if split else None, encoder=encoder,
                                llm=llm)
        generate_for_prompts(project, load_generator(generator), written, budget, seed=0)
        error = error_on_generated(project)
        for lam in lams:
            result = run_repair(project, RepairConfig(data=GENERATED, baseline=None, control=False,
                                                      retrain=replace(retrain, lam=lam), seeds=seeds,
                                                      record_models=debug_sets), task=task_of(project))
            name = (f"{GENERATED}: {prompts}" + (f", k {k}" if prompts == "backgrounds" else "")
                    + (f", lambda {lam:g}" if len(lams) > 1 else ""))
            summaries.append(result.summary.assign(method=name))
            changes.append(result.changes.assign(method=name))
            models += len(result.runs)
            if debug_sets:
                fixed.append(failures_fixed(project, original, result.runs, name, split))
    return summaries, changes, error, models, fixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--budgets", type=parse_budget, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--methods", nargs="+", default=OURS + BASELINES, choices=SELECTION_METHODS.names())
    parser.add_argument("--no-generated", action="store_true", help="skip the renderer's images")
    parser.add_argument("--prompts", nargs="+", default=["hibug"], choices=PROMPT_METHODS.names(),
                        help="prompt methods of the generated arms (default: hibug)")
    parser.add_argument("--lams", type=float, nargs="+", default=None,
                        help="generated arms: each weight lambda of the new images' loss (Chegini and Feizi's sweep; "
                             "default: as if added, n_new / n_original)")
    parser.add_argument("--ks", type=int, nargs="+", default=[3],
                        help="the backgrounds arm: each number of backgrounds per class k (Chegini and Feizi's sweep)")
    model_arguments(parser, encoder=True, llm=True, generator=True)  # the backgrounds arm's encoder and LLM
    parser.add_argument("--debug-sets", action="store_true",
                        help="also print the share of the model's val failures (debug seed) and test failures (debug "
                             "held-out) each repair fixes (Chegini and Feizi)")
    parser.add_argument("--halves", action="store_true",
                        help="with --debug-sets, Chegini and Feizi's split: the val failures in two seeded halves, "
                             "the generated arms' prompts written from the first (prompts written from failures "
                             "only: backgrounds, class names), the share fixed measured on each half")
    parser.add_argument("--dir", default="repair-bench")
    parser.add_argument("--retrain", default="fine-tune", choices=RETRAIN_METHODS.names())
    args = parser.parse_args()
    if args.halves and (not args.debug_sets or any(
            FROM_FAILURES not in PROMPT_METHODS.get(p).needs for p in args.prompts)):
        parser.error("--halves goes with --debug-sets and prompts written from the failures (--prompts "
                     f"{' '.join(repr(e.name) for e in PROMPT_METHODS if FROM_FAILURES in e.needs)})")
    root = Path(args.dir)
    retrain = RetrainConfig(method=args.retrain)
    seeds = tuple(args.seeds)
    started, models, verdicts = time.perf_counter(), 0, []
    for problem in args.problems:
        ensure_demo(root / problem, PROBLEMS[problem]).close()
        for budget_share in args.budgets:
            work = root / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(root / problem, work)
            with Project.open(work) as project:
                original = project.models()[0]
                n_train = task_of(project).training_count(project.samples(), project)
                budget = resolve_budget(budget_share, n_train)
                runs = [run_repair(project, RepairConfig(selection=SelectionConfig(method=method, budget=budget_share),
                                                         baseline=None, control=(k == 0), retrain=retrain,
                                                         seeds=seeds, record_models=args.debug_sets),
                                   task=task_of(project))
                        for k, method in enumerate(args.methods)]
                # with --halves the selection arms' slices saw every val failure: no held-out half to report
                fixed = [failures_fixed(project, original, r.runs) for r in runs] \
                    if args.debug_sets and not args.halves else []
            summaries, all_changes = [r.summary for r in runs], [r.changes for r in runs]
            models += sum(len(r.runs) for r in runs)
            errors = {}
            arms = [(p, k) for p in ([] if args.no_generated else args.prompts)
                    for k in (args.ks if p == "backgrounds" else [3])]
            for prompts, k in arms:
                arm = prompts + (f", k {k}" if prompts == "backgrounds" else "")
                arm_summaries, arm_changes, errors[arm], count, arm_fixed = generated_arms(
                    root / problem, root / "generated", prompts, budget, retrain, seeds, args.lams or [None],
                    args.debug_sets, args.generator, k, args.halves, args.encoder, llm_from(args))
                summaries += arm_summaries
                all_changes += arm_changes
                fixed += arm_fixed
                models += count
            summary = pd.concat(summaries, ignore_index=True)
            changes = pd.concat(all_changes, ignore_index=True)
            shown = [m for m in dict.fromkeys(summary["method"]) if m != CONTROL] + [CONTROL]
            print(f"\n### {problem}: budget {budget_share} of the training split ({budget} of {n_train} images), "
                  f"{args.retrain}; accuracy on the test split after repair, mean ± sd over seeds {list(seeds)}\n",
                  flush=True)
            print(markdown_table(table(summary, shown)))
            if errors:
                print("\nThe model's error on the generated images, before retraining (HiBug's Table 5): " + "; ".join(
                    f"{p}: {e:.1%}" for p, e in errors.items()), flush=True)
            if fixed:
                shares = pd.concat(fixed, ignore_index=True).groupby("method", sort=False).agg(
                    lambda v: f"{v.mean():.1%} ± {v.std():.1%}" if len(v) > 1 else f"{v.mean():.1%}")
                print("\nThe model's failures each repair fixes, mean ± sd over seeds (Chegini and Feizi's debug seed "
                      "and debug held-out sets; columns: set, failures in it):\n")
                print(markdown_table(shares.drop(columns="seed").reset_index()), flush=True)
            verdict = paired(changes, summary, [m for m in OURS if m in args.methods])
            if not verdict.empty:
                print("\nPaired over seeds against the best baseline on each slice:\n")
                print(markdown_table(verdict), flush=True)
                verdicts.append(verdict.assign(problem=problem, budget=budget_share))
    if verdicts:
        tally = pd.concat(verdicts).groupby(["method", "verdict"]).size().unstack(fill_value=0)
        print("\n### Verdicts against the best baseline, over every problem, budget and kept slice\n")
        print(markdown_table(tally.reset_index()))
    print(f"\n{models} retrained models in {time.perf_counter() - started:.0f} s")

if __name__ == "__main__":
    main()
