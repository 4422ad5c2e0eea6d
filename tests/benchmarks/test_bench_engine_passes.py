"""The engine overhead pools the per-step ratios of several runs of fresh engines."""

from __future__ import annotations

import time

import pytest

from specguard.benchmarks import engine as engine_bench


def test_two_passes_pool_their_steps_and_report_each_pass() -> None:
    pytest.importorskip("torch")
    one = engine_bench.engine_overhead(engine_bench.QUICK_WORKLOAD, time.process_time)
    two = engine_bench.engine_overhead(engine_bench.QUICK_WORKLOAD, time.process_time,
                                       passes=2)
    assert one["available"] and two["available"]
    assert one["passes"] == 1 and two["passes"] == 2
    # Each pass serves the whole workload: the same steps, twice.
    assert two["steps"] == one["steps"] > 0
    for name in ("strict", "strict_default", "strict_full"):
        by_pass = two[f"{name}_overhead_by_pass"]
        assert len(by_pass) == 2 and len(one[f"{name}_overhead_by_pass"]) == 1
        # The pooled median lies between the passes' own medians.
        assert min(by_pass) - 1e-12 <= two[f"{name}_overhead"] <= max(by_pass) + 1e-12
        assert 0 <= two[f"{name}_contract_share"] < 1
