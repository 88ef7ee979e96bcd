"""The encoder registry: one name per encoder, used in settings and on the command line."""
from __future__ import annotations

import functools
import hashlib
import re

from hibug_core.embeddings.base import Encoder
from hibug_core.errors import ModelLoadError

DEFAULT_ENCODER = "conse"
ENCODER_HELP = {
    "conse": "offline default: EfficientNet-Lite0 ImageNet probabilities + all-MiniLM-L6-v2 (ConSE zero-shot)",
    "open_clip:<architecture>:<pretrained tag or checkpoint path>": "any open_clip model, e.g. open_clip:ViT-B-32:laion2b_s34b_b79k",
    "transformers:<hub id or folder>": "transformers CLIP, e.g. transformers:openai/clip-vit-base-patch32",
    "tiny-open_clip": "random 2-layer open_clip model (tests; no meaning)",
    "tiny-transformers": "random 2-layer transformers CLIP (tests; no meaning)",
}


def encoder_key(spec: str) -> str:
    """A file-safe cache key: readable prefix plus a short hash of the whole name."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", spec)[:48].strip("-")
    if readable == spec:
        return spec
    return f"{readable}-{hashlib.blake2b(spec.encode(), digest_size=4).hexdigest()}"


def _quiet_hub_progress() -> None:
    """Model loading draws its own progress bars into logs and CLI output; hibug reports its own progress."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


@functools.lru_cache(maxsize=4)
def load_encoder(spec: str = DEFAULT_ENCODER, device: str | None = None) -> Encoder:
    """Load an encoder once per process; a clear error for unknown names and unreachable weights."""
    spec = spec.strip()
    key = encoder_key(spec)
    _quiet_hub_progress()
    if spec == "conse":
        from hibug_core.embeddings.conse import ConseEncoder

        return ConseEncoder(device=device)
    if spec == "tiny-open_clip":
        from hibug_core.embeddings.clip_models import OpenClipEncoder
        from hibug_core.embeddings.tiny import build_tiny_open_clip

        model, transform, tokenizer = build_tiny_open_clip()
        return OpenClipEncoder("tiny", None, spec=spec, key=key, device=device, model=model, transform=transform,
                               tokenizer=tokenizer)
    if spec == "tiny-transformers":
        from hibug_core.embeddings.clip_models import TransformersClipEncoder
        from hibug_core.embeddings.tiny import tiny_transformers_folder

        return TransformersClipEncoder(str(tiny_transformers_folder()), spec=spec, key=key, device=device)
    backend, _, rest = spec.partition(":")
    if backend == "open_clip" and rest:
        from hibug_core.embeddings.clip_models import OpenClipEncoder

        architecture, _, pretrained = rest.partition(":")
        return OpenClipEncoder(architecture, pretrained or None, spec=spec, key=key, device=device)
    if backend == "transformers" and rest:
        from hibug_core.embeddings.clip_models import TransformersClipEncoder

        return TransformersClipEncoder(rest, spec=spec, key=key, device=device)
    raise ModelLoadError(f"unknown encoder '{spec}'; use one of: " + "; ".join(f"{k} ({v})" for k, v in ENCODER_HELP.items()))
