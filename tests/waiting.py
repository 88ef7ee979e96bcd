"""Waiting in tests: always with a deadline, and saying what was awaited when it passes."""
from __future__ import annotations

import time


def wait_until(check, timeout: float = 60, what: str = "", every: float = 0.1):
    """Poll check() until it returns something truthy (returned); AssertionError naming `what` after `timeout` s."""
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"timed out after {timeout:.0f} s waiting for " + (
            what() if callable(what) else what or repr(check))
        time.sleep(every)
