"""torchvision, open_clip, transformers' CLIP and diffusers pipelines import on this machine's CPU torch."""
from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from hibug_core.torch_compat import nms_reference  # noqa: E402


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
