"""The rules across data-parallel ranks, checked from gathered rows without any process."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import RankStep, check_ranks
from specguard.adapters.ranks import HEADER, describe_rows
from specguard.cli import main as specguard

#: Four ranks at step 5, mtp_k 3; rank 2 is idle and runs a dummy decode span.
CLEAN = (
    RankStep(5, 3, 12, 12, False, 4, [0, 4, 8]),
    RankStep(5, 3, 8, 12, False, 4, [1, 5]),
    RankStep(5, 3, 4, 12, True, 4, []),
    RankStep(5, 3, 12, 12, False, 4, [3, 7, 11]),
)


def rows(steps=CLEAN, slots: int = 4, **changes_by_rank) -> np.ndarray:
    """The gathered matrix of ``steps``; ``r3={"mtp_k": 2}`` changes rank 3's row."""
    changed = list(steps)
    for key, changes in changes_by_rank.items():
        rank = int(key[1:])
        changed[rank] = dataclasses.replace(changed[rank], **changes)
    return np.stack([step.row(id_slots=slots) for step in changed])


def test_clean_rows_pass_every_rule():
    """Ranks that agree break no rule, at full depth, collecting every finding."""
    with contracts.checking(mode="strict", depth="full", collect="all"):
        agreement = check_ranks(rows())
        assert contracts.validate(agreement) == []
    assert agreement.seq_ids is not None and agreement.seq_ids.shape == (4, 4)


CASES = [
    ("SG701", {"r1": {"stopped": 101}},
     "SG701 no rank has stopped on a contract violation [RankAgreement.stopped, across "
     "ranks]: rank 1 stopped on a violation of SG101; every rank stops with it "
     "(expected 0; actual 101)"),
    ("SG702", {"r2": {"step": 6}},
     "SG702 every rank is at the same step [RankAgreement.step, across ranks]: rank 2 is at "
     "step 6, but ranks 0, 1 and 3 are at step 5 (expected 5; actual 6)"),
    ("SG703", {"r3": {"mtp_k": 2, "dummy_tokens": 3}},
     "SG703 every rank runs the same mtp_k [RankAgreement.mtp_k, across ranks]: rank 3 runs "
     "mtp_k 2, but ranks 0, 1 and 2 run mtp_k 3 (expected 3; actual 2)"),
    ("SG704", {"r1": {"padded_tokens": 8}},
     "SG704 every rank pads to the same size, which fits every rank's tokens [RankAgreement."
     "padded_tokens, across ranks]: rank 1 pads to 8, fewer than the 12 tokens of rank 0; "
     "ranks 0, 2 and 3 pad to 12 (expected 12; actual 8)"),
    ("SG704", {"r1": {"padded_tokens": 16}},
     "rank 1 pads to 16, but ranks 0, 2 and 3 pad to 12 (expected 12; actual 16)"),
    ("SG705", {"r2": {"num_tokens": 1, "dummy_tokens": 1}},
     "SG705 every rank follows the same dummy-step convention [RankAgreement.dummy_tokens, "
     "across ranks]: rank 2 runs dummy steps of 1 token, but ranks 0, 1 and 3 run dummy "
     "steps of 4 tokens (expected 4; actual 1)"),
    ("SG705", {"r2": {"num_tokens": 1}},
     "SG705 every rank follows the same dummy-step convention [RankAgreement.num_tokens, "
     "across ranks]: rank 2 runs a dummy step of 1 token, but its convention is 4"),
    ("SG706", {"r3": {"seq_ids": [0, 1, 2]}},
     "SG706 seq ids are unique across ranks [RankAgreement.seq_ids, across ranks]: seq 0: "
     "rank 3 schedules it as well as rank 0 (expected seq 0 on one rank; actual on ranks 0 "
     "and 3)"),
]


@pytest.mark.parametrize(("code", "changes", "message"), CASES,
                         ids=[f"{c}-{i}" for i, (c, *_) in enumerate(CASES)])
def test_disagreement_is_caught_naming_the_rank(code, changes, message):
    """One rank that disagrees breaks its rule, and the message names that rank."""
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation, match=re.escape(message)) as caught:
        check_ranks(rows(**changes))
    assert caught.value.codes == (code,)


def test_two_ranks_that_disagree_name_rank_one():
    """With no majority the lowest rank's value is the reference: rank 1 is named."""
    two = CLEAN[:2]
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(rows(two, r1={"mtp_k": 2}))
    assert "rank 1 runs mtp_k 2, but rank 0 runs mtp_k 3" in str(caught.value)


def test_every_rank_padding_too_little_is_caught():
    """Ranks that agree on a size smaller than some rank's batch break SG704."""
    small: dict[str, Any] = {f"r{r}": {"padded_tokens": 8} for r in range(4)}
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(rows(**small))
    assert "rank 0 runs 12 tokens, more than the 8 every rank pads to" in str(caught.value)


