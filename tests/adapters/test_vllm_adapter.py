"""The vLLM adapter: SchedulerOutput, rejection-sampler rows and drafter inputs."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from vllm_engine import (
    VOCAB,
    attention_metadata,
    next_token_ids_0_11_0,
    next_token_ids_0_11_1,
    scheduler_output,
)

from specguard import contracts
from specguard.adapters import StepTracker, VllmView

K = 3


def _view(**options) -> VllmView:
    return VllmView(mtp_k=K, vocab_size=VOCAB, **options)


@pytest.fixture(autouse=True)
def _full_depth():
    """Every value rule runs, so clean cases are clean for all of them."""
    with contracts.checking(depth="full"):
        yield


def test_clean_output_maps_request_ids_to_batch_positions():
    """Requests keep their batch order; rows exist for the requests with drafts."""
    step = _view().schedule(scheduler_output({"a": [5, 6, 7], "b": [8]}, {"new": 40}))
    assert step.req_ids == ("a", "b", "new")
    assert step.num_scheduled.tolist() == [4, 2, 40]
    assert step.draft_tokens.seq_ids.tolist() == [0, 1]
    assert step.draft_tokens.num_drafts.tolist() == [3, 1]


def test_runner_batch_order_wins_over_dict_order():
    """``req_ids`` (the runner's InputBatch order) sets the positions."""
    step = _view().schedule(scheduler_output({"a": [5], "b": [8]}), req_ids=["b", "a"])
    assert step.num_draft_tokens.tolist() == [1, 1]
    assert step.draft_tokens.draft_token_ids[:, 0].tolist() == [8, 5]


@pytest.mark.parametrize(("req_ids", "reason"), [
    ("ab", "req_ids must be a sequence of request ids, got str"),
    (3, "req_ids must be a sequence of request ids, got int"),
    ([["a"], "b"], "req_ids holds an entry that cannot be a request id: unhashable type: "
                   "'list'"),
])
def test_a_runner_batch_order_that_is_not_request_ids_is_sg001(req_ids, reason):
    """``req_ids`` that is not a sequence of hashable request ids is SG001, never a
    TypeError from a dict lookup."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG001 field has the declared type [vLLM SchedulerOutput.req_ids, scheduler → "
            f"runner]: {reason}")):
        _view().schedule(scheduler_output({"a": [5], "b": [8]}), req_ids=req_ids)


def test_drafts_that_are_not_the_tail_are_sg621_naming_the_request():
    """A request with 3 drafts scheduled 3 tokens breaks vLLM's tail convention: SG621."""
    output = scheduler_output({"a": [5, 6], "req-7": [1, 2, 3]})
    output.num_scheduled_tokens["req-7"] = 3
    output.total_num_scheduled_tokens -= 1
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG621 a request's drafts fit at the tail of its scheduled tokens "
                "[VllmSchedule.num_scheduled_tokens, scheduler → runner]: seq 1 at batch "
                "position 1: request 'req-7': scheduled 3 tokens with 3 drafts "
                "(expected >= 1 + 3 drafts = 4; actual 3)")):
        _view().schedule(output)


def test_a_total_that_is_not_the_sum_is_sg622():
    """A total_num_scheduled_tokens the runner mutated without the counts is SG622."""
    output = scheduler_output({"a": [5, 6]}, {"p": 10})
    output.total_num_scheduled_tokens = 11
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG622 every request is scheduled tokens, and the total is their sum "
                "[VllmSchedule.num_tokens, scheduler → runner]: total_num_scheduled_tokens "
                "differs from the per-request sum (expected 13; actual 11)")):
        _view().schedule(output)


def test_placeholders_are_sg108_before_0_33_unless_async_scheduling_allows_them():
    """[-1, -1, -1] drafts: a violation in 0.11.x sync mode, vLLM's placeholder under async."""
    output = scheduler_output({"a": [5, 6, 7], "b": [-1, -1, -1]})
    step = _view(async_scheduling=True, version="0.11.1").schedule(output)
    assert step.draft_tokens.num_drafts.tolist() == [3, 0]
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG108 draft token ids are valid vocabulary ids [DraftTokens.draft_token_ids, "
                "scheduler → runner]: seq 1 at batch position 1: request 'b': draft 0 of row 1 "
                "is -1")):
        _view(version="0.11.1").schedule(output)


