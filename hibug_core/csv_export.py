"""The one CSV writer of everything hibug exports: cells a spreadsheet would run as a formula are neutralised (the
OWASP rule: a leading ' before =, +, -, @, tab or carriage return), while numbers stay numbers."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?")  # "-5", "+1.5e3", "-12%": a number, not a formula


def neutralised(value):
    """`value` as a spreadsheet may read it: text starting like a formula gets a leading ', anything else is
    unchanged (numbers, and text that is a plain number such as '-5')."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` with every text cell, column name and index label neutralised; numeric columns as they
    were."""
    safe = frame.copy()
    for column in safe.columns:
        if not (pd.api.types.is_numeric_dtype(safe[column]) or pd.api.types.is_bool_dtype(safe[column])):
            safe[column] = safe[column].map(neutralised)
    safe.columns = [neutralised(str(c)) for c in safe.columns]
    if not pd.api.types.is_numeric_dtype(safe.index):
        safe.index = safe.index.map(neutralised)
    return safe


def csv_text(frame: pd.DataFrame, *, index: bool = False) -> str:
    """`frame` as CSV text, formula cells neutralised."""
    return safe_frame(frame).to_csv(index=index)


def write_csv(frame: pd.DataFrame, path: str | Path, *, index: bool = False) -> Path:
    """`frame` written as CSV at `path`, formula cells neutralised (FileRefused in words where it cannot be)."""
    from hibug_core.safe_files import write_output

    return write_output(path, csv_text(frame, index=index), what="the table")
