"""A scene mask model (an instance segmenter hibug can train, run and fine-tune): torchvision's Mask R-CNN on the zoo's
small pyramid backbone, with slim box and mask heads, for square images of one size, trained here on CPU."""
from __future__ import annotations

import hashlib
import json
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
class MaskModelConfig(RcnnConfig):
    """The mask model's settings: the zoo's R-CNN settings, its head drawing masks."""

    mask_threshold: float = 0.5  # a pixel is the object's where the mask head's probability reaches this

    def checks(self) -> dict[str, tuple[bool, str]]:
        return {**super().checks(), "mask_threshold": (0 < self.mask_threshold < 1, "in (0, 1)")}


def build_mask_model(classes: list[str], config: MaskModelConfig = MaskModelConfig()):
    """An untrained Mask R-CNN for `classes` (labels 1..len(classes))."""
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import MultiScaleRoIAlign

    parts = rcnn_parts(classes, config, anchor_sizes=(8, 16, 32), detections=30, kept_proposals=60)
    channels, head = config.pyramid_channels, config.head_channels
    model = MaskRCNN(**parts, mask_roi_pool=MultiScaleRoIAlign(LEVELS, 14, 2),
                     mask_head=MaskRCNNHeads(channels, (head, head), 1),
                     mask_predictor=MaskRCNNPredictor(head, head, len(classes) + 1))
    model.mask_threshold = config.mask_threshold  # what segment() keeps of a mask's probabilities
    return model


def _targets(objects_by_image: list, masks_by_image: list, classes: list[str]) -> list[dict]:
    """Per image, Mask R-CNN's targets from its boxes (x, y, w, h rows), class names and masks ((n, h, w) bool)."""
    import torch

    targets = []
    for (boxes, names), masks in zip(objects_by_image, masks_by_image):
        corners = torch.tensor(np.asarray(boxes, dtype=np.float32).reshape(-1, 4))
        corners[:, 2:] += corners[:, :2]
        targets.append({"boxes": corners, "labels": torch.tensor([classes.index(n) + 1 for n in names],
                                                                  dtype=torch.int64),
                        "masks": torch.from_numpy(np.asarray(masks, dtype=np.uint8))})
    return targets


def train_mask_model(images: list, objects_by_image: list, masks_by_image: list, classes: list[str],
                     config: MaskModelConfig = MaskModelConfig(), progress: ProgressCallback = no_progress, *,
                     start_from=None, new: tuple[list, list, list] | None = None, lam: float = 1.0):
    """Train on PIL images and, per image, (boxes (n, 4) x/y/w/h, class names) and its masks ((n, h, w) bool);
    seeded. From scratch, or further from `start_from`'s weights; `new` (images, objects, masks) weighted by `lam` in
    every step."""
    # 1. Check the inputs.
    if not images or not (len(images) == len(objects_by_image) == len(masks_by_image)):
        raise ValueError("give one (boxes, classes) pair and one mask stack per training image, and at least one "
                         "image")
    # 2. The model and its data.
    reuse_freed_tensor_memory()
    model = build_mask_model(classes, config)
    if start_from is not None:
        model.load_state_dict(start_from.state_dict())
    inputs, targets = image_batch(images), _targets(objects_by_image, masks_by_image, classes)
    new_inputs, new_targets = ((image_batch(new[0]), _targets(new[1], new[2], classes)) if new and new[0]
                               else (None, None))
    # 3. Epochs of shuffled batches.
    return fit_detector(model, inputs, targets, config, progress, new_inputs=new_inputs, new_targets=new_targets,
                        lam=lam, stage="training the mask model" if start_from is None else
                        "fine-tuning the mask model")


def segment(model, images: list, classes: list[str], *, batch_size: int = 32, score_floor: float | None = None,
            progress: ProgressCallback = no_progress) -> list[list[dict]]:
    """Per image, what the model finds as {category, bbox [x, y, w, h], score, segmentation} (a compressed COCO
    run-length encoding of the mask, thresholded at the config's mask_threshold); down to `score_floor` where given
    (else the model's own score threshold)."""
    with rcnn.score_floor(model, score_floor):
        return _segment(model, images, classes, batch_size, progress)


def _segment(model, images: list, classes: list[str], batch_size: int, progress: ProgressCallback) -> list[list[dict]]:
    import torch

    from hibug_core.objects.masks import from_pixels

    threshold = getattr(model, "mask_threshold", MaskModelConfig.mask_threshold)
    device = compute_device()
    model.to(device).eval()
    found = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            for output in model(on_device(image_batch(images[start:start + batch_size]), None, device)[0]):
                output = {k: v.cpu() for k, v in output.items()}
                boxes = output["boxes"].numpy().astype(float)
                encoded = from_pixels(output["masks"][:, 0].numpy() >= threshold)
                found.append([{"category": classes[int(label) - 1],
                               "bbox": [round(b[0], 2), round(b[1], 2), round(b[2] - b[0], 2), round(b[3] - b[1], 2)],
                               "score": round(float(score), 5),
                               "segmentation": rle}
                              for b, label, score, rle in zip(boxes, output["labels"].tolist(),
                                                              output["scores"].tolist(), encoded)])
            progress("finding objects and their masks", min(start + batch_size, len(images)), len(images))
    return found


def training_fingerprint(objects_by_image: list, masks_by_image: list, classes: list[str],
                         config: MaskModelConfig) -> str:
    """A hash of exactly what a model is trained on (boxes, classes, masks, settings): a stored model is reused only
    for the same."""
    digest = hashlib.sha256(json.dumps([classes, asdict(config)]).encode())
    for (boxes, names), masks in zip(objects_by_image, masks_by_image):
        digest.update(np.asarray(boxes, dtype=np.float32).tobytes())
        digest.update("|".join(names).encode())
        digest.update(np.packbits(np.asarray(masks, dtype=bool)).tobytes())
    return digest.hexdigest()


def save_mask_model(path: Path, model, classes: list[str], config: MaskModelConfig, fingerprint: str | None = None,
                    *, half: bool = False) -> None:
    """The weights (in half precision where asked: a shipped asset stays small), with what they were trained on
    where given."""
    save_weights(path, model, half=half, classes=classes, config=asdict(config),
                 **({"training_fingerprint": fingerprint} if fingerprint else {}))


def load_mask_model(path: Path):
    """(the model, its classes, its settings) from a checkpoint save_mask_model wrote."""
    stored = stored_weights(path)
    classes, config = list(stored["classes"]), MaskModelConfig(**stored["config"])
    return with_weights(build_mask_model(classes, config), stored), classes, config


def load_trained_mask_model(path: Path, classes: list[str], config: MaskModelConfig, fingerprint: str):
    """The stored model if it was trained on exactly this data and settings (its fingerprint), else None."""
    stored = stored_weights(path, classes=classes, config=asdict(config), training_fingerprint=fingerprint)
    return None if stored is None else with_weights(build_mask_model(classes, config), stored)
