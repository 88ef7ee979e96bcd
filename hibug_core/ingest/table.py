"""Reading a manifest file (CSV or Parquet) into a table, mapping read failures to row issues, and bringing its cells
into the stored form by their column's role in the data contract."""
from __future__ import annotations

import codecs
import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.errors import Issues, ManifestError, RowIssue
from hibug_core.safe_files import TABLE_MAX_BYTES, FileRefused, open_checked, read_checked
from hibug_core.values import Role, ValueRefused, normalise_column, shown, stored_or_why

_TOKENIZE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
csv.field_size_limit(2 ** 31 - 1)  # a cell as long as the file allows (the default, 128 kB, fails with a traceback)


def _bad_utf8_issue(raw: bytes, error: UnicodeDecodeError, header: list[str]) -> RowIssue:
    line_number = raw.count(b"\n", 0, error.start) + 1
    byte = raw[error.start : error.start + 1].hex()
    fix = f"text is not valid UTF-8 (byte 0x{byte}); save the file as UTF-8"
    if line_number == 1:
        return RowIssue(None, None, f"header: {fix}")
    line_start = raw.rfind(b"\n", 0, error.start) + 1
    prefix = raw[line_start : error.start].decode("utf-8", errors="replace")
    field_index = len(next(csv.reader([prefix + "\ufffd"]))) - 1
    column = header[field_index] if 0 <= field_index < len(header) else None
    return RowIssue(line_number - 1, column, fix)


def _field_count_issues(text: str, body: bytes, delimiter: str, cap: int = 20) -> list[RowIssue]:
    """Rows whose number of fields differs from the header's (pandas would shift or pad them silently); `body` is
    `text` in UTF-8."""
    if '"' not in text and "\r" not in text:  # no quoting: a line is a row, counted in a vectorised pass
        return _unquoted_field_count_issues(body, delimiter, cap)
    return _csv_field_count_issues(text, delimiter, cap)


def _csv_field_count_issues(text: str, delimiter: str, cap: int) -> list[RowIssue]:
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    issues = []
    try:
        expected = len(next(reader, []))
        for row_number, fields in enumerate(reader, start=1):
            if fields and len(fields) != expected:
                issues.append(RowIssue(row_number, None, f"expected {expected} fields, found {len(fields)}; "
                                       "check quoting and commas"))
                if len(issues) >= cap:
                    break
    except csv.Error as error:
        issues.append(RowIssue(reader.line_num or None, None, f"not readable as CSV ({error}); check quoting"))
    return issues


def _unquoted_field_count_issues(body: bytes, delimiter: str, cap: int) -> list[RowIssue]:
    """_field_count_issues for UTF-8 text without quotes or carriage returns: delimiters counted per line with numpy
    (a million rows in a fraction of a second instead of a Python pass over every row)."""
    data = np.frombuffer(body, dtype=np.uint8)
    ends = np.flatnonzero(data == 10)
    if len(ends) == 0 or ends[-1] != len(data) - 1:
        ends = np.r_[ends, len(data)]
    starts = np.r_[0, ends[:-1] + 1]
    lengths = ends - starts
    delimiters = np.flatnonzero(data == ord(delimiter))
    fields = np.searchsorted(delimiters, ends) - np.searchsorted(delimiters, starts) + 1
    expected = int(fields[0])
    wrong = np.flatnonzero((fields[1:] != expected) & (lengths[1:] > 0))[:cap]
    return [RowIssue(int(i) + 1, None, f"expected {expected} fields, found {int(fields[i + 1])}; check quoting and "
                     "commas") for i in wrong]


def header_issues(columns: list[str], written: list | None = None) -> list[RowIssue]:
    """Column names that clash once in the stored form (the spaces around them, invisible characters and Unicode forms
    do not count; pandas would rename or mix them); `written`: the names as the file wrote them, to show."""
    seen: dict[str, list[str]] = {}
    for column, raw in zip(columns, written or columns):
        seen.setdefault(str(column).strip(), []).append(str(raw))
    return [RowIssue(None, name, f"the column appears {len(raw)} times ({', '.join(repr(r) for r in raw)}; spaces "
                     "around names, invisible characters and Unicode forms do not count); remove or rename all but one")
            for name, raw in seen.items() if len(raw) > 1]


def _delimiter(path: Path, header_line: str) -> str:
    """Tab for .tsv, and for a .csv/.txt whose header has tabs and no commas; comma otherwise."""
    if path.suffix.lower() == ".tsv" or ("\t" in header_line and "," not in header_line):
        return "\t"
    return ","


def _read_csv(path: Path) -> pd.DataFrame:
    raw = _read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        header_end = raw.find(b"\n")
        header_bytes = raw if header_end < 0 else raw[:header_end]
        header = next(csv.reader([header_bytes.decode("utf-8", errors="replace")]), [])
        raise ManifestError(str(path), [_bad_utf8_issue(raw, error, [h.strip() for h in header])]) from None
    if not text.strip():
        raise ManifestError(str(path), [RowIssue(None, None, "the file is empty; a manifest needs a header row")])
    delimiter = _delimiter(path, text.split("\n", 1)[0])
    try:
        header = next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [])
    except csv.Error as error:
        raise ManifestError(str(path), [RowIssue(None, None, f"header: not readable as CSV ({error})")]) from None
    body = raw.removeprefix(codecs.BOM_UTF8)  # the text's UTF-8, as read: not encoded again
    issues = header_issues(header)
    if issues:
        raise ManifestError(str(path), issues)
    try:  # pyarrow's parser: several times faster at a million rows, and it refuses a row with too few or too many
        # fields (pandas' would pad or shift it silently), so a table it reads needs no count of its own
        frame = pd.read_csv(io.BytesIO(body), dtype=str, keep_default_na=False, sep=delimiter, engine="pyarrow")
    except Exception:  # noqa: BLE001 - any failure is read again below, where the problem is named
        frame = None
    if frame is not None:
        return frame
    issues = _field_count_issues(text, body, delimiter)
    if issues:
        raise ManifestError(str(path), issues)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, index_col=False, sep=delimiter)
    except pd.errors.ParserError as error:
        match = _TOKENIZE.search(str(error))
        if match:
            expected, line, seen = (int(g) for g in match.groups())
            issue = RowIssue(line - 1, None, f"expected {expected} fields, found {seen}; check quoting and commas")
        else:
            issue = RowIssue(None, None, f"not a readable CSV file: {error}")
        raise ManifestError(str(path), [issue]) from None
    return frame


