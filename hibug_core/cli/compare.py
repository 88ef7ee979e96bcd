"""Commands that compare models: compare (the slice table in the terminal and as a file) and check (a gate for CI)."""
from __future__ import annotations

from hibug_core.cli.command import operation_command
from hibug_core.operations import Check, CompareModels

COMMANDS = {"compare": operation_command(CompareModels), "check": operation_command(Check)}
