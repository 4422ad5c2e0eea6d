"""``DraftTokens.from_mapping``: dense rows from the engines' seq-id-to-drafts form."""

from __future__ import annotations

import inspect
import logging
import re

import numpy as np
import pytest

from specguard import contracts

DT = contracts.DraftTokens
_IDS = [40, 42, 44]


def _from(drafts, **options):
    settings = {"mtp_k": 2, "vocab_size": 32, "placeholder": 0, **options}
    return DT.from_mapping(settings.pop("seq_ids", _IDS), drafts, **settings)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, "int32", "int64"])
def test_rows_follow_batch_order_and_dtype(dtype):
    """Rows are in seq_ids order whatever the mapping's order, in the requested dtype."""
    drafts = _from({44: [9], 40: [1, 2]}, dtype=dtype)
    assert drafts.draft_token_ids.tolist() == [[1, 2], [0, 0], [9, 0]]
    assert drafts.num_drafts.tolist() == [2, 0, 1]
    assert drafts.seq_ids.tolist() == _IDS
    assert drafts.draft_token_ids.dtype == np.dtype(dtype)


def test_torch_dtype_is_accepted():
    """A torch dtype names the id width as well as a numpy one does."""
    torch = pytest.importorskip("torch")
    assert _from({}, dtype=torch.int64).num_drafts.dtype == np.int64


def test_per_seq_placeholders_fill_their_own_rows():
    """One placeholder per seq (e.g. its last token) fills that seq's free slots."""
    drafts = _from({42: [5]}, placeholder=np.array([7, 8, 9]))
    assert drafts.draft_token_ids.tolist() == [[7, 7], [5, 8], [9, 9]]


def test_too_many_drafts_is_sg102():
    """A seq with more than mtp_k drafts is reported with its row and seq."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG102 row width follows mtp_k [DraftTokens.draft_token_ids, scheduler → runner]: "
        "seq 42 at batch position 1: seq has 3 drafts (expected at most mtp_k=2)"
    )):
        _from({42: [1, 2, 3]})


def test_drafts_that_are_not_ids_are_sg002():
    """Floats, nested lists or strings as drafts are SG002 naming the seq."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG002 array has an allowed dtype [DraftTokens.draft_token_ids, scheduler → runner]: "
        "seq 44 at batch position 2: drafts are not 1-D integer ids that fit int32"
    )):
        _from({44: [1.5]})


def test_drafts_too_large_for_the_dtype_are_sg002():
    """An id that does not fit int32 is rejected rather than wrapped."""
    with pytest.raises(contracts.ContractViolation, match="fit int32"):
        _from({40: [2**40]})


def test_seq_ids_are_int64_whatever_the_token_dtype():
    """Seq ids name requests: an id past int32 is fine with int32 tokens, stored as int64."""
    drafts = _from({7: [1]}, seq_ids=[2**40, 7], dtype=np.int32)
    assert drafts.seq_ids.dtype == np.int64
    assert drafts.seq_ids.tolist() == [2**40, 7]
    assert drafts.draft_token_ids.dtype == np.int32
    assert drafts.draft_token_ids.tolist() == [[0, 0], [1, 0]]


def test_seq_ids_too_large_for_int64_are_sg002():
    """Seq ids past int64 are rejected, never silently wrapped."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG002 array has an allowed dtype [DraftTokens.seq_ids, scheduler → runner]: "
        "expected a 1-D sequence of integer ids that fit int64, got u64[1]"
    )):
        _from({}, seq_ids=[2**63])


def test_drafts_that_are_not_a_mapping_are_sg001():
    """A list of rows is exactly the positional form the mapping replaces: SG001."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG001 field has the declared type [DraftTokens.draft_token_ids, scheduler → runner]: "
        "drafts must be a mapping of seq id to drafts, got list"
    )):
        _from([[1, 2], [3, 4]])


@pytest.mark.parametrize("dtype", [np.float32, "bogus", None])
def test_non_id_dtype_is_sg002(dtype):
    """Only int32 and int64 are id dtypes."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "ids are stored as int32 or int64, not "
    )):
        _from({}, dtype=dtype)


@pytest.mark.parametrize("placeholder", [[1, 2], 2**40, "x"])
def test_bad_placeholder_is_sg108(placeholder):
    """A placeholder list of the wrong length or an id that does not fit is rejected."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG108 draft token ids are valid vocabulary ids [DraftTokens.draft_token_ids, "
        "scheduler → runner]: placeholder must be one id, or one id per decode seq, that "
        "fits int32; got "
    )):
        _from({}, placeholder=placeholder)


