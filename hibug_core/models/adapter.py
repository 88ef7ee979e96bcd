"""The model under test as one object, whatever library built it: its network, the library's own preprocessing, its
class names, and a batched forward pass that gives class probabilities and penultimate features."""
from __future__ import annotations

import hashlib
import re
from typing import Callable

import numpy as np

from hibug_core.embeddings.base import normalize_rows, pick_device
from hibug_core.errors import ModelLoadError


class ModelAdapter:
    """A classifier the project can run. Quacks like an encoder for image batches (transform, input_size,
    encode_images), so the batched, resumable image pipeline of the embeddings serves it unchanged.

    encode_images returns "probabilities" (softmax over `classes`), "features" (the input of the classifier layer,
    the model's own embedding) and "embedding" (those features L2-normalised, for maps and nearest neighbours)."""

    logit_scale = 1.0

    def __init__(self, spec: str, network, transform: Callable, classes: list[str], *, input_size: int = 224,
                 device: str | None = None, head=None, recipe: dict | None = None):
        import torch

        if not classes:
            raise ModelLoadError(f"{spec}: the model has no class names; give them with the checkpoint (a 'classes' "
                                 "entry, or a classes.txt file beside it, one name per line)")
        self.spec, self.transform, self.classes, self.input_size = spec, transform, list(classes), input_size
        self.recipe = dict(recipe or {})  # how the network was trained (epochs, batch_size, learning_rate), if known
        self.device = pick_device(device)
        self.network = network.eval().to(self.device)
        self.head = head if head is not None else classifier_layer(network, spec)
        outputs = getattr(self.head, "out_features", None)
        if outputs is not None and outputs != len(self.classes):
            raise ModelLoadError(f"{spec}: the classifier has {outputs} outputs but {len(self.classes)} class names "
                                 "were given; they must match one to one")
        self.key = _model_key(spec, network)
        self._features: list = []
        self.head.register_forward_hook(lambda module, inputs, output: self._features.append(inputs[0]))
        self.half = self.device.startswith("cuda") and torch.cuda.is_available()

    def encode_images(self, batch) -> dict[str, np.ndarray]:
        import torch

        self._features.clear()
        with torch.inference_mode(), torch.autocast(self.device.split(":")[0], enabled=self.half):
            output = self.network(batch.to(self.device))
        logits = getattr(output, "logits", output)  # transformers wraps them in an output object
        features = self._features[-1].flatten(1).float().cpu().numpy()
        probabilities = torch.softmax(logits.float(), dim=1).cpu().numpy()
        return {"embedding": normalize_rows(features), "features": features.astype(np.float32),
                "probabilities": probabilities.astype(np.float32)}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        raise ModelLoadError(f"{self.spec} is a classifier, not a vision-language model: it cannot encode text")


def classifier_layer(network, spec: str = "model"):
    """The layer whose input are the penultimate features: timm's get_classifier(), a `classifier`, `fc` or
    `head(s)` attribute, else the last linear layer registered."""
    from torch import nn

    candidates = []
    if hasattr(network, "get_classifier"):
        candidates.append(network.get_classifier())
    for name in ("classifier", "fc", "head", "heads"):
        candidates.append(getattr(network, name, None))
    for candidate in candidates:
        if isinstance(candidate, nn.Sequential):
            candidate = next((m for m in reversed(list(candidate.modules())) if isinstance(m, nn.Linear)), None)
        if isinstance(candidate, nn.Linear):
            return candidate
    linear = [m for m in network.modules() if isinstance(m, nn.Linear)]
    if not linear:
        raise ModelLoadError(f"{spec}: no linear classifier layer found; hibug reads the penultimate features as its "
                             "input (wrap the network so its last layer is an nn.Linear)")
    return linear[-1]


def _model_key(spec: str, network) -> str:
    """A file-safe cache key that changes with the weights: a repaired checkpoint at the same path is not stale."""
    import torch

    digest = hashlib.blake2b(digest_size=6)
    for name, tensor in sorted(network.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().flatten().view(torch.uint8).numpy().tobytes())
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec)[:40].strip("-")
    return f"{readable}-{digest.hexdigest()}"
