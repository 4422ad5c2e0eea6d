"""Value predicates that rules call, with one policy for arrays on an accelerator.

A rule asks "is every element of ``a`` in ``[lo, hi)``?" and passes ``explain``, which
turns the index of the first offender into a :class:`Finding`. On the host the answer is
computed at once (one vectorised pass; the offender is located only on failure). On an
accelerator the :class:`DeviceValues` policy decides: a deferred verdict read at the next
sync point, ``torch._assert_async``, or an opt-in synchronous read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specguard.contracts._core._arrays import UNSIGNED, array_kind
from specguard.contracts._core._config import Config, Depth, DeviceValues
from specguard.contracts._core._deferred import PendingVerdict, submit
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import maximum_of as _maximum
from specguard.contracts._core._numpy_calls import minimum_of as _minimum
from specguard.contracts._core._violation import Finding

__all__ = ["HOST_DEVICE_TYPES", "Explain", "ValueChecks", "all_within", "host_twin",
           "on_host", "plain_twin", "scalar_mask"]

Explain = Callable[[int], Finding]

#: Device types whose values are read directly. Tests empty it to drive the device path.
HOST_DEVICE_TYPES: set[str] = {"cpu"}

# The unsigned view sends every negative value to at least 2**(bits-1): one maximum
# below ``hi`` proves "none negative, none too big" only for ``hi`` up to that reach.
#: Per signed dtype, its unsigned twin and that reach: one lookup on the hot path.
_UNSIGNED_BOUND: dict[np.dtype[Any], tuple[Any, int]] = {
    dtype: (unsigned, 2 ** (8 * dtype.itemsize - 1)) for dtype, unsigned in UNSIGNED.items()}

# Bound once: these run on every validation, and the method wrappers cost more than the
# reduction itself for the small arrays of a decode step.
_ndarray = np.ndarray
_bool_scalars = (np.bool_, bool)


_COMPARE: dict[str, Callable[[Any, int], Any]] = {
    "lt": lambda a, b: a < b,
    "ge": lambda a, b: a >= b,
    "gt": lambda a, b: a > b,
    "ne": lambda a, b: a != b,
}
# What a comparison answers for every element when the bound lies below the dtype's range.
_BELOW_RANGE = {"lt": False, "ge": True, "gt": True, "ne": True}
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def scalar_mask(a: Any, op: str, bound: int) -> Any:
    """``a < bound`` (``"lt"``, ``"ge"``, ``"gt"``, ``"ne"``), exact for any integer bound.

    numpy compares a bound outside the array's dtype exactly; torch first casts it to the
    tensor's dtype, so in int32 ``2**32 + 5`` compares equal to 5 (and ``2**70`` raises).
    A bound outside the dtype's range gives the same answer for every element.
    """
    compare = _COMPARE[op]
    if type(a) is _ndarray or _INT32_MIN <= bound <= _INT32_MAX or array_kind(a) != "torch":
        return compare(a, bound)
    import torch

    info = torch.iinfo(a.dtype)
    if info.min <= bound <= info.max:
        return compare(a, bound)
    below = bound < info.min
    return torch.full_like(a, below if op != "lt" else not below, dtype=torch.bool)


def all_within(a: np.ndarray, hi: int) -> bool:
    """Whether every element of the host array ``a`` lies in ``[0, hi)``.

    Negative values wrap to huge unsigned ones, so one maximum of the unsigned view
    covers both ends wherever ``hi`` is within its reach; else a minimum and a maximum.
    """
    if not a.size:
        return True
    bound = _UNSIGNED_BOUND.get(a.dtype)
    if bound is not None and hi <= bound[1]:
        return bool(_maximum(a.view(bound[0]), None) < hi)
    return bool(_minimum(a, None) >= 0 and _maximum(a, None) < hi)


def _numpy_first_outside(a: np.ndarray, lo: int, hi: int) -> int | None:
    if lo == 0:
        clean = all_within(a, hi)
    else:
        clean = not a.size or bool(_minimum(a, None) >= lo and _maximum(a, None) < hi)
    if clean:
        return None
    bad = (a < lo) | (a >= hi)
    return int(np.flatnonzero(bad)[0])


def _numpy_first_true(mask: np.ndarray) -> int | None:
    # count_nonzero is a plain C loop: several times cheaper than .any() on small masks.
    if not _count_nonzero(mask):
        return None
    return int(np.flatnonzero(mask)[0])


def _host_view(t: Any) -> np.ndarray | None:
    """A numpy view of a CPU tensor's memory (no copy), or None when torch refuses one."""
    try:
        view: np.ndarray = t.numpy()
    except (RuntimeError, TypeError, ValueError):
        return None
    return view


