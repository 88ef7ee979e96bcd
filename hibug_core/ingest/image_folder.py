"""Importing an image-folder tree (root/<split>/<label>/*.jpg) with a predictions CSV onto the data contract."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from hibug_core.config import IngestConfig
from hibug_core.errors import ManifestError, RowIssue
from hibug_core.ingest.manifest import DEFAULT_MODEL, ValidatedManifest, validate_manifest
from hibug_core.ingest.table import read_table
from hibug_core.progress import ProgressCallback, no_progress

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff"}


def scan_image_folder(root: Path) -> pd.DataFrame:
    """image (relative to root), label and split of every image file under root/<split>/[<label>/]."""
    rows = []
    for split_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(split_dir.rglob("*")):
            if path.suffix.lower() not in IMAGE_SUFFIXES or not path.is_file():
                continue
            relative = path.relative_to(root)
            label = relative.parts[1] if len(relative.parts) > 2 else ""
            rows.append({"image": relative.as_posix(), "label": label, "split": split_dir.name})
    return pd.DataFrame(rows, columns=["image", "label", "split"])


def load_image_folder(root: str | Path, predictions_csv: str | Path, *, default_model: str = DEFAULT_MODEL,
                      config: IngestConfig = IngestConfig(),
                      progress: ProgressCallback = no_progress) -> ValidatedManifest:
    """Validate an image-folder tree joined with a predictions file whose 'image' column is relative to root."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise ManifestError(str(root), [RowIssue(None, None, "image folder not found")])
    tree = scan_image_folder(root)
    if tree.empty:
        raise ManifestError(str(root), [RowIssue(None, None, "no images found under <root>/<split>/<label>/")])
    predictions_path = Path(predictions_csv).resolve()
    predictions = read_table(predictions_path)
    if "image" not in predictions.columns:
        raise ManifestError(str(predictions_path), [RowIssue(None, "image", "required column is missing")])
    clashing = [c for c in ("label", "split") if c in predictions.columns]
    if clashing:
        raise ManifestError(str(predictions_path), [
            RowIssue(None, c, "comes from the folder tree; remove it from the predictions file") for c in clashing])
    predictions["image"] = predictions["image"].map(lambda p: Path(p).as_posix())
    duplicated = predictions["image"].duplicated().to_numpy().nonzero()[0]
    if len(duplicated):
        raise ManifestError(str(predictions_path), [
            RowIssue(i + 1, "image", f"duplicate image '{predictions['image'].iat[i]}'") for i in duplicated[:50]])
    unknown = ~predictions["image"].isin(set(tree["image"]))
    issues = [RowIssue(i + 1, "image", f"'{predictions['image'].iat[i]}' is not an image under {root}")
              for i in unknown.to_numpy().nonzero()[0][:50]]
    if issues:
        raise ManifestError(str(predictions_path), issues)
    frame = tree.merge(predictions, on="image", how="left", validate="one_to_one")
    missing = frame.index[frame.drop(columns=["image", "label", "split"]).isna().all(axis=1)]
    if len(missing):
        raise ManifestError(str(predictions_path), [
            RowIssue(None, "image", f"no predictions for '{frame['image'].iat[i]}'") for i in missing[:50]])
    frame = frame.fillna("")
    return validate_manifest(frame, source=str(root), base_dir=root, default_model=default_model,
                             config=config, progress=progress)
