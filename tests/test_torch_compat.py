"""torchvision, open_clip, transformers' CLIP and diffusers pipelines import on this machine's CPU torch."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hibug_core.torch_compat import nms_reference, roi_align_reference  # noqa: E402


def test_nms_reference_matches_the_greedy_definition():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 9]], dtype=torch.float)
    scores = torch.tensor([0.9, 0.8, 0.7, 0.95])
    assert nms_reference(boxes, scores, 0.5).tolist() == [3, 2]
    assert nms_reference(boxes, scores, 0.95).tolist() == [3, 0, 1, 2]
    assert nms_reference(boxes[:0], scores[:0], 0.5).tolist() == []


def _greedy(boxes, scores, threshold):
    """NMS as defined, one box at a time (the definition the vectorised pass must keep)."""
    kept = []
    for i in sorted(range(len(scores)), key=lambda k: (-float(scores[k]), k)):
        a = boxes[i].tolist()
        if all(_iou(a, boxes[j].tolist()) <= threshold for j in kept):
            kept.append(i)
    return kept


def _iou(a, b):
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.mark.parametrize("seed", range(5))
def test_nms_reference_keeps_the_greedy_choice_on_crowded_random_boxes(seed):
    generator = torch.Generator().manual_seed(seed)
    corners = torch.rand(400, 2, generator=generator) * 100
    boxes = torch.cat([corners, corners + 5 + torch.rand(400, 2, generator=generator) * 30], dim=1)
    scores = torch.rand(400, generator=generator).round(decimals=2)  # ties too, kept in their given order
    for threshold in (0.3, 0.5, 0.7):
        assert nms_reference(boxes, scores, threshold).tolist() == _greedy(boxes, scores, threshold)


def _pooled(feature, region, scale, bins, per_bin):
    """RoIAlign as defined, one sample at a time: the mean of per_bin x per_bin bilinear reads per bin, at the
    sub-bins' centres, each coordinate held inside the map (torchvision's pure-torch fallback)."""
    height, width = feature.shape[-2:]
    x1, y1, x2, y2 = (v * scale for v in region)
    bin_w, bin_h = max(x2 - x1, 1.0) / bins, max(y2 - y1, 1.0) / bins

    def read(y, x):
        y, x = min(max(y, 0.0), height - 1), min(max(x, 0.0), width - 1)
        y0, x0 = min(int(y), height - 2), min(int(x), width - 2)
        ly, lx = y - y0, x - x0
        return ((1 - ly) * (1 - lx) * feature[:, y0, x0] + (1 - ly) * lx * feature[:, y0, x0 + 1]
                + ly * (1 - lx) * feature[:, y0 + 1, x0] + ly * lx * feature[:, y0 + 1, x0 + 1])

    out = torch.zeros(feature.shape[0], bins, bins, dtype=feature.dtype)
    for row in range(bins):
        for column in range(bins):
            for i in range(per_bin):
                for j in range(per_bin):
                    out[:, row, column] += read(y1 + row * bin_h + (i + 0.5) * bin_h / per_bin,
                                                x1 + column * bin_w + (j + 0.5) * bin_w / per_bin)
    return out / per_bin ** 2


@pytest.mark.parametrize("seed", range(3))
def test_roi_align_reference_reads_every_sample_as_defined(seed):
    """Regions of several images, inside the map, across its edges, thinner than a pixel, and none at all."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(3, 4, 9, 11, generator=generator, dtype=torch.float64)
    corners = torch.rand(25, 2, generator=generator, dtype=torch.float64) * 50 - 5
    sizes = torch.rand(25, 2, generator=generator, dtype=torch.float64) * 30
    sizes[:3] = 0.5  # thinner than a pixel at this scale: grown to one, as torchvision does
    images = torch.tensor([0, 2] * 12 + [0], dtype=torch.float64)  # image 1 has no region
    rois = torch.cat([images[:, None], corners, corners + sizes], dim=1)
    pooled = roi_align_reference(features, rois, 0.25, 3, 3, 2, False)
    assert pooled.shape == (25, 4, 3, 3)
    for k, roi in enumerate(rois.tolist()):
        expected = _pooled(features[int(roi[0])], roi[1:], 0.25, 3, 2)
        assert torch.allclose(pooled[k], expected, atol=1e-10), k
    assert roi_align_reference(features, rois[:0], 0.25, 3, 3, 2, False).shape == (0, 4, 3, 3)