def test_placeholder_slots_are_legal_in_sync_mode_from_0_33():
    """0.33's runner clamps -1 draft slots before embedding: counted out, not SG108."""
    output = scheduler_output({"a": [5, 6, 7], "b": [-1, -1, -1]})
    step = _view().schedule(output)
    assert step.draft_tokens.num_drafts.tolist() == [3, 0]
    with pytest.raises(contracts.ContractViolation, match="SG108"):
        _view().schedule(scheduler_output({"a": [5, -1, 7]}))


def test_drafts_for_an_unscheduled_request_are_sg114_with_its_string_id():
    """A drafts entry for a request that is not scheduled names that request."""
    output = scheduler_output({"a": [5, 6, 7]})
    output.scheduled_spec_decode_tokens["gone"] = [1, 2, 3]
    with pytest.raises(contracts.ContractViolation) as caught:
        _view().schedule(output)
    assert caught.value.codes == ("SG114",)
    assert "'gone'" in caught.value.violations[0].reason


def test_more_drafts_than_k_are_sg102():
    """Four drafts with k=3 is SG102 naming the request."""
    output = scheduler_output({"a": [5, 6, 7, 8]})
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 0 at batch position 0: request 'a': seq has 4 drafts")):
        _view().schedule(output)


def test_wrong_container_types_are_violations_not_crashes():
    """A list where vLLM has a dict is SG001; a non-integer count is SG002."""
    output = scheduler_output({"a": [5]})
    output.num_scheduled_tokens = [("a", 2)]  # type: ignore[assignment]
    with pytest.raises(contracts.ContractViolation, match="SG001"):
        _view().schedule(output)
    output = scheduler_output({"a": [5]})
    output.num_scheduled_tokens["a"] = 2.0  # type: ignore[assignment]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "request 'a': scheduled token count 2.0 is not an integer")):
        _view().schedule(output)


def _sampled(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.int32)


def test_rejection_rows_pass_and_give_accepted_counts():
    """Left-packed rows, -1 padded: accepted = valid tokens - 1, per request in order."""
    view = _view()
    step = view.schedule(scheduler_output({"a": [5, 6, 7], "b": [8]}, {"p": 9}))
    out = view.verified(step, _sampled([[5, 6, 40, -1], [9, -1, -1, -1], [3, -1, -1, -1]]))
    assert out is not None and out.num_accepted.tolist() == [2, 0, 0]


def test_a_step_without_drafts_has_nothing_to_verify():
    """One sampled column (max_spec_len 0) returns None."""
    view = _view()
    step = view.schedule(scheduler_output({}, {"p": 9}))
    assert view.verified(step, _sampled([[3]])) is None


def test_a_hole_in_a_rejection_row_is_sg202():
    """A -1 before the row's last token breaks the left-packed layout: SG202."""
    view = _view()
    step = view.schedule(scheduler_output({"a": [5, 6, 7]}))
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "seq 0 at batch position 0: request 'a': column 1 (token) is -1")):
        view.verified(step, _sampled([[5, -1, 40, -1]]))


def test_accepting_beyond_the_request_drafts_is_sg605():
    """A row of a request with one draft holding three tokens accepted a placeholder."""
    view = _view()
    step = view.schedule(scheduler_output({"a": [5, 6, 7], "short": [8]}))
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG605 a row accepts at most the real drafts it carried [VerifyRows.num_accepted,"
                " verifier → drafter]: seq 1 at batch position 1: request 'short': accepted 2 "
                "drafts, but the row carried 1 real drafts")):
        view.verified(step, _sampled([[5, 6, 7, 1], [8, 9, 4, -1]]))


