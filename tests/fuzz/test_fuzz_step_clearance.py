"""The step tracker's transition clearance says "every rule passes" exactly when the six
rules between two steps do, on transitions drawn to break them often."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_switch import IMPLEMENTATIONS, kernels_as

from specguard import contracts
from specguard.adapters._step_rules import TRANSITION, StepTransition
from specguard.contracts._core._clearance import clearance_for
from specguard.contracts._core._values import ValueChecks

_SMALL = st.integers(-1, 3)  # ids, counts and positions that collide often


def _vector(draw: Any, n: int, values: Any = _SMALL) -> np.ndarray:
    return np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)


def _mask(draw: Any, n: int) -> np.ndarray:
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)


@st.composite
def transitions(draw: Any, leave: frozenset[str] | None = None) -> StepTransition:
    """A StepTransition with clean metadata and values anywhere near a rule's edge, the
    rules not in ``leave`` (drawn when None) repaired."""
    k, n = draw(st.integers(1, 3)), draw(st.integers(0, 8))
    phases = st.lists(st.sampled_from([True, True, False]), min_size=n, max_size=n)
    decode = np.flatnonzero(np.array(draw(phases), dtype=bool)).astype(np.int64)
    d = decode.shape[0]
    matrix = st.lists(st.lists(_SMALL, min_size=k, max_size=k), min_size=d, max_size=d)

    def rows(values: list[list[int]]) -> np.ndarray:
        return np.array(values, dtype=np.int64).reshape(d, k)

    optional = st.booleans()
    fields = {
        "mtp_k": k, "draft_placeholder": draw(st.sampled_from([None, -1, 0])),
        "seq_ids": np.arange(n, dtype=np.int64), "prev_rows": _vector(draw, n),
        "starts": _vector(draw, n), "expected_starts": _vector(draw, n),
        "decode_positions": decode, "draft_token_ids": rows(draw(matrix)),
        "num_drafts": _vector(draw, d, st.integers(0, k)), "proposed": rows(draw(matrix)),
        "has_proposal": _mask(draw, d), "expected_num_drafts": _vector(draw, d),
        "refilled": _mask(draw, d),
        "num_proposed": _vector(draw, d) if draw(optional) else None,
        "first_seen": _mask(draw, d) if draw(st.sampled_from([True, True, False])) else None,
        "drafts_handed_over": _mask(draw, d) if draw(optional) else None,
    }
    # Each rule the draw leaves alone is repaired on the fields only it reads, so that a
    # transition often breaks one rule, or none, rather than several at once.
    left = draw(st.one_of(  # often one rule alone, which no other rule's verdict masks
        st.sampled_from(TRANSITION).map(lambda code: frozenset({code})),
        st.frozensets(st.sampled_from(TRANSITION)))) if leave is None else leave
    for code, repair in _REPAIRS.items():
        if code not in left:
            repair(fields)
    with contracts.checking(mode="off"):
        return StepTransition(**fields)


def _repair_resumes(f: dict[str, Any]) -> None:  # SG601
    starts, expected = f["starts"], f["expected_starts"]
    f["expected_starts"] = np.where((expected >= 0) & (starts >= 0), starts, expected)


def _repair_carried(f: dict[str, Any]) -> None:  # SG602
    drafts = f["draft_token_ids"]
    compared = (np.arange(drafts.shape[1])[None, :] < f["num_drafts"][:, None]) \
        & (f["has_proposal"] & ~f["refilled"])[:, None]
    f["proposed"] = np.where(compared, drafts, f["proposed"])


def _repair_refilled(f: dict[str, Any]) -> None:  # SG603
    needs = f["refilled"].copy()
    if f["draft_placeholder"] is not None:
        needs |= (f["draft_token_ids"] == f["draft_placeholder"]).any(axis=1)
    rows = f["prev_rows"].copy()
    at = f["decode_positions"][needs]
    rows[at] = np.maximum(rows[at], 0)
    f["prev_rows"] = rows


def _repair_whole(f: dict[str, Any]) -> None:  # SG607
    wanted = f["expected_num_drafts"]
    f["expected_num_drafts"] = np.minimum(wanted, f["num_drafts"])


def _repair_unproposed(f: dict[str, Any]) -> None:  # SG660
    if f["num_proposed"] is not None:
        real = np.where(f["refilled"], f["mtp_k"], f["num_drafts"])
        proposed = f["num_proposed"]
        f["num_proposed"] = np.where(proposed >= 0, np.maximum(proposed, real), proposed)


def _repair_unmade(f: dict[str, Any]) -> None:  # SG661
    if f["first_seen"] is not None:
        f["first_seen"] = f["first_seen"] & ((f["num_drafts"] == 0) | f["refilled"])


_REPAIRS = {"SG601": _repair_resumes, "SG602": _repair_carried, "SG603": _repair_refilled,
            "SG607": _repair_whole, "SG660": _repair_unproposed, "SG661": _repair_unmade}


def _verdicts(step: StepTransition) -> tuple[bool, bool]:
    """(the clearance's answer, "no covered rule finds anything")."""
    plan = type(step).__sg_plan__
    found = clearance_for("StepTransition")
    assert found is not None and plan.fast_check(step)
    target = plan.rule_target(step)
    values = ValueChecks(contracts.Config(), plan.subject)
    covered = [rule for rule in plan.rules if rule.code in found.covers]
    assert {rule.code for rule in covered} == found.covers == set(TRANSITION)
    def finds(rule: Any) -> bool:
        check = rule.check
        assert check is not None  # every rule between two steps is a value rule
        return check(target, values) is not None

    return found.check(target), not any(map(finds, covered))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(max_examples=max(settings().max_examples, 500))  # small objects: ~1 s
@given(transitions())
def test_the_transition_clearance_agrees_with_its_rules(implementation: str,
                                                        step: StepTransition) -> None:
    with kernels_as(implementation) as counting:
        clear, rules_pass = _verdicts(step)
    assert clear is rules_pass
    assert counting is None or counting.declined() == 0  # int64 transitions: all answered


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@given(transitions(leave=frozenset()))
def test_a_transition_repaired_for_every_rule_is_cleared(implementation: str,
                                                         step: StepTransition) -> None:
    """The strategy's repairs are sound, and the clearance clears what they make."""
    with kernels_as(implementation):
        assert _verdicts(step) == (True, True)


def test_a_clean_transition_is_cleared_and_a_broken_one_still_names_its_rule() -> None:
    """Both ways: the tracker's steady state is cleared, and a stale draft is SG602 with
    its message, found by the rule once the clearance says no."""
    fields: dict[str, Any] = {
        "mtp_k": 2, "seq_ids": np.array([0, 1]), "prev_rows": np.array([0, 1]),
        "starts": np.array([5, 8]), "expected_starts": np.array([5, 8]),
        "decode_positions": np.array([0, 1]), "draft_token_ids": np.array([[1, 2], [3, 4]]),
        "num_drafts": np.array([2, 2]), "proposed": np.array([[1, 2], [3, 4]]),
        "has_proposal": np.array([True, True]), "expected_num_drafts": np.array([2, 2]),
        "refilled": np.array([False, False])}
    with contracts.checking(mode="strict"):
        clean = StepTransition(**fields)
    assert _verdicts(clean) == (True, True)
    fields["draft_token_ids"] = np.array([[1, 2], [3, 9]])
    with contracts.checking(mode="strict"):
        try:
            StepTransition(**fields)
        except contracts.ContractViolation as raised:
            assert raised.codes == ("SG602",)
            assert raised.violations[0].reason == (
                "draft 1 is 9, but the previous step proposed 4 for this seq")
            assert raised.violations[0].position == 1
        else:
            raise AssertionError("a stale draft passed")


@st.composite
def _rows(draw: Any, verify: bool) -> Any:
    """VerifyRows or DraftRows whose rows follow the step's seqs, or do not."""
    from specguard.adapters._step_rules import DraftRows, VerifyRows

    n = draw(st.integers(0, 6))
    batch = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
                     dtype=np.int64)
    rows = batch.copy()
    if draw(st.booleans()):  # break the order, the count, or one seq
        rows = np.array(draw(st.lists(st.integers(0, 5), max_size=7)), dtype=np.int32)
    if not verify:
        return DraftRows(batch_ids=batch, seq_ids=rows)
    m = rows.shape[0]
    drafts = _vector(draw, n, st.integers(0, 3))
    accepted = _vector(draw, m, st.integers(0, 3))
    return VerifyRows(batch_ids=batch, positions=np.arange(n), num_drafts=drafts,
                      seq_ids=rows, num_accepted=accepted)


