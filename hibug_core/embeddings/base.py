"""What every encoder offers: a picklable image transform, batched image and text encoding into one space."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np
from PIL import Image


def pick_device(device: str | None = None) -> str:
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, 1e-12)).astype(np.float32)


class Encoder(ABC):
    """Maps images and texts into one space where cosine similarity says how well a text describes an image."""

    spec: str  # the registry name this encoder was loaded from
    key: str  # stable, file-safe name under which its embeddings are cached
    logit_scale: float  # temperature of the softmax over tag prompts
    transform: Callable[[Image.Image], object]  # PIL image -> tensor, picklable (runs in loader workers)
    input_size: int

    @abstractmethod
    def encode_images(self, batch) -> dict[str, np.ndarray]:
        """A batch tensor from `transform` -> {"embedding": L2-normalised (n, d), optionally "features": (n, f)}."""

    @abstractmethod
    def encode_texts(self, texts: list[str]) -> np.ndarray:
        """Texts -> L2-normalised (n, d) in the image embedding space."""
