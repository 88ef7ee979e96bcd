"""The one form every value entering a project takes: text in NFC without invisible or control characters or
surrounding space, the usual spellings of a missing value read as missing, cells that are not text refused by type."""
from __future__ import annotations

import datetime
import decimal
import functools
import math
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hibug_core.errors import HibugError

# pandas' default NA spellings (read_csv's na_values), compared without case, and "nil".
MISSING_SPELLINGS = frozenset(s.casefold() for s in (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
    "NULL", "NaN", "None", "n/a", "nan", "null", "NaT", "nil"))

# Directional embeddings, overrides and isolates make stored text read differently from its characters: refused.
_BIDI_CONTROLS = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_ODD_SPACE = re.compile(r"[^\S ]|\s{2,}")  # a space other than ' ' (no-break, ideographic...), or a run of spaces
_BREAKS = frozenset("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85")

# "none" is also a word a tag can be (occlusion: none, partial, heavy): for tags it is one.
TAG_MISSING_SPELLINGS = MISSING_SPELLINGS - {"none"}

Role = Literal["text", "tag", "number", "numbers", "path"]
MAX_TEXT = 1_000  # characters of a class, tag, id or name (a class name of a megabyte was stored and shown)


def _missing(role: str) -> frozenset:
    return TAG_MISSING_SPELLINGS if role == "tag" else MISSING_SPELLINGS


class ValueRefused(HibugError, ValueError):
    """A value that cannot enter a project; the message says why and what to give instead."""


@dataclass
class NormalisedColumn:
    """A column in the stored form: text, or None where the value is missing."""

    values: list  # or, when changed_any is False, the cells as given (every one already in the stored form)
    changed_any: bool = True
    refused: list[tuple[int, str]] = field(default_factory=list)  # (0-based row, why)
    changed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # what was changed -> rows
    spelled_missing: dict[int, str] = field(default_factory=dict)  # row -> its text spelling a missing value ("NaN")

    def notes(self, column: str) -> list[str]:
        """One line per kind of harmless change, and one for the values read as missing, naming the column and the
        first rows."""
        lines = []
        for what, rows in self.changed.items():
            first = ", ".join(str(r + 1) for r in rows[:3]) + (" ..." if len(rows) > 3 else "")
            lines.append(f"column '{column}': {what} in {len(rows):,} value{'s' if len(rows) != 1 else ''} "
                         f"(row {first})")
        if self.spelled_missing:
            rows, spelled = list(self.spelled_missing), sorted(set(self.spelled_missing.values()))
            lines.append(f"column '{column}': {len(rows):,} value{'s' if len(rows) != 1 else ''} spelling a missing "
                         f"value ({', '.join(spelled[:5])}) read as missing (row {rows[0] + 1}"
                         f"{' ...' if len(rows) > 1 else ''})")
        return lines


def code_point(character: str) -> str:
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X}" + (f" {name}" if name else "")


def _clean_text(text: str, changes: list[str], missing: frozenset = MISSING_SPELLINGS) -> str | None:
    """One text in the stored form; None where it spells a missing value. Raises ValueRefused."""
    text = text.strip()
    if not (text.isascii() and text.isprintable()):
        kept, removed = [], set()
        for character in text:
            category = unicodedata.category(character)
            if category == "Cf":
                if ord(character) in _BIDI_CONTROLS:
                    raise ValueRefused(f"holds the direction control {code_point(character)}, which makes the text "
                                       "read differently from what is stored; remove it")
                removed.add(code_point(character))
            elif category in ("Zl", "Zp") or character in _BREAKS:
                raise ValueRefused(f"holds a line break or tab ({code_point(character)}); a value is one line")
            elif category in ("Cc", "Cs"):
                raise ValueRefused(f"holds the control character {code_point(character)}; remove it")
            else:
                kept.append(character)
        if removed:
            changes.append(f"invisible characters removed ({', '.join(sorted(removed))})")
            text = "".join(kept).strip()
    if _ODD_SPACE.search(text):
        text = " ".join(text.split())
        changes.append("unusual or repeated spaces made one space")
    text = unicodedata.normalize("NFC", text)
    return None if text.casefold() in missing else text


def _type_name(value) -> str:
    return type(value).__name__


def _refuse_type(value, role: Role) -> ValueRefused:
    if isinstance(value, (list, tuple, dict, set, frozenset, np.ndarray)):
        return ValueRefused(f"is a {_type_name(value)}, not one value; give one "
                            f"{'number' if role == 'number' else 'text'} per cell")
    if isinstance(value, (datetime.date, datetime.time, np.datetime64, np.timedelta64, datetime.timedelta)) or \
            _type_name(value) in ("Timestamp", "Timedelta", "Period"):
        return ValueRefused("is a date or time, not a class; store it as text if it is meant as one")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ValueRefused(f"is binary data ({len(bytes(value))} bytes), not text; store it as text")
    return ValueRefused(f"is of type {_type_name(value)}, not text or a whole number")


