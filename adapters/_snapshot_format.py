"""The snapshot file format (JSON, version 1) and how a value is written into it.

A snapshot holds one boundary object (its type name and fields), optionally the previous
step's state it was checked against, and the violations reported when it was written::

    {"format": "specguard-snapshot", "version": 1, "written": "...",
     "object": {"type": "ScheduledBatch", "fields": {"mtp_k": {"kind": "int", "value": 3},
                "seq_ids": {"kind": "array", "dtype": "int64", "shape": [128],
                            "data": [0, 1, ...]}, ...}},
     "state": null, "violations": [{"code": "SG101", ...}]}

A field value is one of: ``none``; ``int``; ``bool``; ``array`` (an integer or bool dtype,
its shape and the flat row-major data); ``list`` (a list of ints, or of lists of ints,
as some engines pass); ``opaque`` (anything else, kept as a description only). Reading
goes through strict pydantic models with size limits: nothing in a file is executed,
unpickled or trusted.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, TypeGuard

import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from specguard.contracts import describe
from specguard.contracts.ops import is_int

__all__ = [
    "MAX_ELEMENTS",
    "MAX_FILE_BYTES",
    "ArrayValue",
    "Budget",
    "ObjectRecord",
    "SnapshotFile",
    "ValidationError",
    "decode_array",
    "duplicate_key",
    "encode",
    "read_model",
]

FORMAT = "specguard-snapshot"
VERSION = 1
#: Largest snapshot file read, in bytes.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Most array elements (all arrays of a file together) written or read.
MAX_ELEMENTS = 8 * 1024 * 1024
MAX_RANK = 4
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
DType = Literal["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"]
ValidationError = pydantic.ValidationError

_I64 = np.iinfo(np.int64)
Int64 = Annotated[StrictInt, Field(ge=int(_I64.min), le=int(_I64.max))]
Text = Annotated[StrictStr, Field(max_length=4000)]
Name = Annotated[StrictStr, Field(max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class NoneValue(BaseModel):
    """A field that held None."""

    model_config = _STRICT
    kind: Literal["none"]


class IntValue(BaseModel):
    """A Python or numpy integer."""

    model_config = _STRICT
    kind: Literal["int"]
    value: Int64


class BoolValue(BaseModel):
    """A Python bool."""

    model_config = _STRICT
    kind: Literal["bool"]
    value: StrictBool


class ArrayValue(BaseModel):
    """An integer or bool array: dtype, shape and the flat data in row-major order."""

    model_config = _STRICT
    kind: Literal["array"]
    dtype: DType
    shape: Annotated[list[Annotated[StrictInt, Field(ge=0, le=MAX_ELEMENTS)]],
                     Field(max_length=MAX_RANK)]
    data: Annotated[list[Int64] | list[StrictBool], Field(max_length=MAX_ELEMENTS)]


class ListValue(BaseModel):
    """A plain list of ints, or of lists of ints (e.g. ATOM's ``block_tables``)."""

    model_config = _STRICT
    kind: Literal["list"]
    value: Annotated[list[Int64] | list[Annotated[list[Int64], Field(max_length=MAX_ELEMENTS)]],
                     Field(max_length=MAX_ELEMENTS)]


class OpaqueValue(BaseModel):
    """Anything else: only a description of it was written."""

    model_config = _STRICT
    kind: Literal["opaque"]
    type: Annotated[StrictStr, Field(max_length=200)]


Value = Annotated[NoneValue | IntValue | BoolValue | ArrayValue | ListValue | OpaqueValue,
                  Field(discriminator="kind")]


class ObjectRecord(BaseModel):
    """A boundary object: its type name and its fields."""

    model_config = _STRICT
    type: Name
    fields: Annotated[dict[Name, Value], Field(max_length=64)]


class ViolationRecord(BaseModel):
    """One violation as reported when the snapshot was written."""

    model_config = _STRICT
    code: Annotated[StrictStr, Field(max_length=16)]
    title: Text
    boundary: Text
    subject: Text
    reason: Text
    field: Text | None = None
    position: Int64 | None = None
    seq_id: Int64 | None = None
    expected: Text | None = None
    actual: Text | None = None
    token: Int64 | None = None
    bindings: Annotated[dict[Name, Int64], Field(max_length=64)] = {}


class SnapshotFile(BaseModel):
    """The whole file."""

    model_config = _STRICT
    format: Literal["specguard-snapshot"]
    version: Literal[1]
    written: Annotated[StrictStr, Field(max_length=64)]
    object: ObjectRecord
    state: ObjectRecord | None = None
    violations: Annotated[list[ViolationRecord], Field(max_length=1000)] = []


def read_model(raw: bytes) -> SnapshotFile:
    """Parse and validate a file's bytes (raises pydantic.ValidationError)."""
    return SnapshotFile.model_validate_json(raw)


def duplicate_key(raw: bytes) -> str | None:
    """The first key written twice in one JSON object, else None.

    Run on a file :func:`read_model` accepted, which bounds its size and nesting.
    """
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not found:
                found.append(key)
            seen.add(key)
        return dict(items)

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):  # not for this check to judge: read_model did
        return None
    return found[0] if found else None


class Budget:
    """How many array elements may still be written into one file."""

    def __init__(self, elements: int = MAX_ELEMENTS) -> None:
        self.left = elements

    def take(self, count: int) -> bool:
        if count > self.left:
            return False
        self.left -= count
        return True


def encode(value: Any, budget: Budget) -> dict[str, Any]:
    """The JSON form of one field value (arrays on a device are copied to the host)."""
    if value is None:
        return {"kind": "none"}
    if isinstance(value, bool | np.bool_):
        return {"kind": "bool", "value": bool(value)}
    if isinstance(value, int | np.integer) and _I64.min <= int(value) <= _I64.max:
        return {"kind": "int", "value": int(value)}
    array = _host_numpy(value)
    if array is not None and array.dtype.name in DTYPES and budget.take(array.size):
        return {"kind": "array", "dtype": array.dtype.name, "shape": list(array.shape),
                "data": array.reshape(-1).tolist()}
    if _int_list(value) and budget.take(_list_size(value)):
        return {"kind": "list", "value": [list(v) if isinstance(v, list | tuple) else int(v)
                                          for v in value]}
    return {"kind": "opaque", "type": describe(value)[:200]}


def _host_numpy(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        return value.detach().cpu().numpy()  # type: ignore[no-any-return]
    return None


def _int_list(value: Any) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    if not isinstance(value, list | tuple):
        return False
    if all(is_int(v) for v in value):
        return True
    return all(isinstance(v, list | tuple) and all(is_int(x) for x in v) for v in value)


def _list_size(value: Any) -> int:
    return sum(len(v) if isinstance(v, list | tuple) else 1 for v in value)


def decode_array(record: ArrayValue) -> np.ndarray:
    """The numpy array of a validated record; ValueError when data and shape disagree."""
    count = math.prod(record.shape)
    if count != len(record.data):
        raise ValueError(f"shape {record.shape} needs {count} elements, data has "
                         f"{len(record.data)}")
    is_bool = record.dtype == "bool"
    if record.data and isinstance(record.data[0], bool) != is_bool:
        raise ValueError(f"data elements do not match dtype {record.dtype}")
    if is_bool:
        return np.array(record.data, dtype=bool).reshape(record.shape)
    flat = np.array(record.data, dtype=np.int64)
    info = np.iinfo(np.dtype(record.dtype))
    if flat.size and (flat.min() < info.min or flat.max() > info.max):
        raise ValueError(f"values outside the range of {record.dtype}")
    return flat.astype(record.dtype).reshape(record.shape)
