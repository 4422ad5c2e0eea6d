"""Hostile engine objects: every adapter either accepts them or raises a ContractViolation."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from hypothesis import example, given
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
    np.full((4, 3), 2**40), np.full(4, 2.5),
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
@example(field="context_lens", value=np.full((4, 3), 2**40), tracked=True, first=False)
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


class _LengthRaises(list):
    def __len__(self) -> int:
        raise RuntimeError("no length today")


class _IterationRaises(list):
    def __iter__(self) -> Any:
        raise RuntimeError("no iteration today")


@pytest.mark.parametrize("container", [_LengthRaises, _IterationRaises])
@pytest.mark.parametrize("field", ["req_ids", "block_tables", "per_req_cache_groups"])
@pytest.mark.parametrize("mode", ["strict", "warn"])
def test_an_atom_container_that_raises_is_sg001_naming_its_field(container, field, mode):
    """A list subclass whose ``__len__`` or ``__iter__`` raises (what no ATOM annotation
    allows) is SG001 naming the field, in strict mode raised, in warn mode logged while
    the view goes on; nothing escapes as the container's own exception."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    atom = decode_batch(seqs, dense=True)
    setattr(atom, field, container(getattr(atom, field) or [[0]] * 4))
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE, tracker=StepTracker())
    heard: list[contracts.Violation] = []
    with contracts.checking(mode=mode), contracts.listening(heard.extend):
        try:
            view(atom)
            view.verified(atom, np.zeros((4, K + 1), np.int64), np.zeros(4, np.int64))
            view.drafted(atom, np.zeros((4, K), np.int64))
        except contracts.ContractViolation:
            assert mode == "strict"
        else:
            assert mode == "warn"
    first = heard[0]
    assert (first.code, first.field) == ("SG001", field)
    assert first.reason == (f"reading the batch's {field!r} raised RuntimeError: no "
                            f"{'length' if container is _LengthRaises else 'iteration'} today")


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


SGLANG_V2_FIELDS = [("entry", name) for name in (
    "reqs", "forward_mode", "seq_lens", "seq_lens_cpu", "req_pool_indices", "spec_info",
    "future_indices", "bonus_tokens", "topk_index")] + [("verify", name) for name in (
    "draft_token", "positions", "retrieve_index", "retrieve_next_token",
    "retrieve_next_sibling", "spec_steps", "topk", "draft_token_num")] + [
    ("result", name) for name in (
        "next_token_ids", "accept_lens", "accept_index", "new_seq_lens", "next_draft_input")]


@given(where=st.sampled_from(SGLANG_V2_FIELDS),
       value=st.sampled_from([*HOSTILE, [_RaisingIndex()] * 2, np.array(["a", "b"]),
                              np.full(2, np.nan), np.full(2, 2**40)]),
       depth=st.sampled_from(["metadata", "essential", "full"]), tracked=st.booleans())
@example(where=("entry", "seq_lens_cpu"), value=np.array(["a", "b"]), depth="essential",
         tracked=True)
@example(where=("entry", "seq_lens_cpu"), value=np.full(2, np.nan), depth="full",
         tracked=True)
def test_sglang_v2_hand_overs_with_hostile_fields(where, value, depth, tracked):
    """Any field of the overlap worker's four hand-overs replaced by a hostile value is
    accepted or a violation, two steps running (the second relates to the first), with
    and without the step tracker and the relay, at every depth; and no numpy warning
    (a NaN length cast to an integer) is raised on the way."""
    import warnings
    from types import SimpleNamespace

    from specguard.adapters import SglangV2View
    from specguard.adapters import examples as ex

    part, field = where
    view = SglangV2View(spec_steps=3, vocab_size=1000,
                        tracker=StepTracker() if tracked else None, carried=tracked)
    entry = ex._sglang_v2_entry(**({field: value} if part == "entry" else {}))
    verify_input = ex._sglang_v2_verify_input(**({field: value} if part == "verify" else {}))
    result = ex._sglang_v2_result(**({field: value} if part == "result" else {}))

    def step() -> None:
        checked = view.schedule(entry)
        view.verify_input(checked, verify_input)
        view.verified(checked, result)
        view.drafted(checked, getattr(result, "next_draft_input", None) or SimpleNamespace())

    with warnings.catch_warnings(), contracts.checking(depth=depth):
        warnings.simplefilter("error", RuntimeWarning)
        _contract_or_nothing(step)
        _contract_or_nothing(step)


