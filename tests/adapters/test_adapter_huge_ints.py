"""Ids and counts past int64 in engine objects: a ContractViolation, never an OverflowError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from vllm_engine import scheduler_output

from specguard import contracts
from specguard.adapters import AtomView, StepTracker, VllmView

K = 3
PAST_INT64 = [2**63, np.uint64(2**64 - 1), 2**64, -(2**63) - 1]
IDS = ["2**63", "uint64 max", "2**64", "-2**63-1"]


def _codes(call: Any) -> tuple[str, ...]:
    """The codes ``call`` raises; () when it passes. A foreign exception fails the test."""
    with contracts.checking(depth="full", collect="all"):
        try:
            call()
        except contracts.ContractViolation as error:
            return error.codes
    return ()


@pytest.mark.parametrize("value", PAST_INT64, ids=IDS)
@pytest.mark.parametrize("tracked", [False, True], ids=["untracked", "tracked"])
def test_atom_request_id_past_int64_is_sg002(value, tracked):
    """An ATOM req_id past int64 reaches the contract as a wrong dtype (SG002)."""
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE,
                    tracker=StepTracker() if tracked else None)
    batch = decode_batch([sequence(i, 40, drafts=K) for i in range(4)], dense=True)
    batch.req_ids = [value, *batch.req_ids[1:]]
    assert "SG002" in _codes(lambda: view(batch))


@pytest.mark.parametrize("value", PAST_INT64, ids=IDS)
def test_atom_cache_group_past_int64_is_a_violation(value):
    """A per-request cache group past int64 is reported, not converted."""
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE, per_req_state=True)
    seqs = [sequence(i, 40, drafts=K, cache_group=i) for i in range(4)]
    batch = decode_batch(seqs, dense=True)
    batch.per_req_cache_groups = [value, *batch.per_req_cache_groups[1:]]
    assert _codes(lambda: view(batch))


@pytest.mark.parametrize("value", PAST_INT64, ids=IDS)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_vllm_scheduled_count_past_int64_is_sg002(value, asynchronous):
    """A vLLM num_scheduled_tokens entry past int64 is SG002 naming the request."""
    output = scheduler_output({"a": [5, 6, 7], "b": [1]}, {"p": 4})
    output.num_scheduled_tokens["p"] = value
    view = VllmView(mtp_k=K, vocab_size=VOCAB, async_scheduling=asynchronous,
                    tracker=StepTracker())
    assert _codes(lambda: view.schedule(output)) == ("SG002",)


@pytest.mark.parametrize("value", PAST_INT64, ids=IDS)
def test_vllm_computed_count_past_int64_is_not_an_overflow(value):
    """A num_computed_tokens past int64 is left unread by the tracker, never converted."""
    output = scheduler_output({"a": [5, 6, 7], "b": [1]}, {"p": 4})
    output.scheduled_cached_reqs.num_computed_tokens = [value, value]
    output.scheduled_new_reqs[0].num_computed_tokens = value
    view = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker())
    assert _codes(lambda: view.schedule(output)) == ()
