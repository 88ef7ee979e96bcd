"""Reaching the Hugging Face hub: tell quickly whether it can be reached, and stay offline when it cannot."""
from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

from hibug_core.cache import process_cache


@process_cache("hub reachable", max_items=1)
def hub_reachable(timeout_s: float = 3.0) -> bool:
    """True when huggingface.co answers a TCP connect; without this, an offline load retries for a minute."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://", 1)[-1].split("/", 1)[0]
    host, _, port = endpoint.partition(":")
    try:
        with socket.create_connection((host, int(port or 443)), timeout=timeout_s):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def offline_unless_reachable() -> Iterator[bool]:
    """Within the block, hub lookups use the local cache only when the hub cannot be reached; yields reachability."""
    import huggingface_hub.constants as constants

    reachable = hub_reachable()
    before = constants.HF_HUB_OFFLINE
    if not reachable:
        constants.HF_HUB_OFFLINE = True
    try:
        yield reachable
    finally:
        constants.HF_HUB_OFFLINE = before
