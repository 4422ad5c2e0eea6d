"""Reading arrays on the host without surprising anyone with a device sync."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from specguard.contracts import DeviceValues, current_config

__all__ = ["as_int64", "holds_integers", "host_array"]


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


def holds_integers(*arrays: np.ndarray) -> bool:
    """Whether every host array holds integers: counts and ids a view may compute with.

    A float, bool or string array is left to the contract, which reports its dtype: cast,
    it would truncate 1.5, turn NaN into an arbitrary integer, or raise numpy's own error.
    """
    return all(a.dtype.kind in "iu" for a in arrays)


_INT64 = np.dtype(np.int64)


def as_int64(a: np.ndarray) -> np.ndarray:
    """``a`` as an int64 array: ``a`` itself when it is one already, else a converted
    copy. What ``astype(np.int64, copy=False)`` answers, without walking numpy's
    conversion code for an array that needs none (the common case, once a step between
    model forwards, when that code is out of the caches)."""
    if type(a) is np.ndarray and a.dtype is _INT64:
        return a
    return np.asarray(a).astype(np.int64, copy=False)