SGLANG_FIELDS = [("decode", name) for name in (
    "reqs", "forward_mode", "seq_lens", "seq_lens_cpu", "req_pool_indices")] + [
    ("spec", name) for name in ("verified_id", "topk_index", "topk_p", "hidden_states")] + [
    ("verify_input", name) for name in (
        "draft_token", "positions", "retrive_index", "retrive_next_token",
        "retrive_next_sibling", "spec_steps", "topk", "draft_token_num")] + [
    ("verify_output", name) for name in (
        "accept_length_per_req_cpu", "verified_id", "draft_input")] + [
    ("extend", name) for name in ("reqs", "input_ids", "spec_info")] + [
    ("extend_spec", name) for name in (
        "positions", "verified_id", "seq_lens_for_draft_extend_cpu", "topk_index")] + [
    ("prefill", name) for name in (
        "forward_mode", "input_ids", "extend_lens", "prefix_lens", "out_cache_loc")] + [
    ("sampled", "next_token_ids")]
#: Host arrays that are the right size but no counts: strings, NaN, floats, huge counts.
_HOST_ARRAYS = [np.array(["a", "b"]), np.full(2, np.nan), np.array([5.0, 3.0]),
                np.full(2, 2**40), np.full(7, np.nan), np.array(list("abcdefg"))]


@given(where=st.sampled_from(SGLANG_FIELDS),
       value=st.sampled_from([*HOSTILE, [_RaisingIndex()] * 2, *_HOST_ARRAYS]),
       depth=st.sampled_from(["metadata", "essential", "full"]), tracked=st.booleans())
@example(where=("verify_output", "accept_length_per_req_cpu"), value=np.full(2, 2**40),
         depth="metadata", tracked=False)
@example(where=("verify_output", "accept_length_per_req_cpu"), value=np.full(2, np.nan),
         depth="essential", tracked=True)
@example(where=("extend_spec", "seq_lens_for_draft_extend_cpu"), value=np.array(["a", "b"]),
         depth="full", tracked=False)
@example(where=("decode", "seq_lens_cpu"), value=np.array(["a", "b"]), depth="essential",
         tracked=True)
@example(where=("prefill", "extend_lens"), value=np.full(2, np.nan), depth="metadata",
         tracked=True)
@example(where=("sampled", "next_token_ids"), value=np.array(["a", "b"]), depth="full",
         tracked=True)
def test_sglang_hand_overs_with_hostile_fields(where, value, depth, tracked):
    """Any field of the v1 worker's hand-overs (a prefill, then a decode step) replaced
    by a hostile value is accepted or a violation, with and without a tracker, at every
    depth: no foreign error, no numpy warning, and no allocation sized by a hostile
    count."""
    import warnings
    from types import SimpleNamespace

    from specguard.adapters import SglangView
    from specguard.adapters import examples as ex

    part, field = where

    def changed(obj: SimpleNamespace, name: str) -> SimpleNamespace:
        if part == name:
            setattr(obj, field, value)
        return obj

    prefill = changed(SimpleNamespace(
        reqs=ex._sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
        input_ids=np.arange(10, 18), extend_lens=[5, 3], prefix_lens=[0, 0],
        out_cache_loc=np.arange(1, 9)), "prefill")
    decode = changed(ex._sglang_decode(), "decode")
    changed(decode.spec_info, "spec")
    verify_input = changed(ex._sglang_verify_input(), "verify_input")
    verify_output = changed(ex._sglang_verify_output(), "verify_output")
    extend = changed(ex._sglang_draft_extend(), "extend")
    changed(getattr(extend, "spec_info", SimpleNamespace()), "extend_spec")
    sampled = value if part == "sampled" else np.array([31, 41])
    view = SglangView(spec_steps=3, vocab_size=1000,
                      tracker=StepTracker() if tracked else None)

    def step() -> None:
        view.schedule(prefill)
        view.draft_prefill(prefill, sampled)
        view.schedule(decode)
        view.drafted(decode, verify_input)
        view.verified(SimpleNamespace(reqs=ex._sglang_reqs(False, False)), verify_input,
                      verify_output, SimpleNamespace(out_cache_loc=np.arange(9, 17)))
        view.draft_extend(extend)

    with warnings.catch_warnings(), contracts.checking(depth=depth):
        warnings.simplefilter("error", RuntimeWarning)
        _contract_or_nothing(step)
        _contract_or_nothing(step)