def on_host(t: Any) -> bool:
    """Whether tensor ``t``'s values are read on the host (its device is a host type)."""
    # ``is_cpu`` is an attribute read; ``device.type`` builds a device object first.
    if t.is_cpu:
        return "cpu" in HOST_DEVICE_TYPES
    return bool(t.device.type in HOST_DEVICE_TYPES)


def _host_array(a: Any) -> np.ndarray | None:
    """``a`` itself, or a view of a host tensor's memory; None when values need a device."""
    if type(a) is _ndarray or array_kind(a) == "numpy":
        return a  # type: ignore[no-any-return]
    if hasattr(a, "is_cpu") and on_host(a):
        return _host_view(a)
    return None


def _first(hits: np.ndarray) -> int | None:
    found = np.flatnonzero(hits)
    return int(found[0]) if found.shape[0] else None


def _torch_host_first_outside(a: Any, lo: int, hi: int) -> int | None:
    if a.numel() == 0:
        return None
    view = _host_view(a)
    if view is not None:
        return _numpy_first_outside(view, lo, hi)
    import torch

    # One pass for both ends: aminmax is the cheapest torch reduction for this.
    low, high = torch.aminmax(a)
    if int(low) >= lo and int(high) < hi:
        return None
    bad = scalar_mask(a, "lt", lo) | scalar_mask(a, "ge", hi)
    return int(bad.reshape(-1).nonzero()[0, 0])


def _torch_host_first_true(mask: Any) -> int | None:
    view = _host_view(mask)
    if view is not None:
        return _numpy_first_true(view)
    if not bool(mask.any()):
        return None
    return int(mask.reshape(-1).nonzero()[0, 0])


def host_twin(obj: Any, anchor: str, names: tuple[str, ...]) -> Any:
    """``obj``, or a copy of it whose CPU tensors are numpy views of the same memory.

    Rules are backend-neutral, and on CPU tensors every torch operation pays several
    microseconds of dispatch where numpy pays well under one; reading the same memory
    through numpy views gives the same answers for a fraction of the cost, copying
    nothing. Only for objects whose metadata is clean, so ``anchor`` (a required array
    field) tells the backend and device of every array.
    """
    first = getattr(obj, anchor)
    kind = type(first)
    if kind is _ndarray or not hasattr(first, "is_cpu") or not on_host(first):
        return obj
    twin = object.__new__(type(obj))
    assign = object.__setattr__  # the twin is frozen like ``obj``
    try:
        for name in names:
            value = getattr(obj, name)
            # Clean metadata: every array field is of the anchor's type.
            assign(twin, name, value.numpy() if type(value) is kind else value)
    except (RuntimeError, TypeError, ValueError):  # a tensor numpy cannot view
        return obj
    return twin


def plain_twin(obj: Any, names: tuple[str, ...]) -> Any:
    """``obj``, or a copy of it whose ndarray subclasses are plain ndarray views.

    A subclass can override ``__array_ufunc__`` (or any method) and make the reductions
    of a value check answer whatever it likes; a base-class view of the same memory
    cannot. Only the metadata slow path pays for this: the fast path sees plain arrays.
    """
    subclassed = [name for name in names
                  if isinstance(getattr(obj, name), np.ndarray)
                  and type(getattr(obj, name)) is not _ndarray]
    if not subclassed:
        return obj
    twin = object.__new__(type(obj))
    assign = object.__setattr__  # the twin is frozen like ``obj``
    for name in names:
        value = getattr(obj, name)
        # The unbound base method: a subclass cannot intercept its own conversion.
        assign(twin, name, _ndarray.view(value, _ndarray) if name in subclassed else value)
    return twin


