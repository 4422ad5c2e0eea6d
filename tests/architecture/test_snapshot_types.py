"""Every boundary class specguard declares can be written to a snapshot and read back:
the snapshots' readable types come from the class registry, not from a list."""

from __future__ import annotations

from collections import defaultdict

import pytest

from specguard import contracts
from specguard.adapters import examples, snapshots
from specguard.contracts import BoundaryObject


def _declared_by_specguard() -> dict[str, type[BoundaryObject]]:
    return {name: cls for name, cls in contracts.boundary_classes().items()
            if cls.__module__.startswith("specguard.")}


def _instances() -> dict[str, list[BoundaryObject]]:
    """Every boundary object the rules' examples build, clean or broken, by class name."""
    built: dict[str, list[BoundaryObject]] = defaultdict(list)
    original = BoundaryObject.__post_init__

    def record(self: BoundaryObject) -> None:
        built[type(self).__name__].append(self)
        original(self)

    BoundaryObject.__post_init__ = record  # type: ignore[method-assign]
    try:
        for example in (*examples.EXAMPLES.values(), *examples.STORIES.values()):
            with contracts.checking(mode="warn", depth="full", collect="all"):
                example.build()
    finally:
        BoundaryObject.__post_init__ = original  # type: ignore[method-assign]
    return built


INSTANCES = _instances()
DECLARED = _declared_by_specguard()


def test_every_declared_class_is_a_known_snapshot_type():
    assert set(DECLARED) <= set(snapshots.known_types())
    assert {"Mrv2Drafts", "Mrv2InputBatch", "Mrv2Sampled", "Mrv2TargetInput",
            "RecomputedTokens"} <= set(snapshots.known_types())


def test_the_examples_build_every_declared_class():
    """The round trip below covers every class (else a class had no example object)."""
    # KvTransfer is the docs' own example class; StepState the tracker's own state, made
    # without validation (tests/adapters/test_violation_snapshots.py reads one back).
    assert set(DECLARED) - set(INSTANCES) <= {"KvTransfer", "StepState"}


@pytest.mark.parametrize("name", sorted(set(DECLARED) & set(INSTANCES)))
def test_every_boundary_class_round_trips_through_a_snapshot(name, tmp_path):
    """Written, read back and re-checked, an object breaks the rules it broke before."""
    obj = INSTANCES[name][-1]
    fields = {f.name: getattr(obj, f.name) for f in contracts.fields_of(type(obj))}
    full = contracts.Config(mode=contracts.Mode.STRICT, depth=contracts.Depth.FULL,
                            collect=contracts.Collect.ALL)
    try:
        contracts.validate(obj, config=full)
        expected: list[str] = []
    except contracts.ContractViolation as error:
        expected = list(error.codes)
    path = snapshots.write(tmp_path, name, fields)
    loaded = snapshots.load(path)
    assert loaded.type == name
    assert [v.code for v in snapshots.recheck(loaded)] == expected


def test_a_model_runner_v2_drafts_snapshot_reads_back_as_sg631(tmp_path):
    """The reported case: a written Mrv2Drafts SG631 snapshot loads and re-checks."""
    broken = [obj for obj in INSTANCES["Mrv2Drafts"]
              if "SG631" in [v.code for v in contracts.validate(
                  obj, config=contracts.Config(mode=contracts.Mode.WARN,
                                               depth=contracts.Depth.FULL))]]
    assert broken
    obj = broken[0]
    path = snapshots.write(tmp_path, "Mrv2Drafts",
                           {f.name: getattr(obj, f.name) for f in contracts.fields_of(type(obj))})
    assert [v.code for v in snapshots.recheck(snapshots.load(path))] == ["SG631"]