def _read_bytes(path: Path) -> bytes:
    try:
        return read_checked(path, max_bytes=TABLE_MAX_BYTES, what="a manifest")
    except FileRefused as error:
        raise ManifestError(str(path), [RowIssue(None, None, str(error))]) from None


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        handle = open_checked(path, max_bytes=TABLE_MAX_BYTES, what="a manifest")
    except FileRefused as error:
        raise ManifestError(str(path), [RowIssue(None, None, str(error))]) from None
    try:
        with handle:
            frame = pd.read_parquet(handle)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several unrelated types for a bad file
        raise ManifestError(str(path), [RowIssue(None, None, f"not a readable Parquet file: {error}")]) from None
    frame.columns = [str(c) for c in frame.columns]
    return frame


def read_table(path: Path) -> pd.DataFrame:
    """The manifest as a DataFrame, one row per data row: text cells of a CSV file, typed cells of a Parquet one, as
    they were written (normalised_table brings them into the stored form)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        frame = _read_parquet(path)
    elif suffix in (".csv", ".txt", ".tsv"):
        frame = _read_csv(path)
    else:
        raise ManifestError(
            str(path), [RowIssue(None, None, f"unsupported manifest type '{suffix}'; use .csv or .parquet")]
        )
    issues = header_issues(list(frame.columns))
    if issues:
        raise ManifestError(str(path), issues)
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


_NUMBER_COLUMNS = ("confidence", "score", "prob")
_NUMBERS_COLUMNS = ("box", "pred_box", "keypoints", "pred_keypoints")


def column_role(column: str) -> Role:
    """What a manifest column holds by the data contract: the image's path, a number (confidence, score, prob:*),
    a list of numbers (boxes and keypoints), a tag (attr:*), or text (labels, predictions, ids, splits)."""
    kind = column.partition(":")[0].strip()
    if column == "image":
        return "path"
    if kind in _NUMBER_COLUMNS:
        return "number"
    if kind in _NUMBERS_COLUMNS:
        return "numbers"
    return "tag" if kind == "attr" else "text"


def column_names(frame: pd.DataFrame) -> list[str]:
    """The table's column names in the stored form (as written where one cannot be stored: normalised_table names
    it)."""
    return [name if isinstance(name, str) else str(column)
            for column, name in ((c, stored_or_why(c)) for c in frame.columns)]


def normalised_table(frame: pd.DataFrame, source: str, max_issues: int = 200) -> tuple[pd.DataFrame, list[str]]:
    """Every cell in the stored form (hibug_core.values; '' where missing) and every column name too; raise
    ManifestError naming each refused cell by row, column and why. Returns the table and one note per kind of
    harmless change (invisible characters removed, spaces made one)."""
    issues = Issues(max_issues)
    names = column_names(frame)
    for column in frame.columns:
        why = stored_or_why(column)
        if isinstance(why, ValueRefused):
            issues.add(None, str(column), f"column name {why}")
    notes, out, missing_spelled = [], {}, {}
    for column, name in zip(frame.columns, names):
        normalised = normalise_column(frame[column], column_role(name))
        for row, why in normalised.refused:
            issues.add(row, name, f"{shown(frame[column].iat[row])} {why}")
        notes += normalised.notes(name)
        missing_spelled.update({(row, name): text for row, text in normalised.spelled_missing.items()})
        if not normalised.changed_any:
            out[name] = frame[column]
            continue
        values = np.array(normalised.values, dtype=object)
        values[pd.isna(values)] = ""  # None (missing) as the empty text manifests always used for it
        out[name] = pd.Series(values, dtype=object, index=frame.index)
    clashes = header_issues(names, list(frame.columns))
    if clashes:
        raise ManifestError(source, clashes)
    if issues.items:
        raise ManifestError(source, issues.items, found=issues)
    table = pd.DataFrame(out, index=frame.index)
    table.attrs[SPELLED_MISSING] = missing_spelled
    return table, notes


SPELLED_MISSING = "hibug_spelled_missing"  # normalised_table's {(0-based row, column): the text read as missing}


def explained(frame: pd.DataFrame, issues: list[RowIssue]) -> list[RowIssue]:
    """Issues of a normalised table, each about a cell whose text spelled a missing value saying so (a refused
    "empty label" was written "NaN")."""
    spelled = frame.attrs.get(SPELLED_MISSING) or {}
    if not spelled:
        return issues
    return [RowIssue(i.row, i.column, f"{i.message} ({spelled[(i.row - 1, i.column)]!r} is read as a missing value)",
                     i.unit) if i.row is not None and (i.row - 1, i.column) in spelled else i for i in issues]
