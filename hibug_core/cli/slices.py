"""Commands that find and report error slices: slices, report, and the planted-bug benchmark (bench)."""
from __future__ import annotations

from pathlib import Path

from hibug_core.cli.command import Command, operation_command, progress_bar
from hibug_core.errors import HibugError
from hibug_core.operations import FindSlices, Report

CLASSIFICATION_PROBLEMS = {"spurious": 30, "rare": 30, "shift": 0, "hard": 0, "quick": False}  # option: its default


def _bench_arguments(parser) -> None:
    from hibug_core.bench import TASK_BENCHES
    from hibug_core.cli.command import llm_arguments
    from hibug_core.slices.search import SliceConfig

    parser.add_argument("--task", choices=("classification", *TASK_BENCHES.names()), default="classification",
                        help="whose planted-bug problems: classification (shape CNNs trained on biased splits; the "
                        "options below), or " + "; ".join(f"{e.name}: {e.help}" for e in TASK_BENCHES))
    parser.add_argument("--problems", type=int, help="an object task's problems (default: its own)")
    parser.add_argument("--out", default="bench-results", help="folder for results, problem projects and caches")
    parser.add_argument("--spurious", type=int, default=CLASSIFICATION_PROBLEMS["spurious"],
                        help="spurious-correlation problems")
    parser.add_argument("--rare", type=int, default=CLASSIFICATION_PROBLEMS["rare"], help="rare-case problems")
    parser.add_argument("--shift", type=int, default=CLASSIFICATION_PROBLEMS["shift"],
                        help="distribution-shift problems (a tag and class fewer in "
                        "training than elsewhere, not rare)")
    parser.add_argument("--hard", type=int, default=CLASSIFICATION_PROBLEMS["hard"],
                        help="hard-case problems: a slice of two or three conditions, "
                        "common in training, failed in the outputs of one model trained on an unbiased split per seed")
    parser.add_argument("--quick", action="store_true", help="3 + 3 problems (a quick look; CI runs 1 + 1)")
    parser.add_argument("--taggers", help="comma-separated tag sources: truth, conse, library, taught, llm "
                        "(default: all but llm; see --llm)")
    parser.add_argument("--llm", action="store_true", help="add the 'llm' tag source: attributes proposed by a "
                        "language model (OpenAI-compatible), tagged zero-shot")
    llm_arguments(parser)
    parser.add_argument("--llm-method", choices=("hibug2", "hibug"), default="hibug2", help="whose flow the 'llm' "
                        "tag source proposes attributes by: HiBug2's structured one, or HiBug's (its Table 1)")
    parser.add_argument("--encoder", default="conse", help="encoder of the automatic tag sources")
    parser.add_argument("--top", type=int, default=10, help="Find Attr / Find Tag look at this many top slices")
    parser.add_argument("--gap", type=float, default=SliceConfig.gap, help="C of the main table (others are reported "
                        "too)")
    parser.add_argument("--val-shares", type=float, nargs="+", default=[1.0], metavar="SHARE",
                        help="search the slices on these shares of the validation split too (HiBug's Table 6), e.g. "
                        "0.1 0.25 0.5 1; the main tables are on the largest")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", help="problems from each of these seeds (comma-separated; each in --out/seed-N), "
                        "scored together (default: --seed)")
    parser.add_argument("--finders", help="comma-separated slice finders compared on every problem and its bug-free "
                        "twin: hibug, hibug-rule, single-attribute, sliceline, divexplorer, cleanlab (default: all; "
                        "'none' for none; the peers are the `bench` extra)")


def _task_bench(args) -> int:
    """An object task's planted-bug benchmark with every slice finder; its tables in --out/results.md, every row of
    the finders in --out/results.json."""
    import json

    from hibug_core.bench import TASK_BENCHES
    from hibug_core.bench.contest import finders_table, gathered
    from hibug_core.bench.seeds import per_seed, stacked
    from hibug_core.bench.summary import markdown_table

    given = [f"--{name}" for name, default in CLASSIFICATION_PROBLEMS.items() if getattr(args, name) != default]
    if given:
        raise HibugError(f"{', '.join(given)}: classification's planted problems; the {args.task} benchmark plants "
                         "its own, every bug type in each problem (give their number with --problems)")
    out = Path(args.out)
    report, close = progress_bar()
    try:  # each seed's problems in a folder of their own, scored together
        runs = per_seed(out, _seeds(args), lambda folder, seed: TASK_BENCHES.get(args.task).build(
            folder, problems=args.problems, seed=seed, encoder=args.encoder, progress=report))
    finally:
        close()
    titles = dict.fromkeys(title for tables, _ in runs.values() for title in tables)
    tables = {title: stacked({seed: tables[title] for seed, (tables, _) in runs.items() if title in tables},
                             keep_index=True) for title in titles}
    bugs, problems = (stacked({seed: gathered(found)[part] for seed, (_, found) in runs.items()}) for part in (0, 1))
    finders = finders_table([(bugs, problems)])
    tables = {**found_tables(bugs), **tables}
    out.mkdir(parents=True, exist_ok=True)
    markdown = out / "results.md"
    own = [line for title, table in tables.items() for line in (f"## {title}", "", markdown_table(table.round(3)), "")]
    markdown.write_text("\n".join([f"# Planted-bug benchmark: {args.task}", "", "## who finds bugs best", "",
                                    markdown_table(finders), "", *own]), encoding="utf-8")
    (out / "results.json").write_text(json.dumps({
        "finder_bugs": json.loads(bugs.to_json(orient="records")),
        "finder_problems": json.loads(problems.to_json(orient="records")),
        **{title: json.loads(table.reset_index().to_json(orient="records")) for title, table in tables.items()}},
        indent=1), encoding="utf-8")
    print(markdown_table(finders))
    print(f"tables in {markdown}")
    return 0


