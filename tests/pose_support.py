"""A small seeded pose project for tests: stick figures with COCO's 17 person keypoints on 96-pixel images, a tiny
zoo keypoint model (Keypoint R-CNN built from config) trained on the blue ones only (the planted bug: red figures are
found less often), its results on every split imported as COCO keypoint files, and the model recorded so hibug can
fine-tune it on labelled pool images."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SIZE = 96
NAMES = ["nose", "left eye", "right eye", "left ear", "right ear", "left shoulder", "right shoulder", "left elbow",
         "right elbow", "left wrist", "right wrist", "left hip", "right hip", "left knee", "right knee", "left ankle",
         "right ankle"]
LIMBS = [(5, 7), (7, 9), (6, 8), (8, 10), (5, 6), (11, 12), (5, 11), (6, 12), (11, 13), (13, 15), (12, 14), (14, 16)]
# (x, y) of each keypoint in a unit box, standing and facing the camera (the person's left on the image's right)
STANDING = np.array([(.5, .08), (.55, .05), (.45, .05), (.6, .07), (.4, .07), (.7, .25), (.3, .25), (.8, .42),
                     (.2, .42), (.85, .58), (.15, .58), (.62, .55), (.38, .55), (.63, .77), (.37, .77), (.64, .97),
                     (.36, .97)])
SPLITS = {"train": 32, "val": 32, "test": 24, "pool": 16}  # images per split


def _people(rng) -> list[dict]:
    """One or two figures per image: a box and its 17 keypoints (all visible)."""
    people = []
    for _ in range(int(rng.integers(1, 3))):
        w, h = float(rng.uniform(22, 40)), float(rng.uniform(40, 70))
        x, y = float(rng.uniform(0, SIZE - w)), float(rng.uniform(0, SIZE - h))
        points = STANDING * [w, h] + [x, y] + rng.normal(0, 1.0, STANDING.shape)
        people.append({"bbox": [round(x, 2), round(y, 2), round(w, 2), round(h, 2)],
                       "keypoints": [v for px, py in points for v in (round(px, 2), round(py, 2), 2)]})
    return people


def _draw(people: list[dict], colour: tuple[int, int, int]) -> Image.Image:
    image = Image.new("RGB", (SIZE, SIZE), (235, 235, 225))
    draw = ImageDraw.Draw(image)
    for person in people:
        points = np.asarray(person["keypoints"], float).reshape(-1, 3)[:, :2]
        for a, b in LIMBS:
            draw.line([tuple(points[a]), tuple(points[b])], fill=colour, width=3)
        draw.ellipse([points[0][0] - 4, points[0][1] - 4, points[0][0] + 4, points[0][1] + 4], fill=colour)
    return image


def build_pose_project(root: Path, *, seed: int = 0, epochs: int = 8):
    """The project (open) of stick figures in `root`/project (its files in `root`/data), with `people` (a zoo keypoint
    model) recorded."""
    from hibug_core.models.recorded import POOL_LABELS_META, RecordedModel, record_model
    from hibug_core.models.zoo.scene_keypoints import (KeypointModelConfig, detect_people, save_keypoint_model,
                                                       train_keypoint_model)
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_coco

    rng = np.random.default_rng(seed)
    data = root / "data"
    data.mkdir(parents=True)
    category = {"id": 1, "name": "person", "keypoints": NAMES, "skeleton": [[a + 1, b + 1] for a, b in LIMBS]}
    splits = {}
    for split, count in SPLITS.items():
        images, records, annotations = [], [], []
        for k in range(count):
            people = _people(rng)
            # The planted bug: the model learns on blue figures only; red ones come in val, test and the pool.
            colour = (30, 60, 200) if split == "train" or rng.random() < 0.5 else (200, 60, 30)
            name = f"{split}/{k}.png"
            (data / split).mkdir(exist_ok=True)
            image = _draw(people, colour)
            image.save(data / name)
            images.append(image)
            records.append({"id": k + 1, "file_name": name, "width": SIZE, "height": SIZE})
            annotations += [{"id": len(annotations) + j + 1, "image_id": k + 1, "category_id": 1, "bbox": p["bbox"],
                             "area": p["bbox"][2] * p["bbox"][3], "iscrowd": 0, "keypoints": p["keypoints"],
                             "num_keypoints": 17, "attributes": {"colour": "blue" if colour[2] > 100 else "red"}}
                            for j, p in enumerate(people)]
        splits[split] = (images, records, annotations)
        (data / f"{split}.json").write_text(json.dumps({"images": records, "categories": [category],
                                                        "annotations": annotations}))
    # A tiny keypoint model trained on the train split (its weights seeded), run on every split.
    images, records, annotations = splits["train"]
    people = [(np.array([a["bbox"] for a in annotations if a["image_id"] == r["id"]]),
               ["person"] * sum(a["image_id"] == r["id"] for a in annotations),
               np.array([a["keypoints"] for a in annotations if a["image_id"] == r["id"]]).reshape(-1, 17, 3))
              for r in records]
    config = KeypointModelConfig(epochs=epochs, batch_size=8, learning_rate=6e-3, seed=seed, score_threshold=0.05)
    model = train_keypoint_model(images, people, ["person"], 17, config)
    save_keypoint_model(root / "model.pt", model, ["person"], 17, config)
    for split, (images, records, _) in splits.items():
        found = detect_people(model, images, ["person"])
        (data / f"{split}-people.json").write_text(json.dumps([
            {"image_id": r["id"], "category_id": 1, **{k: d[k] for k in ("bbox", "score", "keypoints")}}
            for r, detections in zip(records, found) for d in detections]))
    # The pool is imported unlabelled (its annotations kept aside, as labelling would return them).
    pool = json.loads((data / "pool.json").read_text())
    (data / "pool-unlabelled.json").write_text(json.dumps({**pool, "annotations": []}))
    project = Project.create_from_manifest(root / "project", load_coco(data / "val.json",
                                                                        {"people": data / "val-people.json"}))
    (project.folder / "models").mkdir()
    (root / "model.pt").rename(project.folder / "models" / "people.pt")
    for split in ("train", "test"):
        project.import_manifest(load_coco(data / f"{split}.json", {"people": data / f"{split}-people.json"},
                                          split=split), kind="coco")
    project.import_manifest(load_coco(data / "pool-unlabelled.json", {"people": data / "pool-people.json"},
                                      split="pool", labelled=False), kind="coco")
    record_model(project, RecordedModel("people", "scene-keypoints:models/people.pt",
                                        training=str(data / "train.json")))
    project.set_meta(POOL_LABELS_META, str(data / "pool.json"))
    return project
