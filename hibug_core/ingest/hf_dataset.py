"""Importing a Hugging Face `datasets` dataset (an image column, a label column, an optional split column or the
dataset's own splits) onto the data contract: images are written once as files, then checked as a manifest is."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.errors import ManifestError, RowIssue
from hibug_core.ingest.manifest import DEFAULT_MODEL, ValidatedManifest, validate_manifest
from hibug_core.progress import ProgressCallback, no_progress

# The datasets' usual split names, spelt as hibug's (train / val / test / pool).
SPLIT_NAMES = {"train": "train", "training": "train", "validation": "val", "valid": "val", "val": "val",
               "dev": "val", "test": "test", "testing": "test", "pool": "pool", "unlabeled": "pool",
               "unlabelled": "pool", "unsupervised": "pool"}
_FORMATS = {b"\xff\xd8": ".jpg", b"\x89P": ".png", b"GI": ".gif", b"BM": ".bmp", b"RI": ".webp"}


def open_dataset(source: str):
    """A DatasetDict or Dataset from a folder saved with save_to_disk, or a hub id / local folder load_dataset reads
    (the hub only when reachable; offline, from its cache)."""
    import datasets

    from hibug_core.embeddings.hub import offline_unless_reachable

    folder = Path(source).expanduser()
    try:
        if (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file():
            return datasets.load_from_disk(str(folder))
        with offline_unless_reachable():
            return datasets.load_dataset(str(folder) if folder.exists() else source)
    except (OSError, ValueError, FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as error:
        raise ManifestError(source, [RowIssue(None, None, f"cannot open the dataset ({str(error).splitlines()[0][:200]}"
                                              "); give a folder saved with save_to_disk, a folder load_dataset "
                                              "reads, or a hub id already in the Hugging Face cache")]) from None


def _suffix(value: dict) -> str:
    path = value.get("path") or ""
    if Path(path).suffix:
        return Path(path).suffix.lower()
    head = (value.get("bytes") or b"")[:2]
    return _FORMATS.get(head, ".png")


def _image_file(value, target: Path) -> str:
    """The file of one image cell: its own path when it is a readable file, else its bytes written to `target`."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if not isinstance(value, dict):  # a decoded PIL image (a dataset made in memory)
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        value = {"bytes": buffer.getvalue(), "path": None}
    if value.get("bytes") is None:
        return value.get("path") or ""
    target = target.with_suffix(_suffix(value))
    if not target.exists() or target.stat().st_size != len(value["bytes"]):
        target.write_bytes(value["bytes"])
    return str(target)


def load_hf_dataset(source: str, images_dir: str | Path, *, image_column: str = "image", label_column: str = "label",
                    split_column: str | None = None, default_model: str = DEFAULT_MODEL,
                    config: IngestConfig = IngestConfig(),
                    progress: ProgressCallback = no_progress) -> ValidatedManifest:
    """Validate a `datasets` dataset as a manifest: images written under `images_dir` (<split>/<row>.<ext>; the
    original files where the dataset points at them), ClassLabel ids as their names, the dataset's splits (or
    `split_column`) as hibug's. Every problem is named; nothing is imported on failure."""
    import datasets

    # 1. Check inputs: the dataset opens and has the columns; every split maps to one of hibug's.
    opened = open_dataset(source)
    parts = dict(opened) if isinstance(opened, datasets.DatasetDict) else {"": opened}
    issues = []
    for name, part in parts.items():
        where = f" in split '{name}'" if name else ""
        for column in (image_column, label_column, *([split_column] if split_column else [])):
            if column not in part.column_names:
                issues.append(RowIssue(None, column, f"no such column{where}; the dataset has "
                                                     f"{', '.join(part.column_names)}"))
        if name and not split_column and SPLIT_NAMES.get(name.lower()) is None:
            issues.append(RowIssue(None, "split",
                                   f"split '{name}' is not one of hibug's ({', '.join(config.allowed_splits)}"
                                                  f"); rename it, or give a split column"))
    if issues:
        raise ManifestError(source, issues)
    # 2. Write the images (undecoded: their bytes as stored) and gather image, label and split per row.
    images_dir = Path(images_dir).expanduser().resolve()
    frames = []
    total, done = sum(len(p) for p in parts.values()), 0
    for name, part in parts.items():
        folder = images_dir / (SPLIT_NAMES.get(name.lower(), name) if name else "all")
        folder.mkdir(parents=True, exist_ok=True)
        feature = part.features[image_column]
        if isinstance(feature, datasets.Image):
            part = part.cast_column(image_column, datasets.Image(decode=False))
        labels = part.features[label_column]
        rows = []
        for index, row in enumerate(part.select_columns([c for c in (image_column, label_column, split_column)
                                                         if c])):
            label = row[label_column]
            if isinstance(labels, datasets.ClassLabel) and label is not None and label >= 0:
                label = labels.int2str(label)
            unlabelled = label is None or isinstance(label, int) and label == -1  # -1: ClassLabel's "no label"
            rows.append({"image": _image_file(row[image_column], folder / f"{index:07d}"),
                         "label": "" if unlabelled else label,  # as typed: the manifest's checks refuse a list
                         "split": row[split_column] if split_column else SPLIT_NAMES.get(name.lower(), "")})
            done += 1
            if done % 256 == 0 or done == total:
                progress("writing the dataset's images", done, total)
        frames.append(pd.DataFrame(rows, columns=["image", "label", "split"]))
    frame = pd.concat(frames, ignore_index=True)
    if not frame["split"].astype(str).ne("").any():
        frame = frame.drop(columns="split")  # one unnamed split: the manifest's default split
    # 3. Check it as a manifest is checked (paths, readable images, labels, splits), naming rows.
    return validate_manifest(frame, source=source, base_dir=images_dir, default_model=default_model, config=config,
                             progress=progress)
