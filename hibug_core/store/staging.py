"""Folders built beside their final place and renamed into it only when complete; what a killed build left behind
is removed by the next one."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

from hibug_core.errors import ProjectError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale(folder: Path, kind: str) -> list[Path]:
    """Remove the staging folders of `folder` whose building process (on this machine) is gone."""
    host = socket.gethostname()
    removed = []
    for leftover in folder.parent.glob(f".{folder.name}.{kind}-*"):
        try:
            owner_host, pid, _ = leftover.name[len(f".{folder.name}.{kind}-"):].rsplit("-", 2)
            stale = owner_host == host and not _alive(int(pid))
        except ValueError:
            continue  # not named by us
        if stale:
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    return removed


@contextlib.contextmanager
def staged_folder(folder: Path, kind: str) -> Iterator[Path]:
    """Yield an empty staging folder next to `folder`; when the block ends well it becomes `folder`, otherwise it is
    removed. ProjectError when `folder` was filled meanwhile (another build won the race); nothing is kept then."""
    folder = Path(folder).resolve()
    remove_stale(folder, kind)
    staging = folder.with_name(f".{folder.name}.{kind}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield staging
        try:
            if folder.exists():
                folder.rmdir()  # only an empty folder may be replaced
            staging.rename(folder)
        except OSError:
            raise ProjectError(f"{folder} was filled by another process while this one was being built (two "
                               "`hibug new` or `hibug demo` at once?); nothing of this one was kept") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
