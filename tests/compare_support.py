"""Projects of two models made from seeded manifests: the same images, one model made wrong on one tag."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from hibug_core.store.project import Project
from hibug_core.tasks import load_manifest


def manifest_project(folder: Path, header: str, rows: list[str]) -> Project:
    """A project made from a manifest of `rows` under `header`, every row pointing at one small image x.png."""
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (200, 40, 40)).save(folder / "x.png")
    (folder / "m.csv").write_text("\n".join([header, *rows]) + "\n")
    return Project.create_from_manifest(folder / "p", load_manifest(folder / "m.csv"))


def planted_pair(folder: Path, *, same: bool = False, candidate: str = "cand") -> Path:
    """300 images over color (red/green/blue) and size; `base` wrong on a seeded tenth; `cand` (or the name given) as
    base, but wrong on 40 green images that base gets right (unless `same`). Returns the project's folder."""
    rng = np.random.default_rng(7)
    colors = np.repeat(["red", "green", "blue"], 100)
    sizes = np.tile(["small", "large"], 150)
    base_right = rng.random(300) > 0.1
    cand_right = base_right.copy()
    if not same:
        green_right = np.flatnonzero((colors == "green") & base_right)
        cand_right[rng.choice(green_right, 40, replace=False)] = False
    rows = [f"s{i},x.png,cat,{'cat' if base_right[i] else 'dog'},{'cat' if cand_right[i] else 'dog'},val,"
            f"{colors[i]},{sizes[i]}" for i in range(300)]
    manifest_project(folder, f"id,image,label,pred:base,pred:{candidate},split,attr:color,attr:size", rows).close()
    return folder / "p"


def two_detectors(detection_demo: Path, folder: Path) -> Path:
    """A project of the detection demo's val scenes with two detectors' results: the demo's, and a version that drops
    a seeded 30% of its circles and shifts every other box by a pixel. Returns the project's folder."""
    import json

    from hibug_core.cli import main

    data = detection_demo / "data"
    rng = np.random.default_rng(0)
    worse = []
    for record in json.loads((data / "shape-fcos_val.json").read_text()):
        if record["category_id"] == 1 and rng.random() < 0.3:
            continue
        x, y, w, h = record["bbox"]
        worse.append({**record, "bbox": [x + 1.0, y, w, h]})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "v2.json").write_text(json.dumps(worse))
    code = main(["new", str(folder / "p"), "--coco", str(data / "instances_val.json"), "--results",
                 f"main={data / 'shape-fcos_val.json'}", f"v2={folder / 'v2.json'}"])
    assert code == 0
    return folder / "p"
