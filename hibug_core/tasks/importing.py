"""Importing: a manifest or a COCO file is read, the one task that claims it validates it, and the validated manifest
states that task (the project stores it at its first import)."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.errors import ManifestError
from hibug_core.ingest.manifest import DEFAULT_MODEL, ValidatedManifest
from hibug_core.ingest.table import column_names, read_table
from hibug_core.native_memory import collector_paused
from hibug_core.objects.coco import read_ground_truth
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.tasks.object_import import load_coco as load_coco_objects
from hibug_core.tasks.registry import claiming_table


def validate_table(frame: pd.DataFrame, *, source: str, base_dir: Path, default_model: str = DEFAULT_MODEL,
                   config: IngestConfig = IngestConfig(), progress: ProgressCallback = no_progress
                   ) -> ValidatedManifest:
    """Check a manifest table with the task that claims its columns (images, objects, people)."""
    task = claiming_table(column_names(frame), source)
    return task.validate_table(frame, source=source, base_dir=base_dir, default_model=default_model, config=config,
                               progress=progress)


def load_manifest(path: str | Path, *, default_model: str = DEFAULT_MODEL, config: IngestConfig = IngestConfig(),
                  progress: ProgressCallback = no_progress) -> ValidatedManifest:
    """Read and validate a CSV or Parquet manifest; image paths are relative to the manifest's folder."""
    path = Path(path).resolve()
    return validate_table(read_table(path), source=str(path), base_dir=path.parent, default_model=default_model,
                          config=config, progress=progress)


def load_uploaded_manifest(data: bytes, name: str, base_dir: str | Path, *, default_model: str = DEFAULT_MODEL,
                           config: IngestConfig = IngestConfig(),
                           progress: ProgressCallback = no_progress) -> ValidatedManifest:
    """A manifest that arrived as bytes (a browser upload); its image paths are relative to `base_dir`."""
    suffix = Path(name).suffix.lower() or ".csv"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"manifest{suffix}"
        path.write_bytes(data)
        try:
            frame = read_table(path)
        except ManifestError as error:  # told as the person's file, never as the server's temporary copy
            raise ManifestError(name, [dataclasses.replace(i, message=i.message.replace(str(path), name)
                                                           .replace(folder, "")) for i in error.issues]) from None
    return validate_table(frame, source=name, base_dir=Path(base_dir).resolve(), default_model=default_model,
                          config=config, progress=progress)


def load_coco(ground_truth, results, *, task: str | None = None, **options) -> ValidatedManifest:
    """A COCO ground truth with one results file per model, checked and matched (options:
    hibug_core.tasks.object_import.load_coco's), stating the task that claims the files (instances: detection; person
    keypoints: pose; masks in the truth and every results file: segmentation), or `task` where it can read them."""
    with collector_paused():
        truth = ground_truth if not isinstance(ground_truth, (str, Path)) else read_ground_truth(ground_truth)
        return load_coco_objects(truth, results, task=task, **options)
