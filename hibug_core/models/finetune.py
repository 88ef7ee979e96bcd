"""Fine-tuning any adapted network for repair: loss = L(original) + lambda * L(new), every step one batch of each
(Chegini and Feizi's weighting); early stopping on a validation split; seeded; a checkpoint after every epoch, so
a killed run resumes; the best network saved as a checkpoint file the user can take away."""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hibug_core.errors import HibugError, check_fields
from hibug_core.models.torch_files import load_tensors
from hibug_core.native_memory import reuse_freed_tensor_memory
from hibug_core.progress import ProgressCallback, no_progress

if TYPE_CHECKING:  # the adapter calls this module (its fine_tune): only a type here
    from hibug_core.models.adapter import ModelAdapter

logger = logging.getLogger(__name__)


FINE_TUNE_RATE = 1e-4  # an already trained network moves a little (a network's own recipe may say otherwise)


CLASSIFIER_EPOCHS = 15


@dataclass(frozen=True)
class TuneConfig:
    epochs: int | None = None  # None: the retrained model's own default (CLASSIFIER_EPOCHS for a classifier)
    batch_size: int = 64
    learning_rate: float | None = None  # None: the network's recipe (how it was trained), else FINE_TUNE_RATE
    weight_decay: float = 0.0
    patience: int = 3  # epochs without a better validation accuracy before stopping (0: never stop early)
    from_scratch: bool = False  # re-initialise the weights first (the architecture is kept)
    seed: int = 0
    workers: int = 0  # image decoding processes

    def __post_init__(self):
        check_fields(self, {"epochs": (self.epochs is None or self.epochs >= 1, "None or 1 or more"),
                            "batch_size": (self.batch_size >= 1, "1 or more"),
                            "learning_rate": (self.learning_rate is None or self.learning_rate > 0,
                                              "above 0, or None (the network's own)"),
                            "patience": (self.patience >= 0, "0 or more")})


@dataclass
class Tuned:
    network: object  # the best network (by validation accuracy), in eval mode
    epochs_run: int
    best_epoch: int
    val_accuracy: list[float]  # per epoch (empty without a validation split)
    checkpoint: Path  # the best network as {"state_dict", "classes", "spec"}


class TuneError(HibugError):
    """Fine-tuning that cannot run (no training images, unknown labels)."""


class DecodedImages:
    """Images as a network's preprocessing makes them, decoded once and kept in memory up to `limit_mb` (training
    has no random augmentation, so every epoch would decode the same tensors again). One per run of repairs."""

    def __init__(self, limit_mb: int = 2048):
        self.limit, self.used, self._tensors = limit_mb << 20, 0, {}

    def __call__(self, adapter: ModelAdapter, path: str):
        from hibug_core.embeddings.compute import decode

        key = (adapter.spec, path)
        tensor = self._tensors.get(key)
        if tensor is None:
            tensor = decode(path, adapter.transform, adapter.input_size)
            if tensor is None:
                raise TuneError(f"cannot read {path}; fix or remove it and run again")
            size = tensor.element_size() * tensor.nelement()
            if self.used + size <= self.limit:
                self._tensors[key], self.used = tensor, self.used + size
        return tensor


@contextlib.contextmanager
def recipe_threads(adapter: ModelAdapter):
    """Within the block, torch uses the threads the network's recipe asks for (a network as small as the demo's
    trains several times faster on one thread than on two, far more so on a busy machine)."""
    import torch

    reuse_freed_tensor_memory()
    threads, before = adapter.recipe.get("threads"), torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _loader(adapter: ModelAdapter, paths: list[str], labels: np.ndarray, batch_size: int, *, shuffle: bool,
            seed: int, workers: int, images: DecodedImages):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Images(Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, index):
            return images(adapter, paths[index]), int(labels[index])

    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(Images(), batch_size=batch_size, shuffle=shuffle, generator=generator, num_workers=workers,
                        drop_last=False)
    loader.reseed = lambda epoch: generator.manual_seed(seed * 100_003 + epoch)  # each epoch's order, resumable
    return loader


def _fingerprint(adapter: ModelAdapter, paths, labels, new_paths, new_labels, lam: float, config: TuneConfig) -> str:
    digest = hashlib.blake2b(digest_size=8)
    digest.update(json.dumps([adapter.key, list(paths), [int(v) for v in labels], list(new_paths),
                              [int(v) for v in new_labels], lam, asdict(config)]).encode())
    return digest.hexdigest()


def fine_tune(adapter: ModelAdapter, paths: list[str], labels: np.ndarray, new_paths: list[str],
              new_labels: np.ndarray, lam: float, *, folder: Path, val_paths: list[str] | None = None,
              val_labels: np.ndarray | None = None, config: TuneConfig = TuneConfig(),
              images: DecodedImages | None = None, progress: ProgressCallback = no_progress) -> Tuned:
    """A copy of the adapter's network trained further (the adapter's own network is left as it was). Under `folder`,
    a folder per run (its inputs' fingerprint) holds the per-epoch checkpoint last.pt (resumed when the same run is
    asked again) and the best network's best.pt."""
    if config.epochs is None:
        config = replace(config, epochs=CLASSIFIER_EPOCHS)
    with recipe_threads(adapter):
        return _fine_tune(adapter, paths, labels, new_paths, new_labels, lam, folder=folder, val_paths=val_paths,
                          val_labels=val_labels, config=config, images=images, progress=progress)


