"""The floor and the naive baseline check the same rules as specguard, so the comparison is fair."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specguard import contracts
from specguard.benchmarks import agreement, violations
from specguard.benchmarks.violations import MUTATIONS, VARIANTS, broken, unbroken_rules
from specguard.benchmarks.workload import Fields, decode_batch, to_torch

BACKENDS = ("numpy", "torch")
CODES = sorted(MUTATIONS)
# The naive baseline's own validator names these; jaxtyping, beartype and pydantic's
# field constraints reject the others without a rule code.
NAIVE_NAMES = {"SG005", "SG010", "SG115", "SG102", "SG103", "SG104", "SG106", "SG107", "SG108",
               "SG109", "SG110", "SG111", "SG112", "SG113"}


def _fields(backend: str, size: int = 24, num_prefill: int = 0, seed: int = 0) -> Fields:
    fields = decode_batch(size, num_prefill=num_prefill, seed=seed)
    return to_torch(fields) if backend == "torch" else fields


def test_every_value_rule_of_the_batch_has_a_mutation():
    """Each check-carrying rule that applies to ScheduledBatch is exercised by a mutation."""
    assert unbroken_rules() == []
    value_rules = {code for code, rule in contracts.REGISTRY.items()
                   if rule.check is not None and "ScheduledBatch" in rule.applies_to}
    assert value_rules <= set(MUTATIONS)


def test_unbroken_rules_notices_a_rule_without_mutation(monkeypatch):
    """Removing a mutation makes the coverage check name the rule it no longer breaks."""
    # A filtered copy, not delitem: restoring a deleted key would move it to the end of
    # the dict and change the order every later test iterates the mutations in.
    monkeypatch.setattr(violations, "MUTATIONS",
                        {code: m for code, m in MUTATIONS.items() if code != "SG112"})
    assert unbroken_rules() == ["SG112"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num_prefill", [0, 5])
def test_clean_batch_passes_every_checker(backend, num_prefill):
    """specguard, the floor and the naive baseline all accept a clean batch."""
    fields = _fields(backend, num_prefill=num_prefill)
    assert agreement.specguard_verdict(fields) is None
    assert agreement.floor_verdict(fields) is None
    assert agreement.naive_verdict(fields) is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("code", CODES)
def test_mutation_breaks_exactly_its_rule_for_specguard(backend, code):
    """Each mutation makes specguard report that rule and no other (collect all)."""
    fields = broken(_fields(backend), code)
    with contracts.checking(mode="strict", depth="full", collect="all"), \
            pytest.raises(contracts.ContractViolation) as caught:
        contracts.ScheduledBatch(**fields)
    assert set(caught.value.codes) == {code}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("code", CODES)
def test_floor_reports_the_same_rule_as_specguard(backend, code):
    """The floor names the rule specguard names for every one-rule mutation."""
    fields = broken(_fields(backend, num_prefill=3), code)
    assert agreement.floor_verdict(fields) == agreement.specguard_verdict(fields) == code


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("code", CODES)
def test_naive_baseline_rejects_every_mutation(backend, code):
    """The naive baseline refuses each mutation, naming the rule when its validator caught it."""
    verdict = agreement.naive_verdict(broken(_fields(backend), code))
    assert verdict == (code if code in NAIVE_NAMES else "rejected")


@pytest.mark.parametrize("backend", BACKENDS)
def test_disagreements_is_empty_for_the_benchmark_batch(backend):
    """The pre-timing fairness check passes on the batches the benchmark times."""
    assert agreement.disagreements(_fields(backend, size=128)) == []


def test_disagreements_catches_a_checker_that_accepts_everything():
    """A checker that misses rules is reported once per mutation it accepts."""
    found = agreement.disagreements(
        decode_batch(16), {"lenient": lambda fields: None, "floor": agreement.floor_verdict})
    # Sorted: a test that deletes and restores a mutation moves it to the dict's end.
    expected = [f"lenient on {code}: expected {code}, got None" for code in CODES]
    expected += [f"lenient on {label}: expected {code}, got None"
                 for label, (code, _) in VARIANTS.items()]
    assert sorted(found) == sorted(expected)


def test_disagreements_catches_a_checker_that_names_the_wrong_rule():
    """A checker must name the rule itself, not merely reject the batch."""
    found = agreement.disagreements(decode_batch(16), {"vague": lambda fields: "rejected"})
    assert found[0] == "vague on clean: expected None, got rejected"
    assert len(found) == 1 + len(CODES) + len(VARIANTS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_every_checker_reports_each_variant_as_its_rule(backend, label):
    """A further way to break a rule (a hole in the middle of a block table) is named by
    specguard and the floor, and refused by the naive baseline: the costs compare the
    same checks."""
    code, mutate = VARIANTS[label]
    bad = mutate(_fields(backend, num_prefill=3))
    assert agreement.floor_verdict(bad) == agreement.specguard_verdict(bad) == code
    assert agreement.naive_verdict(bad) == code


@given(size=st.integers(3, 40), num_prefill=st.integers(0, 2), seed=st.integers(0, 2**16),
       code=st.sampled_from(CODES), backend=st.sampled_from(BACKENDS))
def test_floor_and_specguard_agree_on_random_batches(size, num_prefill, seed, code, backend):
    """On random batch shapes and contents the floor and specguard give the same verdicts."""
    fields = _fields(backend, size=size, num_prefill=num_prefill, seed=seed)
    assert agreement.floor_verdict(fields) is None
    assert agreement.specguard_verdict(fields) is None
    bad = broken(fields, code)
    assert agreement.floor_verdict(bad) == agreement.specguard_verdict(bad) == code


@pytest.mark.parametrize("code", CODES)
def test_floor_metadata_names_the_metadata_rules_and_no_value_rule(code):
    """The guarded call's floor checks what the metadata depth checks: the floor's
    metadata half names every metadata rule's mutation as specguard does, and passes the
    mutation of a value rule (it reads no value)."""
    from specguard.benchmarks import floor
    from specguard.benchmarks.workload import build

    assert floor.metadata(build(decode_batch(24))) is None
    bad = broken(decode_batch(24), code)
    found = floor.metadata(build(bad))
    if contracts.REGISTRY[code].depth is contracts.Depth.METADATA:
        assert found == agreement.specguard_verdict(bad) == code
    else:
        assert found is None


def test_the_hand_guard_passes_a_clean_batch_and_refuses_a_broken_one():
    """The hand-written guard (the floor of a guarded call) checks while on, and its
    verdicts are the floor's: it is a floor that does the work it is compared for."""
    from specguard.benchmarks import floor
    from specguard.benchmarks.workload import build

    def execute(self, batch):
        return batch.num_tokens

    guarded = floor.guarded_by_hand(execute)
    clean = build(decode_batch(8))
    assert guarded(None, clean) == clean.num_tokens
    with pytest.raises(ValueError, match="batch breaks SG104"):
        guarded(None, build(broken(decode_batch(8), "SG104")))
    with pytest.raises(TypeError, match="expected a ScheduledBatch, got dict"):
        guarded(None, {})
