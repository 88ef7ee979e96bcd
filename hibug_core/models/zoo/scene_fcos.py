"""A scene detector (the detection demo's model under test): torchvision's FCOS (a one-stage, anchor-free detector)
on a small CNN backbone with a feature pyramid, trained from scratch here on CPU in a few minutes."""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hibug_core.errors import check_fields
from hibug_core.models.zoo.fitting import (
    compute_device,
    fit_detector,
    image_batch,
    on_device,
    save_weights,
    stored_weights,
    with_weights,
    zoo_checks,
)
from hibug_core.native_memory import reuse_freed_tensor_memory
from hibug_core.progress import ProgressCallback, no_progress


@dataclass(frozen=True)
class DetectorConfig:
    image_size: int = 96  # the scenes' side; FCOS is told not to resize
    width: int = 24  # channels of the backbone's first stage (doubling at each of the next two)
    pyramid_channels: int = 64  # channels of every feature-pyramid level (the head's GroupNorm needs multiples of 32)
    head_convs: int = 2  # convolutions in each of FCOS's heads (torchvision's default is 4)
    epochs: int = 8
    batch_size: int = 32
    learning_rate: float = 2e-3  # peak of a one-cycle schedule (AdamW)
    score_threshold: float = 0.2  # detections kept above this confidence
    seed: int = 0

    def __post_init__(self):
        check_fields(self, {**zoo_checks(self),
                            "pyramid_channels": (self.pyramid_channels % 32 == 0 and self.pyramid_channels > 0,
                                                 "a positive multiple of 32")})


