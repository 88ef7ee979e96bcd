"""Commands that find and report error slices: slices, report, and the planted-bug benchmark (bench)."""
from __future__ import annotations

from pathlib import Path

from hibug_core.cli.command import Command, operation_command, progress_bar
from hibug_core.csv_export import write_csv
from hibug_core.operations import FindSlices, Report


def cmd_slices(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.slices.false_positives import false_positive_slices
    from hibug_core.slices.report_files import kept_error_slices
    from hibug_core.store.attribute_versions import schema_names
    from hibug_core.store.project import Project
    from hibug_core.tagging.sources import rank_sources, trust_message
    from hibug_core.tasks import task_of

    op = operation_from_args(FindSlices, args)
    with Project.open(args.project, read_only=True) as project:
        nouns = task_of(project).nouns
        report = kept_error_slices(project, op.model, split=op.split, config=op.slice_config(),
                                   attributes=op.attributes, tags=op.tags)
        sliced = [c for c in report.all_tags.columns if c in set(schema_names(project))]
        message = trust_message(rank_sources(project, sliced)) if op.tags == "in force" and sliced else None
        predicted = _unseen(project, report, op) if op.unseen else None
        apart = (false_positive_slices(project, report.model, split=op.split, config=op.slice_config(), tags=op.tags)
                 if report.false_positives() else None)  # an object model's, measured apart
    slices = report.slices
    if op.output:
        table = report.exported()
        table.to_json(op.output, orient="records", indent=2) if op.output.endswith(".json") else \
            write_csv(table, op.output, index=True)
    if message:
        print(f"warning: {message}")
    print(report.headline(nouns))
    for rank, row in slices.head(op.top).iterrows():
        print(f"{rank + 1:>3}. {row['description']:<50} n={row['count']:<5} score {row['score']:6.1%} "
              f"[{row['score_low']:.0%}, {row['score_high']:.0%}] q={row['q_value']:.1e}  {row['bug_type']}: "
              f"{row['reason']}{_precision_note(row)}")
    verdict = report.empty_verdict()
    if verdict:
        print(verdict)
    if apart is not None:
        print(apart.headline())
    rare = report.rare_classes[report.rare_classes["rare"]]
    if len(rare):
        named = (f"{c} ({n})" for c, n in zip(rare["class"], rare["train_count"]))
        print("rare classes in training: " + ", ".join(named))
    if predicted is not None:
        _print_unseen(predicted, op.unseen, report)
    return 0


def _unseen(project, report, op):
    from hibug_core.slices.unseen import asks_a_language_model, predict_unseen
    from hibug_core.tasks import task_of

    return predict_unseen(project, report, op.unseen, task=task_of(project), count=op.unseen_count,
                          llm_config=op.llm_config() if asks_a_language_model(op.unseen) else None)


def _print_unseen(predicted, method: str, report) -> None:
    """The predicted slices, those the split barely shows first, each with what the data that match it say."""
    from hibug_core.metrics import points
    from hibug_core.slices.unseen import how_they_fail

    print(f"\nunseen slices predicted by {method}: {len(predicted)} (checked on the pool and the test split; "
          f"unseen: fewer than {report.config.min_support} in {report.split})")
    for row in predicted.head(20).itertuples():
        checked = (f"test score {row.check_score:.1%} on {row.n_check}" if row.check_score == row.check_score
                   else f"{row.n_check} in test (too few to score)")
        predicted_score = f"predicted {row.predicted_score:.1%}; " if row.predicted_score == row.predicted_score else ""
        print(f"  {'unseen ' if row.unseen else 'seen   '}{row.description:<50} {predicted_score}{checked}; "
              f"{row.n_eval} in {report.split}, {row.n_pool} in the pool; {row.reason}")
    for line in predicted.attrs.get("dropped", []):
        print(f"  dropped {line}")
    measured = how_they_fail(predicted, report)
    if measured["scored"]:
        print(f"mean {measured['split']} score on the {measured['scored']} predicted slices it holds enough of: "
              f"{measured['mean_score']:.1%}, against {measured['overall_score']:.1%} on the whole split "
              f"({points(measured['points'])}; {measured['relative_change']:+.1%} relative, HiBug2's Table 1 measure)")


def _precision_note(row) -> str:
    if not row["tag_checked"]:
        return ""
    note = f" (tags right on {row['tag_precision']:.0%} of {row['tag_checked']:,} checked)"
    return note if row["trusted"] else f" UNTRUSTED TAGS{note}"


def cmd_report(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.review.findings import write_report
    from hibug_core.store.project import Project

    op = operation_from_args(Report, args)
    with Project.open(args.project, read_only=True) as project:
        report, table = write_report(project, op.output, model=op.model, split=op.split, top=op.top)
    print(f"{len(table)} error slices of {report.model} on {report.split} written to {op.output}")
    return 0


def _bench_arguments(parser) -> None:
    from hibug_core.cli.command import llm_arguments
    from hibug_core.slices.search import SliceConfig

    parser.add_argument("--out", default="bench-results", help="folder for results, problem projects and caches")
    parser.add_argument("--spurious", type=int, default=30, help="spurious-correlation problems")
    parser.add_argument("--rare", type=int, default=30, help="rare-case problems")
    parser.add_argument("--quick", action="store_true", help="3 + 3 problems (a quick look; CI runs 1 + 1)")
    parser.add_argument("--taggers", help="comma-separated tag sources: truth, conse, library, taught, llm "
                        "(default: all but llm; see --llm)")
    parser.add_argument("--llm", action="store_true", help="add the 'llm' tag source: attributes proposed by a "
                        "language model (OpenAI-compatible), tagged zero-shot")
    llm_arguments(parser)
    parser.add_argument("--encoder", default="conse", help="encoder of the automatic tag sources")
    parser.add_argument("--top", type=int, default=10, help="Find Attr / Find Tag look at this many top slices")
    parser.add_argument("--gap", type=float, default=SliceConfig.gap, help="C of the main table (others are reported "
                        "too)")
    parser.add_argument("--val-shares", type=float, nargs="+", default=[1.0], metavar="SHARE",
                        help="search the slices on these shares of the validation split too (HiBug's Table 6), e.g. "
                        "0.1 0.25 0.5 1; the main tables are on the largest")
    parser.add_argument("--seed", type=int, default=0)


def cmd_bench(args) -> int:
    from dataclasses import replace

    from hibug_core.bench.run import TAGGERS, BenchConfig, run_benchmark
    from hibug_core.bench.summary import markdown_table, summary_tables, write_results

    defaults = BenchConfig()
    taggers = tuple(args.taggers.split(",")) if args.taggers else defaults.taggers + (("llm",) if args.llm else ())
    spurious, rare = (3, 3) if args.quick else (args.spurious, args.rare)
    llm = None
    if args.llm:
        from hibug_core.operations import LLMSettings

        llm = LLMSettings(llm_model=args.llm_model, llm_base_url=args.llm_base_url).llm_config()
    config = BenchConfig(n_spurious=spurious, n_rare=rare, seed=args.seed, taggers=taggers, top_n=args.top,
                         slices=replace(defaults.slices, gap=args.gap), encoder=args.encoder, llm=llm,
                         gaps=tuple(sorted({*defaults.gaps, args.gap})),
                         parent_alphas=tuple(sorted({*defaults.parent_alphas, defaults.slices.parent_test})),
                         val_shares=tuple(sorted(set(args.val_shares))))
    report, close = progress_bar()
    try:
        result = run_benchmark(args.out, config, progress=report)
    finally:
        close()
    tables = summary_tables(result.rows, result.problems, args.gap, config.slices.parent_test)
    markdown, data = write_results(Path(args.out), result, tables, TAGGERS)
    print(markdown_table(tables["scores"]))
    for extra in ("by search", "by validation share"):
        if extra in tables:
            print(markdown_table(tables[extra]))
    print(f"{int(result.problems['kept'].sum())} problems from {len(result.problems)} candidates in "
          f"{result.timings['total']:.0f} s; tables in {markdown}, every row in {data}")
    return 0


COMMANDS = {
    "slices": operation_command(FindSlices, cmd_slices),
    "report": operation_command(Report, cmd_report),
    "bench": Command("planted-bug benchmark: does hibug find and explain bugs planted in models?", _bench_arguments,
                     cmd_bench),
}
