"""Waiting on another process from a test: poll a condition until a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], bool], timeout: float, period: float = 0.1) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds (checked once more
    at the deadline). A bound on waiting, so a hung process fails the test instead of the
    run; never a measure of speed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(period)
    return condition()