@given(data=st.data(), verify=st.booleans())
def test_the_row_clearances_agree_with_their_rules(data: st.DataObject, verify: bool) -> None:
    """VerifyRows (SG604, SG605) and DraftRows (SG606): yes exactly where the rules pass."""
    with contracts.checking(mode="off"):
        rows = data.draw(_rows(verify))
    plan = type(rows).__sg_plan__
    found = clearance_for(type(rows).__name__)
    assert found is not None and plan.fast_check(rows)
    values = ValueChecks(contracts.Config(), plan.subject)
    covered = [rule for rule in plan.rules if rule.code in found.covers]
    assert {rule.code for rule in covered} == found.covers
    target = plan.rule_target(rows)
    rules_pass = not any(rule.check(target, values) is not None
                         for rule in covered if rule.check is not None)
    assert found.check(target) is rules_pass


def test_a_verify_row_past_its_drafts_is_cleared_no_and_named_by_sg605() -> None:
    from specguard.adapters._step_rules import VerifyRows

    fields: dict[str, Any] = {
        "batch_ids": np.array([4, 7]), "positions": np.array([0, 2]),
        "num_drafts": np.array([2, 1]), "seq_ids": np.array([4, 7]),
        "num_accepted": np.array([2, 1])}
    with contracts.checking(mode="strict"):
        VerifyRows(**fields)
    fields["num_accepted"] = np.array([2, 2])
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as raised:
        VerifyRows(**fields)
    assert raised.value.codes == ("SG605",)
    assert raised.value.violations[0].reason == (
        "accepted 2 drafts, but the row carried 1 real drafts")
