"""Hostile engine objects: every adapter either accepts them or raises a ContractViolation."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from hypothesis import given
from hypothesis import strategies as st
from vllm_engine import attention_metadata, scheduler_output

from specguard import contracts
from specguard.adapters import AtomView, StepTracker, VllmView

K = 3

HOSTILE = [
    None, "text", 3.5, -7, 10**30, True, [], [[]], [["a"]], [1.5, 2], {"a": 1}, object(),
    np.zeros((2, 2)), np.zeros(0), np.array(["a", "b"]), np.full(4, -1, np.int32),
    np.full(4, 2**40, np.int64), np.full(4, np.nan), np.zeros(4, bool),
    torch.tensor([1, 2, 3, 4]), torch.zeros((4, 3), dtype=torch.float32),
]
ATOM_FIELDS = [f.name for f in dataclasses.fields(
    type(decode_batch([sequence(0, 40, drafts=K)], dense=True)))]


@pytest.fixture(autouse=True)
def _everything():
    """Full depth and every rule, so that every check meets the hostile value."""
    with contracts.checking(depth="full", collect="all"):
        yield


def _contract_or_nothing(call) -> None:
    try:
        call()
    except contracts.ContractViolation as violation:
        assert violation.violations, "a violation names at least one rule"


@given(field=st.sampled_from([*ATOM_FIELDS, "is_final_chunk", "last_block_num_tokens"]),
       value=st.sampled_from(HOSTILE), tracked=st.booleans(), first=st.booleans())
def test_atom_fields_replaced_by_hostile_values(field, value, tracked, first):
    """Any ATOM field replaced by a hostile value is accepted or a ContractViolation, on
    the tracker's first forward too; so is a hostile drafter input (next_token_ids)."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE,
                    tracker=StepTracker() if tracked else None)
    if tracked and not first:
        view(decode_batch(seqs, dense=True))
    atom = decode_batch(seqs, dense=True)
    setattr(atom, field, value)
    _contract_or_nothing(lambda: view(atom))
    _contract_or_nothing(lambda: view.verified(atom, value, value))
    _contract_or_nothing(lambda: view.drafted(atom, value))
    _contract_or_nothing(lambda: view.drafted(atom, np.zeros((4, K), np.int32), value))


VLLM_FIELDS = ["num_scheduled_tokens", "scheduled_spec_decode_tokens",
               "total_num_scheduled_tokens", "scheduled_new_reqs", "scheduled_cached_reqs"]


@given(field=st.sampled_from(VLLM_FIELDS), value=st.sampled_from(HOSTILE),
       asynchronous=st.booleans())
def test_vllm_scheduler_output_with_hostile_fields(field, value, asynchronous):
    """A SchedulerOutput field replaced by a hostile value is accepted or a violation."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB, async_scheduling=asynchronous,
                    tracker=StepTracker())
    output = scheduler_output({"a": [5, 6, 7], "b": [1]}, {"p": 4})
    setattr(output, field, value)
    _contract_or_nothing(lambda: view.schedule(output))


@given(field=st.sampled_from(VLLM_FIELDS), value=st.sampled_from(HOSTILE))
def test_vllm_scheduler_output_with_hostile_fields_at_metadata_depth(field, value):
    """At metadata depth (keys only, entries read on first use) a hostile field is
    accepted or a violation, when scheduled and when its entries are read later."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB)
    output = scheduler_output({"a": [5, 6, 7], "b": [1]}, {"p": 4})
    setattr(output, field, value)
    with contracts.checking(depth="metadata"):
        try:
            step = view.schedule(output)
        except contracts.ContractViolation:
            return
    _contract_or_nothing(lambda: step.entries())


@given(req_ids=st.sampled_from([*HOSTILE, [["a"]], [None, "a"], ("a", "a", "b", "p"),
                                ["a", "b"], ["a", "b", "p", "q"]]),
       depth=st.sampled_from(["metadata", "full"]), tracked=st.booleans())
