"""Small backend-neutral helpers that rules share (numpy and torch alike)."""

from __future__ import annotations

from typing import Any

import numpy as np

from contracts._core._arrays import array_kind, is_host

__all__ = ["arange_like", "host_value", "number_text", "row_col", "value_text"]


def arange_like(a: Any, n: int) -> Any:
    """``arange(n)`` on the same backend and device as ``a``."""
    if array_kind(a) == "numpy":
        return np.arange(n)
    import torch

    return torch.arange(n, device=a.device)


def host_value(a: Any, flat_index: int) -> int | None:
    """The element at a flat index when it can be read without a device sync."""
    if not is_host(a):
        return None
    flat = np.asarray(a).reshape(-1) if isinstance(a, np.generic) else a.reshape(-1)
    if not 0 <= flat_index < flat.shape[0]:
        return None
    return int(flat[flat_index])


def row_col(flat_index: int, width: int) -> tuple[int, int]:
    """Row and column of a flat index into a row-major matrix of ``width`` columns."""
    return divmod(flat_index, max(width, 1))


def value_text(a: Any, flat_index: int) -> str:
    """`` is -1`` when the value is readable on the host, else the empty string."""
    value = host_value(a, flat_index)
    return "" if value is None else f" is {value}"


def number_text(a: Any, flat_index: int) -> str:
    """`` -1`` when the value is readable on the host, else the empty string."""
    value = host_value(a, flat_index)
    return "" if value is None else f" {value}"
