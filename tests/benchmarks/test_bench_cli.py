"""``specguard bench``: one run, a table or JSON on stdout, progress on stderr."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from specguard.benchmarks.report import format_report
from specguard.cli import main

ROW_KEYS = {"backend", "batch", "floor_us", "full_us", "metadata_us", "default_us",
            "construct_us",
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
    assert set(report) == {"machine", "settings", "validation", "mode_off", "memory",
                           "adapters", "from_mapping", "rules", "import", "engine", "dp", "targets"}
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
    assert {"plain_us", "off_us", "strict_metadata_us", "strict_default_us"} <= set(
        report["mode_off"])


def test_quick_json_reports_the_engine_or_why_not(quick_report):
    """The engine section has step times and contract shares, or a reason it is missing."""
    _, report, _ = quick_report
    engine = report["engine"]
    if engine["available"]:
        assert {"steps", "off_ms", "strict_ms", "strict_default_ms", "strict_full_ms",
                "strict_overhead", "strict_default_overhead", "strict_contract_share",
                "strict_default_contract_share", "strict_full_contract_share",
                "freed_memory_reused"} <= set(engine)
        assert engine["steps"] > 0
        assert isinstance(engine["freed_memory_reused"], bool)
    else:
        assert engine["reason"]


def test_quick_json_targets_name_value_and_verdict(quick_report):
    """Each target says what it checks, the measured value and whether it was met."""
    _, report, _ = quick_report
    targets = report["targets"]
    assert any("mode off" in t["target"] and t["met"] for t in targets)
    assert all({"target", "value", "met"} <= set(t) <= {"target", "value", "met", "note"}
               for t in targets)


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
    assert "| ATOM | 4096 | full | 300.0 | 200.0 | 1.50× | 150.0 |" in text
    assert "| 1024 | 100.0 | 150.0 | 1.50× |" in text
    assert "import specguard.contracts: 90.0 ms CPU of the importing thread" in text


def _fake_report() -> dict[str, Any]:
    row = {"backend": "numpy", "batch": 8, "floor_us": 10.0, "full_us": 15.0,
           "metadata_us": 1.0, "default_us": 1.5, "construct_us": 16.0, "naive_us": 100.0,
           "full_vs_floor": 1.5, "naive_vs_construct": 6.25, "peak_bytes": 2048,
           "floor_peak_bytes": 1024, "token_bytes": 4096}
    report = {
        "machine": {"cpu": "cpu", "cores": 2, "python": "3", "numpy": "2", "torch": "2",
                    "pydantic": "2"},
        "settings": {"mtp_k": 3, "vocab_size": 10, "repeats": 3, "target_ms": 1.0,
                     "clock": "process CPU time"},
        "validation": [row],
        "mode_off": {"identity": True, "plain_us": 0.02, "off_us": 0.02,
                     "strict_metadata_us": 2.0, "strict_default_us": 2.5,
                     "by_hand_us": 1.6, "strict_vs_by_hand": 1.25},
        "adapters": [{"view": "ATOM", "depth": "full", "batch": 4096, "view_us": 300.0,
                      "validation_us": 150.0, "engine_floor_us": 200.0,
                      "ratio_to_engine_floor": 1.5}],
        "from_mapping": [{"batch": 1024, "np_array_us": 100.0, "lists_us": 150.0,
                          "lists_ratio": 1.5}],
        "import": {"import_ms": 90.0, "numpy_ms": 60.0,
                   "beyond_numpy_ms": 30.0, "loads": []},
        "memory": {"num_seqs": 4, "num_tokens": 262144, "token_bytes": 1 << 20,
                   "peak_bytes": 3072},
        "engine": {"available": False, "reason": "no engine here"},
        "targets": [{"target": "full ≤ 2.0× floor, numpy B=8", "value": 2.5, "met": False}],
    }
    return report


def test_quick_json_has_one_adapter_entry_per_view_and_depth(quick_report):
    """The adapters section times ATOM's, vLLM's and SGLang's view at every depth, with a
    StepTracker and without, each against its engine-read floor."""
    _, report, _ = quick_report
    entries = report["adapters"]
    views = ("ATOM", "vLLM", "SGLang 0.5.10", "SGLang 0.5.23")
    expected = [(view + tracker, depth) for view in views
                for tracker in ("", " + StepTracker")
                for depth in ("metadata", "essential", "full")]
    assert sorted((e["view"], e["depth"]) for e in entries) == sorted(expected)
    for entry in entries:
        assert set(entry) == {"view", "depth", "batch", "view_us", "validation_us",
                              "engine_floor_us", "ratio_to_engine_floor"}
        assert entry["batch"] > 0 and entry["view_us"] > 0 and entry["validation_us"] > 0
        assert entry["engine_floor_us"] > 0 and entry["ratio_to_engine_floor"] > 0


def test_the_atom_floor_writes_every_block_id_into_the_padded_table():
    """ATOM's engine-read floor reads the request ids and builds the table attention
    reads: each seq's block ids, then -1 padding, as wide as the longest table."""
    from specguard.benchmarks.adapter_costs import atom_batch, engine_floor

    batch = atom_batch(16)
    ids, padded = engine_floor("ATOM", 16)()
    assert ids.tolist() == batch.req_ids
    width = max(map(len, batch.block_tables))
    assert padded.shape == (16, width)
    for row, table in zip(padded.tolist(), batch.block_tables, strict=True):
        assert row == table + [-1] * (width - len(table))