def _number_text(value: float | int) -> str:
    if isinstance(value, (int, np.integer)):  # its digits, however many (a float would overflow)
        return str(int(value))
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def finite_number(value) -> bool:
    """A finite number (not a yes/no); an int too large for a float is none (JSON allows any length)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def finite_numbers(values: list) -> bool:
    """Every value a finite number (not a yes/no): JSON's plain ints and floats with a finite sum in one pass (a
    keypoint list has dozens), else each value checked."""
    if set(map(type, values)) <= {float, int}:
        try:
            if math.isfinite(sum(values)):
                return True
        except OverflowError:  # ints too large for a float
            pass
    return all(finite_number(v) for v in values)


def normalise_value(value, role: Role = "text", changes: list[str] | None = None) -> str | None:
    """The stored form of one value (None: missing). role: "text" (a class, id or name: whole numbers become their
    digits, other numbers are refused), "tag" (the same, but "none" is a tag, not a missing value), "number" (a number
    kept as its text), "numbers" (a list of numbers, e.g. a box, as space-separated text), "path" (a file path: only
    trimmed, never rewritten). Raises ValueRefused."""
    changes = [] if changes is None else changes
    if value is None:
        return None
    if isinstance(value, str):
        if role == "path":
            text = value.strip()
            bad = next((c for c in text if unicodedata.category(c) == "Cc"), None)
            if bad is not None:
                raise ValueRefused(f"holds the control character {code_point(bad)}; remove it")
            return None if text.casefold() in MISSING_SPELLINGS else text
        text = _clean_text(value, changes, _missing(role))
        if text is not None and len(text) > MAX_TEXT:
            raise ValueRefused(f"is {len(text):,} characters long, more than the {MAX_TEXT:,} hibug keeps for a "
                               "class, tag or name; shorten it")
        return text
    if isinstance(value, (bool, np.bool_)):
        if role in ("number", "numbers"):
            raise ValueRefused(f"is {bool(value)}, not a number")
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating, decimal.Decimal)):
        if isinstance(value, decimal.Decimal) and not value.is_finite() or not isinstance(value, decimal.Decimal) \
                and math.isnan(value):
            return None
        if role == "number":
            return _number_text(value) if isinstance(value, decimal.Decimal) else repr(float(value))
        if role in ("text", "tag", "path") and not (math.isfinite(float(value)) and float(value).is_integer()):
            raise ValueRefused("is a number that is not whole: a class or name is text or a whole number")
        return _number_text(value)
    if role == "numbers" and isinstance(value, (list, tuple, np.ndarray)):
        items = list(np.asarray(value, dtype=object).ravel())
        if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in items):
            raise ValueRefused("is a list that is not all numbers")
        return " ".join(_number_text(v) if isinstance(v, (int, np.integer)) or math.isfinite(v) else repr(float(v))
                        for v in items)
    if _type_name(value) == "NAType" or _type_name(value) == "NaTType":
        return None
    raise _refuse_type(value, role)


def _plain_mask(cells, role: Role) -> np.ndarray | None:
    """Which cells need no change (printable ASCII, trimmed, single spaces, not a missing spelling other than the
    empty text), found by Arrow at once; None when the column is not all text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = pa.array(cells, type=pa.string(), from_pandas=False) if not hasattr(cells, "array") else \
            pa.array(cells.array if cells.dtype == object else cells, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return None
    if text.null_count:
        return None
    odd = pc.or_(pc.starts_with(text, " "), pc.ends_with(text, " "))
    if role != "path":
        odd = pc.or_(odd, pc.match_substring(text, "  "))
    odd = pc.or_(odd, pc.and_(pc.invert(pc.ascii_is_printable(text)), pc.not_equal(text, "")))
    if role in ("text", "tag"):
        odd = pc.or_(odd, pc.greater(pc.binary_length(text), MAX_TEXT))  # refused by normalise_value
    short = pc.less_equal(pc.binary_length(text), max(len(s) for s in MISSING_SPELLINGS))
    if pc.any(short).as_py():
        spelled = pc.is_in(pc.ascii_lower(text), value_set=pa.array(sorted(_missing(role) - {""})))
        odd = pc.or_(odd, spelled)
    return ~np.asarray(odd.to_numpy(zero_copy_only=False) if hasattr(odd, "to_numpy") else odd, dtype=bool)


def normalise_column(cells, role: Role = "text") -> NormalisedColumn:
    """normalise_value of every cell (a list, array or pandas Series), each distinct value worked out once; missing
    values become None, refused cells are listed by row (their value None), harmless changes by kind. A column of
    plain ASCII text is checked by Arrow without a Python loop, and comes back as it was (`changed_any` False)."""
    if not isinstance(cells, (list, np.ndarray)) and not hasattr(cells, "array"):
        cells = list(cells)
    plain = _plain_mask(cells, role) if len(cells) else np.ones(0, bool)
    if plain is not None and plain.all():
        return NormalisedColumn(cells, changed_any=False)
    values = cells.tolist() if hasattr(cells, "tolist") else list(cells)
    out = NormalisedColumn(values)
    rows = range(len(values)) if plain is None else np.flatnonzero(~plain).tolist()
    done: dict = {}
    for row in rows:
        value = values[row]
        try:
            key = (type(value), value)
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in done:
            result, changes, problem = done[key]
        else:
            changes: list[str] = []
            try:
                result, problem = normalise_value(value, role, changes), None
            except ValueRefused as error:
                result, problem = None, str(error)
            if key is not None:
                done[key] = (result, changes, problem)
        values[row] = result
        if result is None and problem is None and isinstance(value, str) and value.strip():
            out.spelled_missing[row] = value.strip()
        if problem:
            out.refused.append((row, problem))
        for what in changes:
            out.changed[what].append(row)
    return out


def normalise_prose(value, what: str) -> str | None:
    """People's words of several lines (a comment): each line in the stored form (normalise_value's rules: no control
    characters, escapes or direction overrides; invisible characters removed; NFC), but line breaks kept, a tab read
    as a space and no word read as missing; None where nothing is left. Raises ValueRefused naming `what`."""
    if not isinstance(value, str):
        raise ValueRefused(f"{what} is {_type_name(value)}, not text")
    lines = value.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ").split("\n")
    try:
        cleaned = [_clean_text(line, [], frozenset()) or "" for line in lines]
    except ValueRefused as error:
        raise ValueRefused(f"{what} {error}") from None
    return "\n".join(cleaned).strip("\n") or None


def near_duplicates(names) -> list[tuple[str, ...]]:
    """Groups of distinct names equal up to case, punctuation and spacing ('Cat', 'cat', 'cat.'), each sorted."""
    groups: dict[str, set[str]] = defaultdict(set)
    for name in set(names):
        key = "".join(c for c in unicodedata.normalize("NFKC", str(name)).casefold() if c.isalnum())
        if key:
            groups[key].add(str(name))
    return sorted(tuple(sorted(group)) for group in groups.values() if len(group) > 1)


def near_duplicates_note(names, what: str = "classes") -> str | None:
    """A warning naming the groups of `names` that differ only by case or punctuation (kept apart, as given); None
    when there are none."""
    groups = near_duplicates(names)
    if not groups:
        return None
    shown_groups = "; ".join(" and ".join(repr(n) for n in group) for group in groups[:8])
    return (f"{len(groups)} group{'s' if len(groups) != 1 else ''} of {what} differ only by case or punctuation and "
            f"are kept apart: {shown_groups}{' ...' if len(groups) > 8 else ''}; if they are one, write them the same "
            "way in the file and import again")


def share_problem(value, what: str = "a confidence") -> str | None:
    """Why `value` cannot be stored as a share in [0, 1] (a confidence, a score, a probability: a detection scored
    5.0 or -3 would rank or match wrongly, silently); None when it can."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return f"{shown(value)} is not a number ({what}, from 0 to 1)"
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return f"{shown(value)} is outside 0 to 1 ({what} is a probability; rescale it, e.g. a logit by a sigmoid)"
    return None


def stored_or_why(value, role: Role = "text") -> str | None | ValueRefused:
    """normalise_value's answer, or the refusal itself instead of raising it (for checks that collect problems)."""
    try:
        return normalise_value(value, role)
    except ValueRefused as error:
        return error


@functools.lru_cache(maxsize=1 << 16)
def _remembered(kind: type, value, role: Role) -> str | None | ValueRefused:
    return stored_or_why(value, role)


def stored_or_why_often(value, role: Role = "text") -> str | None | ValueRefused:
    """stored_or_why for a value that repeats (an import's tags: a few values over millions of objects), remembered
    per (type, value, role) so that each distinct one is normalised once."""
    try:
        return _remembered(type(value), value, role)
    except TypeError:  # not hashable
        return stored_or_why(value, role)


def normalise_name(value, what: str, role: Role = "text") -> str:
    """A name typed or answered (an attribute, a tag, a model, a project): its stored form; ValueRefused naming
    `what` when it is missing or cannot be stored."""
    try:
        text = normalise_value(value, role)
    except ValueRefused as error:
        raise ValueRefused(f"{what} {shown(value)} {error}") from None
    if text is None:
        raise ValueRefused(f"{what} is empty or spells a missing value ({shown(value)}); give a name")
    return text


def shown(value) -> str:
    """A value as a message can show it: its repr, so invisible characters are visible, cut short."""
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
