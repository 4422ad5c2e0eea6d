"""With SPECGUARD_SNAPSHOT_DIR set, every fault the contracts stop leaves a snapshot that
``specguard check`` re-validates to the same rule, the single-object faults included."""

from __future__ import annotations

import pytest
from engine_builders import MODEL
from test_fault_catalogue import WORKLOADS

from specguard import contracts
from specguard.adapters import _snapshot_write, snapshots
from specguard.cli import main as specguard
from specguard.runner.engine import Engine
from specguard.runner.faults import FAULTS

# The faults a single boundary object shows (SG101, SG301, SG105, SG010, SG103, SG308,
# SG403, SG312, SG306); the step-to-step ones (SG6xx) wrote snapshots already, and the
# cross-rank ones (SG7xx) need several ranks (tests/adapters/test_rank_agreement.py
# covers their snapshot).
SINGLE_OBJECT = [name for name, fault in FAULTS.items()
                 if not fault.rule.startswith("SG6") and not fault.across_ranks]


def test_single_object_faults_are_the_ten_of_the_catalogue():
    """Ten faults break a rule of one object; the snapshot guide's own example is SG101."""
    assert len(SINGLE_OBJECT) == 10
    assert {FAULTS[n].rule for n in SINGLE_OBJECT} == {"SG101", "SG301", "SG105", "SG010",
                                                      "SG103", "SG308", "SG403", "SG312",
                                                      "SG306"}


@pytest.mark.parametrize("name", SINGLE_OBJECT)
def test_single_object_fault_writes_a_snapshot_that_checks_to_its_rule(
        name, tmp_path, monkeypatch, capsys):
    """The stopped object is in the folder; `specguard check` finds the fault's rule again."""
    monkeypatch.setenv(snapshots.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(_snapshot_write, "_written", 0)
    cfg, requests = WORKLOADS[name]()
    engine = Engine(cfg, fault=name, model=MODEL)
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation):
        engine.generate(requests)
    fault = FAULTS[name]
    [path] = tmp_path.glob(f"{fault.subject}-*.json")
    codes = {v.code for v in snapshots.recheck(snapshots.load(path))}
    assert codes & set(fault.rules)
    capsys.readouterr()
    assert specguard(["check", str(path)]) == 1
    assert f"re-validated (strict, depth full, collect all):\n{fault.subject} broke" in (
        capsys.readouterr().out)
