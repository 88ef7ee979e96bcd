"""The encoder registry: one name per encoder, used in settings and on the command line."""
from __future__ import annotations

import hashlib
import re

from hibug_core.cache import process_cache
from hibug_core.embeddings.base import Encoder
from hibug_core.errors import ModelLoadError
from hibug_core.registry import Registry, UnknownChoice

DEFAULT_ENCODER = "conse"
ENCODERS = Registry("encoder")


@ENCODERS.register("conse", "offline default: EfficientNet-Lite0 ImageNet probabilities + all-MiniLM-L6-v2 (ConSE "
                   "zero-shot)")
def _conse(*, spec: str, key: str, device: str | None) -> Encoder:
    from hibug_core.embeddings.conse import ConseEncoder

    return ConseEncoder(device=device)


@ENCODERS.register("open_clip", "any open_clip model, e.g. open_clip:ViT-B-32:laion2b_s34b_b79k",
                   form="open_clip:<architecture>:<pretrained tag or checkpoint path>")
def _open_clip(argument: str, *, spec: str, key: str, device: str | None) -> Encoder:
    from hibug_core.embeddings.clip_models import OpenClipEncoder

    architecture, _, pretrained = argument.partition(":")
    return OpenClipEncoder(architecture, pretrained or None, spec=spec, key=key, device=device)


@ENCODERS.register("transformers", "transformers CLIP, e.g. transformers:openai/clip-vit-base-patch32",
                   form="transformers:<hub id or folder>")
def _transformers(argument: str, *, spec: str, key: str, device: str | None) -> Encoder:
    from hibug_core.embeddings.clip_models import TransformersClipEncoder

    return TransformersClipEncoder(argument, spec=spec, key=key, device=device)


@ENCODERS.register("tiny-open_clip", "random 2-layer open_clip model (tests; no meaning)", hidden=True)
def _tiny_open_clip(*, spec: str, key: str, device: str | None) -> Encoder:
    from hibug_core.embeddings.clip_models import OpenClipEncoder
    from hibug_core.embeddings.tiny import build_tiny_open_clip

    model, transform, tokenizer = build_tiny_open_clip()
    return OpenClipEncoder("tiny", None, spec=spec, key=key, device=device, model=model, transform=transform,
                           tokenizer=tokenizer)


@ENCODERS.register("tiny-transformers", "random 2-layer transformers CLIP (tests; no meaning)", hidden=True)
def _tiny_transformers(*, spec: str, key: str, device: str | None) -> Encoder:
    from hibug_core.embeddings.clip_models import TransformersClipEncoder
    from hibug_core.embeddings.tiny import tiny_transformers_folder

    return TransformersClipEncoder(str(tiny_transformers_folder()), spec=spec, key=key, device=device)


@ENCODERS.register("model", "the own penultimate features of a model `hibug predict` ran (maps, linear heads); "
                   "computed by predict, not here", form="model:<model name>")
def _model_features(argument: str, *, spec: str, key: str, device: str | None) -> Encoder:
    raise ModelLoadError(f"{spec}: a model's features are computed by `hibug predict --name {argument}`, then read "
                         "from the project; they cannot be computed as an encoder's")


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


def load_encoder(spec: str = DEFAULT_ENCODER, device: str | None = None) -> Encoder:
    """Load an encoder once per process; a clear error for unknown names and unreachable weights."""
    spec = spec.strip()
    try:
        ENCODERS.get(spec)
    except UnknownChoice as error:
        raise ModelLoadError(str(error)) from None
    return _loaded(spec, device)


@process_cache("encoders", max_items=4)
def _loaded(spec: str, device: str | None) -> Encoder:
    _quiet_hub_progress()
    return ENCODERS.build(spec, spec=spec, key=encoder_key(spec), device=device)
