"""The per-rule costs of ``specguard bench``: measured on clean objects, every rule listed."""

from __future__ import annotations

import time

import pytest

from specguard import contracts
from specguard.benchmarks import rule_costs
from specguard.benchmarks.report import rules_table


def test_the_workload_is_clean_at_full_depth_and_has_every_core_object():
    """Two decode steps, the tracker's objects and three engines' views: built strictly at
    full depth, so any violation in the workload itself would raise here."""
    objects = rule_costs.step_objects(16)
    assert {"ScheduledBatch", "DraftTokens", "ModelInput", "DrafterInput", "VerifyOutput",
            "DrafterOutput", "StepTransition", "VerifyRows", "DraftRows", "AtomLayout",
            "VllmSchedule", "Mrv2InputBatch", "Mrv2Sampled", "RankAgreement"} <= set(objects)
    assert objects["ScheduledBatch"].seq_ids.shape == (16,)


def test_every_rule_with_a_check_gets_a_row_and_most_a_figure():
    rows = rule_costs.rule_costs((8,), repeats=1, clock=time.perf_counter)
    checked = {code for code, rule in contracts.REGISTRY.items() if rule.check is not None}
    assert {row["code"] for row in rows} == checked
    measured = [row for row in rows if row["us"][8] is not None]
    assert len(measured) >= 0.8 * len(rows)
    assert all(row["us"][8] > 0 for row in measured)
    for row in rows:
        assert ("note" in row) == (row["us"][8] is None)
    sg110 = next(row for row in rows if row["code"] == "SG110")
    assert set(sg110) >= {"us", "us_full"}  # its full depth reads the middle blocks too


def test_a_rule_that_finds_something_on_the_workload_stops_the_measurement(monkeypatch):
    """A figure taken on an object the rule rejects would time the wrong path: refused."""
    objects = rule_costs.step_objects(8)
    broken = dict(objects)
    out = objects["VerifyOutput"]
    tokens, accepted = out.token_ids.copy(), out.num_accepted.copy()
    tokens[0], accepted[0] = [5, 6, -1, -1], 0  # a real token where padding belongs
    with contracts.checking(mode="off"):
        broken["VerifyOutput"] = contracts.VerifyOutput(
            mtp_k=out.mtp_k, vocab_size=out.vocab_size, seq_ids=out.seq_ids,
            token_ids=tokens, num_accepted=accepted)
    monkeypatch.setattr(rule_costs, "step_objects", lambda size: broken)
    with pytest.raises(AssertionError, match="SG202 finds a violation on the clean "
                                             "VerifyOutput of 8 seqs"):
        rule_costs.rule_costs((8,), repeats=1, clock=time.perf_counter)


def test_the_table_prints_a_row_per_depth_and_names_the_rules_without_a_figure():
    rows = [{"code": "SG110", "depth": "essential", "us": {8: 7.5, 1024: 11.0},
             "us_full": {8: 15.0, 1024: 60.25}},
            {"code": "SG608", "depth": "essential", "us": {8: None, 1024: None},
             "note": "no object of this workload (RecomputedTokens)"}]
    assert rules_table(rows).splitlines() == [
        "| rule | depth | B=8 µs | B=1024 µs |", "|---|---|---:|---:|",
        "| SG110 | essential | 7.5 | 11.0 |", "| SG110 | full | 15.0 | 60.2 |", "",
        "Not in this workload (no object they apply to): SG608"]
