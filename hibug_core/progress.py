"""Progress reporting for long work: the core calls a callback, the UI and CLI decide how to show it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class ProgressCallback(Protocol):
    def __call__(self, stage: str, done: int, total: int) -> None: ...


def no_progress(stage: str, done: int, total: int) -> None:
    """The default callback: report nothing."""


def tqdm_progress() -> tuple[ProgressCallback, Callable[[], None]]:
    """A callback that draws one tqdm bar per stage, and a function that closes the last bar."""
    from tqdm.auto import tqdm

    bars: dict[str, object] = {}

    def report(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():
                other.close()
            bars.clear()
            bar = bars[stage] = tqdm(total=total, desc=stage, unit="it", leave=True)
        bar.total = total
        bar.n = done
        bar.refresh()

    def close() -> None:
        for bar in bars.values():
            bar.close()
        bars.clear()

    return report, close