def _seed_step(next_token_ids):
    """Three prefill rows, the middle one a partial chunk the runner discards."""
    view = _view()
    step = view.schedule(scheduler_output({}, {"r0": 4, "chunked": 5, "r2": 3}))
    counts = [4, 5, 3]
    meta = attention_metadata(counts)
    sampled = torch.tensor([[11], [12], [13]], dtype=torch.int32)
    backup = torch.tensor([0, 77, 0], dtype=torch.int32)  # next prompt token of 'chunked'
    positions = torch.cat([torch.arange(n) for n in counts]).to(torch.int64)
    return view.drafter_input(
        step, target_token_ids=torch.arange(100, 112, dtype=torch.int32),
        target_positions=positions, next_token_ids=next_token_ids(sampled, [1], backup),
        last_token_indices=(meta.query_start_loc[1:] - 1).to(torch.int64),
        common_attn_metadata=meta)


def test_seed_discarded_row_sentinel_reaching_the_mtp_embedding_is_sg301():
    """vLLM 0.11.0's fast path let the -1 of a discarded chunked-prefill row be embedded."""
    with pytest.raises(contracts.ContractViolation) as caught:
        _seed_step(next_token_ids_0_11_0)
    assert caught.value.codes == ("SG301",)
    assert str(caught.value).splitlines()[1] == (
        "  SG301 no sentinel reaches an embedding [DrafterInput.input_ids, runner → drafter]: "
        "seq 1 at batch position 1, token 8: request 'chunked': input id is -1 "
        "(expected 0 <= id < vocab_size=1000) {num_tokens=12, num_seqs=3}")


def test_seed_fixed_drafter_input_is_clean():
    """With 0.11.1's always-computed valid mask the discarded row embeds its backup token."""
    drafter = _seed_step(next_token_ids_0_11_1)
    assert drafter.input_ids[[3, 8, 11]].tolist() == [11, 77, 13]
    assert drafter.input_ids[:3].tolist() == [101, 102, 103]


def _attention_step(max_seq_len):
    """Two decoding requests whose attention metadata ends at their spans."""
    view = _view()
    step = view.schedule(scheduler_output({}, {"r0": 4, "r1": 4}))
    meta = attention_metadata([4, 4])
    meta.seq_lens = torch.tensor([24, 40], dtype=torch.int32)
    meta.max_seq_len = max_seq_len
    positions = torch.cat([torch.arange(20, 24), torch.arange(36, 40)])
    return view.drafter_input(
        step, target_token_ids=torch.arange(100, 108, dtype=torch.int32),
        target_positions=positions, next_token_ids=torch.tensor([5, 6], dtype=torch.int32),
        last_token_indices=torch.tensor([3, 7]), common_attn_metadata=meta)


def test_drafter_input_carries_the_first_passs_attention_metadata():
    """seq_lens and max_seq_len are read from the CommonAttentionMetadata propose gets."""
    drafter = _attention_step(40)
    assert drafter.seq_lens is not None and drafter.seq_lens.tolist() == [24, 40]
    assert (drafter.max_seq_len, drafter.draft_step) == (40, 0)


def test_a_max_seq_len_short_of_the_longest_seq_is_sg307():
    """A max_seq_len below a request's seq_len would truncate its context: SG307."""
    with pytest.raises(contracts.ContractViolation) as caught:
        _attention_step(39)
    assert caught.value.codes == ("SG307",)
    assert "seq 1 at batch position 1: request 'r1': seq_len is 40 at draft step 0 is " \
        "longer than max_seq_len=39" in str(caught.value)


def test_out_of_range_sample_index_is_reported_not_raised_as_index_error():
    """A last_token_indices entry past the stream is SG302, not an IndexError."""
    view = _view()
    step = view.schedule(scheduler_output({}, {"r0": 4}))
    meta = attention_metadata([4])
    with pytest.raises(contracts.ContractViolation,
                                                         match="SG302"):
        view.drafter_input(step, target_token_ids=torch.arange(4, dtype=torch.int32),
                           target_positions=torch.arange(4),
                           next_token_ids=torch.tensor([5], dtype=torch.int32),
                           last_token_indices=torch.tensor([9]), common_attn_metadata=meta)


