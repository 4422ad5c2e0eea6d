"""Reading arrays on the host without surprising anyone with a device sync."""

from __future__ import annotations

import sys
from typing import Any, TypeGuard

import numpy as np
from specguard.contracts import DeviceValues, current_config

__all__ = ["host_array", "int_at", "is_int"]


def host_array(value: Any) -> np.ndarray | None:
    """``value`` as a numpy array sharing its memory, or None when that needs a device sync.

    numpy arrays come back as they are and CPU tensors as zero-copy views. A tensor on an
    accelerator is copied only under ``device_values="sync"``; otherwise it is None and
    the caller skips what needs its values.
    """
    if isinstance(value, np.ndarray):
        return value
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    if value.device.type != "cpu":
        if current_config().device_values is not DeviceValues.SYNC:
            return None
        value = value.cpu()
    return value.detach().numpy()  # type: ignore[no-any-return]


def int_at(array: Any, index: int) -> int | None:
    """``int(array[index])`` for a host vector and an index in range, else None."""
    if not isinstance(array, np.ndarray) or array.ndim != 1 or not 0 <= index < array.shape[0]:
        return None
    return int(array[index])


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def is_int(value: Any) -> TypeGuard[int | np.integer]:
    """A Python or numpy integer that is not a bool and fits int64: what engines use for
    ids and counts. A larger one (``2**63``, ``np.uint64(2**64 - 1)``) is no id or count
    of any engine; callers leave it to the contract, which reports its type or dtype."""
    return (isinstance(value, int | np.integer) and not isinstance(value, bool)
            and bool(_INT64_MIN <= value <= _INT64_MAX))
