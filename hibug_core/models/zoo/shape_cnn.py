"""A small CNN that classifies the shape in a downsampled image (the classification demo's model under test)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hibug_core.models.torch_files import load_tensors
from hibug_core.native_memory import reuse_freed_tensor_memory
from hibug_core.progress import ProgressCallback, no_progress


@dataclass(frozen=True)
class TrainConfig:
    resolution: int = 24  # low resolution makes shape harder than colour: the bias then shows
    epochs: int = 60
    batch_size: int = 64
    learning_rate: float = 1e-3
    seed: int = 0


WIDTH = 8  # channels of the first convolution (doubling at each of the next two): the demo's network


def build_network(n_classes: int, width: int = WIDTH):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * width, 4 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(4 * width, n_classes),
    )


def _prepare(images: np.ndarray, resolution: int):
    import torch
    import torch.nn.functional as F

    batch = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    return F.interpolate(batch, size=(resolution, resolution), mode="nearest")


def train_shape_cnn(images: np.ndarray, labels: np.ndarray, n_classes: int, config: TrainConfig = TrainConfig(),
                    progress: ProgressCallback = no_progress, *, width: int = WIDTH):
    """Train on uint8 images (N, H, W, 3) with integer labels; seeded and reproducible on one machine."""
    import torch

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    return _train(build_network(n_classes, width), images, labels, epochs=config.epochs,
                  batch_size=config.batch_size, learning_rate=config.learning_rate, resolution=config.resolution,
                  rng=rng, progress=progress, stage="training the demo model")


def _train(network, images, labels, *, epochs: int, batch_size: int, learning_rate: float, resolution: int, rng,
           progress: ProgressCallback, stage: str):
    """Adam over shuffled batches of (images, labels), the demo model's own training (repair fine-tunes it with the
    loop every adapted network uses, hibug_core.models.finetune)."""
    import torch
    import torch.nn.functional as F

    reuse_freed_tensor_memory()
    optimiser = torch.optim.Adam(network.parameters(), lr=learning_rate)
    inputs, targets = _prepare(images, resolution), torch.from_numpy(labels.astype(np.int64))
    order = np.arange(len(labels))
    network.train()
    for epoch in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            index = torch.from_numpy(order[start : start + batch_size])
            loss = F.cross_entropy(network(inputs[index]), targets[index])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        progress(stage, epoch + 1, epochs)
    network.eval()
    return network


def predict_probabilities(network, images: np.ndarray, resolution: int, batch_size: int = 512) -> np.ndarray:
    import torch

    outputs = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = network(_prepare(images[start : start + batch_size], resolution))
            outputs.append(torch.softmax(logits, dim=1).numpy())
    return np.concatenate(outputs).astype(np.float64)


def save_checkpoint(path: Path, network, classes: list[str], config: TrainConfig, training_fingerprint: str, *,
                    width: int = WIDTH) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": network.state_dict(), "classes": classes, "config": asdict(config),
                "training_fingerprint": training_fingerprint, "width": width}, path)


def load_checkpoint(path: Path, classes: list[str], config: TrainConfig, training_fingerprint: str):
    """The stored network if it was trained on exactly this data and config, else None."""

    if not path.exists():
        return None
    stored = load_tensors(path)
    if not isinstance(stored, dict) or (stored.get("classes") != classes or stored.get("config") != asdict(config)
            or stored.get("training_fingerprint") != training_fingerprint):
        return None
    network = build_network(len(classes), int(stored.get("width", WIDTH)))
    network.load_state_dict(stored["state_dict"])
    network.eval()
    return network


class ShapeCnnTransform:
    """PIL image -> the demo network's input: 64 x 64 RGB (the shape world's pixels), scaled to [0, 1], then
    downsampled to the network's resolution (nearest, as in training). Picklable, so loader workers can run it."""

    def __init__(self, resolution: int = TrainConfig.resolution, size: int = 64):
        self.resolution, self.size = resolution, size

    def __call__(self, image):
        from PIL import Image

        image = image.convert("RGB")
        if image.size != (self.size, self.size):
            image = image.resize((self.size, self.size), Image.BILINEAR)
        return _prepare(np.array(image)[None], self.resolution)[0]


def shape_cnn_parts(state: dict, classes: list[str], extra: dict):
    """(network, transform, recipe) of a demo-network checkpoint: the recipe is how it was trained (epochs, batch
    size, learning rate, width), for retraining it from scratch the same way, and the threads it trains fastest on. A
    fine-tuned copy (ModelAdapter.save) keeps its width in the recipe."""
    trained_as = TrainConfig(**extra["config"]) if "config" in extra else TrainConfig()
    width = int(extra.get("width", (extra.get("recipe") or {}).get("width", WIDTH)))
    network = build_network(len(classes), width)
    network.load_state_dict(state)
    recipe = {"epochs": trained_as.epochs, "batch_size": trained_as.batch_size,
              "learning_rate": trained_as.learning_rate, "threads": 1, "width": width}
    return network, ShapeCnnTransform(trained_as.resolution), recipe
