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
