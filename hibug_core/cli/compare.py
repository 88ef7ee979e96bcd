"""Commands that compare models: compare (the slice table in the terminal and as a file) and check (a gate for CI)."""
from __future__ import annotations

from pathlib import Path

from hibug_core.cli.command import operation_command
from hibug_core.operations import Check, CompareModels


def _compare(project_folder: str, op, models: list[str]):
    """The comparison of `models` on the operation's split, slices and tags (project opened read-only)."""
    from hibug_core.slices.compare import compare_models
    from hibug_core.store.project import Project

    with Project.open(project_folder, read_only=True) as project:
        return project.name, compare_models(project, models, split=op.split, slices=op.slice_config(),
                                            config=op.compare_config(), attributes=op.attributes, tags=op.tags)


def _line(row) -> str:
    warning = "(untrusted tags) " if row.get("tag_warning") else ""
    return (f"{warning + row['description']:<55} n={int(row['count']):<6} {row['baseline_score']:6.1%} -> "
            f"{row['candidate_score']:6.1%} ({100 * row['difference']:+5.1f} pts) q={row['q_value']:.1e}")


def cmd_compare(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.slices.compare import UNCHANGED
    from hibug_core.slices.compare_files import write_comparison

    op = operation_from_args(CompareModels, args)
    name, comparison = _compare(args.project, op, op.models)
    overall = comparison.overall
    print(f"{len(comparison.evaluation):,} shared labelled '{op.split}' samples; {comparison.test}, q-values over "
          f"the slices compared (significant at {op.alpha:g})")
    for _, row in overall.iterrows():
        change = "" if row["model"] == comparison.baseline else \
            f" ({100 * row['difference']:+.1f} pts, p={row['p_value']:.1e}: {row['change']})"
        print(f"  {row['model']:<30} {row['score']:.1%}{change}; {int(row['error_slices']):,} error slices at C = "
              f"{comparison.config.error_gap:g}")
    for candidate in comparison.candidates:
        table = comparison.against(candidate)
        changed = table[table["change"] != UNCHANGED]
        counts = changed["change"].value_counts()
        print(f"\n{candidate} against {comparison.baseline}: {counts.get('regression', 0)} slices worse, "
              f"{counts.get('improvement', 0)} better, of {len(table):,} compared")
        classes = comparison.classes[(comparison.classes["candidate"] == candidate) &
                                     (comparison.classes["change"] != UNCHANGED)]
        for _, row in classes.iterrows():
            print(f"  {row['change']:<12} {_line(row)}")
        for _, row in changed[changed["repeats"] == ""].head(op.top).iterrows():
            print(f"  {row['change']:<12} {_line(row)}")
        repeats = int((changed["repeats"] != "").sum())
        if repeats:
            print(f"  ... and {repeats} more that repeat these (the same samples named by other tags)")
    if len(comparison.candidates) > 1:
        print("\nfailure IoU between models: " + "; ".join(
            f"{r['model_a']} & {r['model_b']} {r['iou']:.2f}" for _, r in comparison.failure_iou.iterrows()))
        print(f"overlap of their worst {comparison.config.worst_share:.0%} of slices (Jaccard): " + "; ".join(
            f"{r['model_a']} & {r['model_b']} {r['jaccard']:.2f}" for _, r in comparison.worst_overlap.iterrows()))
    if op.output:
        path = write_comparison(comparison, op.output, f"{name}: {', '.join(op.models)}", op.top)
        print(f"written to {path}")
    return 0


def cmd_check(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.slices.compare_files import gate_junit, gate_markdown

    op = operation_from_args(Check, args)
    _, comparison = _compare(args.project, op, [op.baseline, op.candidate])
    checked = comparison.checked(op.candidate)
    failed = checked[checked["failed"]]
    if op.junit:
        Path(op.junit).write_bytes(gate_junit(comparison, checked, op.candidate))
    if op.markdown:
        Path(op.markdown).write_text(gate_markdown(comparison, checked, op.candidate), encoding="utf-8")
    distinct = failed[failed["repeats"] == ""]  # one row per problem: repeats are the same samples by other tags
    print(f"{op.candidate} against {op.baseline} on {op.split}: {len(checked)} checks on "
          f"{len(comparison.evaluation):,} shared samples ({comparison.test}); "
          + (f"FAILED: {len(distinct)} significant drop(s) over {100 * op.max_drop:g} points" if len(failed)
             else "passed"))
    for _, row in distinct.iterrows():
        print(f"  {row['kind']:<8} {_line(row)}")
    repeats = int((failed["repeats"] != "").sum())
    if repeats:
        print(f"  ... and {repeats} more slices whose drop is that of one above (the same samples named by other "
              "tags); every one is in --junit and --markdown")
    return 1 if len(failed) else 0


COMMANDS = {"compare": operation_command(CompareModels, cmd_compare), "check": operation_command(Check, cmd_check)}
