"""Bulk arrays of a project (probabilities, embeddings, score matrices) as .npz files beside the database."""
from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hibug_core.errors import ProjectError
from hibug_core.safe_files import folder_within, inside

logger = logging.getLogger(__name__)
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")


def temporary_beside(final: Path) -> Path:
    """Where a file is written before its atomic rename to `final` (hidden, unique; remove_temporaries finds it)."""
    return final.with_name(f".{final.stem}.{uuid.uuid4().hex}.tmp")


def remove_temporaries(root: Path) -> int:
    """Delete the temporary files under `root` of writes that crashed before their rename; returns how many."""
    if not root.exists():
        return 0
    leftovers = list(root.rglob(".*.tmp"))
    for path in leftovers:
        path.unlink(missing_ok=True)
    return len(leftovers)


class DamagedArraysError(ProjectError):
    """A stored array file that cannot be read (cut short, overwritten, deleted); `path` names it."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        super().__init__(f"{path} is {'missing' if reason == MISSING else f'damaged ({reason})'}")


MISSING = "missing"


@dataclass
class StagedArrays:
    """Arrays written to a temporary file, published by commit() once the database write succeeded."""

    temporary: Path
    final: Path

    def commit(self) -> Path:
        os.replace(self.temporary, self.final)
        return self.final

    def discard(self) -> None:
        self.temporary.unlink(missing_ok=True)


@dataclass
class ArrayBatch:
    """Arrays staged inside ArrayStore.publishing(): all published, or none."""

    store: ArrayStore
    staged: list[StagedArrays] = field(default_factory=list)

    def stage(self, name: str, **arrays: np.ndarray) -> None:
        self.staged.append(self.store.stage(name, **arrays))


class ArrayStore:
    """Named groups of numpy arrays; writes are atomic, reads never see a half-written file."""

    def __init__(self, root: Path, *, read_only: bool = False):
        self.root = Path(root)
        self.read_only = read_only

    def path(self, name: str) -> Path:
        if not _NAME.match(name) or ".." in name.split("/"):
            raise ProjectError(f"invalid array name {name!r}: use letters, digits, '_', '-', '.' and '/'")
        return self.root / f"{name}.npz"

    def stage(self, name: str, **arrays: np.ndarray) -> StagedArrays:
        final = self.path(name)
        folder_within(self.root.parent, final.parent)  # in the project's own folders, never through a link
        temporary = temporary_beside(final)
        try:
            with open(temporary, "wb") as handle:
                np.savez(handle, **arrays)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException as error:
            temporary.unlink(missing_ok=True)
            if isinstance(error, OSError) and error.errno == errno.ENOSPC:
                raise ProjectError(f"the disk holding {self.root} is full; nothing was kept of {name}. Free some "
                                   "space and run again") from None
            raise
        return StagedArrays(temporary, final)

    @contextmanager
    def publishing(self) -> Iterator[ArrayBatch]:
        """Arrays staged in the block (batch.stage) are published when it ends without error, so they appear only
        with the database write the block makes; discarded when it fails."""
        batch = ArrayBatch(self)
        try:
            yield batch
        except BaseException:
            for item in batch.staged:
                item.discard()
            raise
        for item in batch.staged:
            item.commit()

    def save(self, name: str, **arrays: np.ndarray) -> Path:
        return self.stage(name, **arrays).commit()

    def load(self, name: str) -> dict[str, np.ndarray]:
        path = self.path(name)
        if not path.exists():
            raise DamagedArraysError(path, MISSING)
        if not inside(path, self.root):
            raise DamagedArraysError(path, "a link leading out of the project's arrays, which is not read")
        try:
            with np.load(path, allow_pickle=False) as data:
                return {key: data[key] for key in data.files}
        except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError) as error:
            raise DamagedArraysError(path, str(error) or type(error).__name__) from None

    def load_recomputable(self, name: str) -> dict[str, np.ndarray] | None:
        """load() of a file whatever made it can make again (a cache part, a map): None when it is damaged, and the
        file set aside (where the store can be written) so the next run makes it again."""
        try:
            return self.load(name)
        except DamagedArraysError:
            if not self.read_only:
                self.set_aside(name)
            return None

    def set_aside(self, name: str) -> Path:
        """Move a damaged file out of the store's reach (kept beside it as .damaged, for a person to look at)."""
        path = self.path(name)
        aside = path.with_name(path.name + ".damaged")
        if not path.exists() and not path.is_symlink():  # a file deleted: nothing to move
            return aside
        os.replace(path, aside)
        logger.warning("set aside the damaged %s as %s", path, aside.name)
        return aside

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def names(self, prefix: str = "") -> list[str]:
        folder = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root  # search only below the prefix
        if not folder.exists():
            return []
        found = [p.relative_to(self.root).with_suffix("").as_posix() for p in folder.rglob("*.npz")]
        return sorted(name for name in found if name.startswith(prefix))

    def link_from(self, other: ArrayStore, prefix: str) -> int:
        """Take the arrays under `prefix` that `other` has and this store lacks, as hard links (copies across file
        systems). Only for immutable, uniquely named parts (content-keyed caches): they can then be shared."""
        mine = set(self.names(prefix))
        added = 0
        for name in other.names(prefix):
            if name in mine:
                continue
            source, target = other.path(name), self.path(name)
            folder_within(self.root.parent, target.parent)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
            added += 1
        return added

    def remove_leftovers(self) -> int:
        """Delete temporary files left by a write that crashed before commit."""
        return remove_temporaries(self.root)
