"""Commands that repair a model: select (pool images to label), repair (retrain and compare), generate (images for
the error slices) and failure-search (captions of failures, Wiles et al.)."""
from __future__ import annotations

from hibug_core.cli.command import operation_command, run_here
from hibug_core.operations import FailureSearch, Generate, Repair, Select


def _dry_run(parser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the prompts only (they serve every task: to "
                        "make and annotate images by hand)")


def cmd_generate(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.store.project import Project

    if not args.dry_run:
        return run_here(Generate, args)
    op = operation_from_args(Generate, args)
    with Project.open(args.project, read_only=True) as project:
        prompts = op.prompt_table(project)
    print(prompts[["prompt", "label", "slice", "weight"]].to_string(index=False))
    return 0


COMMANDS = {
    "select": operation_command(Select),
    "repair": operation_command(Repair),
    "generate": operation_command(Generate, cmd_generate, extra=_dry_run),
    "failure-search": operation_command(FailureSearch),
}