def test_out_of_vocab_placeholder_is_caught_at_full_depth():
    """contracts.PLACEHOLDER (-1) fits the dtype but is no vocabulary id: SG108 on the rows."""
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=re.escape(
            "seq 40 at batch position 0: draft 0 of row 0 is -1")
    ):
        _from({42: [1, 2]}, placeholder=contracts.PLACEHOLDER)


def test_placeholder_must_be_stated():
    """from_mapping has no default placeholder: a silent 0 looked like drafts of token 0."""
    placeholder = inspect.signature(DT.from_mapping).parameters["placeholder"]
    assert placeholder.default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="placeholder"):
        DT.from_mapping(_IDS, {}, mtp_k=2, vocab_size=32)  # pyright: ignore[reportCallIssue]


def _batch_with_placeholder_row(**declared):
    """Seqs 40 and 42 decoding; seq 42 just left prefill, so its row is all -1."""
    return contracts.ScheduledBatch(
        mtp_k=2, vocab_size=32, block_size=4, num_decode=2, num_tokens=6,
        seq_ids=np.array([40, 42]), is_decode=np.array([True, True]),
        num_scheduled_tokens=np.array([3, 3]), context_lens=np.array([5, 7]),
        block_tables=np.array([[0, 1], [2, 3]]), token_ids=np.arange(6),
        draft_token_ids=np.array([[5, 6], [-1, -1]]), num_drafts=np.array([2, 0]), **declared)


def test_a_declared_placeholder_row_passes_where_the_runner_masks_it():
    """A -1 row is legal in a ScheduledBatch that declares -1 as its masked placeholder."""
    with contracts.checking(depth="full"):
        batch = _batch_with_placeholder_row(draft_placeholder=contracts.PLACEHOLDER)
    assert batch.draft_token_ids[1].tolist() == [-1, -1]


def test_an_undeclared_placeholder_row_is_sg108():
    """The same -1 row, with nothing declaring it masked, is caught by SG108 at its seq."""
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=re.escape(
            "SG108 draft token ids are valid vocabulary ids [ScheduledBatch.draft_token_ids, "
            "scheduler → runner]: seq 42 at batch position 1: draft 0 of row 1 is -1")
    ):
        _batch_with_placeholder_row()


def test_a_placeholder_reaching_the_drafter_embedding_is_sg301():
    """Declared or not, a -1 fed to the MTP head's embedding is SG301: masking is the
    runner's job before that point."""
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=r"SG301 .* is -1"
    ):
        contracts.DrafterInput(
            vocab_size=32, num_tokens=4, seq_ids=np.array([40, 42]),
            input_ids=np.array([5, 6, 7, contracts.PLACEHOLDER]), positions=np.arange(4),
            query_start_loc=np.array([0, 2, 4]), sample_indices=np.array([1, 3]))


def test_invalid_mtp_k_is_reported_by_the_constructor():
    """mtp_k=0 is SG006 on mtp_k itself, not a row-width complaint."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG006 scalar is within its range [DraftTokens.mtp_k, scheduler → runner]: "
        "must be >= 1, got 0"
    )):
        _from({40: [1]}, mtp_k=0)


def test_collect_all_reports_every_row_problem(caplog):
    """With collect="all" every bad row and the stranger are reported together."""
    with caplog.at_level(logging.WARNING, logger="specguard"), contracts.checking(
        mode="warn", collect="all"
    ):
        drafts = _from({40: [1, 2, 3], 44: ["x"], 7: [1]})
    assert [r.getMessage().split()[1] for r in caplog.records] == ["SG102", "SG002", "SG114"]
    assert drafts.draft_token_ids.tolist() == [[1, 2], [0, 0], [0, 0]]


def test_several_strangers_are_counted():
    """More than one stale seq is summarised, naming the first."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "seq 7: has drafts but is not a decode seq of this batch (2 more such seqs)"
    )):
        _from({7: [1], 8: [1], 9: [1]})
