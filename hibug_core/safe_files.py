"""The one way a file named by a manifest, a COCO file or a visitor is read: checked first (a regular file, under a
size cap), opened without blocking, read no further than the cap, so a device, a pipe or a huge file is refused in
words instead of hanging or filling memory."""
from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from hibug_core.errors import HibugError

MiB = 1 << 20
GiB = 1 << 30
IMAGE_MAX_BYTES = 512 * MiB  # one image file (a 100-megapixel PNG is ~300 MB)
TABLE_MAX_BYTES = 4 * GiB  # a manifest, a COCO or results JSON file (COCO's own train2017 instances: ~450 MB)
MODEL_MAX_BYTES = 64 * GiB  # one file of a model: a checkpoint, or a file in a model's folder
READ_CHUNK = 8 * MiB  # what a file that grows while it is read is read on by
MODEL_FOLDER_ENTRIES = 10_000  # a model's folder holds a few dozen files; more is not a model folder


class FileRefused(HibugError, ValueError):
    """A named file that is not read: missing, not a regular file, or too large; the message says which."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _size(count: int) -> str:
    if count >= GiB:
        return f"{count / GiB:.1f} GiB"
    return f"{count / MiB:.1f} MiB" if count >= MiB else f"{count:,} bytes"


def _refuse_unless_regular(info: os.stat_result, max_bytes: int, what: str) -> None:
    """FileRefused unless the file whose status is `info` is a regular file of at most `max_bytes`."""
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"is {_kind(info.st_mode)}, not {what}; name a regular file")
    if info.st_size > max_bytes:
        raise FileRefused(f"is {_size(info.st_size)}, more than the {_size(max_bytes)} hibug reads as {what}")


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether `path` lies inside `folder` once every link on the way is followed (a name the file system refuses
    lies nowhere)."""
    try:
        real, home = os.path.realpath(path), os.path.realpath(folder)
    except (OSError, ValueError):
        return False
    return real == home or real.startswith(home.rstrip(os.sep) + os.sep)


def folder_within(root: str | Path, folder: str | Path) -> Path:
    """`folder` (inside `root`) made where missing, one level at a time, with no link on the way from `root`: every
    write of a project (thumbnails, arrays, logs) lands inside it, never through a link to elsewhere. Raises
    FileRefused naming the link."""
    root, folder = Path(root), Path(folder)
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        raise FileRefused(f"{folder} is not inside {root}; hibug writes only inside a project") from None
    if ".." in parts:
        raise FileRefused(f"{folder} leads out of {root}; hibug writes only inside a project")
    root.mkdir(parents=True, exist_ok=True)  # the project itself: whoever named it chose where it is
    current = root
    for part in parts:
        current = current / part
        try:
            os.mkdir(current)
            continue
        except FileExistsError:
            pass
        info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode):
            raise FileRefused(f"{current} is a link; hibug writes only inside the project, never through a link "
                              "(replace the link with a folder)")
        if not stat.S_ISDIR(info.st_mode):
            raise FileRefused(f"{current} is {_kind(info.st_mode)} where hibug keeps a folder")
    return folder


