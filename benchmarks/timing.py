"""Interleaved timeit: every candidate of a comparison timed in turn, repeat after repeat.

Shared machines drift by more than the differences being measured, so the candidates
of one comparison are never timed one after the other for seconds each. Each repeat
times every candidate once (in a rotating order), and ratios are taken per repeat
before the median, so that drift cancels between the two sides of a ratio.

The default clock is the process's CPU time (``time.process_time``): on a shared machine
other processes preempt this one, and wall-clock time would charge their slices to
whatever was being timed. ``time.perf_counter`` can be passed for wall-clock figures.
"""

from __future__ import annotations

import random
import statistics
import time
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Case", "Timings", "calibrate", "interleave"]


@dataclass(frozen=True)
class Case:
    """One timed statement and the names it reads."""

    stmt: str
    namespace: Mapping[str, Any]

    def timer(self, clock: Callable[[], float] = time.process_time) -> timeit.Timer:
        """A fresh timer of the statement."""
        return timeit.Timer(self.stmt, timer=clock, globals=dict(self.namespace))


@dataclass(frozen=True)
class Timings:
    """Per-call seconds of every candidate, one entry per repeat (in the same order)."""

    samples: Mapping[str, list[float]]

    def median(self, name: str) -> float:
        """The median per-call time of one candidate, in seconds."""
        return statistics.median(self.samples[name])

    def ratio(self, name: str, reference: str) -> float:
        """The median of the per-repeat ratios ``name / reference``."""
        pairs = zip(self.samples[name], self.samples[reference], strict=True)
        return statistics.median(a / b for a, b in pairs)


def calibrate(timer: timeit.Timer, target_s: float) -> int:
    """How many calls make one repeat last about ``target_s`` seconds.

    One call runs first, untimed: a first call's one-off costs (compiling a class's
    checks, cold caches, a first allocation) would otherwise make a slow statement look
    slower still and leave it with one or two calls a repeat.
    """
    timer.timeit(1)
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= target_s / 4 or number >= 1 << 24:
            break
        number *= 4
    return max(1, round(number * target_s / max(elapsed, 1e-9)))


def interleave(
    cases: Mapping[str, Case], *, repeats: int, target_s: float,
    clock: Callable[[], float] = time.process_time,
) -> Timings:
    """Time every case ``repeats`` times, interleaved; about ``target_s`` per timing.

    The order is shuffled in every repeat (with a fixed seed), so that no case always
    runs right after the same neighbour and inherits its cache and allocator state.
    """
    timers = {name: case.timer(clock) for name, case in cases.items()}
    numbers = {name: calibrate(timer, target_s) for name, timer in timers.items()}
    names = list(cases)
    order = random.Random(len(names) * 7919 + repeats)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        order.shuffle(names)
        for name in names:
            samples[name].append(timers[name].timeit(numbers[name]) / numbers[name])
    return Timings(samples)
