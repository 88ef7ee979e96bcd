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
_FALLBACK_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


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
        if "torchvision" in sys.modules or _compiled_ops_load():
            return False
        import torch

        library = torch.library.Library("torchvision", "DEF")
        for name, schema in _FALLBACK_SCHEMAS.items():
            library.define(schema)
            library.impl(name, nms_reference, "CompositeExplicitAutograd")
        _state["library"] = library  # the registration lives as long as this object
        _state["fallback"] = True
        return True


def allow_fallback_nms() -> None:
    """Let torchvision.ops.nms (and batched_nms, which detectors call) run on the fallback kernel: torchvision checks
    that its compiled library loaded before every op. Call after importing torchvision; nothing changes where the
    compiled ops loaded. Other compiled ops (roi_align, ...) still fail, with "no such operator"."""
    if not _state["fallback"]:
        return
    import torchvision.extension

    torchvision.extension._has_ops = lambda: True


class _TorchvisionImportHook(importlib.abc.MetaPathFinder):
    """Runs ensure_torchvision_ops() right before the first `import torchvision`, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision":
            uninstall_import_hook()
            ensure_torchvision_ops()
        return None


_hook = _TorchvisionImportHook()


def install_import_hook() -> None:
    """Fix torchvision lazily: importing hibug_core stays fast, and open_clip/transformers/diffusers work."""
    if "torchvision" in sys.modules or _hook in sys.meta_path:
        return
    sys.meta_path.insert(0, _hook)


def uninstall_import_hook() -> None:
    if _hook in sys.meta_path:
        sys.meta_path.remove(_hook)
