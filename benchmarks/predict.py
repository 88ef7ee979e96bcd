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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tagging import forward_rate  # noqa: E402  (the same bare-forward measurement as the encoders')

from hibug_core.demo import ensure_demo  # noqa: E402
from hibug_core.embeddings.compute import EmbedConfig, configure_threads  # noqa: E402
from hibug_core.models.predict import predict_project  # noqa: E402
from hibug_core.models.registry import load_model  # noqa: E402


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
