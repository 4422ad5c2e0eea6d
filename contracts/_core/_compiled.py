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
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["KERNELS", "exact_ints", "int_or_none", "load_kernels", "reads_in_place",
           "switched_off", "verdict"]


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


#: torch.Tensor, once the kernels were told torch's types (they then read CPU tensors).
_TENSOR: type | None = None


def reads_in_place(kind: type) -> bool:
    """Whether the kernels read arrays of type ``kind`` in place: exactly torch.Tensor
    (they check each one is on the CPU). Tells them torch's types on first sight; torch
    is never imported here, only recognised once the engine has imported it."""
    global _TENSOR
    kernels = KERNELS
    if kernels is None:
        return False
    if kind is _TENSOR:
        return True
    torch = sys.modules.get("torch")
    if _TENSOR is not None or torch is None or kind is not getattr(torch, "Tensor", None):
        return False
    # The module itself, not whatever stands in for it (a test's counting wrapper): the
    # types are the module's state, and naming them is no clearance's answer.
    module = load_kernels({})
    if module is None:
        return False
    # uint16 and uint32 came with torch 2.3; the others are older than the range we allow.
    module.use_torch(torch.Tensor, torch.strided, torch.bool, torch.int8, torch.uint8,
                     torch.int16, getattr(torch, "uint16", None), torch.int32,
                     getattr(torch, "uint32", None), torch.int64)
    _TENSOR = kind
    return True


def exact_ints(values: Any, width: int = 0) -> np.ndarray | None:
    """``values``, a list or tuple of plain ints (``width`` 0) or of lists of ``width``
    plain ints, as a new int64 vector in their order; None where an entry is anything else
    (a bool, a numpy integer, a float, an int past int64, a row of another length) or
    where this install has no kernels: the caller's own reading decides then.

    Engines hand ids, counts and drafts over as Python lists: numpy first discovers their
    shape and dtype, and ``struct`` builds an argument tuple of them; the kernel reads
    them where they lie. No bool passes, so a caller need not look for one among the
    entries equal to 0 or 1.
    """
    kernels = KERNELS
    if kernels is None or type(values) not in (list, tuple):
        return None
    packed = np.empty(len(values) * (width or 1), dtype=np.int64)
    return packed if kernels.pack_ints(values, width, packed) is True else None


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