class _ShapeOf:
    """An object whose ``shape`` is not a tuple of row counts."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


@given(field=st.sampled_from(["structured_output_request_ids", "grammar_bitmask",
                              "num_draft_tokens", "num_logits"]),
       value=st.sampled_from([*HOSTILE, [["a"]], ["a", ["x"]], [None], ["a", "a", "b"],
                              _ShapeOf("ab"), _ShapeOf((_RaisingIndex(),))]),
       version=st.sampled_from(["0.11.1", "0.33.0"]))
@example(field="grammar_bitmask", value=_ShapeOf("ab"), version="0.33.0")
def test_vllm_grammar_outputs_with_hostile_fields(field, value, version):
    """A GrammarOutput field (or the runner's counts) replaced by a hostile value is
    accepted or a violation, in both bitmask layouts."""
    from types import SimpleNamespace

    view = VllmView(mtp_k=K, vocab_size=VOCAB, tracker=StepTracker(), version=version)
    step = view.schedule(scheduler_output({"a": [5, 6, 7], "b": [1, 2, 3]}))
    grammar = SimpleNamespace(structured_output_request_ids=["a", "b"],
                              grammar_bitmask=np.zeros((8, 4), np.int32))
    changes = {}
    if field in ("num_draft_tokens", "num_logits"):
        changes[field] = value
    else:
        setattr(grammar, field, value)
    _contract_or_nothing(lambda: view.logits_rows(step, grammar, **changes))


def test_vllm_grammar_request_id_that_cannot_be_one_is_sg001():
    from types import SimpleNamespace

    view = VllmView(mtp_k=K, vocab_size=VOCAB)
    step = view.schedule(scheduler_output({"a": [5, 6, 7], "b": [1, 2, 3]}))
    grammar = SimpleNamespace(structured_output_request_ids=["a", ["b"]],
                              grammar_bitmask=np.zeros((8, 4), np.int32))
    with pytest.raises(contracts.ContractViolation) as raised:
        view.logits_rows(step, grammar)
    (violation, *_) = raised.value.violations
    assert (violation.code, violation.field) == ("SG001", "structured_output_request_ids")
    assert violation.reason == ("structured_output_request_ids holds list, which cannot "
                                "be a request id")


_PLAN_FIELDS = ["mtp_k", "seq_ids", "is_decode", "starts", "num_scheduled", "draft_token_ids",
                "num_drafts", "draft_placeholder", "token_ids", "num_before_drafts",
                "drafts_handed_over", "first_scheduled", "stable_ids"]


def _plan(**changes: Any) -> Any:
    from specguard.adapters import StepPlan

    fields: dict[str, Any] = dict(
        mtp_k=K, seq_ids=np.array([0, 1]), is_decode=np.array([True, True]),
        starts=np.array([10, 20]), num_scheduled=np.array([4, 4]),
        draft_token_ids=np.array([[1, 2, 3], [4, 5, 6]]), num_drafts=np.array([3, 3]))
    fields.update(changes)
    return StepPlan(**fields)


@given(field=st.sampled_from(_PLAN_FIELDS),
       value=st.sampled_from([*HOSTILE, np.array([0, 0]), np.full((2, 3), 2**62)]))
@example(field="draft_token_ids", value=[[1, 2, 3], [4, 5, 6]])
@example(field="stable_ids", value=np.array([1, 0]))
@example(field="seq_ids", value=torch.tensor([0, 1]))
def test_a_step_plan_built_by_hand_with_hostile_fields(field, value):
    """A StepPlan an engine author builds by hand with something else than host numpy
    arrays is not sound: the tracker forgets what it knew instead of raising the
    arrays' own errors; any other plan is related, or a violation."""
    tracker = StepTracker()
    tracker.schedule(_plan())
    tracker.draft_rows(np.array([0, 1]), np.array([[7, 8, 9], [1, 2, 3]]))
    hostile = _plan(**{field: value})
    _contract_or_nothing(lambda: tracker.schedule(hostile))
    _contract_or_nothing(lambda: tracker.schedule(_plan(starts=np.array([14, 24]))))


def test_a_step_plan_of_lists_is_not_sound():
    assert _plan().is_sound()
    assert not _plan(draft_token_ids=[[1, 2, 3], [4, 5, 6]]).is_sound()
    assert not _plan(seq_ids=torch.tensor([0, 1])).is_sound()
    assert not _plan(stable_ids=np.array([1, 0])).is_sound()


@pytest.mark.parametrize(("extend_lens", "codes"), [
    ([5, 4], [("SG104", "positions"), ("SG304", "query_start_loc")]),
    ([2**40, 3], [("SG001", "positions"), ("SG304", "query_start_loc")]),
], ids=["one token more", "absurd"])
def test_sglang_prefill_spans_that_miss_the_stream(extend_lens, codes):
    """Spans one token longer than the stream keep the positions' length mismatch next to
    the spans' own rule; spans of 2**40 tokens are the spans' violation, with no
    positions computed (an array of their size could not be allocated)."""
    from types import SimpleNamespace

    from specguard.adapters import SglangView
    from specguard.adapters import examples as ex

    prefill = SimpleNamespace(
        reqs=ex._sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
        input_ids=np.arange(10, 18), extend_lens=extend_lens, prefix_lens=[0, 0],
        out_cache_loc=np.arange(1, 9))
    view = SglangView(spec_steps=3, vocab_size=1000, tracker=StepTracker())
    with pytest.raises(contracts.ContractViolation) as raised:
        view.draft_prefill(prefill, np.array([31, 41]))
    assert [(v.code, v.field) for v in raised.value.violations] == codes


@pytest.mark.parametrize("verified_id", [
    np.array([32, 33, 99, 42, 43, 44, 7], np.float64), np.full(7, np.nan),
    np.array(list("abcdefg"))], ids=["float", "NaN", "str"])
def test_sglang_verified_ids_that_are_not_token_ids_are_sg002(verified_id):
    """The verify output's verified_id is read into the verifier's rows; a float, NaN or
    string array there is SG002 naming it (only its count is in an object), not a
    silent cast (floats), an arbitrary id (NaN) or numpy's own error (strings)."""
    from types import SimpleNamespace

    from specguard.adapters import SglangView
    from specguard.adapters import examples as ex

    view = SglangView(spec_steps=3, vocab_size=1000, tracker=StepTracker())
    decode, verify_input = ex._sglang_decode(), ex._sglang_verify_input()
    verify_output = ex._sglang_verify_output()
    verify_output.verified_id = verified_id
    view.schedule(decode)
    view.drafted(decode, verify_input)
    with pytest.raises(contracts.ContractViolation) as raised:
        view.verified(SimpleNamespace(reqs=ex._sglang_reqs(False, False)), verify_input,
                      verify_output, SimpleNamespace(out_cache_loc=np.arange(9, 17)))
    (violation,) = raised.value.violations
    assert (violation.code, violation.subject, violation.field) == (
        "SG002", "SGLang EagleVerifyOutput", "verified_id")
    assert violation.reason == (f"verified_id must hold token ids, got {verified_id.dtype} "
                                "values")
