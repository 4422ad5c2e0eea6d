"""What an array is, without importing torch until a tensor shows up.

numpy arrays and torch tensors (CPU or accelerator) are the two kinds a contract field
accepts. torch is looked up in ``sys.modules``: if the caller never imported it, no value
can be a tensor, and numpy-only engines never pay for torch's import.
"""

from __future__ import annotations

import sys
from typing import Any, TypeGuard

import numpy as np

__all__ = [
    "UNSIGNED",
    "array_kind",
    "describe",
    "dtype_name",
    "host_value",
    "is_host",
    "is_int",
    "torch_module",
]

#: The unsigned twin of each index dtype. Viewed as unsigned, a negative id wraps to a
#: huge value, so one maximum answers "is every element in ``[0, hi)``?".
UNSIGNED: dict[np.dtype[Any], type[np.unsignedinteger[Any]]] = {
    np.dtype(np.int32): np.uint32,
    np.dtype(np.int64): np.uint64,
}

_SHORT_DTYPES = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "bool": "bool",
}


def torch_module() -> Any:
    """The torch module if the process has imported it, else None."""
    return sys.modules.get("torch")


def array_kind(value: object) -> str | None:
    """``"numpy"``, ``"torch"`` or None for anything that is not an array."""
    if isinstance(value, np.ndarray):
        # A masked array hides its masked entries from every reduction a value check runs.
        return None if isinstance(value, np.ma.MaskedArray) else "numpy"
    torch = torch_module()
    if torch is not None and isinstance(value, torch.Tensor):
        return "torch"
    return None


def is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """A Python or numpy integer, not a bool: what engines use for ids and counts."""
    return type(value) is int or isinstance(value, np.integer)


def dtype_name(value: Any) -> str:
    """The dtype's plain name (``int32``) for numpy and torch alike."""
    return str(value.dtype).removeprefix("torch.")


def is_host(value: Any) -> bool:
    """True when reading the values needs no device sync."""
    if isinstance(value, np.ndarray | np.generic):
        return True
    return array_kind(value) == "torch" and value.device.type == "cpu"


def host_value(a: Any, flat_index: int) -> int | None:
    """The element at a flat index when it can be read without a device sync, else None."""
    if a is None or not (isinstance(a, np.generic) or array_kind(a) is not None) or not is_host(a):
        return None
    flat = np.asarray(a).reshape(-1) if isinstance(a, np.generic) else a.reshape(-1)
    if not 0 <= flat_index < flat.shape[0]:
        return None
    return int(flat[flat_index])


def describe(value: object) -> str:
    """A compact summary, never the values: ``i32[127,3]``, ``i64[8]@cuda:0``, ``list``."""
    kind = array_kind(value)
    if kind is None:
        if value is None or isinstance(value, bool | int | float | str):
            return repr(value)
        return type(value).__name__
    array: Any = value
    name = dtype_name(array)
    shape = ",".join(str(int(n)) for n in array.shape)
    text = f"{_SHORT_DTYPES.get(name, name)}[{shape}]"
    if kind == "torch" and array.device.type != "cpu":
        text += f"@{array.device}"
    return text
