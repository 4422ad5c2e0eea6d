"""Contract time: boundary constructions and guarded checks, method bodies excluded."""

from __future__ import annotations

import numpy as np
import pytest

from specguard import contracts
from specguard.runner import _timing
from specguard.runner._timing import ContractClock


class FakeTime:
    """A perf_counter that advances by a set amount per reading."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 1.0

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def fake_time(monkeypatch):
    """Replace the clock module's time source with a deterministic one."""
    fake = FakeTime()
    monkeypatch.setattr(_timing, "time", fake)
    return fake


def test_construction_counts_as_checking(fake_time):
    """A boundary object's construction (its validation) counts as checking time."""
    clock = ContractClock()
    result = clock.checking(dict, a=1)
    assert result == {"a": 1}
    assert clock.seconds == 1.0


def test_construction_with_checks_off_is_engine_work(fake_time):
    """With contracts off nothing is validated, so construction is not checking time."""
    clock = ContractClock()
    with contracts.checking(mode="off"):
        clock.checking(dict, a=1)
    assert clock.seconds == 0.0


def test_work_done_for_the_checks_counts_only_while_checking(fake_time):
    """Recording for the step tracker is checking time; with contracts off it is not paid."""
    clock = ContractClock()
    assert clock.checking(sorted, [3, 1, 2]) == [1, 2, 3]
    assert clock.seconds == 1.0
    with contracts.checking(mode="off"):
        clock.checking(sorted, [2, 1])
    assert clock.seconds == 1.0


def test_a_check_inside_a_check_is_counted_once(fake_time):
    """Work for the checks that builds an object itself counts its time once: the outer
    call's reading covers the inner one."""
    clock = ContractClock()
    assert clock.checking(lambda: clock.checking(dict, a=1) | {"b": 2}) == {"a": 1, "b": 2}
    assert clock.seconds == 1.0  # one reading each side, none inside (counted twice: 4)
    clock.checking(dict)  # and the clock counts again after it
    assert clock.seconds == 2.0


def test_guarded_call_counts_checks_but_not_the_body(fake_time, monkeypatch):
    """Around-check time minus the body's own time is what the clock keeps."""
    clock = ContractClock()
    monkeypatch.setattr(_timing, "CLOCK", clock)

    @_timing.guarded(ids=np.ndarray)
    def consume(ids):
        fake_time.now += 100.0  # a long body
        return int(ids.sum())

    assert consume(np.arange(3)) == 3
    assert 0 < clock.seconds < 100.0


def test_guarded_is_the_plain_function_when_checks_are_off():
    """Mode off at decoration: no wrapper at all, so nothing to pay or to time."""
    def consume(ids):
        return ids

    with contracts.checking(mode="off"):
        assert _timing.guarded(ids=np.ndarray)(consume) is consume


def test_guarded_still_checks(fake_time):
    """The timing wrapper keeps the guard's behaviour: a wrong type is refused."""
    @_timing.guarded(ids=np.ndarray)
    def consume(ids):
        return ids

    with pytest.raises(contracts.ContractViolation) as caught:
        consume([1, 2])
    assert caught.value.codes == ("SG001",)