def test_drafts_outside_the_vocabulary_are_sg108():
    """A draft argmax over a padded lm_head (vLLM #35937) is caught at the drafter's output."""
    view = _view()
    step = view.schedule(scheduler_output({"a": [5, 6, 7]}))
    with pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "seq 0 at batch position 0: request 'a': draft 2 of row 0 is 1003")):
        view.drafted(step, torch.tensor([[1, 2, 1003]]))


def _tracked_steps(second: dict[str, list[int]], *, async_scheduling: bool,
                   version: str = "0.11.1"):
    view = _view(tracker=StepTracker(), async_scheduling=async_scheduling, version=version)
    step = view.schedule(scheduler_output({"a": [5, 6, 7]}, computed={"a": 50}))
    view.verified(step, _sampled([[5, 9, -1, -1]]))
    view.drafted(step, torch.tensor([[21, 22, 23]]))
    return view.schedule(scheduler_output(second, computed={"a": 52, "b": 70}))


def test_sync_drafts_carried_and_positions_continue():
    """Next step: 'a' resumes 2 positions on and carries the drafts proposed for it."""
    step = _tracked_steps({"a": [21, 22, 23]}, async_scheduling=False)
    assert step.req_ids == ("a",)


def test_sync_drafts_of_another_step_are_sg602():
    """'a' carrying drafts that were not proposed for it is SG602."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 0 at batch position 0: request 'a': draft 0 is 5, but the previous step "
            "proposed 21")):
        _tracked_steps({"a": [5, 6, 7]}, async_scheduling=False)


def test_drafts_trimmed_by_the_scheduler_pass_but_are_still_the_proposed_ones():
    """vLLM trims drafts to the budget: 'a' may carry 1 of its 3 (no SG607), not another."""
    step = _tracked_steps({"a": [21]}, async_scheduling=False)
    assert step.num_draft_tokens.tolist() == [1]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG602 drafts carried into a step are the ones proposed for the seq")):
        _tracked_steps({"a": [22]}, async_scheduling=False)


def test_async_placeholders_of_a_request_from_the_previous_batch_pass():
    """Under async scheduling 'a' may carry [-1, -1, -1]: the runner fills them."""
    step = _tracked_steps({"a": [-1, -1, -1]}, async_scheduling=True)
    assert step.num_draft_tokens.tolist() == [3]


def test_async_placeholders_of_a_request_new_to_the_batch_are_sg603():
    """0.11.x: 'b' re-entering with placeholders has no previous row to fill them from
    (#37629), so they reach the embedding."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG603 rows refilled from the previous step were in the previous forward "
            "[StepTransition.draft_token_ids, scheduler → runner]: seq 1 at batch position 1: "
            "request 'b': row is filled from the previous step's drafts")):
        _tracked_steps({"a": [-1, -1, -1], "b": [-1, -1, -1]}, async_scheduling=True)


def test_numpy_rows_are_accepted_too():
    """The views take numpy arrays as well as torch tensors."""
    view = _view()
    step = view.schedule(scheduler_output({"a": [5, 6, 7]}))
    out = view.verified(step, np.array([[5, 6, 7, 1]], dtype=np.int64))
    assert out is not None and out.num_accepted.tolist() == [3]


def test_drafter_input_on_a_device_is_built_without_reading_values():
    """On torch's data-less meta device (any host read would raise) the stream is rebuilt
    and its metadata checked: no sync is needed to build it."""
    view = _view()
    step = view.schedule(scheduler_output({}, {"r0": 4, "r1": 4}))
    meta = attention_metadata([4, 4])
    meta.query_start_loc = meta.query_start_loc.to("meta")
    with contracts.checking(depth="metadata"):
        drafter = view.drafter_input(
            step, target_token_ids=torch.arange(8, dtype=torch.int32, device="meta"),
            target_positions=torch.arange(8, device="meta"),
            next_token_ids=torch.ones(2, dtype=torch.int32, device="meta"),
            last_token_indices=torch.tensor([3, 7], device="meta"),
            common_attn_metadata=meta)
    assert isinstance(drafter.input_ids, torch.Tensor)
    assert drafter.input_ids.device.type == "meta" and drafter.input_ids.shape == (8,)
