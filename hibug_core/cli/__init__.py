"""The `hibug` command line: create, inspect and serve projects, embed and tag images, find error slices, repair.
Each command lives in a small module of this package; only the command being run is imported."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from hibug_core.cli.help_text import literal_help
from hibug_core.errors import HibugError, environment_failure

# command -> module of this package that defines it (its COMMANDS table holds help, options and handler)
INDEX = {
    "new": "projects", "import": "projects", "record": "projects", "info": "projects", "remove": "projects",
    "serve": "projects", "mcp": "projects", "demo": "projects",
    "embed": "tagging", "predict": "tagging", "tag": "tagging", "tags": "tagging", "teach": "tagging",
    "attributes": "attributes",
    "slices": "slices", "report": "slices", "bench": "slices", "compare": "compare", "check": "compare",
    "select": "repair", "repair": "repair", "generate": "repair", "failure-search": "repair",
}


def commands(module: str) -> dict:
    return importlib.import_module(f"hibug_core.cli.{module}").COMMANDS


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or (only = a command) one whose other commands are names alone: `hibug info` need not import
    what `hibug repair` does."""
    parser = argparse.ArgumentParser(prog="hibug", description="Find, explain and repair the error slices of "
                                     "computer-vision models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in INDEX.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        command = commands(module)[name]
        p = sub.add_parser(name, help=literal_help(command.help), description=command.help)
        command.arguments(p)
        p.set_defaults(handler=command.run)
    return parser


def _command_in(argv: list[str]) -> str | None:
    words = [a for a in argv if not a.startswith("-")]
    return words[0] if words and words[0] in INDEX else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_in(argv)).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        code = args.handler(args)
        sys.stdout.flush()  # here, so a reader that went away is caught below rather than at exit
        return code
    except HibugError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`hibug info --json | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:
        message = environment_failure(error)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2
