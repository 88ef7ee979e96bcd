"""Commands that repair a model: select (pool images to label), repair (retrain and compare), generate (images for
the error slices) and failure-search (captions of failures, Wiles et al.)."""
from __future__ import annotations

from hibug_core.cli.command import operation_command, progress_bar, run_kind_here
from hibug_core.operations import FailureSearch, Generate, Repair, Select


def cmd_select(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.repair.selection import export_selection
    from hibug_core.slices.report import error_slices
    from hibug_core.slices.search import SliceConfig
    from hibug_core.store.project import Project
    from hibug_core.tasks import task_of

    op = operation_from_args(Select, args)
    with Project.open(args.project) as project:
        report = error_slices(project, op.model, split=op.split, config=SliceConfig(by_class=op.by_class))
        chosen = task_of(project).select_pool(report, op.selection_config(), project=project)
    print(f"{len(chosen)} pool images selected by {op.method} (budget {chosen.attrs['budget']}, "
          f"unspent {chosen.attrs['unspent']})")
    print(chosen["slice"].fillna("(no slice)").value_counts().head(op.top).to_string())
    if op.export:
        print(f"written to {export_selection(chosen, op.export)}")
    return 0


def cmd_repair(args) -> int:
    from hibug_core.bench.summary import markdown_table
    from hibug_core.cli.options import operation_from_args
    from hibug_core.metrics import points
    from hibug_core.repair.loop import run_repair
    from hibug_core.repair.selection import export_selection
    from hibug_core.store.project import Project
    from hibug_core.tasks import task_of

    op = operation_from_args(Repair, args)
    config = op.repair_config()
    with Project.open(args.project) as project:
        op.check_task(task_of(project))
        report, close = progress_bar()
        try:
            result = run_repair(project, config, task=task_of(project), progress=report)
        finally:
            close()
    if op.export:
        main = result.selections.get((op.method, op.seeds[0]))
        if main is not None:
            print(f"selection written to {export_selection(main, op.export)}")
    summary = result.summary.copy()
    summary["after"] = [f"{a:.1%} ± {s:.1%}" if s == s else f"{a:.1%}" for a, s in
                        zip(summary["after"], summary["after_sd"])]
    summary["change"] = summary["change"].map(points)
    summary["before"] = [f"{b:.1%}" for b in summary["before"]]
    summary["planted"] = summary["planted"].map({True: "yes", False: ""})
    print(markdown_table(summary[["slice", "planted", "n", "method", "before", "after", "change", "worse"]]))
    print(f"repair run {result.run_id}: {len(result.runs)} retrained models over seeds {list(config.seeds)} "
          f"on '{config.eval_split}' ('worse' counts seeds where the slice got significantly worse)")
    print(result.verdict())
    return 0


def _dry_run(parser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the prompts only")


def cmd_generate(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.repair.prompts import build_prompts
    from hibug_core.store.project import Project
    from hibug_core.tasks import task_of

    op = operation_from_args(Generate, args)
    with Project.open(args.project) as project:
        if not args.dry_run:  # prompts alone serve every task (to make and annotate images by hand)
            op.check_task(task_of(project))
        prompts = build_prompts(project, op.prompts, model=op.model, top=op.top,
                                llm=op.llm_config() if op.llm else None, encoder=op.encoder,
                                failures_of=op.failures_of)
    print(prompts[["prompt", "label", "slice", "weight"]].to_string(index=False))
    if args.dry_run:
        return 0
    # the same work the Repair page runs as a job, on the prompts just printed
    project, done = run_kind_here(Generate, args, prompt_rows=prompts.to_dict("records"))
    project.close()
    print(f"{done['images']} images from {done['generator']} stored as split 'generated' (run {done['run']}); "
          f"retrain with `hibug repair {args.project} --data generated`")
    return 0


def cmd_failure_search(args) -> int:
    from hibug_core.repair.runs import repair_runs

    project, done = run_kind_here(FailureSearch, args)
    with project:
        runs = repair_runs(project, "failure search")
    for row in runs.loc[runs["id"] == done["run"], "result"].iat[0]["table"]:
        mark = "*" if row["significant"] else " "
        typed = "  (typed)" if row["origin"] == "typed by a person" else ""
        goes = (f"  -> '{row['failures_go_to']}' {row['target_rate']:.0%} (baseline {row['baseline_target_rate']:.0%})"
                if isinstance(row.get("failures_go_to"), str) else "")
        print(f"{mark} {row['failure_rate']:6.1%} ({row['failures']}/{row['images']})  {row['caption']}{typed}{goes}")
    print(f"* failure rate significantly above the baseline (first row), FDR 5% over every caption tested; "
          f"-> the label most of its failures are given, the share of its images given it and of the baseline's; "
          f"stored as repair run {done['run']}")
    return 0


COMMANDS = {
    "select": operation_command(Select, cmd_select),
    "repair": operation_command(Repair, cmd_repair),
    "generate": operation_command(Generate, cmd_generate, extra=_dry_run),
    "failure-search": operation_command(FailureSearch, cmd_failure_search),
}
