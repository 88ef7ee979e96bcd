"""A scene keypoint model (a pose estimator hibug can train, run and fine-tune): torchvision's Keypoint R-CNN on the
zoo's small pyramid backbone, with slim box and keypoint heads, for square images of one size, trained here on CPU."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hibug_core.models.zoo import rcnn
from hibug_core.models.zoo.fitting import (
    compute_device,
    fit_detector,
    image_batch,
    on_device,
    save_weights,
    stored_weights,
    with_weights,
)
from hibug_core.models.zoo.rcnn import LEVELS, RcnnConfig, rcnn_parts
from hibug_core.native_memory import reuse_freed_tensor_memory
from hibug_core.progress import ProgressCallback, no_progress


@dataclass(frozen=True)
class KeypointModelConfig(RcnnConfig):
    """The keypoint model's settings: the zoo's R-CNN settings, its head finding keypoints."""


def build_keypoint_model(classes: list[str], keypoints: int, config: KeypointModelConfig = KeypointModelConfig()):
    """An untrained Keypoint R-CNN for `classes` (labels 1..len(classes)), each with `keypoints` points."""
    from torchvision.models.detection import KeypointRCNN
    from torchvision.models.detection.keypoint_rcnn import KeypointRCNNHeads, KeypointRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    parts = rcnn_parts(classes, config, anchor_sizes=(16, 32, 64), detections=20, kept_proposals=50)
    channels, head = config.pyramid_channels, config.head_channels
    return KeypointRCNN(**parts, keypoint_roi_pool=MultiScaleRoIAlign(LEVELS, 14, 2),
                        keypoint_head=KeypointRCNNHeads(channels, (head, head)),
                        keypoint_predictor=KeypointRCNNPredictor(head, keypoints))


def _targets(people_by_image: list, classes: list[str]) -> list[dict]:
    """Per image, Keypoint R-CNN's targets from its boxes (x, y, w, h rows), class names and keypoints ((n, k, 3):
    x, y and COCO's visibility flag; 0 is unlabelled)."""
    import torch

    targets = []
    for boxes, names, points in people_by_image:
        corners = torch.tensor(np.asarray(boxes, dtype=np.float32).reshape(-1, 4))
        corners[:, 2:] += corners[:, :2]
        targets.append({"boxes": corners, "labels": torch.tensor([classes.index(n) + 1 for n in names],
                                                                  dtype=torch.int64),
                        "keypoints": torch.tensor(_keypoint_rows(points, len(names)))})
    return targets


def _keypoint_rows(points, people: int) -> np.ndarray:
    """(people, k, 3) float32; an image with nobody in it keeps its keypoint count where its empty array states it."""
    points = np.asarray(points, dtype=np.float32)
    if people:
        return points.reshape(people, -1, 3)
    return points.reshape(0, points.shape[-2] if points.ndim == 3 else 0, 3)


def train_keypoint_model(images: list, people_by_image: list, classes: list[str], keypoints: int,
                         config: KeypointModelConfig = KeypointModelConfig(), progress: ProgressCallback = no_progress,
                         *, start_from=None, new: tuple[list, list] | None = None, lam: float = 1.0):
    """Train on PIL images and, per image, (boxes (n, 4) x/y/w/h, class names, keypoints (n, k, 3)); seeded. From
    scratch, or further from `start_from`'s weights; `new` (images, people) weighted by `lam` in every step."""
    # 1. Check the inputs.
    if len(images) != len(people_by_image) or not images:
        raise ValueError("give one (boxes, classes, keypoints) triple per training image, and at least one image")
    # 2. The model and its data.
    reuse_freed_tensor_memory()
    model = build_keypoint_model(classes, keypoints, config)
    if start_from is not None:
        model.load_state_dict(start_from.state_dict())
    inputs, targets = image_batch(images), _targets(people_by_image, classes)
    new_inputs, new_targets = (image_batch(new[0]), _targets(new[1], classes)) if new and new[0] else (None, None)
    # 3. Epochs of shuffled batches.
    return fit_detector(model, inputs, targets, config, progress, new_inputs=new_inputs, new_targets=new_targets,
                        lam=lam, stage="training the keypoint model" if start_from is None else
                        "fine-tuning the keypoint model")


def detect_people(model, images: list, classes: list[str], *, batch_size: int = 32, score_floor: float | None = None,
                  progress: ProgressCallback = no_progress) -> list[list[dict]]:
    """Per image, what the model finds as {category, bbox [x, y, w, h], score, keypoints [x, y, v, ...]} (v = 2: a
    predicted point counts as visible, as COCO's results format has it); down to `score_floor` where given (else the
    model's own score threshold)."""
    with rcnn.score_floor(model, score_floor):
        return _detect_people(model, images, classes, batch_size, progress)


def _detect_people(model, images: list, classes: list[str], batch_size: int,
                   progress: ProgressCallback) -> list[list[dict]]:
    import torch

    device = compute_device()
    model.to(device).eval()
    found = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            for output in model(on_device(image_batch(images[start:start + batch_size]), None, device)[0]):
                output = {k: v.cpu() for k, v in output.items()}
                boxes = output["boxes"].numpy().astype(float)
                points = output["keypoints"].numpy().astype(float)
                found.append([{"category": classes[int(label) - 1],
                               "bbox": [round(b[0], 2), round(b[1], 2), round(b[2] - b[0], 2), round(b[3] - b[1], 2)],
                               "score": round(float(score), 5),
                               "keypoints": [v for x, y, _ in p for v in (round(x, 2), round(y, 2), 2)]}
                              for b, label, score, p in zip(boxes, output["labels"].tolist(),
                                                            output["scores"].tolist(), points)])
            progress("finding people", min(start + batch_size, len(images)), len(images))
    return found


def save_keypoint_model(path: Path, model, classes: list[str], keypoints: int, config: KeypointModelConfig,
                        fingerprint: str | None = None, *, half: bool = False) -> None:
    """The weights (in half precision where asked: a shipped asset stays small), with what they were trained on
    where given."""
    save_weights(path, model, half=half, classes=classes, keypoints=keypoints, config=asdict(config),
                 **({"training_fingerprint": fingerprint} if fingerprint else {}))


def load_keypoint_model(path: Path):
    """(the model, its classes, its keypoint count, its settings) from a checkpoint save_keypoint_model wrote."""
    stored = stored_weights(path)
    classes, keypoints = list(stored["classes"]), int(stored["keypoints"])
    config = KeypointModelConfig(**stored["config"])
    return with_weights(build_keypoint_model(classes, keypoints, config), stored), classes, keypoints, config


def load_trained_keypoint_model(path: Path, classes: list[str], keypoints: int, config: KeypointModelConfig,
                                fingerprint: str):
    """The stored model if it was trained on exactly this data and settings (its fingerprint), else None."""
    stored = stored_weights(path, classes=classes, keypoints=keypoints, config=asdict(config),
                            training_fingerprint=fingerprint)
    return None if stored is None else with_weights(build_keypoint_model(classes, keypoints, config), stored)
