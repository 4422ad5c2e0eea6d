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

from contracts._core._arrays import array_kind
from contracts._core._config import Config, DeviceValues
from contracts._core._deferred import PendingVerdict, submit
from contracts._core._violation import Finding

__all__ = ["HOST_DEVICE_TYPES", "Explain", "Values"]

Explain = Callable[[int], Finding]

#: Device types whose values are read directly. Tests empty it to drive the device path.
HOST_DEVICE_TYPES: set[str] = {"cpu"}

_UNSIGNED = {np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64}


def _numpy_first_outside(a: np.ndarray, lo: int, hi: int) -> int | None:
    unsigned = _UNSIGNED.get(a.dtype)
    if unsigned is not None and lo == 0:
        # Negative ids wrap to huge unsigned values, so one comparison covers both ends.
        if np.less(a.view(unsigned), hi).all():
            return None
    elif a.size == 0 or (a.min() >= lo and a.max() < hi):
        return None
    bad = (a < lo) | (a >= hi)
    return int(np.flatnonzero(bad.ravel())[0])


def _torch_host_first_outside(a: Any, lo: int, hi: int) -> int | None:
    if a.numel() == 0:
        return None
    import torch

    # One pass for both ends: aminmax is the cheapest torch reduction for this.
    low, high = torch.aminmax(a)
    if int(low) >= lo and int(high) < hi:
        return None
    bad = (a < lo) | (a >= hi)
    return int(bad.reshape(-1).nonzero()[0, 0])


class Values:
    """The value-check context of one validation: host answers now, device ones later."""

    __slots__ = ("_config", "_pending", "_subject", "rule")

    def __init__(self, config: Config, subject: str) -> None:
        self._config = config
        self._subject = subject
        self._pending: list[PendingVerdict] = []
        self.rule = ""

    def outside(self, a: Any, lo: int, hi: int, explain: Explain) -> Finding | None:
        """A finding for the first element outside ``[lo, hi)``, else None."""
        if array_kind(a) == "numpy":
            index = _numpy_first_outside(a, lo, hi)
        elif a.device.type in HOST_DEVICE_TYPES:
            index = _torch_host_first_outside(a, lo, hi)
        else:
            return self._on_device((a < lo) | (a >= hi), explain)
        return None if index is None else explain(index)

    def any_true(self, mask: Any, explain: Explain) -> Finding | None:
        """A finding for the first True element of a boolean mask, else None."""
        if isinstance(mask, np.ndarray | np.generic | bool):
            mask = np.asarray(mask)
            if not mask.any():
                return None
            return explain(int(np.flatnonzero(mask.ravel())[0]))
        if mask.device.type in HOST_DEVICE_TYPES:
            if not bool(mask.any()):
                return None
            return explain(int(mask.reshape(-1).nonzero()[0, 0]))
        return self._on_device(mask, explain)

    def _on_device(self, bad: Any, explain: Explain) -> Finding | None:
        import torch

        if bad.device.type == "meta":
            return None  # meta tensors carry shapes only: there are no values to check
        flat = bad.reshape(-1)
        policy = self._config.device_values
        if policy is DeviceValues.ASSERT:
            torch._assert_async(~flat.any(), f"specguard {self.rule} on {self._subject}")
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