def found_tables(bugs) -> dict:
    """Every finder's planted bugs found, per bug type and per number of conditions (in words)."""
    import pandas as pd

    from hibug_core.bench.ranking import by_bug_type, formatted

    if not len(bugs):
        return {"found per bug type": pd.DataFrame(), "found per number of conditions": pd.DataFrame()}
    return {"found per bug type": formatted(by_bug_type(bugs, ["tags", "method"])),
            "found per number of conditions": formatted(by_bug_type(bugs, ["tags", "method"], by="conditions"))}


def _seeds(args) -> list[int]:
    """The seeds the problems are drawn from: --seeds 0,1,2, else --seed."""
    if not args.seeds:
        return [args.seed]
    try:
        return [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        raise HibugError(f"--seeds {args.seeds!r}: give whole numbers separated by commas, e.g. 0,1,2") from None


def cmd_bench(args) -> int:
    from dataclasses import replace

    from hibug_core.bench import TASK_BENCHES

    if args.task in TASK_BENCHES:
        return _task_bench(args)

    from hibug_core.bench.run import TAGGERS, BenchConfig, BenchResult, run_benchmark
    from hibug_core.bench.seeds import per_seed
    from hibug_core.bench.summary import markdown_table, summary_tables, write_results

    defaults = BenchConfig()
    taggers = tuple(args.taggers.split(",")) if args.taggers else defaults.taggers + (("llm",) if args.llm else ())
    spurious, rare, shift, hard = (3, 3, 0, 0) if args.quick else (args.spurious, args.rare, args.shift, args.hard)
    llm = None
    if args.llm:
        from hibug_core.operations import LLMSettings

        llm = LLMSettings(llm_model=args.llm_model, llm_base_url=args.llm_base_url).llm_config()
    config = BenchConfig(n_spurious=spurious, n_rare=rare, n_shift=shift, n_hard=hard, seed=args.seed, taggers=taggers,
                         llm_method=args.llm_method,
                         top_n=args.top,
                         slices=replace(defaults.slices, gap=args.gap), encoder=args.encoder, llm=llm,
                         gaps=tuple(sorted({*defaults.gaps, args.gap})),
                         parent_alphas=tuple(sorted({*defaults.parent_alphas, defaults.slices.parent_test})),
                         val_shares=tuple(sorted(set(args.val_shares))),
                         finders=(defaults.finders if args.finders is None else () if args.finders == "none"
                                  else tuple(args.finders.split(","))))
    report, close = progress_bar()
    try:  # each seed's problems in a folder of their own, scored together
        result = BenchResult.combined(per_seed(Path(args.out), _seeds(args), lambda folder, seed: run_benchmark(
            folder, replace(config, seed=seed), progress=report)))
    finally:
        close()
    # HiBug's tables score the bugs planted in training (one attribute each); hard cases only in the finders' tables
    tables = summary_tables(result.rows, result.problems, args.gap, config.slices.parent_test) if len(result.rows) \
        else {}
    if len(result.finder_problems):
        from hibug_core.bench.ranking import formatted, summary_table

        tables["who finds bugs best"] = formatted(summary_table(result.finder_bugs, result.finder_problems,
                                                                ["tags", "method"]))
        tables.update(found_tables(result.finder_bugs))
    markdown, data = write_results(Path(args.out), result, tables, TAGGERS)
    if "scores" in tables:
        print(markdown_table(tables["scores"]))
    if "who finds bugs best" in tables:
        print(markdown_table(tables["who finds bugs best"]))
    for extra in ("by search", "by validation share"):
        if extra in tables:
            print(markdown_table(tables[extra]))
    print(f"{int(result.problems['kept'].sum())} problems from {len(result.problems)} candidates in "
          f"{result.timings['total']:.0f} s; tables in {markdown}, every row in {data}")
    return 0


COMMANDS = {
    "slices": operation_command(FindSlices),
    "report": operation_command(Report),
    "bench": Command("planted-bug benchmark: does hibug find and explain bugs planted in models?", _bench_arguments,
                     cmd_bench),
}
