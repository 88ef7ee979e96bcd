"""Tables that only an import changes, kept as Arrow files beside the database: a new process maps them instead of
reading a million rows through the driver. A cache only: a missing, stale or damaged file is read again from SQL."""
from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hibug_core.safe_files import folder_within, inside
from hibug_core.store.arrays import remove_temporaries, temporary_beside

if TYPE_CHECKING:  # pandas and pyarrow are imported when a table is read: `hibug info` reads none
    import pandas as pd

logger = logging.getLogger(__name__)
_VERSION = b"hibug_version"
_OBJECTS = b"hibug_object_columns"


class ColumnFiles:
    """One Arrow IPC file per table name, stamped with the version of the data it holds (the newest import)."""

    def __init__(self, root: Path, *, read_only: bool = False):
        self.root = Path(root)
        self.read_only = read_only

    def path(self, name: str) -> Path:
        return self.root / f"{name}.arrow"

    def get_or_read(self, name: str, version: str, read: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """The table as of `version`: from its file when that holds this version, else read() (then stored)."""
        frame = self.load(name, version)
        if frame is None:
            frame = read()
            self.save(name, version, frame)
        return frame

    def load(self, name: str, version: str) -> pd.DataFrame | None:
        import pyarrow as pa

        path = self.path(name)
        if not path.exists() or not inside(path, self.root):  # a link leading out: read from the database instead
            return None
        try:
            with pa.memory_map(str(path)) as source:
                reader = pa.ipc.open_file(source)
                metadata = reader.schema.metadata or {}
                if metadata.get(_VERSION) != version.encode():
                    return None
                frame = reader.read_all().to_pandas()
                objects = json.loads(metadata.get(_OBJECTS, b"[]"))
        except (pa.ArrowException, OSError, ValueError, KeyError) as error:
            logger.warning("the column file %s cannot be read (%s); its table is read from the database", path, error)
            return None
        # Columns that were Python objects come back as such (pandas 3 would make text its own string type), with
        # the missing value they held (None or NaN); they are stored dictionary-encoded (tags: a few distinct values),
        # so this is a take, not a million string copies.
        if isinstance(objects, list):  # files written before the missing values were recorded
            objects = dict.fromkeys(objects, "nan")
        return frame.assign(**{name: _as_objects(frame[name], None if missing == "none" else np.nan)
                               for name, missing in objects.items()}) if objects else frame

    def save(self, name: str, version: str, frame: pd.DataFrame) -> None:
        """Write atomically (readers see the old file or the new one); never fails the caller: a read-only project
        or a full disk only means the next process reads from the database again."""
        import pyarrow as pa

        if self.read_only:
            return
        path = self.path(name)
        temporary = temporary_beside(path)
        from pandas.api.types import is_object_dtype

        try:
            objects = {str(name): _missing_value(frame[name])
                       for name, dtype in frame.dtypes.items() if is_object_dtype(dtype)}
            table = pa.Table.from_pandas(_dictionary_encoded(frame, list(objects)), preserve_index=True)
            table = table.replace_schema_metadata({**(table.schema.metadata or {}), _VERSION: version.encode(),
                                                   _OBJECTS: json.dumps(objects).encode()})
            folder_within(self.root.parent, self.root)  # in the project's own folder, never through a link
            with pa.OSFile(str(temporary), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(temporary, path)
        except (pa.ArrowException, OSError, ValueError, TypeError) as error:
            temporary.unlink(missing_ok=True)
            full = isinstance(error, OSError) and error.errno == errno.ENOSPC
            logger.warning("the column file %s was not written (%s); its table is read from the database next time",
                           path, "the disk is full" if full else error)

    def remove_leftovers(self) -> int:
        """Delete temporary files of writes that crashed before their rename."""
        return remove_temporaries(self.root)


def _dictionary_encoded(frame: pd.DataFrame, objects: list[str]) -> pd.DataFrame:
    """Object columns as categoricals where their values allow it (strings); others as they are."""
    import pyarrow as pa

    encoded = {}
    for name in objects:
        try:
            encoded[name] = frame[name].astype("category")
            pa.array(encoded[name].cat.categories)  # one Arrow type for every value, or it stays as it is
        except (TypeError, ValueError, pa.ArrowException):
            encoded.pop(name, None)
    return frame.assign(**encoded) if encoded else frame


def _missing_value(column: pd.Series) -> str:
    """"none" when the object column's missing values include None, else "nan" (a column holding both comes back
    with None alone)."""
    import pandas as pd

    values = column.to_numpy(dtype=object)
    missing = values[pd.isna(values)]
    return "none" if len(missing) and not (missing != missing).all() else "nan"  # NaN != NaN; None == None


def _as_objects(column: pd.Series, missing) -> pd.Series:
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        values = np.append(column.cat.categories.to_numpy(dtype=object), missing)  # code -1 takes the last
        return pd.Series(values[column.cat.codes.to_numpy()], index=column.index, name=column.name, dtype=object)
    column = column.astype(object)
    return column.where(column.notna(), missing) if missing is None else column
