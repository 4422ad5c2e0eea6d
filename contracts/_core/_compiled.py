"""The compiled clearances, where this install has them.

``KERNELS`` is the C extension ``_kernels`` (built from ``_kernels.c`` when the package
is installed with a C compiler at hand), or None: where it was not built, or when
``SPECGUARD_PURE_PYTHON`` is set to anything but ``0`` or empty. Each clearance asks it
first and answers in numpy where it is None or declines (answers None), so the verdicts
are the same either way; only their cost differs. Between model forwards, when numpy's
code is out of the caches, a clearance's dozen numpy calls cost tens of microseconds and
one compiled loop a few (``docs/performance.md``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

__all__ = ["KERNELS", "int_or_none", "load_kernels", "switched_off", "verdict"]


def load_kernels(environ: dict[str, str] | None = None) -> ModuleType | None:
    """The compiled module, or None where it is missing or switched off."""
    settings = os.environ if environ is None else environ
    if settings.get("SPECGUARD_PURE_PYTHON", "").strip() not in ("", "0"):
        return None
    try:
        from specguard.contracts._core import _kernels
    except ImportError:
        return None
    return _kernels


#: The compiled clearances, or None (read at each call, so a test may switch them off).
KERNELS: ModuleType | None = load_kernels()


def verdict(kernel: str, *args: Any) -> bool | None:
    """The compiled clearance ``kernel``'s answer on ``args``: True or False, or None
    where this install has no kernels or the kernel declines (numpy answers then)."""
    kernels = KERNELS
    if kernels is None:
        return None
    answer = getattr(kernels, kernel)(*args)
    return None if answer is None else bool(answer)


def int_or_none(value: Any) -> int | None:
    """An optional scalar field as the kernels take it: a Python int, or None."""
    return None if value is None else int(value)


@contextlib.contextmanager
def switched_off() -> Iterator[None]:
    """Answer in numpy inside the block. The step tracker's fused hand-overs build no
    object where they find it clean; a tool that wants every object built (to time its
    rules) builds them here."""
    global KERNELS
    previous, KERNELS = KERNELS, None
    try:
        yield
    finally:
        KERNELS = previous
