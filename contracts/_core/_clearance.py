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
    object of ``subject`` with clean metadata whose arrays are numpy arrays.

    ``compiled``, where the clearance has one, is its compiled half alone: the answer
    ``check`` gives, or None where it gives none (no kernels here, a form of input they
    do not read). It also reads CPU torch tensors in place, so an object of them is
    cleared without numpy views of its tensors being made first.
    """

    subject: str
    covers: frozenset[str]
    check: Callable[[Any], bool]
    compiled: Callable[[Any], bool | None] | None = None


_CLEARANCES: dict[str, Clearance] = {}


def clearance(subject: str, covers: Iterable[str], *,
              compiled: Callable[[Any], bool | None] | None = None
              ) -> Callable[[Callable[[Any], bool]], Callable[[Any], bool]]:
    """Register ``check`` as the clearance of ``subject``'s rules ``covers``: ``compiled``
    (where given) answers first, and the numpy ``check`` only where it gives no answer."""

    def register(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
        if subject in _CLEARANCES:
            raise ValueError(f"{subject} already has a clearance")
        whole = check if compiled is None else _compiled_first(compiled, check)
        _CLEARANCES[subject] = Clearance(subject, frozenset(covers), whole, compiled)
        return check

    return register


def _compiled_first(compiled: Callable[[Any], bool | None],
                    numpy_check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def check(obj: Any) -> bool:
        found = compiled(obj)
        return numpy_check(obj) if found is None else found

    return check


def clearance_for(subject: str) -> Clearance | None:
    """The clearance registered for ``subject``, if any."""
    return _CLEARANCES.get(subject)
