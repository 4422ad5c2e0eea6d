"""Boundary-object cases and how their arrays are laid out in memory.

A :class:`Case` keeps canonical values (int64 and bool numpy arrays, Python ints) and how
to lay them out; :meth:`Case.kwargs` materialises fresh arrays on every call, in the
requested backend, id dtype and memory layout (strides, offsets, Fortran order, read-only
and broadcast views).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from specguard import contracts
from specguard.contracts import DraftTokens

Draw = Callable[[st.SearchStrategy[Any]], Any]
Rng = np.random.Generator

BACKENDS = ("numpy", "torch")
ID_DTYPES = ("int32", "int64")
#: How an array is laid out in memory; every layout holds the same values.
STYLES = ("contiguous", "strided", "offset", "fortran", "columns", "readonly", "reversed",
          "broadcast")
#: Upper bound of the "thousands of seqs" size class.
MAX_SEQS = 2048
INT32_MAX = 2**31 - 1
_JUNK = -7  # what surrounds a view in its bigger buffer: an invalid id for every rule


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """A boundary object to build: canonical values, their layout, and late overrides."""

    cls: type[contracts.BoundaryObject]
    values: Mapping[str, Any]
    backend: str = "numpy"
    dtypes: Mapping[str, str] = field(default_factory=dict)
    styles: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)

    def with_values(self, **values: Any) -> Case:
        """The same case with some canonical values replaced."""
        return dataclasses.replace(self, values={**self.values, **values})

    def with_after(self, name: str, change: Callable[[Any], Any]) -> Case:
        """The same case whose field ``name`` is changed after materialisation."""
        return dataclasses.replace(self, after={**self.after, name: change})

    def kwargs(self) -> dict[str, Any]:
        """Fresh constructor arguments: arrays in the case's backend, dtypes and styles."""
        out = {}
        for name, value in self.values.items():
            made = materialize(value, self.backend, self.dtypes.get(name, "int64"),
                               self.styles.get(name, "contiguous"))
            out[name] = self.after[name](made) if name in self.after else made
        return out

    def build(self) -> Any:
        """Construct (and so validate, under the config in force) the object."""
        return self.cls(**self.kwargs())

    def __repr__(self) -> str:
        shapes = {k: contracts.describe(v) for k, v in self.kwargs().items()}
        return (f"Case({self.cls.__name__}, {self.backend}, styles={dict(self.styles)}, "
                f"after={sorted(self.after)}, {shapes})")


@dataclass(frozen=True)
class MappingCase:
    """Arguments of :meth:`DraftTokens.from_mapping`, the engines' usual form of drafts."""

    seq_ids: Any
    drafts: Any
    mtp_k: Any
    vocab_size: Any
    placeholder: Any = 0
    dtype: Any = np.int32

    def build(self) -> Any:
        """Call ``DraftTokens.from_mapping`` with these arguments."""
        return DraftTokens.from_mapping(
            self.seq_ids, self.drafts, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
            placeholder=self.placeholder, dtype=self.dtype)


# ------------------------------------------------------------------ materialisation


def _fits_int32(a: np.ndarray) -> bool:
    return a.size == 0 or bool(a.min() >= -(2**31) and a.max() <= INT32_MAX)


def materialize(value: Any, backend: str, dtype: str, style: str) -> Any:
    """A fresh array holding ``value`` in the given backend, id dtype and memory layout."""
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype != np.bool_:
        wanted = dtype if dtype == "int64" or _fits_int32(value) else "int64"
        value = value.astype(wanted)
    if backend == "torch":
        return _torch_layout(torch.from_numpy(value.copy()), style)
    return _numpy_layout(value.copy(), style)


def _junk_buffer(shape: tuple[int, ...], dtype: Any, like: str) -> Any:
    if like == "torch":
        fill = True if dtype == torch.bool else _JUNK
        return torch.full(shape, fill, dtype=dtype)
    return np.full(shape, True if dtype == np.bool_ else _JUNK, dtype=dtype)


def _numpy_layout(a: np.ndarray, style: str) -> np.ndarray:
    if a.ndim == 0 or style == "contiguous":
        return a
    if style == "strided":
        buffer = _junk_buffer((2 * a.shape[0], *a.shape[1:]), a.dtype, "numpy")
        buffer[::2] = a
        return buffer[::2]
    if style == "offset":
        buffer = _junk_buffer((a.shape[0] + 5, *a.shape[1:]), a.dtype, "numpy")
        buffer[2 : 2 + a.shape[0]] = a
        return buffer[2 : 2 + a.shape[0]]
    if style == "fortran":
        return np.asfortranarray(a) if a.ndim == 2 else a
    if style == "columns" and a.ndim == 2:
        buffer = _junk_buffer((a.shape[0], a.shape[1] + 3), a.dtype, "numpy")
        buffer[:, 1 : 1 + a.shape[1]] = a
        return buffer[:, 1 : 1 + a.shape[1]]
    if style == "readonly":
        a.flags.writeable = False
        return a
    if style == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if style == "broadcast" and a.size and (a == a.reshape(-1)[0]).all():
        return np.broadcast_to(a.reshape(-1)[:1].reshape((1,) * a.ndim), a.shape)
    return a


def _torch_layout(t: torch.Tensor, style: str) -> torch.Tensor:
    if t.ndim == 0 or style == "contiguous":
        return t
    if style == "strided":
        buffer = _junk_buffer((2 * t.shape[0], *t.shape[1:]), t.dtype, "torch")
        buffer[::2] = t
        return buffer[::2]
    if style == "offset":
        buffer = _junk_buffer((t.shape[0] + 5, *t.shape[1:]), t.dtype, "torch")
        buffer[2 : 2 + t.shape[0]] = t
        return buffer[2 : 2 + t.shape[0]]
    if style == "fortran" and t.ndim == 2:
        return t.t().contiguous().t()
    if style == "columns" and t.ndim == 2:
        buffer = _junk_buffer((t.shape[0], t.shape[1] + 3), t.dtype, "torch")
        buffer[:, 1 : 1 + t.shape[1]] = t
        return buffer[:, 1 : 1 + t.shape[1]]
    if style == "broadcast" and t.numel() and bool((t == t.reshape(-1)[0]).all()):
        return t.reshape(-1)[:1].reshape((1,) * t.ndim).expand(t.shape)
    return t


def seeded_rng(draw: Draw) -> Rng:
    """A numpy generator seeded by Hypothesis: bulk values cost one draw and shrink."""
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def other_backend(value: Any) -> Any:
    """The same values on the other backend (numpy ↔ torch)."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    return value.numpy().copy()


def on_meta_device(value: Any) -> Any:
    """A data-less tensor of the same shape on torch's meta device."""
    dtype = torch.bool if value.dtype in (np.bool_, torch.bool) else torch.int64
    return torch.empty(tuple(value.shape), dtype=dtype, device="meta")