def _fine_tune(adapter: ModelAdapter, paths, labels, new_paths, new_labels, lam: float, *, folder, val_paths,
               val_labels, config: TuneConfig, images, progress) -> Tuned:
    import torch
    import torch.nn.functional as F

    # 1. Check inputs.
    if not len(paths):
        raise TuneError("no training images to fine-tune on")
    for name, values in (("training", labels), ("new", new_labels), ("validation", val_labels)):
        if values is not None and len(values) and (np.min(values) < 0 or np.max(values) >= len(adapter.classes)):
            raise TuneError(f"{name} labels outside the model's {len(adapter.classes)} classes")
    fingerprint = _fingerprint(adapter, paths, labels, new_paths, new_labels, lam, config)
    folder = Path(folder) / fingerprint  # one folder per run: asking for the same run again resumes it
    folder.mkdir(parents=True, exist_ok=True)
    last = folder / "last.pt"
    # 2. Set up: a copy of the network (re-initialised from scratch if asked), seeded data order and optimiser.
    images = images if images is not None else DecodedImages()
    rate = config.learning_rate or adapter.recipe.get("learning_rate", FINE_TUNE_RATE)
    torch.manual_seed(config.seed)
    network = copy.deepcopy(adapter.network).to(adapter.device)
    if config.from_scratch:
        for module in network.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
    optimiser = torch.optim.AdamW(network.parameters(), lr=rate, weight_decay=config.weight_decay)
    loader = dict(workers=config.workers, images=images)
    train = _loader(adapter, paths, labels, config.batch_size, shuffle=True, seed=config.seed, **loader)
    extra = lam > 0 and len(new_paths) > 0
    new = _loader(adapter, new_paths, new_labels, config.batch_size, shuffle=True, seed=config.seed + 1,
                  **loader) if extra else None
    val = _loader(adapter, val_paths, val_labels, 256, shuffle=False, seed=0, **loader) if val_paths else None
    start, scores, best, best_epoch, best_state = 0, [], -1.0, 0, copy.deepcopy(network.state_dict())
    if last.exists():  # 3. Resume where a killed run stopped.
        saved = load_tensors(last, map_location=adapter.device, what="a fine-tune's resume point")
        network.load_state_dict(saved["state_dict"])
        optimiser.load_state_dict(saved["optimiser"])
        start, scores, best, best_epoch = saved["epoch"], saved["scores"], saved["best"], saved["best_epoch"]
        best_state = saved["best_state"]
        torch.set_rng_state(saved["rng"])
        logger.info("resuming fine-tuning after epoch %d", start)
    # 4. Train epoch by epoch: one batch of the original data and (with lambda) one of the new data per step.
    epochs_run = start
    for epoch in range(start, config.epochs):
        network.train()
        train.reseed(epoch)
        if extra:
            new.reseed(epoch)
            new_batches = iter(new)
        for images, targets in train:
            loss = F.cross_entropy(_logits(network, images.to(adapter.device)), targets.to(adapter.device))
            if extra:
                batch = next(new_batches, None)
                if batch is None:  # the new data are fewer: start them again
                    new_batches = iter(new)
                    batch = next(new_batches)
                loss = loss + lam * F.cross_entropy(_logits(network, batch[0].to(adapter.device)),
                                                    batch[1].to(adapter.device))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        epochs_run = epoch + 1
        # 5. Validate; keep the best network; checkpoint the epoch.
        if val is not None:
            scores.append(_accuracy(network, val, adapter.device))
        if val is None or scores[-1] > best:
            best, best_epoch = (scores[-1] if val is not None else best), epochs_run
            best_state = copy.deepcopy(network.state_dict())
        torch.save({"state_dict": network.state_dict(), "optimiser": optimiser.state_dict(), "epoch": epochs_run,
                    "scores": scores, "best": best, "best_epoch": best_epoch, "best_state": best_state,
                    "rng": torch.get_rng_state()}, last)
        progress("fine-tuning", epochs_run, config.epochs)
        if val is not None and config.patience and epochs_run - best_epoch >= config.patience:
            logger.info("early stop after epoch %d (best: epoch %d, %.3f)", epochs_run, best_epoch, best)
            break
    network.load_state_dict(best_state)
    network.eval()
    checkpoint = adapter.save(network, folder / "best.pt", best_epoch=best_epoch, val_accuracy=scores)
    return Tuned(network, epochs_run, best_epoch, scores, checkpoint)


def _logits(network, images):
    output = network(images)
    return getattr(output, "logits", output)


def _accuracy(network, loader, device: str) -> float:
    import torch

    network.eval()
    right = total = 0
    with torch.inference_mode():
        for images, targets in loader:
            predicted = _logits(network, images.to(device)).argmax(dim=1).cpu()
            right += int((predicted == targets).sum())
            total += len(targets)
    return right / max(total, 1)


def predict_paths(adapter: ModelAdapter, network, paths: list[str], images: DecodedImages,
                  batch_size: int = 256) -> np.ndarray:
    """Class probabilities of `network` (the adapter's architecture, e.g. a repaired copy) for image files."""
    import torch

    network.eval()
    outputs = []
    with torch.inference_mode(), recipe_threads(adapter):
        for start in range(0, len(paths), batch_size):
            batch = torch.stack([images(adapter, p) for p in paths[start : start + batch_size]])
            outputs.append(torch.softmax(_logits(network, batch.to(adapter.device)).float(), dim=1).cpu().numpy())
    return np.concatenate(outputs) if outputs else np.zeros((0, len(adapter.classes)), np.float32)
