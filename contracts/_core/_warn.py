"""Warn mode's log: each distinct violation once, its repeats counted rather than logged.

An engine in warn mode meets the same broken object on every step: a hundred identical
calls would give a hundred identical lines and bury everything else. A violation is
"the same" when its rule, object, field and batch position are: the first is logged in
full, then one line at the 10th, 100th, 1000th... repeat saying how many were seen.
Every repeat is still counted (``STATS.repeats_not_logged``, and each listener still
hears of it), so nothing is lost but the noise.

The log is a listener of :mod:`._delivery` (:func:`log_warnings`, the first one
registered): told the mode of each delivery, it logs the warn-mode ones.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from specguard.contracts._core._config import Mode
from specguard.contracts._core._format import line, repeat_line
from specguard.contracts._core._stats import STATS
from specguard.contracts._core._violation import Violation

if TYPE_CHECKING:
    import logging

    from specguard.contracts._core._delivery import Delivery

__all__ = ["log_warnings", "warn"]

# Distinct violations remembered; past this many, new ones are logged but not tracked.
_MAX_TRACKED = 10_000


@cache
def _log() -> logging.Logger:
    """The ``specguard`` logger; :mod:`logging` is imported at the first warning, not at
    ``import specguard.contracts`` (a logger configured earlier is the same object)."""
    import logging

    return logging.getLogger("specguard")


def log_warnings(delivery: Delivery) -> None:
    """The logging listener: each violation of a warn-mode delivery, :func:`warn`'s way."""
    if delivery.mode is Mode.WARN:
        for violation in delivery.violations:
            warn(violation)


def warn(violation: Violation) -> None:
    """Log ``violation`` the warn-mode way: in full the first time, then its repeat count."""
    key = (violation.code, violation.subject, violation.field, violation.position)
    seen = STATS.warned.get(key, 0) + 1
    if seen > 1 or len(STATS.warned) < _MAX_TRACKED:
        STATS.warned[key] = seen
    if seen == 1:
        _log().warning("specguard: %s", line(violation))
    elif _is_power_of_ten(seen):
        _log().warning("specguard: %s", repeat_line(violation, seen))
    else:
        STATS.repeats_not_logged += 1


def _is_power_of_ten(count: int) -> bool:
    while count % 10 == 0:
        count //= 10
    return count == 1
