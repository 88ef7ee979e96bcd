"""Benchmark: `hibug predict` (decode, preprocess, batch, run, store, record) against the bare forward pass of the same
model on the same images already decoded into tensors, same batch size and threads, in the same run; and the repair
fine-tune's time per epoch (lambda-weighted batches, validation, checkpoint) against bare training steps on the same
decoded tensors.

The model is a real-size timm or torchvision architecture with random weights saved as a checkpoint (speed does not
depend on the weights; nothing is downloaded), run over distinct demo images. Target: at least 90% of the forward
rate on CPU. On a GPU (fp16 there) the same script reports the GPU figures.
Usage: python benchmarks/predict.py [--model timm:resnet18] [--images 512] [--rounds 5] [--batch-size 64] [--train 256]
       [--epochs 3] [--dir /tmp/hibug-bench-predict]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tagging import forward_rate

from hibug_core.demo import ensure_demo
from hibug_core.embeddings.compute import EmbedConfig, configure_threads
from hibug_core.models.predict import predict_project
from hibug_core.models.registry import load_model


def random_checkpoint(kind: str, architecture: str, classes: list[str], path: Path) -> str:
    import torch

    torch.manual_seed(0)
    if kind == "timm":
        import timm

        network = timm.create_model(architecture, pretrained=False, num_classes=len(classes))
    else:
        from torchvision import models

        network = models.get_model(architecture, weights=None, num_classes=len(classes))
    torch.save({"state_dict": network.state_dict(), "classes": classes}, path)
    return f"{kind}:{architecture}:{path}"


def bare_training_epoch(adapter, train, new, val, batch_size: int) -> float:
    """Seconds for one epoch of bare steps (a batch of the original and one of the new tensors per step, AdamW),
    then one forward pass over the validation tensors, as fine-tuning validates after every epoch."""
    import copy

    import torch
    import torch.nn.functional as F

    network = copy.deepcopy(adapter.network).train()
    optimiser = torch.optim.AdamW(network.parameters(), lr=1e-4)
    (x, y), (x_new, y_new) = train, new
    start = time.perf_counter()
    for step, first in enumerate(range(0, len(x), batch_size)):
        picked = slice((step * batch_size) % len(x_new), (step * batch_size) % len(x_new) + batch_size)
        with torch.autocast(adapter.device.split(":")[0], enabled=adapter.half):
            output = network(x[first:first + batch_size].to(adapter.device))
            loss = F.cross_entropy(getattr(output, "logits", output).float(), y[first:first + batch_size].to(
                adapter.device))
            output = network(x_new[picked].to(adapter.device))
            loss = loss + F.cross_entropy(getattr(output, "logits", output).float(), y_new[picked].to(adapter.device))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    network.eval()
    with torch.inference_mode(), torch.autocast(adapter.device.split(":")[0], enabled=adapter.half):
        for first in range(0, len(val), 256):
            network(val[first:first + 256].to(adapter.device))
    if adapter.device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def time_fine_tune(adapter, samples, n_train: int, epochs: int, batch_size: int, folder: Path) -> None:
    import torch

    from hibug_core.embeddings.compute import decode
    from hibug_core.models.finetune import TuneConfig, fine_tune

    index = {c: i for i, c in enumerate(adapter.classes)}
    train = samples[samples["split"] == "train"].head(n_train)
    new = samples[samples["split"] == "pool"].head(max(n_train // 8, 1))
    val = samples[samples["split"] == "val"].head(n_train // 2)
    labels, new_labels = train["label"].map(index).to_numpy(), new["label"].map(index).to_numpy()
    stamps = [time.perf_counter()]
    tuned = fine_tune(adapter, list(train["image_path"]), labels, list(new["image_path"]), new_labels, 1.0,
                      folder=folder / "tuning-bench", val_paths=list(val["image_path"]),
                      val_labels=val["label"].map(index).to_numpy(),
                      config=TuneConfig(epochs=epochs, batch_size=batch_size, patience=0),
                      progress=lambda stage, done, total: stamps.append(time.perf_counter()))
    shutil.rmtree(tuned.checkpoint.parent)
    epoch_times = [b - a for a, b in zip(stamps, stamps[1:])]
    tensors = [torch.stack([decode(p, adapter.transform, adapter.input_size) for p in rows["image_path"]])
               for rows in (train, new, val)]
    bare = bare_training_epoch(adapter, (tensors[0], torch.tensor(labels)), (tensors[1], torch.tensor(new_labels)),
                               tensors[2], batch_size)
    later = sum(epoch_times[1:]) / max(len(epoch_times) - 1, 1)
    print(f"fine-tune     : {len(train)} training + {len(new)} new images (lambda 1), validation on {len(val)}, "
          f"batch {batch_size}")
    print(f"  first epoch : {epoch_times[0]:7.2f} s (decodes the images once)")
    print(f"  later epochs: {later:7.2f} s each = {later / bare:.2f}x the bare training steps and validation pass "
          f"on decoded tensors ({bare:.2f} s; the rest is loading batches and the per-epoch checkpoint)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="timm:resnet18", help="kind:architecture (timm or torchvision)")
    parser.add_argument("--images", type=int, default=512, help="images per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train", type=int, default=256, help="training images for the fine-tune timing")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--dir", default="/tmp/hibug-bench-predict")
    args = parser.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    demo = ensure_demo(folder / "demo")
    work = folder / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder / "demo", work)
    demo.close()
    from hibug_core.store.project import Project

    project = Project.open(work)
    kind, architecture = args.model.split(":", 1)
    classes = sorted(project.samples()["label"].dropna().unique())
    spec = random_checkpoint(kind, architecture, classes, folder / f"{architecture}.pt")
    adapter = load_model(spec)
    config = EmbedConfig(batch_size=args.batch_size)
    configure_threads(config)
    samples = project.samples().drop_duplicates("content_hash")
    # Rounds on distinct images, each timing the bare forward then hibug predict: the median ratio over rounds is
    # what a shared, noisy machine cannot swing much.
    ratios, rates = [], []
    for round_ in range(args.rounds):
        chosen = samples.index[round_ * args.images:(round_ + 1) * args.images]
        forward = forward_rate(adapter, list(samples.loc[chosen, "image_path"]), args.batch_size)
        start = time.perf_counter()
        predict_project(project, adapter, name=f"bench {round_}", sample_ids=chosen, config=config)
        pipeline = len(chosen) / (time.perf_counter() - start)
        ratios.append(pipeline / forward)
        rates.append((forward, pipeline))
    ratio = float(np.median(ratios))
    print(f"model {spec.rsplit(':', 1)[0]} (random weights), {args.rounds} rounds of {args.images} distinct images at "
          f"{adapter.input_size} px, batch {args.batch_size}, device {adapter.device}{' fp16' if adapter.half else ''}")
    for round_, ((forward, pipeline), one) in enumerate(zip(rates, ratios)):
        print(f"  round {round_}: bare forward {forward:7.1f} images/s (tensors already decoded), hibug predict "
              f"{pipeline:7.1f} images/s = {one:.0%}")
    print(f"hibug predict : median {ratio:.0%} of the forward rate "
          f"(target >= 90%: {'PASS' if ratio >= 0.9 else 'FAIL'})")
    time_fine_tune(adapter, project.samples(), args.train, args.epochs, args.batch_size, folder)


if __name__ == "__main__":
    main()
