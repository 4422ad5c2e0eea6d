"""Guarded proxies: contracts around a scheduler and a runner that cannot be edited."""

from __future__ import annotations

import re

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence

from specguard import contracts
from specguard.adapters import AtomView, guard_runner, guard_scheduler, is_guarded, unwrap

K = 3


class Scheduler:
    """An engine scheduler: hands out the batches it was given, one per call."""

    def __init__(self, batches):
        self.batches = list(batches)
        self.calls = 0

    def schedule(self):
        """The next batch."""
        self.calls += 1
        return self.batches.pop(0)

    def __len__(self):
        return len(self.batches)


class Runner:
    """An engine runner that records what it was asked to run."""

    def __init__(self):
        self.seen = []

    def forward(self, batch, step=0):
        """Run one batch; returns its seq ids."""
        self.seen.append(batch)
        return batch.seq_ids

    def stats(self):
        """An unguarded method."""
        return {"seen": len(self.seen)}


def _batches(*, compacted: bool):
    seqs = [sequence(i, 40, drafts=K) for i in range(7)] + [sequence(7, 40)]
    return [decode_batch(seqs, dense=not compacted)]


def _view():
    return AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)


def test_clean_batches_come_back_identical():
    """The proxy returns the very object the scheduler returned."""
    inner = Scheduler(_batches(compacted=False))
    expected = inner.batches[0]
    assert guard_scheduler(inner, _view()).schedule() is expected


def test_violating_batch_is_refused_before_any_runner_sees_it():
    """A compacted ATOM batch raises SG101 at schedule(); the runner is never called."""
    runner = Runner()
    scheduler = guard_scheduler(Scheduler(_batches(compacted=True)), _view())
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 7 at batch position 7: decode seq without a draft row")):
        runner.forward(scheduler.schedule())
    assert runner.seen == []


def test_proxy_forwards_attributes_isinstance_and_dunders():
    """Reads, writes, deletes, isinstance, len, repr and equality all reach the engine."""
    inner = Scheduler(_batches(compacted=False))
    proxy = guard_scheduler(inner, _view())
    assert isinstance(proxy, Scheduler) and is_guarded(proxy) and unwrap(proxy) is inner
    proxy.schedule()
    assert proxy.calls == inner.calls == 1
    proxy.extra = "x"  # pyright: ignore[reportAttributeAccessIssue] - a new attribute
    assert inner.extra == "x"  # pyright: ignore[reportAttributeAccessIssue]
    del proxy.extra  # pyright: ignore[reportAttributeAccessIssue]
    assert not hasattr(inner, "extra")
    assert len(proxy) == 0 and repr(proxy) == repr(inner) and proxy == inner
    assert hash(proxy) == hash(inner)


def test_runner_arguments_are_revalidated_after_in_place_mutation():
    """A batch mutated after construction is re-validated when it reaches forward()."""
    batch = _view()(_batches(compacted=False)[0])
    assert batch is not None
    runner = guard_runner(Runner(), {"forward": {"batch": contracts.ScheduledBatch}})
    assert runner.forward(batch) is batch.seq_ids
    object.__setattr__(batch, "num_drafts", batch.num_drafts[:3])
    with pytest.raises(contracts.ContractViolation, match="SG101"):
        runner.forward(batch)
    assert len(unwrap(runner).seen) == 1


def test_runner_argument_of_the_wrong_type_is_sg001():
    """A plain list where a ScheduledBatch is declared is SG001 naming the method."""
    runner = guard_runner(Runner(), {"forward": {"batch": contracts.ScheduledBatch}})
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG001 field has the declared type [Runner.forward.batch")):
        runner.forward([1, 2])


def test_return_values_are_checked_with_the_return_key():
    """``"return"`` names the result's spec; a numpy result passes an ndarray hint."""
    runner = guard_runner(Runner(), {"forward": {"return": np.ndarray}})
    batch = _view()(_batches(compacted=False)[0])
    assert batch is not None
    assert runner.forward(batch, step=2) is batch.seq_ids
    with pytest.raises(contracts.ContractViolation, match="SG001"):
        guard_runner(Runner(), {"forward": {"return": int}}).forward(batch)


def test_unnamed_methods_are_untouched():
    """Methods that are not named run as they are (the bound method itself)."""
    inner = Runner()
    runner = guard_runner(inner, {"forward": {"batch": contracts.ScheduledBatch}})
    assert runner.stats == inner.stats and runner.stats() == {"seen": 0}


def test_mode_off_returns_the_object_itself():
    """With the mode off when wrapping, there is no proxy at all."""
    inner = Runner()
    with contracts.checking(mode="off"):
        assert guard_runner(inner, {"forward": {"batch": contracts.ScheduledBatch}}) is inner


def test_mode_turned_off_later_skips_the_checks():
    """A proxy made in strict mode checks nothing while the mode is off, and again after."""
    runner = guard_runner(Runner(), {"forward": {"batch": contracts.ScheduledBatch}})
    unwrap(runner).forward = lambda batch, step=0: "ran"
    with contracts.checking(mode="off"):
        assert runner.forward("not a batch") == "ran"
    with pytest.raises(contracts.ContractViolation, match="SG001"):
        runner.forward("not a batch")


def test_a_replaced_method_is_guarded_too():
    """Rebinding a guarded method on the engine keeps it guarded."""
    inner = Runner()
    runner = guard_runner(inner, {"forward": {"batch": contracts.ScheduledBatch}})
    inner.forward = lambda batch, step=0: "replaced"
    with pytest.raises(contracts.ContractViolation, match="SG001"):
        runner.forward("not a batch")


def test_unknown_method_or_parameter_is_a_type_error_at_once():
    """Typos fail when the proxy is made, not never."""
    with pytest.raises(TypeError, match="has no method 'forwrad'"):
        guard_runner(Runner(), {"forwrad": {"batch": contracts.ScheduledBatch}})
    with pytest.raises(TypeError, match="lacks"):
        guard_runner(Runner(), {"forward": {"bacth": contracts.ScheduledBatch}})