def test_vllm_runner_batch_orders_that_are_hostile(req_ids, depth, tracked):
    """The runner's batch order of any type or content (unhashable, repeated, missing or
    extra requests) is accepted or a violation, at every depth, with or without a tracker."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker() if tracked else None)
    output = scheduler_output({"a": [5, 6, 7], "b": [1]}, {"p": 4})
    with contracts.checking(depth=depth):
        _contract_or_nothing(lambda: view.schedule(output, req_ids=req_ids).entries())


@given(drafts=st.sampled_from(HOSTILE))
def test_vllm_draft_lists_with_hostile_entries(drafts):
    """A request's drafts entry of any shape or type is accepted or a violation."""
    output = scheduler_output({"a": [5, 6, 7]})
    output.scheduled_spec_decode_tokens["a"] = drafts
    _contract_or_nothing(lambda: VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output))


@given(sampled=st.sampled_from(HOSTILE), drafts=st.sampled_from(HOSTILE))
def test_vllm_sampler_and_drafter_outputs_with_hostile_values(sampled, drafts):
    """Rejection rows and proposals of any type are accepted or a violation."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker())
    step = view.schedule(scheduler_output({"a": [5, 6, 7], "b": [1]}))
    _contract_or_nothing(lambda: view.verified(step, sampled))
    _contract_or_nothing(lambda: view.drafted(step, drafts))


@given(part=st.sampled_from(["target_token_ids", "target_positions", "next_token_ids",
                             "last_token_indices", "query_start_loc"]),
       value=st.sampled_from(HOSTILE))
def test_vllm_drafter_inputs_with_hostile_values(part, value):
    """Any propose() input replaced by a hostile value is accepted or a violation."""
    view = VllmView(mtp_k=K, vocab_size=VOCAB)
    step = view.schedule(scheduler_output({}, {"r0": 4, "r1": 4}))
    meta = attention_metadata([4, 4])
    inputs = {"target_token_ids": torch.arange(8, dtype=torch.int32),
              "target_positions": torch.arange(8), "next_token_ids": torch.tensor(
                  [1, 2], dtype=torch.int32), "last_token_indices": torch.tensor([3, 7])}
    if part == "query_start_loc":
        meta.query_start_loc = value
    else:
        inputs[part] = value
    _contract_or_nothing(lambda: view.drafter_input(step, common_attn_metadata=meta, **inputs))


class _RaisingIndex:
    """An integer-like whose ``__index__`` raises something that is no TypeError."""

    def __index__(self) -> int:
        raise ValueError("no index today")


def test_an_entry_whose_index_raises_is_a_violation_not_a_foreign_error():
    """The packed readings of ATOM's request ids, vLLM's counts and vLLM's draft lists
    call each entry's ``__index__``; one that raises reaches the contract, which names
    the field, instead of escaping from the view."""
    hostile: Any = _RaisingIndex()  # what the engine's annotations would refuse
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    atom = decode_batch(seqs, dense=True)
    atom.req_ids = [0, 1, hostile, 3]
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE, tracker=StepTracker())
    with pytest.raises(contracts.ContractViolation) as raised:
        view(atom)
    assert [(v.code, v.field) for v in raised.value.violations] == [("SG002", "seq_ids")]

    counts = scheduler_output({"a": [1, 2, 3], "b": [4, 5, 6]})
    counts.num_scheduled_tokens["b"] = hostile
    with pytest.raises(contracts.ContractViolation) as raised:
        VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker()).schedule(counts)
    (violation,) = raised.value.violations
    assert (violation.code, violation.field) == ("SG002", "num_scheduled_tokens")
    assert violation.reason.startswith("request 'b': scheduled token count ")

    drafts = scheduler_output({"a": [1, 2, 3], "b": [4, 5, 6]})
    drafts.scheduled_spec_decode_tokens["b"] = [4, hostile, 6]
    with pytest.raises(contracts.ContractViolation) as raised:
        VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker()).schedule(drafts)
    (violation,) = raised.value.violations
    assert (violation.code, violation.field) == ("SG002", "draft_token_ids")
    assert violation.reason.startswith("request 'b': drafts are not 1-D integer ids")
