"""Training loop of the zoo's torchvision detectors (boxes or keypoints): seeded shuffled batches under a one-cycle
AdamW schedule; fine-tuning goes on from given weights, with new data weighted by lambda in every step."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hibug_core.models.torch_files import load_tensors
from hibug_core.progress import ProgressCallback, no_progress


def compute_device():
    """Where the zoo's networks train and run: the GPU when torch sees one, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def on_device(tensors, targets: list[dict] | None, device):
    """A batch's images (a list of tensors) and targets moved to `device`."""
    moved = [t.to(device) for t in tensors]
    return moved, None if targets is None else [{k: v.to(device) for k, v in t.items()} for t in targets]


def image_batch(images: list):
    """PIL images of one size as a float tensor (n, 3, h, w) in [0, 1]."""
    import torch

    return torch.from_numpy(np.stack([np.asarray(i.convert("RGB")) for i in images])).permute(0, 3, 1, 2).float() / 255


def fit_detector(model, inputs, targets: list[dict], config, progress: ProgressCallback = no_progress, *,
                 new_inputs=None, new_targets: list[dict] | None = None, lam: float = 1.0,
                 stage: str = "training the detector"):
    """Train `model` (a torchvision detector in train mode returning its losses) on `inputs` and their `targets`;
    `config` gives epochs, batch_size, learning_rate and seed. With `new_targets`, every step also takes a batch of
    them, its loss weighted by `lam` (loss = L(original) + lam * L(new)). Progress after each step (a job cancels by
    raising from it). Trains on compute_device(); returns the model there, in eval mode."""
    import torch

    device = compute_device()
    model.to(device)
    steps_per_epoch = max(1, len(targets) // config.batch_size)
    optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, config.learning_rate,
                                                   total_steps=config.epochs * steps_per_epoch)
    rng = np.random.default_rng(config.seed)
    new_order = np.random.default_rng(config.seed + 1).permutation(len(new_targets)) if new_targets else None
    model.train()
    total = config.epochs * steps_per_epoch
    for epoch in range(config.epochs):
        order = rng.permutation(len(targets))
        for step in range(steps_per_epoch):
            batch = order[step * config.batch_size:(step + 1) * config.batch_size]
            losses = model(*on_device(inputs[batch], [targets[i] for i in batch], device))
            loss = sum(losses.values())
            if new_targets:
                taken = np.roll(new_order, -(epoch * steps_per_epoch + step) * config.batch_size)[:config.batch_size]
                extra = model(*on_device(new_inputs[taken], [new_targets[i] for i in taken], device))
                loss = loss + lam * sum(extra.values())
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            progress(stage, epoch * steps_per_epoch + step + 1, total)
    model.eval()
    return model


def zoo_checks(config) -> dict[str, tuple[bool, str]]:
    """The checks of the settings every zoo family has (its images' side, first-stage width, schedule and score
    threshold), for its config's check_fields."""
    return {"image_size": (config.image_size >= 32, "32 or more"),
            "width": (config.width >= 4, "4 or more"),
            "epochs": (config.epochs >= 1, "1 or more"),
            "batch_size": (config.batch_size >= 1, "1 or more"),
            "score_threshold": (0 <= config.score_threshold < 1, "in [0, 1)")}


def save_weights(path, model, *, half: bool = False, **about) -> None:
    """The network's weights (in half precision where asked: a shipped asset stays small) with what describes them
    (its classes, settings, what it was trained on)."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.half() if half and v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, **about}, path)


def stored_weights(path, **expected) -> dict | None:
    """What save_weights wrote at `path`, if it is there and says exactly `expected` (e.g. its classes, settings and
    training fingerprint: a stored model is reused only for the same); else None. No `expected`: whatever it says."""

    if not Path(path).exists():
        return None
    stored = load_tensors(path)
    matches = isinstance(stored, dict) and all(stored.get(key) == value for key, value in expected.items())
    return stored if matches else None


def with_weights(model, stored: dict):
    """`model` (built for the stored settings) holding the stored weights in full precision, ready to run."""
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in stored["state_dict"].items()})
    model.eval()
    return model
