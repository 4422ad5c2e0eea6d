"""Interleaved timing: calibration, shuffled repeats and paired ratios (no clock assertions)."""

from __future__ import annotations

import itertools

from specguard.benchmarks.timing import Case, Timings, calibrate, interleave


def test_ratio_is_the_median_of_per_repeat_ratios():
    """Ratios pair repeats before the median, so drift shared by both sides cancels."""
    timings = Timings({"a": [2.0, 4.0, 9.0], "b": [1.0, 2.0, 3.0]})
    assert timings.ratio("a", "b") == 2.0
    assert timings.median("a") == 4.0


def test_calibrate_aims_for_the_target_duration():
    """With a clock that advances one second per call, a 100 s target means 100 calls."""
    calls = itertools.count()
    now = [0]

    def tick():
        now[0] = next(calls)

    timer = Case("tick()", {"tick": tick}).timer(lambda: float(now[0]))
    assert calibrate(timer, 100.0) == 100


def test_interleave_times_every_case_once_per_repeat():
    """Every case gets one sample per repeat and the statements really run."""
    calls = {"a": 0, "b": 0}

    def count(name):
        calls[name] += 1

    cases = {name: Case(f"count({name!r})", {"count": count}) for name in calls}
    timings = interleave(cases, repeats=5, target_s=0.0001)
    assert {name: len(samples) for name, samples in timings.samples.items()} == {"a": 5, "b": 5}
    assert calls["a"] >= 5 and calls["b"] >= 5