def test_the_vllm_floor_reads_order_counts_drafts_and_computed_tokens():
    """vLLM's engine-read floor is the request order, the counts, the spec tokens
    flattened in that order and num_computed_tokens, read from the SchedulerOutput."""
    from specguard.benchmarks.adapter_costs import engine_floor, scheduler_output

    output = scheduler_output(8)
    order, counts, spec, computed = engine_floor("vLLM", 8)()
    assert order == tuple(output.num_scheduled_tokens)
    assert counts.tolist() == list(output.num_scheduled_tokens.values())
    assert spec.tolist() == [d for r in order for d in output.scheduled_spec_decode_tokens[r]]
    assert computed.tolist() == output.scheduled_cached_reqs.num_computed_tokens


def test_quick_json_times_every_draft_row_builder_form(quick_report):
    """from_mapping has, per batch size, each form against np.array of the same rows."""
    _, report, _ = quick_report
    entries = report["from_mapping"]
    assert [e["batch"] for e in entries] == [8, 128]
    for entry in entries:
        assert entry["np_array_us"] > 0
        for form in ("lists", "arrays", "dense"):
            assert entry[f"{form}_us"] > 0 and entry[f"{form}_ratio"] > 0


def test_quick_json_measures_the_import_in_a_fresh_process(quick_report):
    """The import entry has the importing thread's CPU milliseconds and no optional module."""
    _, report, _ = quick_report
    imported = report["import"]
    assert {"import_ms", "numpy_ms", "beyond_numpy_ms", "loads"} == set(imported)
    assert imported["numpy_ms"] > 0 and imported["beyond_numpy_ms"] > 0
    # specguard imports numpy itself: the whole import costs more than what it adds.
    assert imported["import_ms"] > imported["beyond_numpy_ms"]
    assert imported["loads"] == []


@pytest.mark.parametrize("target", [
    "full ≤ 1.2× floor, numpy B=8",
    "a strict guarded call at metadata depth ≤ 2× the same call guarded by hand",
    "ATOM view at B=64, metadata depth ≤ ½ its engine-read floor",
    "vLLM view at B=64, full depth ≤ 2× its engine-read floor",
    "ATOM view at B=64, essential depth ≤ 2× its engine-read floor",
    "ATOM + StepTracker view at B=64, metadata depth ≤ 2× its engine-read floor",
    "vLLM + StepTracker view at B=64, full depth ≤ 2× its engine-read floor",
    "import specguard.contracts ≤ 2× numpy's own import (CPU of the importing thread)",
    "no copy of the token arrays: peak extra memory ≤ 1/16 of a long token stream",
])
def test_quick_json_lists_the_speed_targets(quick_report, target):
    """Each target of the speed work appears by name, with a boolean verdict."""
    _, report, _ = quick_report
    found = [t for t in report["targets"] if t["target"] == target]
    assert len(found) == 1
    assert isinstance(found[0]["met"], bool)


def test_builder_targets_start_at_b_1024():
    """The builder targets are judged from B=1024 on, one per form, honestly computed."""
    from specguard.benchmarks.suite import _around_targets

    entry = {"batch": 1024, "np_array_us": 10.0, "lists_us": 15.0, "lists_ratio": 1.5,
             "arrays_us": 30.0, "arrays_ratio": 3.0, "dense_us": 5.0, "dense_ratio": 0.5}
    small = {**entry, "batch": 128}
    found = _around_targets([], [small, entry], {"import_ms": 230.0, "numpy_ms": 110.0,
                                                       "beyond_numpy_ms": 120.0})
    verdicts = {t["target"]: t["met"] for t in found}
    assert verdicts == {
        "DraftTokens from a dict of lists ≤ 2× np.array of the rows, B=1024": True,
        "DraftTokens from a dict of arrays ≤ 2× np.array of the rows, B=1024": False,
        "DraftTokens from dense rows and their seq ids (from_rows) ≤ 2× np.array of the "
        "rows, B=1024": True,
        "import specguard.contracts ≤ 2× numpy's own import (CPU of the importing "
        "thread)": False,
    }
    assert found[-1]["value"] == pytest.approx(230 / 110)
    assert found[-1]["note"] == ("230 ms; numpy's own import: 110 ms; specguard's modules "
                                 "beyond it: 120 ms")


def test_quick_json_reports_memory_for_a_long_token_stream(quick_report):
    """Four seqs with a 1 MiB token stream: the peak extra memory is reported, in bytes."""
    _, report, _ = quick_report
    memory = report["memory"]
    assert memory["num_seqs"] == 4 and memory["token_bytes"] == 1 << 20
    assert memory["peak_bytes"] > 0


def test_quick_json_judges_every_view_against_its_engine_floor(quick_report):
    """Every view, at every depth, with a StepTracker and without, has a floor target
    whose value is its measured ratio and whose verdict is that ratio against 2."""
    _, report, _ = quick_report
    for entry in report["adapters"]:
        name = (f"{entry['view']} view at B={entry['batch']}, {entry['depth']} depth "
                "≤ 2× its engine-read floor")
        [target] = [t for t in report["targets"] if t["target"] == name]
        assert target["value"] == entry["ratio_to_engine_floor"]
        assert target["met"] is (target["value"] <= 2)
