"""Warn mode's log: each distinct violation once, its repeats counted rather than logged.

An engine in warn mode meets the same broken object on every step: a hundred identical
calls would give a hundred identical lines and bury everything else. A violation is
"the same" when its rule, object, field and batch position are: the first is logged in
full, then one line at the 10th, 100th, 1000th... repeat saying how many were seen.
Every repeat is still counted (``STATS.repeats_not_logged``, and each listener still
hears of it), so nothing is lost but the noise.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from specguard.contracts._core._stats import STATS
from specguard.contracts._core._violation import Violation

if TYPE_CHECKING:
    import logging

__all__ = ["warn"]

# Distinct violations remembered; past this many, new ones are logged but not tracked.
_MAX_TRACKED = 10_000


@cache
def _log() -> logging.Logger:
    """The ``specguard`` logger; :mod:`logging` is imported at the first warning, not at
    ``import specguard.contracts`` (a logger configured earlier is the same object)."""
    import logging

    return logging.getLogger("specguard")


def warn(violation: Violation) -> None:
    """Log ``violation`` the warn-mode way: in full the first time, then its repeat count."""
    key = (violation.code, violation.subject, violation.field, violation.position)
    seen = STATS.warned.get(key, 0) + 1
    if seen > 1 or len(STATS.warned) < _MAX_TRACKED:
        STATS.warned[key] = seen
    if seen == 1:
        _log().warning("specguard: %s", violation.format())
    elif _is_power_of_ten(seen):
        target = f"{violation.subject}.{violation.field}" if violation.field else violation.subject
        where = f" at batch position {violation.position}" if violation.position is not None else ""
        _log().warning("specguard: %s on %s%s seen %d times (repeats are counted, not logged; "
                     "next line at %d)", violation.code, target, where, seen, seen * 10)
    else:
        STATS.repeats_not_logged += 1


def _is_power_of_ten(count: int) -> bool:
    while count % 10 == 0:
        count //= 10
    return count == 1
