"""The overlap worker's relay check gives the verdicts a StepTracker gave on the same steps.

The view used to follow the relay with a second ``StepTracker(progress=False)``, fed a
plan of two carried tokens per request at each entry and the rows the draft extend made.
It now keeps the relay itself (``_relay.Relay``). Here both follow the same random
traffic (requests joining, leaving, reordered; extend and decode steps; the draft
extend sometimes missing), with faults in what is carried: every step gets the same
verdict, the same violations and the same messages.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specguard import contracts
from specguard.adapters import StepPlan, StepTracker
from specguard.adapters.engines.sglang.v2._relay import CARRIED, Relay

NAMES = [f"req-{i}" for i in range(12)]
DRAFT_TOKENS = 4


def _tracker_way():
    """The relation as the view's second tracker made it (SG661 aside: a first-seen
    request is the main tracker's rule)."""
    tracker = StepTracker(progress=False, sees_every_seq=False)

    def entered(ids, carried, starts):
        n = ids.shape[0]
        if carried is None:
            tracker.schedule(StepPlan(
                CARRIED, ids, np.zeros(n, dtype=bool), starts, np.ones(n, dtype=np.int64),
                np.zeros((0, CARRIED), dtype=np.int64), np.zeros(0, dtype=np.int64),
                stable_ids=False), names=NAMES)
        else:
            tracker.schedule(StepPlan(
                CARRIED, ids, np.ones(n, dtype=bool), starts,
                np.full(n, DRAFT_TOKENS, dtype=np.int64), carried,
                np.full(n, CARRIED, dtype=np.int64), stable_ids=False), names=NAMES)

    def made(ids, rows):
        tracker.draft_rows(ids, rows, names=NAMES)

    return entered, made


def _relay_way():
    relay = Relay()

    def entered(ids, carried, starts):
        relay.entered(ids, carried, starts=starts, names=NAMES)

    return entered, relay.made


def _verdicts(way, steps):
    """What each step's entry said, until the first violation."""
    entered, made = way()
    said = []
    with contracts.checking(mode="strict", depth="essential"):
        for ids, carried, starts, rows in steps:
            try:
                entered(ids, carried, starts)
            except contracts.ContractViolation as violation:
                said.append([(v.code, v.position, v.reason) for v in violation.violations])
                break
            said.append([])
            if rows is not None:
                made(ids, rows)
    return said


def _traffic(seed):
    """Steps of random traffic: (ids, carried rows or None, starts, rows made or None)."""
    rng = np.random.default_rng(seed)
    made: dict[int, np.ndarray] = {}  # what each request's last draft extend made
    previous: set[int] = set()
    steps = []
    for _ in range(int(rng.integers(2, 9))):
        size = int(rng.integers(1, 7))
        ids = rng.choice(len(NAMES), size=size, replace=False).astype(np.int64)
        starts = rng.integers(1, 50, size).astype(np.int64)
        if rng.random() < 0.25:
            carried = None  # an extend batch
        else:
            carried = rng.integers(0, 100, (size, CARRIED)).astype(np.int64)
            for row, seq in enumerate(ids.tolist()):
                if seq in previous and seq in made and rng.random() < 0.9:
                    carried[row] = made[seq]  # what the relay should carry
            if rng.random() < 0.3:  # a fault: one request gets another value
                carried[int(rng.integers(size)), int(rng.integers(CARRIED))] += 1
        rows = None
        if rng.random() < 0.85:  # the draft extend ran
            rows = rng.integers(0, 100, (size, CARRIED)).astype(np.int64)
        previous = set(ids.tolist())
        made = {seq: rows[row] for row, seq in enumerate(ids.tolist())} if rows is not None \
            else {}
        steps.append((ids, carried, starts, rows))
    return steps


@given(seed=st.integers(0, 2**32 - 1))
def test_the_relay_agrees_with_the_tracker_it_replaced(seed):
    steps = _traffic(seed)
    assert _verdicts(_relay_way, steps) == _verdicts(_tracker_way, steps)


def test_a_swapped_pair_after_a_reorder_names_the_request_and_its_row():
    """Both ways on one pinned case: two requests come back in the other order with each
    other's tokens."""
    ids = np.array([3, 5], dtype=np.int64)
    made = np.array([[10, 11], [20, 21]], dtype=np.int64)
    back = ids[::-1].copy()
    steps = [(ids, None, np.array([4, 4]), made),
             (back, made.copy(), np.array([5, 5]), None)]  # rows not reordered
    for way in (_relay_way, _tracker_way):
        (clean, found) = _verdicts(way, steps)
        assert clean == []
        assert [(code, position) for code, position, _ in found] == [("SG602", 0)]
        assert found[0][2] == ("request 'req-5': draft 0 is 10, but the previous step "
                               "proposed 20 for this seq")


def test_a_relay_carried_intact_passes_and_forgets_on_reset():
    relay = Relay()
    ids = np.array([1, 2, 3], dtype=np.int64)
    rows = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64)
    with contracts.checking(mode="strict", depth="essential"):
        relay.entered(ids, None, starts=np.ones(3, dtype=np.int64), names=NAMES)
        relay.made(ids, rows)
        order = np.array([3, 1], dtype=np.int64)  # one left, the others reordered
        relay.entered(order, rows[[2, 0]], starts=np.ones(2, dtype=np.int64), names=NAMES)
        assert relay.previous_ids is not None and relay.previous_ids.tolist() == [3, 1]
        relay.made(order, rows[[2, 0]] + 1)
        relay.reset()
        assert relay.previous_ids is None
        # After a reset nothing is compared, whatever is carried.
        relay.entered(order, rows[[0, 2]], starts=np.ones(2, dtype=np.int64), names=NAMES)
        relay.made(order, rows[[0, 2]])
        with pytest.raises(contracts.ContractViolation, match="SG602"):
            relay.entered(order, rows[[2, 0]], starts=np.ones(2, dtype=np.int64),
                          names=NAMES)


def test_rows_made_for_other_ids_are_not_kept():
    """A draft extend's rows are the forward's own only for its ids in its order: rows
    for other ids (a stale or foreign hand-over) are dropped, so nothing is compared."""
    relay = Relay()
    ids = np.array([1, 2], dtype=np.int64)
    rows = np.array([[1, 2], [3, 4]], dtype=np.int64)
    with contracts.checking(mode="strict", depth="essential"):
        relay.entered(ids, None, starts=np.ones(2, dtype=np.int64), names=NAMES)
        relay.made(ids[::-1].copy(), rows)  # not this forward's order
        relay.entered(ids, rows + 1, starts=np.ones(2, dtype=np.int64), names=NAMES)
        relay.made(ids.copy(), rows)  # equal ids, another array: kept
        with pytest.raises(contracts.ContractViolation, match="SG602"):
            relay.entered(ids, rows + 1, starts=np.ones(2, dtype=np.int64), names=NAMES)
