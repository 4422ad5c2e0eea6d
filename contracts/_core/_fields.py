"""Compile a class's jaxtyping annotations into field specs, once, at class creation.

Readers and static tools see ``Index[Array, "num_decode mtp_k"]`` in the class body;
validation sees an :class:`ArrayField` with its allowed dtypes and parsed dimensions.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from specguard.contracts._core._dims import DIMENSIONS

__all__ = ["ArrayField", "AxisSpec", "FieldSpec", "ScalarField", "compile_fields"]

# jaxtyping lists numpy's spelling too; validation compares plain names (``bool``).
_DTYPE_ALIASES = {"bool_": "bool"}
_AXIS = re.compile(r"^(?:(?P<size>\d+)|(?P<name>[A-Za-z_]\w*)(?P<offset>[+-]\d+)?)$")


@dataclass(frozen=True)
class AxisSpec:
    """One axis: a fixed size, or a named dimension plus a constant offset (``mtp_k+1``)."""

    name: str | None
    size: int = 0
    offset: int = 0

    def expected(self, bindings: dict[str, int]) -> int | None:
        """The length this axis must have under ``bindings``, or None if still free."""
        if self.name is None:
            return self.size
        bound = bindings.get(self.name)
        return None if bound is None else bound + self.offset

    def __str__(self) -> str:
        if self.name is None:
            return str(self.size)
        return f"{self.name}{self.offset:+d}" if self.offset else self.name


@dataclass(frozen=True)
class ArrayField:
    """An array field: allowed dtype names and the axes in order."""

    name: str
    dtypes: frozenset[str]
    axes: tuple[AxisSpec, ...]
    optional: bool
    annotation: Any

    @property
    def shape_text(self) -> str:
        """The declared shape in named dimensions, e.g. ``[num_decode, mtp_k]``."""
        return "[" + ", ".join(str(a) for a in self.axes) + "]"


@dataclass(frozen=True)
class ScalarField:
    """A Python int (or bool) field; an int named like a dimension binds it."""

    name: str
    type: type
    minimum: int | None
    optional: bool
    binds: bool
    maximum: int | None = None


FieldSpec = ArrayField | ScalarField


def parse_axes(dim_str: str, owner: str) -> tuple[AxisSpec, ...]:
    """Parse a jaxtyping shape string limited to what contracts need."""
    axes = []
    for token in dim_str.split():
        match = _AXIS.match(token)
        if match is None:
            raise TypeError(f"{owner}: unsupported axis {token!r} in shape {dim_str!r}")
        if match["size"] is not None:
            axes.append(AxisSpec(None, size=int(match["size"])))
        else:
            axes.append(AxisSpec(match["name"], offset=int(match["offset"] or 0)))
    return tuple(axes)


def _split_optional(hint: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(members) == 1 and len(typing.get_args(hint)) == 2:
            return members[0], True
    return hint, False


def _field(name: str, hint: Any, minimum: int | None, owner: str, dims: set[str]) -> FieldSpec:
    inner, optional = _split_optional(hint)
    if hasattr(inner, "dim_str") and hasattr(inner, "dtypes"):
        axes = parse_axes(inner.dim_str, f"{owner}.{name}")
        dtypes = frozenset(_DTYPE_ALIASES.get(d, d) for d in map(str, inner.dtypes))
        return ArrayField(name, dtypes, axes, optional, hint)
    if inner in (int, bool):
        dim = DIMENSIONS.get(name)
        maximum = dim.maximum if dim is not None and inner is int else None
        return ScalarField(name, inner, minimum, optional, inner is int and name in dims, maximum)
    raise TypeError(f"{owner}.{name}: contract fields are jaxtyping arrays or ints, not {hint!r}")


def compile_fields(
    cls: type, minimums: dict[str, int] | None = None
) -> tuple[FieldSpec, ...]:
    """Every annotated field of ``cls`` in declaration order: scalars first, then arrays.

    Scalars come first because they are the source of truth for the dimensions they name
    (``mtp_k``, ``num_decode``): arrays are then checked against them.
    """
    hints = {
        name: hint
        for name, hint in typing.get_type_hints(cls, include_extras=True).items()
        if not name.startswith("_")
    }
    dims = {
        axis.name
        for hint in hints.values()
        if hasattr(_split_optional(hint)[0], "dim_str")
        for axis in parse_axes(_split_optional(hint)[0].dim_str, cls.__name__)
        if axis.name
    }
    minimums = minimums or {}
    specs = [
        _field(name, hint, minimums.get(name), cls.__name__, dims) for name, hint in hints.items()
    ]
    scalars = [s for s in specs if isinstance(s, ScalarField)]
    arrays = [s for s in specs if isinstance(s, ArrayField)]
    return (*scalars, *arrays)
