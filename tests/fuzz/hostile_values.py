"""Hostile values for the fuzz suite: integers past every width, sparse tensors, ndarray
subclasses whose reductions lie, and strings too long to quote.

Kept apart from :mod:`strategies`: these are values a hostile caller hands over, not
objects or mutations of the contract, and each comes with the outcome it must have.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from specguard.contracts import ArrayField

#: Scalars past int32, int64 and Python's printable range, and odd numpy widths.
HUGE_SCALARS: dict[str, Any] = {
    "2**63": 2**63,
    "2**64": 2**64,
    "-2**63-1": -(2**63) - 1,
    "10**5000": 10**5000,
    "-10**5000": -(10**5000),
    "uint64 max": np.uint64(2**64 - 1),
    "int8 max": np.int8(127),
    "uint8 max": np.uint8(255),
}

#: Integers a list of ids may hold that no id dtype can.
HUGE_IDS: dict[str, Any] = {
    "2**63": 2**63,
    "uint64 max": np.uint64(2**64 - 1),
    "10**5000": 10**5000,
    "-2**63-1": -(2**63) - 1,
}

#: The value a lying array hides: invalid in the first entry of every integer field
#: (below -1, the only negative any field allows, and not a declared placeholder).
HIDDEN = -2

#: Longest message a violation may have, however long the value it describes.
MESSAGE_LIMIT = 2000

SKIP = object()  # a kind that does not apply to this field


class LyingReductions(np.ndarray):
    """An ndarray whose every reduction answers 0: max, min, any, count_nonzero."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **options: Any) -> Any:
        if method == "reduce":
            return 0
        plain = [np.asarray(i) if isinstance(i, LyingReductions) else i for i in inputs]
        return getattr(ufunc, method)(*plain, **options)


def _host(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _is_bool(spec: ArrayField) -> bool:
    return spec.dtypes == frozenset({"bool"})


def lying(value: Any) -> LyingReductions:
    """``value``'s entries in an ndarray subclass whose reductions lie."""
    return _host(value).copy().view(LyingReductions)


def lying_with_hidden(value: Any, spec: ArrayField) -> Any:
    """A lying subclass whose first entry is :data:`HIDDEN`; full depth must find it."""
    if _is_bool(spec) or _host(value).size == 0:
        return SKIP
    array = _host(value).copy()
    array.reshape(-1)[0] = HIDDEN
    return array.view(LyingReductions)


def sparse(value: Any, spec: ArrayField) -> Any:
    """The same entries as a sparse COO tensor (CSR too, for matrices)."""
    dense = torch.from_numpy(_host(value).copy())
    if dense.ndim != 2 or dense.dtype == torch.bool:
        return dense.to_sparse()
    with warnings.catch_warnings():  # "sparse CSR support is in beta": that is the point
        warnings.simplefilter("ignore", UserWarning)
        return dense.to_sparse_csr()


def uint64_max(value: Any, spec: ArrayField) -> Any:
    """An unsigned array holding 2**64 - 1 (-1 in disguise)."""
    if _host(value).size == 0:
        return SKIP
    array = _host(value).astype(np.uint64)
    array.reshape(-1)[0] = np.uint64(2**64 - 1)
    return array


def long_string(value: Any, spec: ArrayField) -> Any:
    """Ten megabytes of text where an array belongs."""
    return "7" * 10_000_000


#: Array values that every boundary object must refuse (a ContractViolation).
HOSTILE_ARRAY_VALUES: dict[str, Callable[[Any, ArrayField], Any]] = {
    "sparse tensor": sparse,
    "uint64 holding 2**64-1": uint64_max,
    "10 MB string": long_string,
}
