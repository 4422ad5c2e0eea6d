"""How much of a step goes to contract checks: object construction and guarded calls.

Boundary objects validate themselves when built, so building one is timed as a whole
(with contracts off nothing is validated, and construction is plain engine work); so is
work done only for the checks, such as recording a forward for the step tracker. A
guarded method is timed around ``specguard.adapters.guard`` with its own body excluded, which
leaves exactly the time spent checking its arguments and result.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from specguard import contracts
from specguard.adapters import guard, snapshots

__all__ = ["CLOCK", "ContractClock", "guarded"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
P = ParamSpec("P")
B = TypeVar("B", bound=contracts.BoundaryObject)
_NO_RETURN_SPEC = object()


class ContractClock:
    """Seconds spent in contract checks since the last :meth:`reset`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._excluded = 0.0
        self._timing = False  # inside a timed call: a nested one is already counted

    def reset(self) -> None:
        """Start counting from zero."""
        self.seconds = 0.0
        self._excluded = 0.0

    def build(self, cls: type[B], /, **fields: Any) -> B:
        """Build a boundary object, counting its time as checking (unless off).

        A violation is written to a snapshot first when ``SPECGUARD_SNAPSHOT_DIR`` is set.
        """
        return self.checking(snapshots.built, cls, **fields)

    def checking(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Call ``fn``, work done only for the checks, counting its time (unless off)."""
        if self._timing or contracts.current_config().mode is contracts.Mode.OFF:
            return fn(*args, **kwargs)
        self._timing = True
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self._timing = False

    def around_checks(self, fn: F) -> F:
        """Count a call's time, minus what :meth:`body` excludes, as checking."""

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start, excluded = time.perf_counter(), self._excluded
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start - (self._excluded - excluded)

        return cast(F, timed)

    def body(self, fn: F) -> F:
        """Exclude a method body from the checking time of the call around it."""

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._excluded += time.perf_counter() - start

        return cast(F, timed)


CLOCK = ContractClock()


def guarded(returns: Any = _NO_RETURN_SPEC, /, **params: Any) -> Callable[[F], F]:
    """``specguard.adapters.guard`` with its checking time on :data:`CLOCK`.

    When the guard is disabled (mode off at import) the method is returned untouched.
    """

    def decorate(fn: F) -> F:
        body = CLOCK.body(fn)
        checker = guard(**params) if returns is _NO_RETURN_SPEC else guard(returns, **params)
        checked = checker(body)
        if checked is body:
            return fn
        return CLOCK.around_checks(checked)

    return decorate
