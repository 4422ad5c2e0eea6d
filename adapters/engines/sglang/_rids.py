"""The request ids of an SGLang batch, read only when something needs them.

A batch's ``reqs`` are Python objects, and reading ``rid`` from each is one attribute
lookup per request: at 4096 requests more than the checks of the batch's tensors. A view
that follows no request from step to step needs the ids for one thing only, to name the
request of a violation, so it hands :class:`RequestIds` to the objects it builds: its
length is the batch's, and the ids are read on the first look at one of them. The
requests are the batch's list as it was handed over (a copy of the list, the same
``Req`` objects, whose ``rid`` never changes), so a late read names the same requests.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, overload

__all__ = ["Picked", "RequestIds", "read_rids"]

_RID = attrgetter("rid")


def read_rids(reqs: Sequence[Any]) -> tuple[str, ...]:
    """Each ``Req``'s ``rid`` (SGLang's are strings; its batch position, as a string, for
    a request without one), in one C-level pass when every request has one."""
    try:
        return tuple(map(_RID, reqs))
    except Exception:  # a hostile Req must not replace the violation being reported
        return tuple(_one_rid(r, i) for i, r in enumerate(reqs))


def _one_rid(req: Any, position: int) -> str:
    """One request's ``rid``, or its batch position when reading it fails: the ids may be
    read while a violation is being reported, which a broken ``Req`` must not replace."""
    try:
        return str(req.rid)
    except Exception:
        return str(position)


class RequestIds(Sequence[str]):
    """The ``rid`` of each request of ``reqs``, read on first use (see the module)."""

    __slots__ = ("_read", "_reqs")

    def __init__(self, reqs: Sequence[Any]) -> None:
        self._reqs = reqs
        self._read: tuple[str, ...] | None = None

    def ids(self) -> tuple[str, ...]:
        """Every id, read now if not yet."""
        if self._read is None:
            self._read = read_rids(self._reqs)
        return self._read

    def __len__(self) -> int:
        return len(self._reqs)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.ids()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestIds):
            # The very same Req objects have the same ids; read them only otherwise.
            if self._reqs is other._reqs or _same_objects(self._reqs, other._reqs):
                return True
            other = other.ids()
        return self.ids() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RequestIds(<{len(self)} requests>)"


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


class Picked(Sequence[str]):
    """``names[i]`` for each ``i`` of ``positions``, looked up when one is read: the names
    of the requests a later hand-over keeps (the unfinished ones of a verified batch)."""

    __slots__ = ("_names", "_positions")

    def __init__(self, names: Sequence[str], positions: Sequence[int]) -> None:
        self._names, self._positions = names, positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self._names[p] for p in self._positions[index]]
        return self._names[self._positions[index]]