def pyramid_backbone(width: int, channels: int):
    """A small CNN (stride 4 stem, then three stages at strides 8, 16 and 32) under a feature pyramid of `channels`
    per level, the levels named "0", "1", "2" as torchvision's detectors expect."""
    import torch
    from torch import nn
    from torchvision.ops import FeaturePyramidNetwork

    def stage(inputs: int, outputs: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(inputs, outputs, 3, 2, 1, bias=False), nn.BatchNorm2d(outputs),
                             nn.ReLU(inplace=True), nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False),
                             nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))

    class PyramidBackbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(stage(3, width // 2), stage(width // 2, width))  # stride 4
            self.stride8, self.stride16 = stage(width, 2 * width), stage(2 * width, 4 * width)
            self.stride32 = stage(4 * width, 4 * width)
            self.pyramid = FeaturePyramidNetwork([2 * width, 4 * width, 4 * width], channels)
            self.out_channels = channels

        def forward(self, images: torch.Tensor):
            eight = self.stride8(self.stem(images))
            sixteen = self.stride16(eight)
            return self.pyramid(OrderedDict([("0", eight), ("1", sixteen), ("2", self.stride32(sixteen))]))

    return PyramidBackbone()


def build_detector(classes: list[str], config: DetectorConfig = DetectorConfig()):
    """An untrained FCOS for `classes` (labels 1..len(classes)) on a three-level pyramid at strides 8, 16 and 32."""
    import torch
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.fcos import FCOSHead

    import hibug_core.torch_compat as compat

    compat.allow_fallback_ops()

    torch.manual_seed(config.seed)
    anchors = AnchorGenerator(sizes=((8,), (16,), (32,)), aspect_ratios=((1.0,),) * 3)
    return FCOS(pyramid_backbone(config.width, config.pyramid_channels), num_classes=len(classes) + 1,
                min_size=config.image_size, max_size=config.image_size, image_mean=[0.5] * 3, image_std=[0.25] * 3,
                anchor_generator=anchors, head=FCOSHead(config.pyramid_channels, 1, len(classes) + 1,
                                                        config.head_convs),
                score_thresh=config.score_threshold, nms_thresh=0.5,
                detections_per_img=30, topk_candidates=100)


def _targets(objects_by_image: list, classes: list[str]) -> list[dict]:
    """Per image, FCOS's targets from its boxes (x, y, w, h rows) and class names."""
    import torch

    targets = []
    for boxes, names in objects_by_image:
        corners = torch.tensor(np.asarray(boxes, dtype=np.float32).reshape(-1, 4))
        corners[:, 2:] += corners[:, :2]
        targets.append({"boxes": corners, "labels": torch.tensor([classes.index(n) + 1 for n in names],
                                                                  dtype=torch.int64)})
    return targets


def train_detector(images: list, objects_by_image: list, classes: list[str], config: DetectorConfig = DetectorConfig(),
                   progress: ProgressCallback = no_progress, *, start_from=None, new: tuple[list, list] | None = None,
                   lam: float = 1.0):
    """Train on PIL images and, per image, (boxes (n, 4) x/y/w/h in pixels, class names); seeded. From scratch, or
    further from `start_from`'s weights (fine-tuning: the same schedule, `config`'s epochs and peak rate). `new`
    (images, objects): every step also takes a batch of them, its loss weighted by `lam` (loss = L(original) +
    lam * L(new), as HiBug and Chegini and Feizi retrain)."""
    # 1. Check the inputs.
    if len(images) != len(objects_by_image) or not images:
        raise ValueError("give one (boxes, classes) pair per training image, and at least one image")
    # 2. The model, its data and its schedule.
    reuse_freed_tensor_memory()
    model = build_detector(classes, config)
    if start_from is not None:
        model.load_state_dict(start_from.state_dict())
    inputs, targets = image_batch(images), _targets(objects_by_image, classes)
    new_inputs, new_targets = (image_batch(new[0]), _targets(new[1], classes)) if new and new[0] else (None, None)
    # 3. Epochs of shuffled batches.
    return fit_detector(model, inputs, targets, config, progress, new_inputs=new_inputs, new_targets=new_targets,
                        lam=lam, stage="training the detector" if start_from is None else "fine-tuning the detector")


def detect(model, images: list, classes: list[str], *, batch_size: int = 64, score_floor: float | None = None,
           progress: ProgressCallback = no_progress) -> list[list[dict]]:
    """Per image, its detections as {category (class name), bbox [x, y, w, h], score}; down to `score_floor` where
    given (else the model's own score threshold)."""
    model.eval()
    kept = model.score_thresh
    if score_floor is not None:
        model.score_thresh = score_floor
    try:
        found = _detect(model, images, classes, batch_size, progress)
    finally:
        model.score_thresh = kept
    return found


def _detect(model, images: list, classes: list[str], batch_size: int, progress: ProgressCallback) -> list[list[dict]]:
    import torch

    device = compute_device()
    model.to(device)
    found = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            for output in model(on_device(image_batch(images[start:start + batch_size]), None, device)[0]):
                output = {k: v.cpu() for k, v in output.items()}
                boxes = output["boxes"].numpy().astype(float)
                found.append([{"category": classes[int(label) - 1],
                               "bbox": [round(b[0], 2), round(b[1], 2), round(b[2] - b[0], 2), round(b[3] - b[1], 2)],
                               "score": round(float(score), 5)}
                              for b, label, score in zip(boxes, output["labels"].tolist(), output["scores"].tolist())])
            progress("detecting objects", min(start + batch_size, len(images)), len(images))
    return found


def training_fingerprint(objects_by_image: list, classes: list[str], config: DetectorConfig) -> str:
    """What a stored detector was trained on: its annotations, classes and settings."""
    text = json.dumps([[np.round(np.asarray(b, float), 2).tolist(), list(n)] for b, n in objects_by_image])
    return hashlib.sha256(json.dumps([text, classes, asdict(config)]).encode()).hexdigest()[:16]


def save_detector(path: Path, model, classes: list[str], config: DetectorConfig, fingerprint: str) -> None:
    """The weights in half precision (the asset stays small) with what they were trained on."""
    save_weights(path, model, half=True, classes=classes, config=asdict(config), training_fingerprint=fingerprint)


def load_detector(path: Path, classes: list[str], config: DetectorConfig, fingerprint: str):
    """The stored detector if it was trained on exactly this data and settings, else None."""
    stored = stored_weights(path, classes=classes, config=asdict(config), training_fingerprint=fingerprint)
    return None if stored is None else with_weights(build_detector(classes, config), stored)


def load_checkpoint(path: Path):
    """(the detector, its classes, its settings) from a checkpoint save_detector wrote, whatever it was trained on."""
    stored = stored_weights(path)
    classes, config = list(stored["classes"]), DetectorConfig(**stored["config"])
    return with_weights(build_detector(classes, config), stored), classes, config
