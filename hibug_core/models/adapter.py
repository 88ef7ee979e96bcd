"""The model under test as one object, whatever its task or the library that built it: the contract every model
keeps (predict, features, fine-tune, save), and the classifier's adapter (its network, the library's own
preprocessing, its class names, a batched forward pass giving class probabilities and penultimate features)."""
from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hibug_core.embeddings.base import normalize_rows, pick_device
from hibug_core.errors import ModelLoadError
from hibug_core.progress import ProgressCallback, no_progress


class ModelUnderTest(ABC):
    """What every model under test gives hibug, whatever its task: the model registry builds one from a spec, a
    project records it (hibug_core.store.recorded_models), and repair retrains it. `network` is the model's own; each
    method also takes another network of its architecture (a repaired copy)."""

    spec: str
    classes: list[str]
    network: object
    draws: tuple[str, ...] = ()  # the shapes its outputs draw, as a task's (hibug_core.tasks.base.Task.shapes);
    # none: it judges whole images

    @abstractmethod
    def predict(self, images: list, *, network=None, progress: ProgressCallback = no_progress) -> list:
        """Per image (PIL), the model's outputs: a classifier's class probabilities; a model of objects' findings
        ({category, bbox [x, y, w, h], score}, with keypoints for people)."""

    @abstractmethod
    def features(self, images: list, *, network=None) -> np.ndarray:
        """Per image, the model's own embedding (n, d): the input of a classifier's last layer; the pooled top level
        of a detector's feature pyramid."""

    @abstractmethod
    def fine_tune(self, data, new, *, lam: float | None, tune, progress: ProgressCallback = no_progress, **options):
        """A copy of the network trained further on `data` plus `new` (loss = L(data) + lam * L(new); lam None: simply
        added), with the epochs, rate and seed of `tune` (hibug_core.models.finetune.TuneConfig). What data are is the
        family's: (image paths, label indices) for a classifier, a TrainingSet for a model of objects."""

    @abstractmethod
    def save(self, network, path: Path, **extra) -> Path:
        """`network` as a checkpoint its family loads again (with `extra` entries); returns the path."""


class ModelAdapter(ModelUnderTest):
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

    def _outputs(self, images: list, network=None) -> dict[str, np.ndarray]:
        """encode_images of PIL images through the adapter's preprocessing, with `network` in place of its own."""
        import torch

        batch = torch.stack([self.transform(image.convert("RGB")) for image in images])
        if network is None or network is self.network:
            return self.encode_images(batch)
        captured: list = []
        hook = classifier_layer(network, self.spec).register_forward_hook(
            lambda module, inputs, output: captured.append(inputs[0]))
        try:
            network.eval()
            with torch.inference_mode():
                output = network(batch.to(self.device))
        finally:
            hook.remove()
        logits = getattr(output, "logits", output)
        features = captured[-1].flatten(1).float().cpu().numpy()
        return {"features": features.astype(np.float32),
                "probabilities": torch.softmax(logits.float(), dim=1).cpu().numpy().astype(np.float32)}

    def predict(self, images: list, *, network=None, progress: ProgressCallback = no_progress) -> list:
        return list(self._outputs(images, network)["probabilities"]) if images else []

    def features(self, images: list, *, network=None) -> np.ndarray:
        return self._outputs(images, network)["features"]

    def fine_tune(self, data, new, *, lam: float | None, tune, progress: ProgressCallback = no_progress, **options):
        """data, new: (image paths, label indices); options: fine_tune's (folder, val_paths, val_labels, images)."""
        from hibug_core.models.finetune import fine_tune

        paths, labels = data
        new_paths, new_labels = new
        return fine_tune(self, list(paths), np.asarray(labels), list(new_paths), np.asarray(new_labels),
                         1.0 if lam is None else lam, config=tune, progress=progress, **options).network

    def save(self, network, path: Path, **extra) -> Path:
        """{"state_dict", "classes", "spec", "recipe", ...extra}: the registry loads it with the adapter's spec."""
        import torch

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu() for k, v in network.state_dict().items()}
        torch.save({"state_dict": state, "classes": self.classes, "spec": self.spec, "recipe": self.recipe, **extra},
                   path)
        return path


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
