"""Make torchvision importable on a CPU-only torch whose torchvision wheel was built against CUDA."""
from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

_lock = threading.RLock()  # re-entered: find_spec inside it runs the import hook, which calls back
_state: dict[str, object] = {"done": False, "fallback": False, "library": None}

# Ops that torchvision registers fake kernels for unconditionally at import time; every other
# compiled op is only touched when torchvision's extension reports it loaded.
TORCHVISION = "torchvision"  # the package (and its operator library) this module makes importable
_FALLBACK_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_ROI_ALIGN_SCHEMA = ("roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                     "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor")


def nms_reference(boxes, scores, iou_threshold: float):
    """Greedy non-maximum suppression in plain torch (same contract as torchvision.ops.nms). The overlaps of every
    pair are computed at once; only the greedy pass over them is a loop (of cheap numpy steps: a detector's training
    calls this for every image and pyramid level)."""
    import numpy as np
    import torch

    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    order = scores.argsort(descending=True, stable=True)
    x1, y1, x2, y2 = boxes.float()[order].unbind(1)
    areas = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    width = (torch.minimum(x2[:, None], x2[None]) - torch.maximum(x1[:, None], x1[None])).clamp(min=0)
    height = (torch.minimum(y2[:, None], y2[None]) - torch.maximum(y1[:, None], y1[None])).clamp(min=0)
    inter = width * height
    overlaps = (inter / (areas[:, None] + areas[None] - inter).clamp(min=1e-12) > iou_threshold).cpu().numpy()
    suppressed = np.zeros(len(order), dtype=bool)
    keep = []
    for position in range(len(order)):
        if suppressed[position]:
            continue
        keep.append(position)
        suppressed[position + 1:] |= overlaps[position, position + 1:]
    return order[torch.as_tensor(keep, dtype=torch.long, device=boxes.device)]


def roi_align_reference(input, rois, spatial_scale: float, pooled_height: int, pooled_width: int,
                        sampling_ratio: int, aligned: bool):
    """RoIAlign in plain torch, as torchvision's kernels compute it (rois are (batch index, x1, y1, x2, y2) rows; a
    sample beyond the feature map reads its edge, where the compiled kernel reads zero). Every sample point of every
    region is read by grid_sample, then averaged per bin: about five times faster on CPU than torchvision's own
    pure-torch fallback and differentiable the same way. Adaptive sampling (sampling_ratio 0 or less: a grid per
    region's size, as Mask R-CNN's mask targets are read) reads the regions of one grid size together; torchvision's
    fallback there samples every region over the whole feature map's height and width (7 GB for one image's mask
    targets; a machine's whole memory for a few)."""
    import torch

    channels = input.shape[1]
    regions = rois.shape[0]
    if regions == 0:
        return input.new_zeros((0, channels, pooled_height, pooled_width))
    offset = 0.5 if aligned else 0.0
    x1, y1 = rois[:, 1] * spatial_scale - offset, rois[:, 2] * spatial_scale - offset
    region_width, region_height = rois[:, 3] * spatial_scale - offset - x1, rois[:, 4] * spatial_scale - offset - y1
    if not aligned:
        region_width, region_height = region_width.clamp(min=1.0), region_height.clamp(min=1.0)
    if sampling_ratio > 0:
        return _read_regions(input, rois[:, 0].long(), x1, y1, region_width, region_height, pooled_height,
                             pooled_width, sampling_ratio, sampling_ratio)
    # Adaptive: ceil(region size / bins) samples per bin and side, as the kernels choose them.
    per_bin_y = torch.ceil(region_height / pooled_height).clamp(min=1).long()
    per_bin_x = torch.ceil(region_width / pooled_width).clamp(min=1).long()
    out = input.new_zeros((regions, channels, pooled_height, pooled_width))
    sizes = torch.stack([per_bin_y, per_bin_x], 1)
    for size in torch.unique(sizes, dim=0).tolist():
        chosen = torch.nonzero((sizes == torch.tensor(size, device=sizes.device)).all(1)).flatten()
        out = out.index_copy(0, chosen, _read_regions(
            input, rois[chosen, 0].long(), x1[chosen], y1[chosen], region_width[chosen], region_height[chosen],
            pooled_height, pooled_width, int(size[0]), int(size[1])))
    return out


def _read_regions(input, batch, x1, y1, region_width, region_height, pooled_height: int, pooled_width: int,
                  per_bin_y: int, per_bin_x: int):
    """RoIAlign of regions (their image, corner and size in feature-map pixels) with per_bin_y x per_bin_x samples
    in every bin."""
    import torch
    import torch.nn.functional as F

    images, channels, height, width = input.shape
    regions = batch.shape[0]
    # 1. Every sample point, in feature-map pixels, at the sub-bins' centres.
    xs = _sample_points(x1, region_width / pooled_width, pooled_width, per_bin_x)
    ys = _sample_points(y1, region_height / pooled_height, pooled_height, per_bin_y)
    # 2. As grid_sample's coordinates (pixel centres at -1 and 1; the border repeats), the regions of each image
    # side by side in one grid per image.
    grid = torch.stack(torch.broadcast_tensors((xs / max(width - 1, 1) * 2 - 1)[:, None, :],
                                               (ys / max(height - 1, 1) * 2 - 1)[:, :, None]), -1)
    per_image = torch.bincount(batch, minlength=images)
    order = torch.argsort(batch, stable=True)
    slot = torch.empty_like(batch)
    slot[order] = torch.arange(regions, device=input.device) - (torch.cumsum(per_image, 0) - per_image)[batch[order]]
    most, rows, columns = int(per_image.max()), grid.shape[1], grid.shape[2]
    grids = grid.new_zeros((images, most, rows, columns, 2))
    grids[batch, slot] = grid
    # 3. Read and average each bin.
    sampled = F.grid_sample(input, grids.reshape(images, most * rows, columns, 2), mode="bilinear",
                            padding_mode="border", align_corners=True)
    sampled = sampled.reshape(images, channels, most, rows, columns).transpose(1, 2)[batch, slot]
    return F.avg_pool2d(sampled, (per_bin_y, per_bin_x))


def _sample_points(start, bin_size, bins: int, per_bin: int):
    """(regions, bins * per_bin) sample coordinates, bin by bin, summed in the order torchvision's kernels sum them."""
    import torch

    bin_index = torch.arange(bins, dtype=start.dtype, device=start.device)
    within = torch.arange(per_bin, dtype=start.dtype, device=start.device) + 0.5
    points = (start[:, None, None] + bin_index[None, :, None] * bin_size[:, None, None]
              + within[None, None, :] * (bin_size / per_bin)[:, None, None])
    return points.reshape(len(start), bins * per_bin)


def _compiled_ops_load() -> bool:
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return True  # nothing to fix: torchvision is not installed
    candidates = sorted(Path(spec.origin).parent.glob("_C*.so")) + sorted(Path(spec.origin).parent.glob("_C*.pyd"))
    if not candidates:
        return False
    try:
        torch.ops.load_library(str(candidates[0]))
        return True
    except (OSError, ImportError, RuntimeError) as error:
        logger.info("torchvision compiled ops unavailable (%s); registering pure-torch fallbacks", error)
        return False


def ensure_torchvision_ops() -> bool:
    """Register fallback schemas for torchvision's ops when its compiled library cannot load.

    Returns True when fallbacks were registered. Safe to call many times and from many threads.
    """
    with _lock:
        if _state["done"]:
            return bool(_state["fallback"])
        _state["done"] = True
        if TORCHVISION in sys.modules or _compiled_ops_load():
            return False
        import torch

        library = torch.library.Library(TORCHVISION, "DEF")
        for name, schema in _FALLBACK_SCHEMAS.items():
            library.define(schema)
            library.impl(name, nms_reference, "CompositeExplicitAutograd")
        library.define(_ROI_ALIGN_SCHEMA)
        library.impl("roi_align", roi_align_reference, "CompositeImplicitAutograd")  # autograd goes through it
        _state["library"] = library  # the registration lives as long as this object
        _state["fallback"] = True
        return True


def allow_fallback_ops() -> None:
    """Let torchvision.ops.nms (and batched_nms, which detectors call) and roi_align (which Keypoint R-CNN's poolers
    call) run on the fallback kernels: torchvision checks that its compiled library loaded before every op. Call
    after importing torchvision; nothing changes where the compiled ops loaded. Other compiled ops (ps_roi_align,
    deform_conv2d, ...) still fail, with "no such operator"."""
    if not _state["fallback"]:
        return
    import torchvision.extension
    import torchvision.ops.roi_align

    torchvision.extension._has_ops = lambda: True
    # the module holds its own reference to the check (and torchvision.ops.roi_align names the function, not it)
    sys.modules["torchvision.ops.roi_align"]._has_ops = lambda: True


class _TorchvisionImportHook(importlib.abc.MetaPathFinder):
    """Runs ensure_torchvision_ops() right before the first `import torchvision`, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == TORCHVISION:
            uninstall_import_hook()
            ensure_torchvision_ops()
        return None


_hook = _TorchvisionImportHook()


def install_import_hook() -> None:
    """Fix torchvision lazily: importing hibug_core stays fast, and open_clip/transformers/diffusers work."""
    if TORCHVISION in sys.modules or _hook in sys.meta_path:
        return
    sys.meta_path.insert(0, _hook)


def uninstall_import_hook() -> None:
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)
