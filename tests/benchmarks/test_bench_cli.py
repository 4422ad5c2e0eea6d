"""``specguard bench``: one run, a table or JSON on stdout, progress on stderr."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from specguard.benchmarks.report import format_report

from specguard.cli import main

ROW_KEYS = {"backend", "batch", "floor_us", "full_us", "metadata_us", "construct_us",
            "naive_us", "full_vs_floor", "naive_vs_construct", "peak_bytes",
            "floor_peak_bytes", "token_bytes"}


@pytest.fixture(scope="module")
def quick_report():
    """Exit code, JSON report and stderr of one quick run (shared: it takes seconds)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["bench", "--quick", "--json"])
    return code, json.loads(stdout.getvalue()), stderr.getvalue()


def test_quick_json_run_exits_zero_with_top_level_sections(quick_report):
    """The report has the machine, settings, validation table, mode off, engine and targets."""
    code, report, _ = quick_report
    assert code == 0
    assert set(report) == {"machine", "settings", "validation", "mode_off", "engine", "dp",
                           "targets"}
    assert {"cpu", "cores", "python", "numpy", "torch"} <= set(report["machine"])


def test_quick_json_measures_the_collective_across_ranks(quick_report):
    """The dp entry: ranks, steps, and the contracts' collective against the step time."""
    _, report, _ = quick_report
    dp = report["dp"]
    assert dp["available"] is True, dp
    assert dp["ranks"] == 2 and dp["steps"] > 0
    assert 0 < dp["collective_ms"] < dp["step_ms"]
    assert dp["collective_share"] == pytest.approx(dp["collective_ms"] / dp["step_ms"])


def test_quick_json_has_one_row_per_backend_and_size(quick_report):
    """Every backend and batch size of the quick run has a row with every figure."""
    _, report, _ = quick_report
    rows = report["validation"]
    sizes = report["settings"]["sizes"]
    assert [(r["backend"], r["batch"]) for r in rows] == [
        (backend, size) for backend in ("numpy", "torch") for size in sizes]
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["floor_us"] > 0 and row["full_us"] > 0 and row["naive_us"] > 0


def test_quick_json_traces_memory_for_numpy_only(quick_report):
    """tracemalloc sees numpy's allocations, not torch's: torch rows say so with null."""
    _, report, _ = quick_report
    for row in report["validation"]:
        traced = row["backend"] == "numpy"
        assert (row["peak_bytes"] is not None) is traced
        assert (row["floor_peak_bytes"] is not None) is traced


def test_quick_json_reports_mode_off_identity(quick_report):
    """The mode-off section says the decorated method is the original function."""
    _, report, _ = quick_report
    assert report["mode_off"]["identity"] is True
    assert {"plain_us", "off_us", "strict_metadata_us"} <= set(report["mode_off"])


def test_quick_json_reports_the_engine_or_why_not(quick_report):
    """The engine section has step times and contract shares, or a reason it is missing."""
    _, report, _ = quick_report
    engine = report["engine"]
    if engine["available"]:
        assert {"steps", "off_ms", "strict_ms", "strict_full_ms", "strict_overhead",
                "strict_contract_share", "strict_full_contract_share"} <= set(engine)
        assert engine["steps"] > 0
    else:
        assert engine["reason"]


def test_quick_json_targets_name_value_and_verdict(quick_report):
    """Each target says what it checks, the measured value and whether it was met."""
    _, report, _ = quick_report
    targets = report["targets"]
    assert any("mode off" in t["target"] and t["met"] for t in targets)
    assert all(set(t) == {"target", "value", "met"} for t in targets)


def test_progress_goes_to_stderr_only(quick_report):
    """Progress lines are on stderr, so stdout stays machine-readable JSON."""
    _, _, stderr = quick_report
    assert "bench: validation: numpy B=8" in stderr
    assert "bench: mode off" in stderr


def test_table_output_is_markdown():
    """Without --json the report is a Markdown table with a row per backend and size."""
    text = format_report(_fake_report())
    assert "| backend | B | floor µs | full µs | full ÷ floor |" in text
    assert "| numpy | 8 | 10.0 | 15.0 | 1.50× |" in text
    assert "- [MISSED] full ≤ 2.0× floor, numpy B=8 (2.500)" in text
    assert "engine step: not measured (no engine here)" in text


def _fake_report() -> dict[str, Any]:
    row = {"backend": "numpy", "batch": 8, "floor_us": 10.0, "full_us": 15.0,
           "metadata_us": 1.0, "construct_us": 16.0, "naive_us": 100.0,
           "full_vs_floor": 1.5, "naive_vs_construct": 6.25, "peak_bytes": 2048,
           "floor_peak_bytes": 1024, "token_bytes": 4096}
    report = {
        "machine": {"cpu": "cpu", "cores": 2, "python": "3", "numpy": "2", "torch": "2",
                    "pydantic": "2"},
        "settings": {"mtp_k": 3, "vocab_size": 10, "repeats": 3, "target_ms": 1.0,
                     "clock": "process CPU time"},
        "validation": [row],
        "mode_off": {"identity": True, "plain_us": 0.02, "off_us": 0.02,
                     "strict_metadata_us": 2.0},
        "engine": {"available": False, "reason": "no engine here"},
        "targets": [{"target": "full ≤ 2.0× floor, numpy B=8", "value": 2.5, "met": False}],
    }
    return report