@pytest.mark.parametrize("aligned", [False, True])
def test_adaptive_sampling_reads_a_grid_per_region_size_in_bounded_memory(aligned):
    """Sampling ratio 0 (Mask R-CNN's mask targets): ceil(region size / bins) samples per bin and side, as torchvision
    defines it (its own pure-torch fallback sampled every region over the whole map: 7 GB for one image's masks)."""
    import resource

    generator = torch.Generator().manual_seed(0)
    features = torch.randn(2, 3, 20, 24, generator=generator, dtype=torch.float64)
    corners = torch.rand(12, 2, generator=generator, dtype=torch.float64) * 14
    sizes = 1 + torch.rand(12, 2, generator=generator, dtype=torch.float64) * 9
    rois = torch.cat([torch.randint(0, 2, (12, 1), generator=generator).double(), corners, corners + sizes], dim=1)
    pooled = roi_align_reference(features, rois, 1.0, 3, 3, 0, aligned)
    offset = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois.tolist()):
        height, width = roi[4] - roi[2], roi[3] - roi[1]
        if not aligned:
            height, width = max(height, 1.0), max(width, 1.0)
        per_y, per_x = int(np.ceil(height / 3)), int(np.ceil(width / 3))
        if per_y == per_x:  # _pooled samples a square grid per bin; the others are checked by the library below
            corners_k = [roi[1] - offset, roi[2] - offset, roi[3] - offset, roi[4] - offset]
            expected = _pooled(features[int(roi[0])], corners_k, 1.0, 3, per_y)
            assert torch.allclose(pooled[k], expected, atol=1e-10), k
    from torchvision.ops.roi_align import _roi_align

    assert torch.allclose(pooled.float(), _roi_align(features.float(), rois.float(), 1.0, 3, 3, 0, aligned),
                          atol=1e-5)
    masks = (torch.rand(6, 1, 240, 320, generator=generator) > 0.5).float()
    boxes = torch.rand(128, 2, generator=generator) * 200
    regions = torch.cat([torch.randint(0, 6, (128, 1), generator=generator).float(), boxes,
                         boxes + 20 + torch.rand(128, 2, generator=generator) * 100], dim=1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert roi_align_reference(masks, regions, 1.0, 28, 28, 0, aligned).shape == (128, 1, 28, 28)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 300  # MB


def test_roi_align_reference_passes_gradients_back_to_the_features():
    features = torch.randn(2, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[0, 4.0, 4, 20, 24], [1, 0, 0, 31, 31], [1, 10, 2, 14, 30]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda f: roi_align_reference(f, rois, 0.25, 2, 2, 2, False), (features,))


@pytest.mark.slow
def test_model_libraries_import_after_hibug_core():
    script = (
        "import hibug_core, torch\n"
        "import torchvision, open_clip\n"
        "from transformers import CLIPModel, CLIPConfig\n"
        "from diffusers import StableDiffusionPipeline, UNet2DConditionModel\n"
        "b = torch.tensor([[0., 0, 10, 10], [1, 1, 11, 11]]); s = torch.tensor([0.9, 0.8])\n"
        "print(torchvision.ops.nms(b, s, 0.5).tolist() if torchvision.extension._has_ops()"
        " else torch.ops.torchvision.nms(b, s, 0.5).tolist())\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[0]"


def test_importing_hibug_core_does_not_import_torch():
    script = "import sys, hibug_core; print('torch' in sys.modules, 'torchvision' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False False", result.stderr[-2000:]


@pytest.mark.parametrize(("given", "kept"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_workers_wait_passively_unless_the_environment_chose(given, kept):
    """hibug_core sets the policy before torch loads libgomp, so that side-by-side processes share their cores
    (benchmarks/side_by_side.py measures it); a policy the environment sets is kept."""
    import os

    environment = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given:
        environment["OMP_WAIT_POLICY"] = given
    shown = subprocess.run([sys.executable, "-c", "import hibug_core, os, torch; print(os.environ['OMP_WAIT_POLICY'])"],
                           env=environment, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.split() == [kept]
