"""Request ids by tracker id: how an engine view names the seqs of a tracker's violations.

Engines key requests by strings; a :class:`~specguard.adapters.StepTracker` numbers them.
A view keeps the map from number to request id and hands the tracker this read-only
sequence, so a violation says ``request 'r7'`` instead of ``seq 12``. A number the view no
longer knows reads ``#<number>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

__all__ = ["TrackedNames"]


class TrackedNames(Sequence[str]):
    """Request ids by tracker id, for naming the tracker's violations: ``names[id]``."""

    def __init__(self, names: dict[int, str]) -> None:
        self._by_id = names
        self._length: int | None = None  # read only when a violation is named

    def __len__(self) -> int:
        if self._length is None:
            self._length = max(self._by_id, default=-1) + 1
        return self._length

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._by_id.get(index, f"#{index}")
