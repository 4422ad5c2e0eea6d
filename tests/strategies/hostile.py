"""Hostile values: the wrong types, dtypes, ranks, backends and devices for a field.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from specguard.contracts import (
    ArrayField,
    ScalarField,
    fields_of,
)
from strategies.cases import Case, materialize, on_meta_device, other_backend

SKIP = object()  # a hostile kind that does not apply to this field


def _is_bool_field(spec: ArrayField) -> bool:
    return spec.dtypes == frozenset({"bool"})


def _same_backend(value: Any, array: np.ndarray) -> Any:
    return torch.from_numpy(array) if isinstance(value, torch.Tensor) else array


def _host(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _cast(numpy_dtype: Any, torch_dtype: Any = None) -> Callable[[Any, ArrayField], Any]:
    def change(value: Any, spec: ArrayField) -> Any:
        if isinstance(value, torch.Tensor):
            return SKIP if torch_dtype is None else value.to(torch_dtype)
        with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows on purpose
            return value.astype(numpy_dtype)

    return change


def _with_nan(value: Any, spec: ArrayField) -> Any:
    array = _host(value).astype(np.float64)
    if array.size:
        array.reshape(-1)[0] = np.nan
    return _same_backend(value, array)


def _ids_for_bool(value: Any, spec: ArrayField) -> Any:
    """For the bool field, an int array; for id fields, a bool array."""
    array = _host(value)
    other = array.astype(np.int64) if _is_bool_field(spec) else array.astype(bool)
    return _same_backend(value, other)


def _object_array(value: Any, spec: ArrayField) -> Any:
    return np.array(_host(value), dtype=object)


def _wrapping(value: Any, spec: ArrayField) -> Any:
    """An int64 value that reads as 5 once cast to int32, where it is out of range."""
    if _is_bool_field(spec) or spec.name in _UNBOUNDED or 0 in tuple(value.shape):
        return SKIP
    array = _host(value).astype(np.int64).copy()
    array.reshape(-1)[0] = 2**32 + 5
    return _same_backend(value, array)


# Seq ids, block ids, state slots and positions have no upper bound: 2**32 + 5 is valid;
# nor have a request's token limit and another rank's token count.
_UNBOUNDED = frozenset({"seq_ids", "block_tables", "state_slots", "positions",
                        "draft_seq_ids", "max_new_tokens", "tokens_across_ranks"})


def _huge_zero_size(value: Any, spec: ArrayField) -> Any:
    shape = (0, 2**31) if len(spec.axes) == 1 else (0, 2**31, 3)
    if isinstance(value, torch.Tensor):
        return torch.empty(shape, dtype=value.dtype)
    return np.empty(shape, dtype=value.dtype)


def _zero_d(value: Any, spec: ArrayField) -> Any:
    array = np.array(0, dtype=np.bool_ if _is_bool_field(spec) else np.int32)
    return _same_backend(value, array)


def _transposed(value: Any, spec: ArrayField) -> Any:
    if value.ndim != 2 or value.shape[0] == value.shape[1]:
        return SKIP
    return value.T


def _matrix(value: Any, spec: ArrayField) -> Any:
    if isinstance(value, torch.Tensor) or len(spec.axes) == 2:
        return SKIP
    with warnings.catch_warnings():  # np.matrix is pending deprecation: that is the point
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.asmatrix(_host(value))


def _big_endian(value: Any, spec: ArrayField) -> Any:
    if isinstance(value, torch.Tensor) or _is_bool_field(spec):
        return SKIP
    return _host(value).astype(_host(value).dtype.newbyteorder(">"))


def _ragged(value: Any, spec: ArrayField) -> Any:
    return [[1, 2], [3], []]


#: Values for an array field that no boundary object may accept (any backend).
HOSTILE_ARRAYS: dict[str, Callable[[Any, ArrayField], Any]] = {
    "list": lambda v, s: _host(v).tolist(),
    "tuple": lambda v, s: tuple(_host(v).tolist()),
    "ragged nested list": _ragged,
    "None": lambda v, s: SKIP if s.optional else None,
    "str": lambda v, s: "0 1 2",
    "bytes": lambda v, s: b"\x00\x01",
    "dict": lambda v, s: {0: 1},
    "set": lambda v, s: {0, 1},
    "int": lambda v, s: 3,
    "float": lambda v, s: float("nan"),
    "memoryview": lambda v, s: np.ascontiguousarray(_host(v)).data,
    "float64 ids": _cast(np.float64, torch.float64),
    "float ids with NaN": _with_nan,
    "float16 ids": _cast(np.float16, torch.float16),
    "bfloat16 ids": _cast(np.float32, torch.bfloat16),
    "bool for int, int for bool": _ids_for_bool,
    "object array": _object_array,
    "uint8": _cast(np.uint8, torch.uint8),
    "int16": _cast(np.int16, torch.int16),
    "uint32": _cast(np.uint32, torch.uint32),
    "uint64": _cast(np.uint64, torch.uint64),
    "complex": _cast(np.complex64, torch.complex64),
    "big-endian": _big_endian,
    "0-d array": _zero_d,
    "huge dims, zero size": _huge_zero_size,
    "extra axis": lambda v, s: v[..., None],
    "transposed": _transposed,
    "np.matrix": _matrix,
    "other backend": lambda v, s: other_backend(v),
    "meta device": lambda v, s: on_meta_device(v),
    "ids that wrap in int32": _wrapping,
}

#: The hostile forms that are wrong only next to another array (SG005).
_MIXES = frozenset({"other backend", "meta device"})

#: Values for a scalar field that no boundary object may accept.
HOSTILE_SCALARS: dict[str, Callable[[ScalarField], Any]] = {
    "None": lambda s: SKIP if s.optional else None,
    "str": lambda s: "3",
    "float": lambda s: 3.0,
    "NaN": lambda s: float("nan"),
    "bool": lambda s: True,
    "numpy float": lambda s: np.float32(3),
    "list": lambda s: [3],
    "0-d array": lambda s: np.array(3),
    "0-d tensor": lambda s: torch.tensor(3),
    "complex": lambda s: 3 + 0j,
    "below minimum": lambda s: SKIP if s.minimum is None else s.minimum - 1,
    "far below minimum": lambda s: SKIP if s.minimum is None else -(2**70),
}

#: Scalars that are strange but not wrong: validation may pass or raise, nothing else.
ODD_SCALARS: tuple[int, ...] = (2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1, 2**63, 2**64, 2**70,
                                -(2**63), -(2**70))


def hostile_variants(case: Case) -> list[tuple[str, str, Any]]:
    """``(field, kind, value)`` for every hostile value of every field of ``case``.

    An absent optional array is replaced by a hostile form of a valid one.
    """
    valid = case.kwargs()
    variants = []
    arrays = sum(isinstance(spec, ArrayField) for spec in fields_of(case.cls))
    for spec in fields_of(case.cls):
        if isinstance(spec, ScalarField):
            made = {kind: make(spec) for kind, make in HOSTILE_SCALARS.items()}
        else:
            base = valid.get(spec.name)
            if base is None:  # an absent optional array: a valid one of the right length
                size = case.values.get(spec.axes[0].name or "")
                length = size if isinstance(size, int) else case.values["seq_ids"].shape[0]
                base = materialize(np.zeros(length, dtype=np.int64), case.backend, "int64",
                                   "contiguous")
            made = {kind: make(base, spec) for kind, make in HOSTILE_ARRAYS.items()}
        if arrays < 2:  # one array is on one backend and device, whichever it is
            made = {kind: bad for kind, bad in made.items() if kind not in _MIXES}
        variants.extend((spec.name, kind, bad) for kind, bad in made.items() if bad is not SKIP)
    return variants
