"""The one process-wide cache helper: explicit keys, a bound on entries (least recently used dropped), thread-safe."""
from __future__ import annotations

import functools
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
_ALL: dict[str, BoundedCache] = {}


class BoundedCache:
    """At most `max_items` values by key; get_or_make computes a missing value once (other threads wait for it)."""

    def __init__(self, name: str, max_items: int):
        if max_items < 1:
            raise ValueError(f"cache '{name}': max_items must be at least 1, not {max_items}")
        if name in _ALL:
            raise ValueError(f"a cache named '{name}' exists already")
        self.name, self.max_items = name, max_items
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.RLock()
        _ALL[name] = self

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            value = make()
            self._values[key] = value
            while len(self._values) > self.max_items:
                self._values.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def process_cache(name: str, max_items: int):
    """Decorator: the function's result per (positional and keyword) arguments, in a BoundedCache named `name`."""
    def decorate(function):
        cache = BoundedCache(name, max_items)

        @functools.wraps(function)
        def cached(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            return cache.get_or_make(key, lambda: function(*args, **kwargs))

        cached.cache = cache
        return cached
    return decorate


def caches() -> dict[str, BoundedCache]:
    """Every process-wide cache by name (to inspect sizes, or clear them in tests)."""
    return dict(_ALL)


def new_identity() -> str:
    """A fresh identity for a computed result whose derived values are cached by it (a slice report, a comparison):
    its shallow copies (dataclasses.replace) keep it; no two results, in any process, share one."""
    return uuid.uuid4().hex
