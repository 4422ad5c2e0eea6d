"""collect="all" gathers every violation of an object into one report; "first" stops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from contract_builders import build

from specguard import contracts

# Three independent value problems: a negative seq id, a sentinel token, a negative slot.
_BROKEN: dict[str, Any] = {
    "seq_ids": np.array([40, -1, 42, 43, 44]),
    "token_ids": np.where(np.arange(15) == 9, -1, np.arange(15)),
    "state_slots": np.array([0, 1, 2, -4, 4]),
}


def test_collect_all_reports_every_value_violation():
    """All three rules appear, in code order, under one header."""
    with contracts.checking(depth="full", collect="all"), pytest.raises(
        contracts.ContractViolation
    ) as caught:
        build(contracts.ScheduledBatch, **_BROKEN)
    assert caught.value.codes == ("SG010", "SG112", "SG113")
    lines = str(caught.value).splitlines()
    assert lines[0] == "ScheduledBatch broke 3 rules:"
    assert [line.split()[0] for line in lines[1:-1]] == ["SG010", "SG112", "SG113"]
    assert lines[-1].startswith("  next: specguard rules SG010 SG112 SG113; ")
    assert contracts.STATS.violations == 3


def test_fail_fast_stops_at_the_first_violation():
    """With collect="first" only the first broken rule is reported."""
    with contracts.checking(depth="full", collect="first"), pytest.raises(
        contracts.ContractViolation
    ) as caught:
        build(contracts.ScheduledBatch, **_BROKEN)
    assert caught.value.codes == ("SG010",)
    assert str(caught.value).splitlines()[0] == "ScheduledBatch broke 1 rule:"


def test_collect_all_gathers_metadata_violations_too():
    """Two fields with the wrong types are both reported, each naming its field."""
    with contracts.checking(collect="all"), pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.VerifyOutput, seq_ids=[40, 42, 44], num_accepted=np.zeros(3))
    assert caught.value.codes == ("SG001", "SG002")
    assert [v.field for v in caught.value.violations] == ["seq_ids", "num_accepted"]


def test_collect_all_mixes_metadata_and_value_rules_without_noise():
    """A broken field's own value rules are skipped; other rules still run."""
    with contracts.checking(depth="full", collect="all"), pytest.raises(
        contracts.ContractViolation
    ) as caught:
        build(contracts.DrafterInput, positions=np.zeros(5, dtype=np.int64),
              input_ids=np.array([1, 2, 3, -1, 5, 6]))
    assert caught.value.codes == ("SG104", "SG301")


def test_warn_mode_collects_and_returns_every_violation(caplog):
    """In warn mode validate returns the gathered violations and logs each one."""
    obj = build(contracts.ScheduledBatch)
    obj.token_ids[3] = -1
    obj.seq_ids[0] = -1
    with contracts.checking(mode="warn", depth="full", collect="all"):
        found = contracts.validate(obj)
    assert [v.code for v in found] == ["SG010", "SG112"]
    assert [r.getMessage().split()[1] for r in caplog.records] == ["SG010", "SG112"]
