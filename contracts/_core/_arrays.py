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
    "int_text",
    "is_host",
    "is_int",
    "short_repr",
    "torch_module",
]

#: Longest text a message quotes from a value; the rest is elided with its length.
TEXT_LIMIT = 60
# Past this many bits an integer's decimal form is long (and past ~14,000 bits Python
# refuses to write it at all): messages give its sign and size instead.
_INT_BITS_LIMIT = 128
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

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
        # No masked array exists before numpy.ma is imported, so the check never imports
        # it (25 ms, at an engine's first hand-over).
        masked = sys.modules.get("numpy.ma")
        return None if masked is not None and isinstance(value, masked.MaskedArray) \
            else "numpy"
    torch = torch_module()
    if torch is not None and isinstance(value, torch.Tensor):
        # Sparse (and other non-strided) layouts store only some entries: reductions
        # skip the rest, and most value operations do not exist for them at all.
        tensor: Any = value  # torch is looked up at run time, so its Tensor type is unknown here
        return "torch" if tensor.layout is torch.strided else None
    return None


def is_int(value: object) -> TypeGuard[int | np.integer[Any]]:
    """A Python or numpy integer, not a bool, that fits int64: what engines use for ids
    and counts. A larger one (``2**63``, ``np.uint64(2**64 - 1)``) is no id or count of
    any engine: callers leave it to the contract, which reports its type or dtype."""
    return (type(value) is int or isinstance(value, np.integer)) \
        and bool(_INT64_MIN <= value <= _INT64_MAX)


def dtype_name(value: Any) -> str:
    """The dtype's plain name (``int32``) for numpy and torch alike."""
    return str(value.dtype).removeprefix("torch.")


def is_host(value: Any) -> bool:
    """True when reading the values needs no device sync."""
    if isinstance(value, np.ndarray | np.generic):
        return True
    return array_kind(value) == "torch" and value.device.type == "cpu"


def host_value(a: Any, flat_index: int) -> int | None:
    """The element at a flat index when it can be read without a device sync, else None.

    A Python int (a count computed on the host) is its own only element.
    """
    if type(a) is int:
        return a if flat_index == 0 else None
    if a is None or not (isinstance(a, np.generic) or array_kind(a) is not None) or not is_host(a):
        return None
    flat = np.asarray(a).reshape(-1) if isinstance(a, np.generic) else a.reshape(-1)
    if not 0 <= flat_index < flat.shape[0]:
        return None
    return int(flat[flat_index])


def int_text(value: int) -> str:
    """``str(value)``, or its sign and size when the decimal form would be huge."""
    number = int(value)
    bits = number.bit_length()
    if bits <= _INT_BITS_LIMIT:
        return str(number)
    return f"{'-' if number < 0 else ''}<integer of {bits} bits>"


def short_repr(value: object, limit: int = TEXT_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters for strings and bytes, sized for ints."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int_text(value)
    if isinstance(value, str | bytes) and len(value) > limit:
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}... ({len(value)} {unit})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def describe(value: object) -> str:
    """A compact summary, never the values: ``i32[127,3]``, ``i64[8]@cuda:0``, ``list``."""
    kind = array_kind(value)
    if kind is None:
        if value is None or isinstance(value, bool | int | float | str):
            return short_repr(value)
        layout = getattr(value, "layout", None)
        torch = torch_module()
        if torch is not None and isinstance(value, torch.Tensor) and layout is not None:
            return f"{str(layout).removeprefix('torch.')} tensor"
        return type(value).__name__
    array: Any = value
    name = dtype_name(array)
    shape = ",".join(str(int(n)) for n in array.shape)
    text = f"{_SHORT_DTYPES.get(name, name)}[{shape}]"
    if kind == "torch" and array.device.type != "cpu":
        text += f"@{array.device}"
    return text
