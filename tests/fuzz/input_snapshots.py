"""Snapshots of constructor inputs, to prove that validation leaves them untouched."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = ["same", "snapshot"]


def snapshot(value: Any) -> Any:
    """Everything validation could change about a value: contents, layout, version."""
    if isinstance(value, np.ndarray):
        return ("numpy", value.copy(), value.dtype, value.shape, value.strides,
                value.flags.writeable, value.__array_interface__["data"][0])
    if isinstance(value, torch.Tensor):
        contents = value.clone() if value.device.type != "meta" else None
        return ("torch", contents, value.dtype, tuple(value.shape), value.stride(),
                value._version, value.data_ptr(), value.device)
    if isinstance(value, dict):
        return {key: snapshot(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(snapshot(item) for item in value)
    return value


def same(before: Any, after: Any) -> bool:
    """Snapshots equal, arrays compared element-wise (NaN equal to NaN)."""
    if isinstance(before, np.ndarray):
        return (isinstance(after, np.ndarray) and before.shape == after.shape
                and before.dtype == after.dtype
                and bool(np.array_equal(before, after, equal_nan=before.dtype.kind in "fc")))
    if isinstance(before, torch.Tensor):
        if not (isinstance(after, torch.Tensor) and before.shape == after.shape
                and before.dtype == after.dtype):
            return False
        if before.is_floating_point() or before.is_complex():
            return bool(((before == after) | (before.isnan() & after.isnan())).all())
        return bool(torch.equal(before, after))
    if isinstance(before, dict):
        return before.keys() == after.keys() and all(same(before[k], after[k]) for k in before)
    if isinstance(before, list | tuple):
        return len(before) == len(after) and all(map(same, before, after))
    if isinstance(before, float) and math.isnan(before):
        return isinstance(after, float) and math.isnan(after)
    return bool(before == after) if before is not None else after is None
