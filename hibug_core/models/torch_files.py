"""The one way hibug reads a PyTorch file (a checkpoint, its own saved weights, a fine-tune's resume point): tensors and
plain values only, never code; what cannot be read so is refused in hibug's words, which never advise loading it
unsafely."""
from __future__ import annotations

import pickle
import warnings
from pathlib import Path

from hibug_core.errors import ModelLoadError
from hibug_core.safe_files import MODEL_MAX_BYTES, FileRefused, check_regular


def load_tensors(path: str | Path, *, map_location="cpu", what: str = "a PyTorch checkpoint"):
    """What the file at `path` holds, read by torch with weights_only (tensors, numbers, texts, lists and dicts).
    Raises ModelLoadError naming the file and what is wrong with it."""
    import torch

    path = Path(path)
    try:
        check_regular(path, max_bytes=MODEL_MAX_BYTES, what=what)
    except FileRefused as error:
        raise ModelLoadError(f"{path} {error}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on pickle protocols says nothing a user can act on
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:  # torch's words for it advise loading the file unsafely: never shown
        raise ModelLoadError(f"{path} is not {what} hibug can read: cut short, another kind of file, or one holding "
                             "Python objects besides tensors and plain values (hibug reads weights only, never code); "
                             "save the model's state_dict: torch.save({'state_dict': model.state_dict(), 'classes': "
                             "[...]}, path)") from None
    except Exception as error:  # noqa: BLE001 (zip, struct, EOF and torch errors alike: not a file torch wrote)
        raise ModelLoadError(f"{path} is not {what} hibug can read: cut short, or another kind of file "
                             f"({type(error).__name__})") from None
