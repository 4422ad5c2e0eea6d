"""mtp_k is bounded above as well as below: a corrupt width never sizes a huge buffer."""

from __future__ import annotations

import numpy as np
import pytest

from specguard import contracts as sg


def _drafter_output(mtp_k: int) -> sg.DrafterOutput:
    return sg.DrafterOutput(
        mtp_k=mtp_k, vocab_size=50, seq_ids=np.arange(2, dtype=np.int32),
        draft_token_ids=np.zeros((2, mtp_k), dtype=np.int32),
    )


@pytest.mark.parametrize("mtp_k", [1, 8, 128])
def test_mtp_k_up_to_the_bound_is_accepted(mtp_k: int) -> None:
    """Widths from 1 to vLLM's MAX_SPEC_LEN (128) are valid."""
    assert _drafter_output(mtp_k).mtp_k == mtp_k


def test_mtp_k_above_the_bound_is_sg006() -> None:
    """A width past 128 is reported as SG006 with the bound in the message."""
    with pytest.raises(sg.ContractViolation, match=r"SG006 .*mtp_k.*must be <= 128, got 129"):
        _drafter_output(129)


def test_from_mapping_refuses_a_huge_width_before_allocating() -> None:
    """from_mapping reports a 2**40 width as SG006 instead of allocating rows for it."""
    with pytest.raises(sg.ContractViolation, match=r"must be <= 128, got 1099511627776"):
        sg.DraftTokens.from_mapping([1, 2], {}, mtp_k=2**40, vocab_size=10, placeholder=0)


def test_the_bound_is_in_the_json_schema() -> None:
    """The JSON Schema carries the same bound, so other languages see it too."""
    schema = sg.json_schema(sg.VerifyOutput)["properties"]["mtp_k"]
    assert (schema["minimum"], schema["maximum"]) == (1, 128)