class ValueChecks:
    """The checks a value rule reads its arrays through, for one validation, under one
    policy: host arrays are answered at once, device arrays as ``device_values`` says
    (a deferred verdict, an asserted one or a read now)."""

    __slots__ = ("_config", "_pending", "_subject", "rule")

    def __init__(self, config: Config, subject: str) -> None:
        self._config = config
        self._subject = subject
        self._pending: list[PendingVerdict] = []
        self.rule = ""

    @property
    def full(self) -> bool:
        """Whether this validation runs at ``full`` depth: a rule whose check reads
        further there (see ``Rule.deeper``) asks this."""
        return self._config.depth is Depth.FULL

    def outside(self, a: Any, lo: int, hi: int, explain: Explain) -> Finding | None:
        """A finding for the first element outside ``[lo, hi)``, else None."""
        if type(a) is _ndarray and lo == 0 and a.size:
            bound = _UNSIGNED_BOUND.get(a.dtype)
            # The common case inline: ids in [0, hi), one maximum of the unsigned view.
            if bound is not None and hi <= bound[1] and _maximum(a.view(bound[0]), None) < hi:
                return None
        if type(a) is _ndarray or array_kind(a) == "numpy":
            index = _numpy_first_outside(a, lo, hi)
        elif on_host(a):
            index = _torch_host_first_outside(a, lo, hi)
        else:
            return self._on_device(scalar_mask(a, "lt", lo) | scalar_mask(a, "ge", hi), explain)
        return None if index is None else explain(index)

    def any_true(self, mask: Any, explain: Explain) -> Finding | None:
        """A finding for the first True element of a boolean mask, else None."""
        kind = type(mask)
        if kind is _ndarray:
            if not _count_nonzero(mask):  # the common answer, without a helper call
                return None
            index = _numpy_first_true(mask)
        elif kind in _bool_scalars:
            index = 0 if mask else None
        elif isinstance(mask, np.ndarray | np.generic | bool):
            index = _numpy_first_true(np.asarray(mask))
        elif on_host(mask):
            index = _torch_host_first_true(mask)
        else:
            return self._on_device(mask, explain)
        return None if index is None else explain(index)

    def above(self, a: Any, limit: int, explain: Explain) -> Finding | None:
        """A finding for the first element greater than ``limit``, else None.

        Same answer as ``any_true(a > limit, ...)``; on the host one maximum decides, and
        the mask is built only to locate an offender.
        """
        if type(a) is _ndarray and (not a.size or _maximum(a, None) <= limit):
            return None  # the common answer, without a helper call
        host = _host_array(a)
        if host is None:
            return self.any_true(scalar_mask(a, "gt", limit), explain)
        if host.size == 0 or _maximum(host, None) <= limit:
            return None
        index = _first(host > limit)
        return None if index is None else explain(index)

    def below(self, a: Any, limit: int, explain: Explain) -> Finding | None:
        """A finding for the first element less than ``limit``, else None.

        Same answer as ``any_true(a < limit, ...)``; on the host one minimum decides.
        """
        if type(a) is _ndarray and (not a.size or _minimum(a, None) >= limit):
            return None  # the common answer, without a helper call
        host = _host_array(a)
        if host is None:
            return self.any_true(scalar_mask(a, "lt", limit), explain)
        if host.size == 0 or _minimum(host, None) >= limit:
            return None
        index = _first(host < limit)
        return None if index is None else explain(index)

    def _on_device(self, bad: Any, explain: Explain) -> Finding | None:
        import torch

        if bad.device.type == "meta":
            return None  # meta tensors carry shapes only: there are no values to check
        flat = bad.reshape(-1)
        if flat.shape[0] == 0:
            return None  # nothing to check; argmax of an empty tensor raises (shape only)
        policy = self._config.device_values
        if policy is DeviceValues.ASSERT:
            # torch's one device-side assert that never syncs; it is not in torch.__all__.
            torch._assert_async(  # pyright: ignore[reportPrivateImportUsage]
                ~flat.any(), f"specguard {self.rule} on {self._subject}")
            return None
        first = torch.where(
            flat.any(), flat.to(torch.int8).argmax(), torch.full_like(flat[:1].sum(), -1)
        ).to(torch.int64)
        if policy is DeviceValues.SYNC:
            index = int(first)
            return None if index < 0 else explain(index)
        self._pending.append(PendingVerdict(first, self.rule, self._subject, explain))
        return None

    def finish(self) -> None:
        """Hand this validation's device verdicts to the deferred queue, without a sync."""
        if self._pending:
            submit(self._pending)
            self._pending = []