def open_for_append(path: str | Path) -> io.BufferedWriter:
    """`path` opened to append to (made if missing), refusing a link in its place (FileRefused): a log is never
    written through a link planted where it goes."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.fdopen(os.open(path, flags, 0o644), "ab")
    except OSError:
        if os.path.islink(path):
            raise FileRefused(f"{path} is a link; hibug writes only inside the project, never through a link") \
                from None
        raise


def write_output(path: str | Path, data: str | bytes, *, what: str = "the output") -> Path:
    """`data` (text as UTF-8) written to a file a person named (a report, a table, a gate's verdict), replacing one
    that is there; FileRefused in words where it cannot be: a folder by that name, no folder to hold it, no right to
    write there, a full disk."""
    path = Path(path)
    if path.is_dir():
        raise FileRefused(f"{path} is a folder; name a file to write {what} to")
    if not path.parent.is_dir():
        raise FileRefused(f"no folder {path.parent} to write {what} into; create it or choose another path")
    try:
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as error:
        raise FileRefused(f"cannot write {what} to {path} ({error.strerror or error})") from None
    return path


def write_new(path: str | Path, data: bytes) -> Path:
    """`data` written to a file made now at `path` (refused where anything is there already, a link included)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
        handle.write(data)
    return Path(path)


def open_checked(path: str | Path, *, max_bytes: int, what: str = "a file") -> io.BufferedReader:
    """`path` opened for reading once it is known to be a regular file of at most `max_bytes` (checked on the open
    file itself, so nothing can be swapped in between). Raises FileRefused saying what is wrong."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags)  # a FIFO opens at once without a writer: O_NONBLOCK
    except FileNotFoundError:
        raise FileRefused("file not found") from None
    except IsADirectoryError:
        raise FileRefused(f"is a folder, not {what}") from None
    except PermissionError:
        raise FileRefused("permission denied") from None
    except OSError as error:
        raise FileRefused(f"cannot open the file ({error.strerror or error})") from None
    try:
        _refuse_unless_regular(os.fstat(descriptor), max_bytes, what)
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_checked(path: str | Path, *, max_bytes: int, what: str = "a file") -> bytes:
    """The bytes of a regular file of at most `max_bytes` (open_checked), never more than that even if it grows while
    it is read. Raises FileRefused."""
    with open_checked(path, max_bytes=max_bytes, what=what) as handle:
        try:
            data = handle.read(os.fstat(handle.fileno()).st_size)  # what the file holds, not the cap: allocated
            more, total = [], len(data)  # as read, so a small file never asks for the cap's memory
            while total <= max_bytes and (chunk := handle.read(min(READ_CHUNK, max_bytes + 1 - total))):
                more.append(chunk)
                total += len(chunk)
        except OSError as error:
            raise FileRefused(f"cannot read the file ({error.strerror or error})") from None
    if total > max_bytes:
        raise FileRefused(f"grew past the {_size(max_bytes)} hibug reads as {what} while it was read")
    return data + b"".join(more) if more else data


def check_regular(path: str | Path, *, max_bytes: int, what: str = "a file") -> Path:
    """`path` when it names a regular file of at most `max_bytes`, found by its status alone (nothing opened: for a
    file handed on to be read by another, e.g. the browser); FileRefused else."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileRefused("file not found") from None
    except OSError as error:
        raise FileRefused(f"cannot read the file ({error.strerror or error})") from None
    _refuse_unless_regular(info, max_bytes, what)
    return Path(path)


def check_model_files(spec: str, kind: str = "model") -> None:
    """Every file a model spec names (a checkpoint, a model's folder and what is in it; `family:argument:...`, the
    parts that exist) checked as open_checked checks it, so a loader never blocks on a pipe or reads a device.
    Raises FileRefused naming the file."""
    for part in spec.split(":")[1:]:
        path = Path(part.strip()).expanduser()
        if not part.strip() or not path.exists():
            continue
        files = [path] if not path.is_dir() else _folder_files(path, spec, kind)
        for file in files:
            try:
                open_checked(file, max_bytes=MODEL_MAX_BYTES, what="a model file").close()
            except FileRefused as error:
                raise FileRefused(f"{kind} '{spec}': {file} {error}") from None


def _folder_files(folder: Path, spec: str, kind: str) -> list[Path]:
    files = []
    for top, folders, names in os.walk(folder):
        files += [Path(top) / name for name in names]
        if len(files) + len(folders) > MODEL_FOLDER_ENTRIES:
            raise FileRefused(f"{kind} '{spec}': {folder} holds more than {MODEL_FOLDER_ENTRIES:,} entries; name "
                              "the folder of one model")
    return files
