"""Value checks on accelerator tensors: deferred, asserted or synchronous verdicts.

There is no accelerator in CI, so ``HOST_DEVICE_TYPES`` is emptied: CPU tensors then
take exactly the path CUDA tensors take.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts
from specguard.contracts._core import _values

pytest.importorskip("torch")

_BAD_SLOT: dict[str, Any] = {"state_slots": np.array([0, 1, -1, 3, 4])}


@pytest.fixture
def device_path(monkeypatch):
    """Treat CPU tensors as device tensors; drop any verdict a test leaves behind."""
    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())
    yield
    with contracts.checking(mode="off"):
        contracts.flush_deferred(wait=True)


def test_deferred_does_not_raise_at_construction(device_path):
    """The verdict is queued, not read: construction returns without a sync."""
    with contracts.checking(depth="full", device_values="deferred"):
        batch = build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
    assert batch.state_slots is not None
    assert contracts.pending_deferred() >= 1
    assert contracts.STATS.deferred_submitted >= 1


def test_flush_raises_deferred_violation_naming_rule_and_position(device_path):
    """flush_deferred(wait=True) reads the verdicts and raises at the sync point."""
    with contracts.checking(depth="full", device_values="deferred"):
        build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
    with pytest.raises(contracts.DeferredViolation, match=re.escape(
        "SG113 state slots are real slots [ScheduledBatch.state_slots, scheduler → runner]: "
        "at batch position 2: state slot is -1 (expected >= 0)"
    )) as caught:
        contracts.flush_deferred(wait=True)
    assert caught.value.codes == ("SG113",)
    assert contracts.pending_deferred() == 0


def test_clean_object_leaves_only_passing_verdicts(device_path):
    """A clean object queues verdicts that flush to no violation."""
    with contracts.checking(depth="full", device_values="deferred"):
        build(contracts.ScheduledBatch, "torch")
    assert contracts.flush_deferred(wait=True) == []


def test_sync_raises_at_once(device_path):
    """device_values="sync" reads the verdict immediately and names the seq as well."""
    with contracts.checking(depth="full", device_values="sync"), pytest.raises(
        contracts.ContractViolation, match=re.escape(
            "seq 42 at batch position 2: state slot is -1 (expected >= 0)")
    ):
        build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
    assert contracts.pending_deferred() == 0


def test_assert_async_raises_at_once_on_cpu():
    """On CPU torch evaluates _assert_async immediately (on CUDA it fires later, fatally)."""
    import torch

    with pytest.raises(RuntimeError, match="specguard probe"):
        torch._assert_async(  # pyright: ignore[reportPrivateImportUsage] - what the rule uses
            torch.tensor(False), "specguard probe")


def test_assert_policy_on_cpu_surfaces_as_a_contract_violation(device_path):
    """Under "assert" the CPU assert fires inside the rule loop, so it is SG000 naming the rule."""
    # On CUDA torch._assert_async is asynchronous and a failure kills the context; on CPU
    # it raises at once, and the rule loop turns that RuntimeError into SG000.
    with contracts.checking(depth="full", device_values="assert"), pytest.raises(
        contracts.ContractViolation, match=re.escape(
            "SG000 every check can evaluate [ScheduledBatch, scheduler → runner]: check SG113 "
            "could not evaluate: RuntimeError: specguard SG113 on ScheduledBatch")
    ) as caught:
        build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
    assert not isinstance(caught.value, RuntimeError)
    assert contracts.pending_deferred() == 0


def test_assert_policy_passes_clean_objects(device_path):
    """A clean object under the assert policy raises nothing and queues nothing."""
    with contracts.checking(depth="full", device_values="assert"):
        build(contracts.ScheduledBatch, "torch")
    assert contracts.pending_deferred() == 0


def test_warn_mode_flush_logs_and_returns(device_path, caplog):
    """In warn mode a failed deferred verdict is logged and returned, not raised."""
    with contracts.checking(mode="warn", depth="full"):
        build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
        found = contracts.flush_deferred(wait=True)
    assert [v.code for v in found] == ["SG113"]
    assert "SG113" in caplog.records[-1].getMessage()


def test_host_tensors_never_defer():
    """CPU tensors are host memory: their verdict is immediate, nothing is queued."""
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation):
        build(contracts.ScheduledBatch, "torch", **_BAD_SLOT)
    assert contracts.pending_deferred() == 0
