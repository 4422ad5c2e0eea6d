"""Clearances say "every covered rule passes" exactly when the rules themselves do."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_switch import IMPLEMENTATIONS, kernels_as
from strategies.cases import Case
from strategies.mutations import MUTATIONS, Mutation, doubly_mutated, mutated
from strategies.valid import valid_cases

from specguard import contracts
from specguard.contracts._core._clearance import Clearance, clearance_for
from specguard.contracts._core._values import ValueChecks

CLEARED = [cls for cls in contracts.BOUNDARY_OBJECTS if clearance_for(cls.__name__)]
CLEARED_MUTATIONS = [m for m in MUTATIONS if set(m.classes) & set(CLEARED)]


def _verdicts(obj: Any) -> tuple[bool, bool] | None:
    """(the clearance's answer, "no covered rule finds anything"), or None when the
    clearance would not be asked (metadata not clean, or arrays not numpy)."""
    plan = type(obj).__sg_plan__
    found: Clearance | None = clearance_for(plan.subject)
    assert found is not None
    if not plan.fast_check(obj):
        return None
    target = plan.rule_target(obj)
    if type(target.seq_ids) is not np.ndarray:
        return None
    values = ValueChecks(contracts.Config(device_values=contracts.DeviceValues.SYNC), plan.subject)

    def finds(rule: Any) -> bool:
        try:
            return rule.check(target, values) is not None
        except Exception:  # SG000: a finding too
            return True

    covered = [r for r in plan.rules if r.code in found.covers]
    assert {r.code for r in covered} == found.covers
    return found.check(target), not any(map(finds, covered))


def _built(case: Case) -> Any:
    with contracts.checking(mode="off"):
        return case.build()


def test_the_batch_clearance_covers_the_per_seq_rules_and_leaves_the_tables():
    """ScheduledBatch's clearance vouches for ten rules; SG110 reads the tables itself."""
    found = clearance_for("ScheduledBatch")
    assert found is not None
    assert sorted(found.covers) == ["SG010", "SG103", "SG106", "SG107", "SG108", "SG109",
                                    "SG111", "SG112", "SG113", "SG115"]
    assert contracts.ScheduledBatch in CLEARED


@pytest.mark.parametrize("cls", [contracts.DrafterInput, contracts.ModelInput,
                                 contracts.VerifyOutput, contracts.DrafterOutput,
                                 contracts.RequestOutput, contracts.LogitsRows,
                                 contracts.DraftTokens],
                         ids=lambda c: c.__name__)
def test_a_per_step_objects_clearance_vouches_for_every_rule_of_it(cls):
    """Each object the engine hands over every step has one clearance for all of its
    rules: the spans of a token stream, the rows of an output. A clean one runs no rule
    of its own."""
    found = clearance_for(cls.__name__)
    assert found is not None
    assert found.covers == {rule.code for rule in contracts.REGISTRY.values()
                            if cls.__name__ in rule.applies_to}
    assert sorted(c.__name__ for c in CLEARED) == [
        "DraftTokens", "DrafterInput", "DrafterOutput", "LogitsRows", "ModelInput",
        "RequestOutput", "ScheduledBatch", "VerifyOutput"]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("cls", CLEARED, ids=lambda c: c.__name__)
@given(data=st.data())
def test_a_clearance_clears_every_valid_object(implementation: str, cls: type,
                                               data: st.DataObject) -> None:
    """On valid objects of any size, phase mix, backend and dtype the clearance says yes."""
    case = data.draw(valid_cases(cls))
    with kernels_as(implementation):
        verdicts = _verdicts(_built(case))
    assert verdicts is None or verdicts == (True, True)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("mutation", CLEARED_MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@settings(max_examples=15)
@given(data=st.data())
def test_a_clearance_agrees_with_its_rules_on_every_mutation(
    implementation: str, mutation: Mutation, data: st.DataObject
) -> None:
    """Broken one rule at a time, the clearance says no exactly when a covered rule fires."""
    # Drawn among the cleared classes alone: most of the boundary classes have no clearance.
    cleared = dataclasses.replace(mutation, classes=tuple(c for c in mutation.classes
                                                          if c in CLEARED))
    _, broken = data.draw(mutated(cleared))
    with kernels_as(implementation):
        verdicts = _verdicts(_built(broken))
    if verdicts is not None:
        clear, rules_pass = verdicts
        assert clear is rules_pass


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(pair=doubly_mutated())
def test_a_clearance_agrees_with_its_rules_on_two_breaks(
    implementation: str, pair: tuple[Any, Any, Any]
) -> None:
    """Two rules broken at once: still never a yes where a covered rule fires."""
    *_, broken = pair
    if broken.cls not in CLEARED:
        return
    with kernels_as(implementation):
        verdicts = _verdicts(_built(broken))
    if verdicts is not None:
        clear, rules_pass = verdicts
        assert clear is rules_pass


@pytest.mark.parametrize("cls", CLEARED, ids=lambda c: c.__name__)
@settings(max_examples=30)
@given(data=st.data())
def test_the_compiled_clearance_answers_on_numpy_objects_rather_than_declining(
    cls: type, data: st.DataObject
) -> None:
    """Valid objects of native integer dtypes are answered by the compiled kernel, not
    passed back to numpy: a kernel that declined everything would pass every test of
    agreement above while saving nothing."""
    case = data.draw(valid_cases(cls))
    with kernels_as("compiled") as counting:
        verdicts = _verdicts(_built(case))
    assert counting is not None
    if verdicts is None:
        return  # not asked: metadata not clean, or not numpy arrays
    assert counting.answers, "the compiled kernel was not asked"
    assert counting.declined() == 0 or _left_to_numpy(_built(case)), counting.answers
    assert verdicts == (True, True)


def _left_to_numpy(obj: Any) -> bool:
    """Whether the compiled kernels leave ``obj`` to numpy on purpose: an array of a
    dtype they do not read (uint64, or not in native byte order), or more seqs or
    tokens than their limits, past which numpy's vectorised passes are faster."""
    from specguard.contracts._core import _compiled

    kernels = _compiled.load_kernels()
    assert kernels is not None
    target = type(obj).__sg_plan__.rule_target(obj)
    arrays = [getattr(target, f.name) for f in dataclasses.fields(target)]
    tokens = int(getattr(target, "num_tokens", 0) or 0)
    rows = max((a.shape[0] for a in arrays if isinstance(a, np.ndarray) and a.ndim), default=0)
    return (rows > kernels.ROWS_LIMIT or tokens > kernels.TOKENS_LIMIT or any(
        isinstance(a, np.ndarray) and (a.dtype == np.uint64 or not a.dtype.isnative)
        for a in arrays))


def test_a_clearance_that_raises_leaves_every_rule_to_run(monkeypatch: Any) -> None:
    """An error inside a clearance is no verdict: the rules run and name the violation."""
    from specguard.contracts._core import _clearance

    found = clearance_for("ScheduledBatch")
    assert found is not None

    def broken_clearance(obj: Any) -> bool:
        raise RuntimeError("boom")

    monkeypatch.setitem(_clearance._CLEARANCES, "ScheduledBatch",
                        Clearance(found.subject, found.covers, broken_clearance))
    from contract_builders import build

    batch = build(contracts.ScheduledBatch)
    batch.token_ids[0] = -1
    plan = contracts.ScheduledBatch.__sg_plan__
    monkeypatch.setattr(plan, "_cleared", {})
    with contracts.checking(depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG112 scheduled token ids are valid vocabulary ids [ScheduledBatch.token_ids, "
                "scheduler → runner]: seq 40 at batch position 0, token 0: token id is -1")):
        contracts.validate(batch)