def test_header_rules_run_at_metadata_depth():
    """The default depth compares the header: a disagreement on mtp_k is still caught."""
    with contracts.checking(mode="strict", depth="metadata"), \
            pytest.raises(contracts.ContractViolation, match="SG703"):
        check_ranks(rows(slots=0, r3={"mtp_k": 2}))


def test_rows_without_seq_ids_skip_the_id_rule():
    """Rows of the header alone (metadata depth) leave SG706 nothing to compare."""
    with contracts.checking(mode="strict", depth="metadata", collect="all"):
        agreement = check_ranks(rows(slots=0, r3={"seq_ids": [0, 1, 2]}))
    assert agreement.seq_ids is None


def test_mode_off_checks_nothing():
    """With contracts off even disagreeing rows pass through unchecked."""
    with contracts.checking(mode="off"):
        assert check_ranks(rows(r1={"mtp_k": 7})).mtp_k.tolist() == [3, 7, 3, 3]


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((2, 3), dtype=np.int64), [[1, 2]]],
                         ids=["flat-floats", "too-narrow", "nested-list"])
def test_malformed_rows_are_a_violation_not_a_crash(bad):
    """Rows of the wrong shape or type raise ContractViolation, never IndexError."""
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(bad)
    assert caught.value.codes[0] in {"SG001", "SG002", "SG003"}


def test_row_layout_is_the_header_then_padded_ids():
    """A row is the header fields in order, then the seq ids padded with -1."""
    row = RankStep(7, 3, 8, 12, False, 4, [9, 10], stopped=0).row(id_slots=4)
    assert row.dtype == np.int64
    assert row.tolist() == [0, 7, 3, 8, 12, 0, 4, 2, 0, 9, 10, -1, -1]
    assert len(HEADER) == 9
    assert RankStep(7, 3, 8, 12, False, 4, [9, 10, 11]).row(id_slots=2).tolist()[-2:] == [9, 10]


def test_row_layout_carries_the_token_counts_before_the_ids():
    """The rank's copy of every rank's token count follows the header, counted in it."""
    row = RankStep(7, 3, 8, 12, False, 4, [9], tokens_across_ranks=[8, 12]).row(id_slots=2)
    assert row.tolist() == [0, 7, 3, 8, 12, 0, 4, 1, 2, 8, 12, 9, -1]


#: Every rank's copy of the clean group's token counts.
_COUNTS = [12, 8, 4, 12]


def _with_counts(**changes_by_rank: dict[str, Any]) -> np.ndarray:
    """The clean rows, every rank carrying ``_COUNTS``, then ``changes_by_rank``."""
    changes: dict[str, Any] = {f"r{rank}": {"tokens_across_ranks": _COUNTS} for rank in range(4)}
    for key, change in changes_by_rank.items():
        changes[key] = {**changes[key], **change}
    return rows(**changes)


def test_ranks_holding_the_same_token_counts_pass():
    """Copies that agree break no rule; the object holds each rank's copy."""
    with contracts.checking(mode="strict", depth="full", collect="all"):
        agreement = check_ranks(_with_counts())
    assert agreement.tokens_across_ranks is not None
    assert agreement.tokens_across_ranks.tolist() == [_COUNTS] * 4
    assert agreement.seq_ids is not None and agreement.seq_ids.shape == (4, 4)


def test_a_rank_with_another_copy_of_the_token_counts_is_named():
    """A stale copy on rank 3 breaks SG710 at the default depth, naming rank and entry."""
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(_with_counts(r3={"tokens_across_ranks": [12, 8, 12, 12]}))
    assert caught.value.codes == ("SG710",)
    assert ("SG710 every rank holds the same token counts across ranks [RankAgreement."
            "tokens_across_ranks, across ranks]: rank 3 holds [12, 8, 12, 12], but ranks 0, "
            "1 and 2 hold [12, 8, 4, 12] (entry 2 differs) (expected 4; actual 12)"
            ) in str(caught.value)
    lines = describe_rows(_with_counts(r3={"tokens_across_ranks": [12, 8, 12, 12]}))
    assert lines[3].endswith("token counts [12, 8, 12, 12]")


def test_ranks_that_carry_different_numbers_of_counts_disagree():
    """A rank that sends no copy while the others send theirs: SG710 on the count."""
    matrix = _with_counts()
    matrix[1, HEADER.index("across")] = 0
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(matrix)
    assert caught.value.codes == ("SG710",)
    assert "rank 1 sends 0 token counts, but ranks 0, 2 and 3 send 4 token counts" in str(
        caught.value)


def test_describe_rows_says_what_each_rank_reported():
    """One readable line per rank: its step, mtp_k, work and padded size."""
    lines = describe_rows(rows(r1={"stopped": 601}))
    assert lines[2] == ("rank 2: step 5, mtp_k 3, dummy step of 4 tokens, padded to 12 "
                        "(dummy steps run 4 tokens)")
    assert lines[1].endswith(", stopped by SG601")
    assert describe_rows(np.zeros(3))[0].startswith("unreadable rows")


