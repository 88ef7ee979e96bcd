"""What the zoo's two-stage models (Keypoint R-CNN, Mask R-CNN) share: their settings, their slim R-CNN parts for
small images, and running them down to a lower score floor."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from hibug_core.errors import check_fields
from hibug_core.models.zoo.fitting import zoo_checks
from hibug_core.models.zoo.scene_fcos import pyramid_backbone

LEVELS = ["0", "1", "2"]  # the pyramid levels the heads pool from


@dataclass(frozen=True)
class RcnnConfig:
    image_size: int = 96  # the images' side; the model is told not to resize
    width: int = 16  # channels of the backbone's first stage (doubling at each of the next two)
    pyramid_channels: int = 32  # channels of every feature-pyramid level
    head_channels: int = 64  # channels of the task head's convolutions and of the box head's layer
    epochs: int = 8
    batch_size: int = 16
    learning_rate: float = 2e-3  # peak of a one-cycle schedule (AdamW)
    score_threshold: float = 0.2  # objects kept above this confidence
    seed: int = 0

    def __post_init__(self):
        check_fields(self, self.checks())

    def checks(self) -> dict[str, tuple[bool, str]]:
        """Each field's check and what it must be (a family adds its own fields')."""
        return {**zoo_checks(self), "pyramid_channels": (self.pyramid_channels >= 8, "8 or more"),
                "head_channels": (self.head_channels >= 8, "8 or more")}


def rcnn_parts(classes: list[str], config: RcnnConfig, *, anchor_sizes: tuple[int, int, int], detections: int,
               kept_proposals: int) -> dict:
    """The arguments every zoo R-CNN is built with (before its task head): the pyramid backbone, no resizing, anchors
    of `anchor_sizes` per level, a slim box head, up to `detections` per image from `kept_proposals` proposals."""
    import torch
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.ops import MultiScaleRoIAlign

    import hibug_core.torch_compat as compat

    compat.allow_fallback_ops()
    torch.manual_seed(config.seed)
    channels, head = config.pyramid_channels, config.head_channels
    return dict(
        backbone=pyramid_backbone(config.width, channels), num_classes=None, min_size=config.image_size,
        max_size=config.image_size, image_mean=[0.5] * 3, image_std=[0.25] * 3,
        rpn_anchor_generator=AnchorGenerator(sizes=tuple((s,) for s in anchor_sizes),
                                             aspect_ratios=((0.5, 1.0, 2.0),) * 3),
        box_roi_pool=MultiScaleRoIAlign(LEVELS, 7, 2), box_head=TwoMLPHead(channels * 7 * 7, head),
        box_predictor=FastRCNNPredictor(head, len(classes) + 1), box_score_thresh=config.score_threshold,
        box_detections_per_img=detections,
        # Few objects per small image: far fewer proposals and sampled regions than torchvision's defaults for COCO.
        rpn_pre_nms_top_n_train=300, rpn_post_nms_top_n_train=100, rpn_pre_nms_top_n_test=150,
        rpn_post_nms_top_n_test=kept_proposals, rpn_batch_size_per_image=64, box_batch_size_per_image=64)


@contextmanager
def score_floor(model, floor: float | None):
    """The model keeps objects down to `floor` inside the block (its own threshold where None), and its own after."""
    kept = model.roi_heads.score_thresh
    if floor is not None:
        model.roi_heads.score_thresh = floor
    try:
        yield model
    finally:
        model.roi_heads.score_thresh = kept
