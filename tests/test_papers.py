"""docs/papers.md, read as a reader trusts it: every row of the papers' tables ends with one of the verdicts the page
defines, and every command it names exists: the `hibug` command and each of its options, the benchmark script and
each of its options."""
from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "papers.md"
VERDICTS = ("same measure", "the paper's measure with another arm", "the paper's measure with other arms",
            "different measure", "not measured here")


def _rows(text: str) -> list[list[str]]:
    """The rows of the four papers' tables (those headed "table or figure"), as cells."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("| table or figure |"):
            inside = True
            continue
        if not line.startswith("|"):
            inside = False
        elif inside and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip()[2:-2].split(" | ")])
    return rows


def _commands(text: str) -> list[str]:
    """Every command in backticks that starts with `hibug` or `python benchmarks/`."""
    return [span for span in re.findall(r"`([^`]+)`", text)
            if span.startswith(("hibug ", "python benchmarks/"))]


def _subcommand(parser, words: list[str]):
    """The (sub)command parser the words name, and the words after it; None where a word names no command."""
    import argparse

    while words:
        choices = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if choices is None or words[0].startswith("-") or words[0].isupper() or "<" in words[0]:
            return parser
        if words[0] not in choices:
            return None if words[0].islower() and words[0].isalpha() and parser.prog == "hibug" else parser
        parser, words = choices[words[0]], words[1:]
    return parser


class _Parsed(Exception):
    def __init__(self, parser):
        self.parser = parser


@functools.cache
def _script_options(script: Path) -> frozenset[str]:
    """The options a benchmark script's parser takes: its main() run until it parses its arguments."""
    import argparse
    import importlib.util
    import sys

    def caught(parser, *args, **kwargs):
        raise _Parsed(parser)

    spec = importlib.util.spec_from_file_location(f"_paper_script_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(script.parent))  # a script may import a sibling
    try:
        spec.loader.exec_module(module)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(argparse.ArgumentParser, "parse_args", caught)
            try:
                module.main()
            except _Parsed as parsed:
                return frozenset(o for action in parsed.parser._actions for o in action.option_strings)
    finally:
        sys.path.remove(str(script.parent))
    raise AssertionError(f"{script.name}: main() parsed no arguments")


def test_every_row_says_whether_it_measures_what_the_paper_measures():
    rows = _rows(PAGE.read_text(encoding="utf-8"))
    assert len(rows) >= 30
    lacking = [row[0] for row in rows if not row[-1].startswith(VERDICTS)]
    assert not lacking, f"rows without a verdict ({', '.join(VERDICTS)}): {lacking}"
    assert all(len(row) == 5 for row in rows), [row[0] for row in rows if len(row) != 5]


def test_every_command_the_page_names_exists_with_its_options():
    from hibug_core.cli import build_parser

    text = PAGE.read_text(encoding="utf-8")
    commands = _commands(text)
    assert len(commands) >= 25
    parser = build_parser()
    missing = []
    for command in commands:
        words = shlex.split(command.replace("<", "").replace(">", ""))
        options = [w.split("=")[0] for w in words if w.startswith("--")]
        if words[0] == "hibug":
            found = _subcommand(parser, words[1:])
            if found is None:
                missing.append(command)
                continue
            known = {o for action in found._actions for o in action.option_strings}
            missing += [f"{command}: {option}" for option in options if option not in known]
        else:
            script = ROOT / words[1]
            if not script.exists():
                missing.append(command)
                continue
            known = _script_options(script)
            missing += [f"{command}: {option}" for option in options if option not in known]
    assert not missing, f"commands or options that do not exist: {missing}"


@pytest.mark.parametrize("text, expected", [
    ("`hibug nosuch PROJECT`", "hibug nosuch PROJECT"),
    ("`hibug slices PROJECT --no-such-option`", "hibug slices PROJECT --no-such-option: --no-such-option"),
    ("`python benchmarks/nosuch.py`", "python benchmarks/nosuch.py"),
])
def test_the_check_catches_what_does_not_exist(text, expected, monkeypatch, tmp_path):
    """The command check itself fails on a command, an option or a script that is not there."""
    page = tmp_path / "papers.md"
    page.write_text(text + "\n" + PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(__import__(__name__), "PAGE", page)
    with pytest.raises(AssertionError, match=re.escape(expected)):
        test_every_command_the_page_names_exists_with_its_options()
