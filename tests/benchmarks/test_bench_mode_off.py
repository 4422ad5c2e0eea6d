"""Disabled means free: a method guarded while the mode is off is the method itself."""

from __future__ import annotations

import pytest

from specguard import contracts
from specguard.adapters import guard
from specguard.benchmarks.suite import Settings, mode_off
from specguard.benchmarks.violations import broken
from specguard.benchmarks.workload import build, decode_batch


def _execute(self, batch):
    """A runner method that reads one field of its batch."""
    return batch.num_tokens


def test_guard_with_mode_off_returns_the_function_itself():
    """Decorating while the mode is off hands back the very same function object."""
    with contracts.checking(mode="off"):
        decorated = guard(batch=contracts.ScheduledBatch)(_execute)
    assert decorated is _execute


def test_guard_with_mode_strict_wraps_and_checks():
    """Decorating while strict gives a wrapper that rejects a broken batch."""
    decorated = guard(batch=contracts.ScheduledBatch)(_execute)
    assert decorated is not _execute
    clean = build(decode_batch(8))
    assert decorated(None, clean) == clean.num_tokens
    bad = build(broken(decode_batch(8), "SG104"))
    with pytest.raises(contracts.ContractViolation, match="SG104"):
        decorated(None, bad)


def test_bench_mode_off_section_reports_identity():
    """The bench's mode-off measurement reports identity and times both calls."""
    result = mode_off(Settings(repeats=1, target_s=0.0002))
    assert result["identity"] is True
    assert result["plain_us"] > 0 and result["off_us"] > 0 and result["strict_metadata_us"] > 0