def test_rank_violation_round_trips_through_a_snapshot(tmp_path, monkeypatch, capsys):
    """A violation across ranks is written to a snapshot that `specguard check` re-raises."""
    monkeypatch.setenv("SPECGUARD_SNAPSHOT_DIR", str(tmp_path))
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation):
        check_ranks(rows(r3={"mtp_k": 2}))
    [path] = tmp_path.glob("RankAgreement-*.json")
    assert specguard(["check", str(path)]) == 1
    assert "rank 3 runs mtp_k 2, but ranks 0, 1 and 2 run mtp_k 3" in capsys.readouterr().out


def test_a_gather_of_no_rank_is_a_violation():
    """A gather never returns zero ranks: at least the gathering rank's own row is there."""
    empty = np.zeros((0, len(HEADER)), dtype=np.int64)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(empty)
    (violation,) = caught.value.violations
    assert violation.code == "SG003"
    assert violation.reason == ("the gathered rows hold no rank: every rank sends its own "
                                "row, so a gather returns at least one")
    with contracts.checking(mode="strict"):
        check_ranks(rows())  # one rank or more: clean


@pytest.mark.parametrize(("field", "value"), [("step", 2**70), ("num_tokens", -(2**64)),
                                                ("padded_tokens", 2**63)])
def test_a_rank_step_past_int64_is_a_violation_not_an_overflow(field, value):
    step = RankStep(step=5, mtp_k=2, num_tokens=10, padded_tokens=16, dummy=False,
                    dummy_tokens=1, seq_ids=[1, 2])
    broken = dataclasses.replace(step, **{field: value})
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        broken.row(4)
    (violation,) = caught.value.violations
    assert (violation.code, violation.field) == ("SG006", field)
    assert "does not fit the int64 row the ranks gather" in violation.reason
    with contracts.checking(mode="warn"):
        sent = broken.row(4)  # warn mode: the entry goes out as -1, and the others see it
    assert sent[HEADER.index(field)] == -1
    assert step.row(4).tolist()[:3] == [0, 5, 2]


def test_rank_step_seq_ids_past_int64_are_a_violation():
    step = RankStep(step=5, mtp_k=2, num_tokens=10, padded_tokens=16, dummy=False,
                    dummy_tokens=1, seq_ids=[1, 2**70])
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        step.row(4)
    assert caught.value.violations[0].code == "SG006"


@pytest.mark.parametrize(("field", "value", "dtype"), [
    ("seq_ids", [1.5, 2.0], "float64"), ("seq_ids", np.full(2, np.nan), "float64"),
    ("seq_ids", [True, False], "bool"), ("tokens_across_ranks", [4.0, 4.0], "float64"),
], ids=["float ids", "NaN ids", "bool ids", "float counts"])
def test_rank_step_values_that_are_not_integers_are_sg001_not_cast(field, value, dtype):
    """A float, NaN or bool vector is refused where it is sent, not cast (1.5 would go out
    as 1, NaN as an arbitrary id); the integer vectors of the same values go out."""
    step = RankStep(step=5, mtp_k=2, num_tokens=10, padded_tokens=16, dummy=False,
                    dummy_tokens=1, seq_ids=[1, 2], tokens_across_ranks=[4, 4])
    broken = dataclasses.replace(step, **{field: value})
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        broken.row(4)
    (violation,) = caught.value.violations
    assert (violation.code, violation.field) == ("SG001", field)
    assert violation.reason == f"{field} must be integers, got {dtype} values"
    with contracts.checking(mode="strict"):
        assert step.row(4).tolist()[-6:] == [4, 4, 1, 2, -1, -1]
        assert dataclasses.replace(step, seq_ids=np.array([1, 2], np.uint64)).row(4) \
            .tolist()[-4:] == [1, 2, -1, -1]


@pytest.mark.parametrize("copy", [[12, 8, 4], [12, 8, 4, 12, 9], []],
                         ids=["short", "long", "none"])
def test_a_copy_of_another_length_keeps_the_row_width_with_across_slots(copy):
    """With ``across_slots`` (the data-parallel size) every rank's row has one width,
    whatever its copy's length: the gather of rows cannot fail on a rank whose copy is
    wrong, and the check names that rank by the count its header carries."""
    steps = [dataclasses.replace(step, tokens_across_ranks=_COUNTS) for step in CLEAN]
    steps[3] = dataclasses.replace(steps[3], tokens_across_ranks=copy)
    built = [step.row(id_slots=4, across_slots=4) for step in steps]
    assert {row.shape for row in built} == {(len(HEADER) + 4 + 4,)}
    assert built[3][HEADER.index("across")] == len(copy)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        check_ranks(np.stack(built))
    assert caught.value.codes == ("SG710",)
    assert (f"rank 3 sends {len(copy)} token counts, but ranks 0, 1 and 2 send 4 token "
            "counts") in str(caught.value)
    # The ranks that agree: the same rows as without the fixed width.
    with contracts.checking(mode="strict", depth="full"):
        check_ranks(np.stack([step.row(id_slots=4, across_slots=4) for step in steps[:3]]))
    assert (steps[0].row(id_slots=4, across_slots=4) == steps[0].row(id_slots=4)).all()
