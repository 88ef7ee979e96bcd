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


def operation_command(op, run: Callable[[argparse.Namespace], int], *,
                      extra: Callable[[argparse.ArgumentParser], None] | None = None) -> Command:
    """A command whose options are the operation's fields (plus the project, plus `extra`)."""
    def arguments(parser: argparse.ArgumentParser) -> None:
        from hibug_core.cli.options import add_operation_options

        project_argument(parser)
        add_operation_options(parser, op)
        if extra is not None:
            extra(parser)
    return Command(op.summary, arguments, run)


def run_kind_here(op, args: argparse.Namespace, **more) -> tuple[object, dict]:
    """(open project, result) of a job kind run in this process with a progress bar: the same code the dashboard's
    background jobs run. The caller closes the project."""
    from hibug_core.cli.options import operation_from_args
    from hibug_core.jobs.kinds import run_operation
    from hibug_core.store.project import Project

    operation = operation_from_args(op, args, **more)
    report, close = progress_bar()
    project = Project.open(args.project)
    try:
        return project, run_operation(project, operation, report)
    except BaseException:
        project.close()
        raise
    finally:
        close()


def llm_arguments(parser: argparse.ArgumentParser) -> None:
    """--llm-model and --llm-base-url, as the operations' LLMSettings define them."""
    from hibug_core.operations import LLMSettings

    for name, info in LLMSettings.model_fields.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, help=info.description)
