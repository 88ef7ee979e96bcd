"""The demo's model under test: a small CNN that classifies the shape in a downsampled easy-vqa image."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hibug_core.progress import ProgressCallback, no_progress


@dataclass(frozen=True)
class TrainConfig:
    resolution: int = 24  # low resolution makes shape harder than colour: the bias then shows
    epochs: int = 60
    batch_size: int = 64
    learning_rate: float = 1e-3
    seed: int = 0


def build_network(n_classes: int):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, n_classes),
    )


def _prepare(images: np.ndarray, resolution: int):
    import torch
    import torch.nn.functional as F

    batch = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0
    return F.interpolate(batch, size=(resolution, resolution), mode="nearest")


def train_shape_cnn(images: np.ndarray, labels: np.ndarray, n_classes: int, config: TrainConfig = TrainConfig(),
                    progress: ProgressCallback = no_progress):
    """Train on uint8 images (N, H, W, 3) with integer labels; seeded and reproducible on one machine."""
    import torch

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    return _train(build_network(n_classes), images, labels, None, None, 0.0, epochs=config.epochs,
                  batch_size=config.batch_size, learning_rate=config.learning_rate, resolution=config.resolution,
                  rng=rng, progress=progress, stage="training the demo model")


@dataclass(frozen=True)
class FineTuneConfig:
    epochs: int = 15
    batch_size: int = 64
    learning_rate: float = 1e-3
    seed: int = 0


def fine_tune_shape_cnn(network, images: np.ndarray, labels: np.ndarray, new_images: np.ndarray,
                        new_labels: np.ndarray, lam: float, config: FineTuneConfig = FineTuneConfig(),
                        resolution: int = TrainConfig.resolution, progress: ProgressCallback = no_progress):
    """A copy of `network` trained further on loss = L(original) + lam * L(new): every step takes one batch of each
    (Chegini and Feizi's weighting); the original network is left as it was."""
    import copy

    import torch

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a network this small trains about twice as fast on one thread as on two
    try:
        return _train(copy.deepcopy(network), images, labels, new_images, new_labels, lam, epochs=config.epochs,
                      batch_size=config.batch_size, learning_rate=config.learning_rate, resolution=resolution,
                      rng=rng, progress=progress, stage="fine-tuning")
    finally:
        torch.set_num_threads(threads)


def _train(network, images, labels, new_images, new_labels, lam: float, *, epochs: int, batch_size: int,
           learning_rate: float, resolution: int, rng, progress: ProgressCallback, stage: str):
    """The one training loop: Adam over shuffled batches of (images, labels); with new data and lam > 0, every step
    adds lam times the loss of a batch drawn from it."""
    import torch
    import torch.nn.functional as F

    optimiser = torch.optim.Adam(network.parameters(), lr=learning_rate)
    inputs, targets = _prepare(images, resolution), torch.from_numpy(labels.astype(np.int64))
    extra = new_labels is not None and len(new_labels) > 0 and lam > 0
    if extra:
        new_inputs, new_targets = _prepare(new_images, resolution), torch.from_numpy(new_labels.astype(np.int64))
    order = np.arange(len(labels))
    network.train()
    for epoch in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            index = torch.from_numpy(order[start : start + batch_size])
            loss = F.cross_entropy(network(inputs[index]), targets[index])
            if extra:
                pick = torch.from_numpy(rng.choice(len(new_labels), min(batch_size, len(new_labels)), replace=False))
                loss = loss + lam * F.cross_entropy(network(new_inputs[pick]), new_targets[pick])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        progress(stage, epoch + 1, epochs)
    network.eval()
    return network


def network_features(network, images: np.ndarray, resolution: int = TrainConfig.resolution,
                     batch_size: int = 512) -> np.ndarray:
    """The network's penultimate features (input to its last linear layer): frozen features for a linear head."""
    import torch

    body = network[:-1]
    outputs = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            outputs.append(body(_prepare(images[start : start + batch_size], resolution)).numpy())
    return np.concatenate(outputs).astype(np.float32)


def read_images(paths, size: int = 64) -> np.ndarray:
    """Images as uint8 RGB arrays (N, size, size, 3), the network's input format."""
    from PIL import Image

    def one(path):
        with Image.open(path) as image:
            image = image.convert("RGB")
            return np.asarray(image if image.size == (size, size) else image.resize((size, size), Image.BILINEAR))

    return np.stack([one(p) for p in paths]) if len(paths) else np.zeros((0, size, size, 3), np.uint8)


def predict_probabilities(network, images: np.ndarray, resolution: int, batch_size: int = 512) -> np.ndarray:
    import torch

    outputs = []
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = network(_prepare(images[start : start + batch_size], resolution))
            outputs.append(torch.softmax(logits, dim=1).numpy())
    return np.concatenate(outputs).astype(np.float64)


def save_checkpoint(path: Path, network, classes: list[str], config: TrainConfig, training_fingerprint: str) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": network.state_dict(), "classes": classes, "config": asdict(config),
                "training_fingerprint": training_fingerprint}, path)


def load_network(path: Path):
    """(network, classes, train config) from a checkpoint, whatever data it was trained on."""
    import torch

    stored = torch.load(path, map_location="cpu", weights_only=True)
    network = build_network(len(stored["classes"]))
    network.load_state_dict(stored["state_dict"])
    network.eval()
    return network, list(stored["classes"]), TrainConfig(**stored["config"])


def load_checkpoint(path: Path, classes: list[str], config: TrainConfig, training_fingerprint: str):
    """The stored network if it was trained on exactly this data and config, else None."""
    import torch

    if not path.exists():
        return None
    stored = torch.load(path, map_location="cpu", weights_only=True)
    if (stored.get("classes") != classes or stored.get("config") != asdict(config)
            or stored.get("training_fingerprint") != training_fingerprint):
        return None
    network = build_network(len(classes))
    network.load_state_dict(stored["state_dict"])
    network.eval()
    return network
