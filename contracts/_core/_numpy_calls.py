"""The C entry points of numpy's commonest reductions, past their Python wrappers.

``np.count_nonzero`` is a Python function (with an array-function dispatcher) in front
of a C loop, and ``ndarray.any`` and ``ndarray.min`` call one too. On the handful of
elements a decode step hands over, those frames cost as much as the loop. And the checks
run between model forwards, with the caches cold: each frame of Python a check walks
then costs cache misses. Measured here at 64 elements after an L2-sized flush: 1.4 µs for
the C ``count_nonzero`` against 3.9 µs for ``np.count_nonzero`` and 7.5 µs for ``.any()``.
Value checks on host arrays call these instead; each answers as the public function
does on a numpy array.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["count_nonzero", "maximum_of", "minimum_of", "same_ids"]


def _c_entry(name: str) -> Any:
    """numpy's own C function ``name`` (``numpy._core`` from numpy 2, ``numpy.core``
    before), or the public one where neither module has it."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return getattr(np, name)


#: How many elements are non-zero (True), as ``np.count_nonzero(a)`` with no axis.
count_nonzero: Callable[[Any], int] = _c_entry("count_nonzero")
#: ``a.max()`` and ``a.min()`` over every element: ``maximum_of(a, None)``; both raise
#: ValueError on an empty array, as the methods do.
maximum_of: Callable[[Any, None], Any] = np.maximum.reduce
minimum_of: Callable[[Any, None], Any] = np.minimum.reduce


def same_ids(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal(a, b)`` for host arrays, by their bytes where that is the same
    answer: equal shapes and one integer (or bool) dtype. ``np.array_equal`` walks
    several Python frames and allocates a mask; a comparison of two ``tobytes`` is one
    copy and one ``memcmp``."""
    if a.shape != b.shape:
        return False
    if a.dtype == b.dtype and a.dtype.kind in "iub":
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b))
