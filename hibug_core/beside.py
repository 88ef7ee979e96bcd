"""A long pure computation run in a worker process beside the caller, so that it overlaps the caller's own work on a
second core (numpy and scipy hold the GIL through most of a mask's measures: a thread overlapped nothing)."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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
        free = available_bytes()
        if needs_bytes is not None and free is not None and free < needs_bytes:  # two at once would not fit
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


def available_bytes() -> int | None:
    """The memory the machine can give without swapping (Linux's MemAvailable; else the free pages); None unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
