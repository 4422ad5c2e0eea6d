"""Greedy verification: left-packed rows, acceptance up to the first mismatch."""

from __future__ import annotations

import pytest
import torch

from specguard import contracts
from specguard.runner.verifier import verify_greedy


def _verify(drafts, targets, num_drafts, mtp_k=3, vocab_size=50):
    return verify_greedy(
        seq_ids=torch.arange(10, 10 + len(drafts)), draft_token_ids=torch.tensor(drafts),
        target_token_ids=torch.tensor(targets), num_drafts=torch.tensor(num_drafts),
        mtp_k=mtp_k, vocab_size=vocab_size)


def test_rows_hold_accepted_drafts_one_token_then_padding():
    """All accepted gives the bonus token; a mismatch gives the target's correction."""
    out = _verify(drafts=[[5, 6, 7], [5, 9, 7], [1, 2, 3]],
                  targets=[[5, 6, 7, 8], [5, 6, 7, 8], [4, 2, 3, 9]],
                  num_drafts=[3, 3, 3])
    assert out.num_accepted.tolist() == [3, 1, 0]
    assert out.token_ids.tolist() == [[5, 6, 7, 8], [5, 6, -1, -1], [4, -1, -1, -1]]


def test_acceptance_stops_at_the_first_mismatch():
    """A later draft that happens to match is not accepted after a rejection."""
    out = _verify(drafts=[[5, 0, 7]], targets=[[5, 6, 7, 8]], num_drafts=[3])
    assert out.num_accepted.tolist() == [1]


def test_placeholder_slots_are_never_accepted():
    """Slots past a row's real drafts are placeholders, even when they equal the target."""
    out = _verify(drafts=[[5, 6, 7], [5, 6, 7]], targets=[[5, 6, 7, 8], [5, 6, 7, 8]],
                  num_drafts=[1, 0])
    assert out.num_accepted.tolist() == [1, 0]
    assert out.token_ids.tolist() == [[5, 6, -1, -1], [5, -1, -1, -1]]


def test_result_is_a_validated_verify_output():
    """The verifier hands over a VerifyOutput, so a bad target id is caught there."""
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation) as caught:
        _verify(drafts=[[5, 6, 7]], targets=[[5, 6, 60, 8]], num_drafts=[3], vocab_size=50)
    assert caught.value.codes == ("SG202",)
    assert "seq 10 at batch position 0" in str(caught.value)
