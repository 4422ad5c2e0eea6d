"""Clearances: one fused predicate that vouches for several value rules of a class.

A value rule answers with its first offender, so a clean object pays for every rule's
own passes; on the small arrays of a decode step numpy's fixed cost per call is most of
that. A clearance answers only "would every rule I cover pass?", in one pass that shares
what those rules share. True lets validation skip the rules it covers; False, or any
error, runs them, and they explain. A clearance must never say True where a covered rule
would find something: a property test holds each one to its rules' verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Clearance", "clearance", "clearance_for"]


@dataclass(frozen=True)
class Clearance:
    """``check(obj)`` is True only when every rule in ``covers`` passes on ``obj``, an
    object of ``subject`` with clean metadata whose arrays are numpy arrays."""

    subject: str
    covers: frozenset[str]
    check: Callable[[Any], bool]


_CLEARANCES: dict[str, Clearance] = {}


def clearance(subject: str, covers: Iterable[str]) -> Callable[[Callable[[Any], bool]],
                                                               Callable[[Any], bool]]:
    """Register ``check`` as the clearance of ``subject``'s rules ``covers``."""

    def register(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
        if subject in _CLEARANCES:
            raise ValueError(f"{subject} already has a clearance")
        _CLEARANCES[subject] = Clearance(subject, frozenset(covers), check)
        return check

    return register


def clearance_for(subject: str) -> Clearance | None:
    """The clearance registered for ``subject``, if any."""
    return _CLEARANCES.get(subject)
