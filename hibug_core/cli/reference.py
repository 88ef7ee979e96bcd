"""The command-line reference (docs/cli.md), generated from the parser the operations build: every command's --help."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

WIDTH = 100  # the columns argparse wraps help at while the reference is written (it reads COLUMNS)
DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

HEADER = """# Command-line reference

Generated from the parser that `hibug_core/operations/` builds (`python -m hibug_core.cli.reference`); a test
checks that it matches `hibug COMMAND --help` of every command. Do not edit by hand: change the operation or the
command and generate it again. What each command is for, with examples: [the README](../README.md) and the guides
in this folder.

Every command that runs an operation takes its options from one typed definition in `hibug_core/operations/`: a
pydantic model per operation with its defaults, its allowed choices (read from the registries of encoders,
generators, selection and retraining methods), its bounds (read from the core's configs) and its checks, and it runs
itself (`Operation.run`): the command prints what it returns. The dashboard's forms and the background jobs are
built from the same models and run the same code, so `hibug repair --help`, the Repair page and a stored job always
agree, and a bad value is refused naming the field. In Python (this block runs as a test):

```python
>>> from hibug_core.operations import OPERATIONS, Repair
>>> list(OPERATIONS)
['embed', 'tag', 'teach', 'map', 'predict', 'propose', 'suggest tags', 'slices', 'unseen slices', 'compare', \
'check', 'select', 'repair', 'generate', 'failure search', 'report']
>>> Repair.choices("method")
['random', 'uncertainty', 'hibug', 'hibug2', 'hibug rule', 'margin', 'coreset', 'badge', 'expected failures']
>>> Repair.default("method"), Repair.default("budget"), Repair.default("seeds")
('expected failures', 0.1, [0, 1, 2])
>>> Repair(budget=0)
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for Repair
budget
  Value error, a count must be 1 or more, not 0 ...
```
"""


@contextlib.contextmanager
def help_width(columns: int = WIDTH) -> Iterator[None]:
    """argparse wraps at $COLUMNS: fixed while help is written, so the reference is the same on every terminal."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_helps() -> list[tuple[str, str]]:
    """(command as typed, its --help text) for `hibug` and every command and sub-command, in the parser's order."""
    from hibug_core.cli import build_parser

    with help_width():
        top = build_parser()
        found = [("hibug", top.format_help())]

        def walk(words: list[str], parser: argparse.ArgumentParser) -> None:
            for name, sub in _subparsers(parser).items():
                found.append((" ".join(["hibug", *words, name]), sub.format_help()))
                walk([*words, name], sub)

        walk([], top)
    return found


def reference() -> str:
    parts = [HEADER]
    for command, text in command_helps():
        parts.append(f"## `{command}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Write the reference to docs/cli.md (or the path given); --check exits 1 when the file differs."""
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    target = Path(paths[0]) if paths else DOC
    text = reference()
    if check:
        same = target.exists() and target.read_text(encoding="utf-8") == text
        print(f"{target}: {'up to date' if same else 'out of date: run python -m hibug_core.cli.reference'}")
        return 0 if same else 1
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
