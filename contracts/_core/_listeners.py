"""Listeners: callbacks that see every reported violation, whatever the mode.

Warn mode only logs a violation and strict mode raises it (and a caller may catch it);
a test plugin or a dashboard that wants every one of them registers a listener.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

from specguard.contracts._core._violation import Violation

__all__ = ["Listener", "listening", "notify"]

Listener = Callable[[Sequence[Violation]], None]

_listeners: list[Listener] = []


@contextlib.contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call ``listener(violations)`` for every report made inside the block, in any thread."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def notify(violations: Sequence[Violation]) -> None:
    """Hand reported violations to every listener, before they are logged or raised."""
    for listener in tuple(_listeners):
        listener(violations)
