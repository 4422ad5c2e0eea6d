"""Run a clearance test on each implementation: the compiled kernels and numpy.

A clearance asks ``specguard.contracts._core._compiled.KERNELS`` first and answers in
numpy where it is None or declines, so each property test of the clearances runs twice:
once with the compiled module (skipped where this install has none) and once without.
With the compiled module, every call is counted by its answer, so that a test can tell
that the kernels really answered rather than declining everything to numpy.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from specguard.contracts._core import _compiled

IMPLEMENTATIONS = ("compiled", "numpy")


class CountingKernels:
    """The compiled module, each function's answers counted (True, False or None)."""

    def __init__(self, kernels: Any) -> None:
        self._kernels = kernels
        self.answers: collections.Counter[tuple[str, bool | None]] = collections.Counter()

    def __getattr__(self, name: str) -> Callable[..., bool | None]:
        function = getattr(self._kernels, name)

        def counted(*args: Any) -> bool | None:
            verdict: bool | None = function(*args)
            self.answers[(name, verdict)] += 1
            return verdict

        return counted

    def declined(self) -> int:
        return sum(n for (_, verdict), n in self.answers.items() if verdict is None)

    def answered(self) -> int:
        return sum(n for (_, verdict), n in self.answers.items() if verdict is not None)


def require(implementation: str) -> None:
    """Skip a compiled run where this install has no compiled kernels."""
    if implementation == "compiled" and _compiled.load_kernels() is None:
        pytest.skip("this install has no compiled kernels (built only with a C compiler)")


@contextlib.contextmanager
def kernels_as(implementation: str) -> Iterator[CountingKernels | None]:
    """Clearances answer with ``implementation`` inside the block."""
    require(implementation)
    previous = _compiled.KERNELS
    counting = CountingKernels(_compiled.load_kernels()) if implementation == "compiled" else None
    _compiled.KERNELS = counting  # type: ignore[assignment]
    try:
        yield counting
    finally:
        _compiled.KERNELS = previous
