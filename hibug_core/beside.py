"""A long pure computation run in a worker process beside the caller, so that it overlaps the caller's own work on a
second core (numpy and scipy hold the GIL through most of a mask's measures: a thread overlapped nothing)."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


class Beside(Generic[T]):
    """`job` (picklable: a module-level function with its arguments, as functools.partial makes it) started in a
    spawned worker process when `in_process` is false, else run in the caller when its result is asked for. Spawned,
    not forked: safe in any host, a served dashboard's threads included. Where no process can start, or the worker
    dies (out of memory), the job runs in the caller instead; an error the job raises is raised by result().
    Use it as a context manager: leaving it lets go of the worker whether or not its result was asked for.
    needs_bytes: what running it beside takes in all (the worker's memory and the caller's growth meanwhile); where the
    machine has less available, it runs in the caller, one after the other."""

    def __init__(self, job: Callable[[], T], *, in_process: bool, needs_bytes: int | None = None):
        self._job, self._pool, self._future = job, None, None
        if in_process:
            return
        free = available_bytes() if needs_bytes is not None else None
        if free is not None and free < needs_bytes:  # the two at once would not fit
            logger.info("running %s in this process: it needs about %.1f GiB beside this one, %.1f GiB are free",
                        getattr(job, "func", job), needs_bytes / 2 ** 30, free / 2 ** 30)
            return
        import multiprocessing

        try:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            self._future = self._pool.submit(job)
        except (OSError, RuntimeError) as error:  # no process to be had (limits, a sandbox): the caller runs it
            logger.info("running %s in this process: %s", getattr(job, "func", job), error)
            self.close()

    def result(self) -> T:
        if self._future is None:
            return self._job()
        try:
            return self._future.result()
        except BrokenProcessPool:
            logger.info("the worker process died; running %s in this process", getattr(self._job, "func", self._job))
            return self._job()
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool, self._future = None, None

    def __enter__(self) -> Beside[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def available_bytes(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory this process can be given without swapping: Linux's MemAvailable, or less where its control group
    (a container's limit) leaves less room; else the free pages; None where unknown."""
    known = [room for room in (_meminfo_available(proc), _cgroup_room(proc, cgroups)) if room is not None]
    if known:
        return min(known)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _meminfo_available(proc: Path) -> int | None:
    try:
        for line in (proc / "meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


NO_LIMIT = 1 << 60  # cgroup v1 says "no limit" with a number near 2**63


def _cgroup_room(proc: Path, cgroups: Path) -> int | None:
    """Limit less use of this process's memory control group (v2: memory.max and memory.current; v1: the memory
    controller's limit_in_bytes and usage_in_bytes), looked for where /proc/self/cgroup puts it and at the root a
    container sees; None without a limit."""
    try:
        lines = (proc / "self" / "cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            folders, files = [cgroups / path.lstrip("/"), cgroups], ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            folders = [cgroups / "memory" / path.lstrip("/"), cgroups / "memory"]
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        for folder in folders:
            try:
                limit, used = ((folder / name).read_text(encoding="ascii").strip() for name in files)
            except OSError:
                continue
            if limit == "max" or not limit.isdigit() or int(limit) >= NO_LIMIT or not used.isdigit():
                break
            return max(int(limit) - int(used), 0)
    return None
