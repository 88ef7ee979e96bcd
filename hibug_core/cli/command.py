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
    reading = {} if op.writes else {"read_only": True, "keep_column_files": True}  # never the database
    with Project.open(args.project, **reading) as project:
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


def model_arguments(parser: argparse.ArgumentParser, *, encoder: bool = False, llm: bool = False,
                    generator: bool = False, captioner: bool = False) -> None:
    """The model options of a benchmark that stands for a paper's experiment, as the commands name them, so that it
    runs unchanged with real weights: --encoder (an encoder spec), --llm with --llm-model and --llm-base-url (the key
    from OPENAI_API_KEY or Streamlit secrets), --generator (a generator spec), --captioner."""
    from hibug_core.repair.generators import SHAPE_RENDERER

    if encoder:
        parser.add_argument("--encoder", default="conse", help="encoder spec (default: conse, offline; e.g. a CLIP "
                            "folder: see `hibug embed --help`)")
    if llm:
        parser.add_argument("--llm", action="store_true", help="ask a language model (OpenAI-compatible) where the "
                            "paper does, instead of the offline stand-in")
        llm_arguments(parser)
    if generator:
        parser.add_argument("--generator", default=SHAPE_RENDERER, help="what draws the images (hibug generate's "
                            "specs, e.g. diffusers:FOLDER; default: the shape-world renderer, the offline stand-in)")
    if captioner:
        from hibug_core.repair.failure_search import CAPTIONERS

        parser.add_argument("--captioner", default="renderer", choices=CAPTIONERS.names(),
                            help="who captions the failures (llm: a multimodal model, with --llm-model and "
                            "--llm-base-url; needed with any generator but the renderer)")


def llm_from(args: argparse.Namespace):
    """The language model the options name (None without --llm)."""
    from hibug_core.operations import LLMSettings

    if not getattr(args, "llm", False):
        return None
    return LLMSettings(llm_model=args.llm_model, llm_base_url=args.llm_base_url).llm_config()


def generator_and_captioner(args):
    """The generator and captioner the options name (hibug_core.cli.command.model_arguments)."""
    from hibug_core.operations import LLMSettings
    from hibug_core.repair.failure_search import CAPTIONERS
    from hibug_core.repair.generators import load_generator

    settings = LLMSettings(llm_model=args.llm_model, llm_base_url=args.llm_base_url)
    return load_generator(args.generator), CAPTIONERS.get(args.captioner).build(settings=settings)
