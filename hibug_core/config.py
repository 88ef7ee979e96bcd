"""Configuration as data: every threshold and default of the core in frozen dataclasses."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "val", "test", "pool")


@dataclass(frozen=True)
class IngestConfig:
    """How manifests are checked on import."""

    allowed_splits: tuple[str, ...] = SPLITS
    default_split: str = "val"
    probability_tolerance: float = 0.01  # |sum(probs) - 1| allowed per row
    require_model: bool = False  # True where a model's output must come with the images
    image_check_size: int = 64  # decode images at most this big when checking they are readable
    workers: int = 8  # threads that read and hash images
    max_issues: int = 200  # stop collecting problems after this many
    image_roots: tuple[Path, ...] | None = None  # images only inside these folders (a served dashboard's data roots)


@dataclass(frozen=True)
class StoreConfig:
    """How the project store talks to its database."""

    busy_timeout_ms: int = 30_000
    thumbnail_size: int = 128
    bulk_rows: int = 10_000  # an import of at least this many rows is written in bulk mode (store/db.py)
