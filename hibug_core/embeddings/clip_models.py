"""CLIP-family encoders: open_clip (any architecture, pretrained tag or checkpoint) and transformers CLIP."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hibug_core.embeddings.base import Encoder, normalize_rows, pick_device
from hibug_core.embeddings.hub import offline_unless_reachable
from hibug_core.errors import ModelLoadError

OFFLINE_ADVICE = ("Without internet, point at local weights instead: "
                  "`open_clip:<architecture>:/path/to/checkpoint.bin` or `transformers:/path/to/folder` "
                  "(a folder written by CLIPModel.save_pretrained with its "
                  "tokenizer and preprocessor files).")


def _reason(error: Exception, hub_reachable: bool) -> str:
    if not hub_reachable:
        return "the Hugging Face hub cannot be reached from here and the weights are not in the local cache"
    return str(error)


def _as_numpy(output) -> np.ndarray:
    tensor = output if hasattr(output, "float") else output.pooler_output  # transformers 5 returns model outputs
    return normalize_rows(tensor.float().cpu().numpy())


class OpenClipEncoder(Encoder):
    def __init__(self, architecture: str, pretrained: str | None, *, spec: str, key: str, device: str | None = None,
                 model=None, transform=None, tokenizer=None):
        import torch

        self.spec, self.key, self.device = spec, key, pick_device(device)
        if model is None:
            import open_clip

            with offline_unless_reachable() as reachable:
                try:
                    model, _, transform = open_clip.create_model_and_transforms(architecture, pretrained=pretrained)
                    tokenizer = open_clip.get_tokenizer(architecture)
                except Exception as error:  # open_clip raises RuntimeError, OSError or hub errors
                    raise ModelLoadError(f"could not load open_clip model {architecture} with weights "
                                         f"'{pretrained}': {_reason(error, reachable)}. {OFFLINE_ADVICE}") from error
        self.model = model.eval().to(self.device)
        self.transform, self.tokenizer = transform, tokenizer
        self.logit_scale = float(torch.as_tensor(model.logit_scale).exp().clamp(max=100).item())
        size = getattr(model.visual, "image_size", 224)
        self.input_size = int(size[0] if isinstance(size, (tuple, list)) else size)

    def encode_images(self, batch) -> dict[str, np.ndarray]:
        import torch

        with torch.inference_mode():
            return {"embedding": _as_numpy(self.model.encode_image(batch.to(self.device)))}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return _as_numpy(self.model.encode_text(self.tokenizer(list(texts)).to(self.device)))


def transform_from_processor_config(folder: Path):
    """The CLIP image processor's resize / crop / normalise as a torchvision transform (fast in loader workers)."""
    from torchvision import transforms

    config = json.loads((folder / "preprocessor_config.json").read_text())
    size = config.get("size", 224)
    size = size.get("shortest_edge", size.get("height", 224)) if isinstance(size, dict) else size
    crop = config.get("crop_size", size)
    crop = crop.get("height", size) if isinstance(crop, dict) else crop
    return transforms.Compose([
        transforms.Resize(int(size), interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(int(crop)), transforms.ToTensor(),
        transforms.Normalize(config.get("image_mean", [0.4815, 0.4578, 0.4082]),
                             config.get("image_std", [0.2686, 0.2613, 0.2758]))]), int(crop)


class TransformersClipEncoder(Encoder):
    def __init__(self, source: str, *, spec: str, key: str, device: str | None = None):
        from huggingface_hub import snapshot_download
        from transformers import AutoTokenizer, CLIPModel

        self.spec, self.key, self.device = spec, key, pick_device(device)
        with offline_unless_reachable() as reachable:
            try:
                folder = Path(source) if Path(source).is_dir() else Path(snapshot_download(
                    source, allow_patterns=["*.json", "*.txt", "*.safetensors"]))
                self.model = CLIPModel.from_pretrained(folder).eval().to(self.device)
                self.tokenizer = AutoTokenizer.from_pretrained(folder)
                self.transform, self.input_size = transform_from_processor_config(folder)
            except Exception as error:  # hub, file and config errors all end here
                raise ModelLoadError(f"could not load transformers CLIP model '{source}': "
                                     f"{_reason(error, reachable)}. {OFFLINE_ADVICE}") from error
        self.logit_scale = float(self.model.logit_scale.exp().clamp(max=100).item())

    def encode_images(self, batch) -> dict[str, np.ndarray]:
        import torch

        with torch.inference_mode():
            return {"embedding": _as_numpy(self.model.get_image_features(pixel_values=batch.to(self.device)))}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        import torch

        tokens = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            return _as_numpy(self.model.get_text_features(**tokens))
