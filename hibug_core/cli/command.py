"""What a command module declares per command: its help, how to add its options, and its handler."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def progress_bar():
    """(report, close) of a tqdm progress bar for the library's progress callback."""
    from hibug_core.progress import tqdm_progress

    return tqdm_progress()


def project_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", help="project folder (see `hibug new`)")


def operation_command(op, run: Callable[[argparse.Namespace], int] | None = None, *,
                      extra: Callable[[argparse.ArgumentParser], None] | None = None) -> Command:
    """A command whose options are the operation's fields (plus the project, plus `extra`); it runs the operation
    (run_here) unless given its own handler."""
    def arguments(parser: argparse.ArgumentParser) -> None:
        from hibug_core.cli.options import add_operation_options

        project_argument(parser)
        add_operation_options(parser, op)
        if extra is not None:
            extra(parser)
    return Command(op.summary, arguments, run or (lambda args: run_here(op, args)))


def run_here(op, args: argparse.Namespace, **more) -> int:
    """Run the operation the options build in this process, with a progress bar: the same code the dashboard's
    background jobs run (Operation.execute). Prints what it says (Result.printed); returns its exit code."""
    from hibug_core.cli.options import operation_from_args
    from hibug_core.store.project import Project

    operation = operation_from_args(op, args, **more)
    with Project.open(args.project, **({} if op.writes else {"read_only": True})) as project:
        report, close = progress_bar()
        try:
            result = operation.execute(project, progress=report)
        finally:
            close()
    print(result.printed())
    return result.exit_code


def llm_arguments(parser: argparse.ArgumentParser) -> None:
    """--llm-model and --llm-base-url, as the operations' LLMSettings define them."""
    from hibug_core.operations import LLMSettings

    for name, info in LLMSettings.model_fields.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, help=info.description)
