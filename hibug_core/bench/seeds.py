"""Problems from several seeds: each seed's run in a folder of its own, their tables stacked with the seed."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd

T = TypeVar("T")


def per_seed(out: Path, seeds: list[int], run: Callable[[Path, int], T]) -> dict[int, T]:
    """run(folder, seed) for each seed, in out/seed-N (in out itself when there is one seed)."""
    return {seed: run(out / f"seed-{seed}" if len(seeds) > 1 else out, seed) for seed in seeds}


def stacked(parts: dict[int, pd.DataFrame], *, keep_index: bool = False) -> pd.DataFrame:
    """Tables of several seeds as one, each row with its seed: a column, or with keep_index the index's last level."""
    parts = {seed: frame for seed, frame in parts.items() if len(frame)}
    if not parts:
        return pd.DataFrame()
    if keep_index:
        return pd.concat([frame.assign(seed=seed).set_index("seed", append=True) for seed, frame in parts.items()])
    return pd.concat([frame.assign(seed=seed) for seed, frame in parts.items()], ignore_index=True)
