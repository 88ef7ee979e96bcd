"""Benchmark: `hibug predict` (decode, preprocess, batch, run, store, record) against the bare forward pass of the same
model on the same images already decoded into tensors, same batch size and threads, in the same run.

The model is a real-size timm or torchvision architecture with random weights saved as a checkpoint (speed does not
depend on the weights; nothing is downloaded), run over distinct demo images. Target: at least 90% of the forward
rate on CPU. On a GPU (fp16 there) the same script reports the GPU figures.
Usage: python benchmarks/predict.py [--model timm:resnet18] [--images 512] [--batch-size 64] [--dir /tmp/hibug-bench-predict]
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import hibug_core  # noqa: F401  (the torchvision import hook, before timm)
from hibug_core.demo import ensure_demo
from hibug_core.embeddings.base import load_rgb
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


def forward_rate(adapter, paths: list[str], batch_size: int) -> float:
    import torch

    tensors = torch.stack([adapter.transform(load_rgb(p, adapter.input_size)) for p in paths])
    adapter.encode_images(tensors[:batch_size])  # warm-up
    start = time.perf_counter()
    for i in range(0, len(tensors), batch_size):
        adapter.encode_images(tensors[i:i + batch_size])
    return len(tensors) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="timm:resnet18", help="kind:architecture (timm or torchvision)")
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
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
    chosen = samples.index[:args.images]
    forward = forward_rate(adapter, list(samples.loc[chosen, "image_path"]), args.batch_size)
    start = time.perf_counter()
    predict_project(project, adapter, name="bench", sample_ids=chosen, config=config)
    pipeline = len(chosen) / (time.perf_counter() - start)
    ratio = pipeline / forward
    print(f"model {spec.rsplit(':', 1)[0]} (random weights), {len(chosen)} images at {adapter.input_size} px, "
          f"batch {args.batch_size}, device {adapter.device}{' fp16' if adapter.half else ''}")
    print(f"bare forward  : {forward:7.1f} images/s (tensors already decoded)")
    print(f"hibug predict : {pipeline:7.1f} images/s = {ratio:.0%} of the forward rate "
          f"(target >= 90%: {'PASS' if ratio >= 0.9 else 'FAIL'})")


if __name__ == "__main__":
    main()
