"""The generated command-line reference (docs/cli.md) is what `hibug COMMAND --help` prints, for every command."""
from __future__ import annotations

import re

import pytest

from hibug_core.cli import INDEX, main
from hibug_core.cli.reference import DOC, help_width, reference

SECTION = re.compile(r"^## `(?P<command>[^`]+)`\n\n```text\n(?P<help>.*?)\n```$", re.S | re.M)


def _documented() -> dict[str, str]:
    return {m["command"]: m["help"] for m in SECTION.finditer(DOC.read_text(encoding="utf-8"))}


def test_the_reference_is_generated_from_the_current_parser():
    assert DOC.read_text(encoding="utf-8") == reference(), "docs/cli.md is stale: python -m hibug_core.cli.reference"


def test_every_command_and_sub_command_is_documented():
    documented = _documented()
    assert {c.split()[1] for c in documented if c != "hibug"} == set(INDEX)
    assert {"hibug attributes propose", "hibug attributes suggest-tags", "hibug attributes edit",
            "hibug attributes show"} <= set(documented)


@pytest.mark.parametrize("command", sorted(_documented()))
def test_each_section_is_what_help_prints(command, capsys):
    with help_width(), pytest.raises(SystemExit) as exited:
        main([*command.split()[1:], "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.rstrip() == _documented()[command]
