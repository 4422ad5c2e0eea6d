"""Step-to-step contracts: the tracker relates each step to the one before (SG601-SG608)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import StepLinks, StepTracker

K, VOCAB, BLOCK = 2, 100, 4


def batch(seq_ids, starts, *, decode=None, drafts=None, counts=None, placeholder=None,
          chunks=None):
    """A contracts.ScheduledBatch: decode seqs get k+1 tokens, prefill seqs their chunk."""
    n = len(seq_ids)
    decode = [True] * n if decode is None else decode
    chunks = chunks or {}
    scheduled = [K + 1 if d else chunks.get(s, 5) for s, d in zip(seq_ids, decode, strict=True)]
    num_decode = sum(decode)
    rows = np.asarray(drafts if drafts is not None else [[1] * K] * num_decode,
                      dtype=np.int64).reshape(num_decode, K)
    context = [start + count for start, count in zip(starts, scheduled, strict=True)]
    blocks = -(-max(context) // BLOCK)
    return contracts.ScheduledBatch(
        mtp_k=K, vocab_size=VOCAB, block_size=BLOCK, num_decode=num_decode,
        num_tokens=sum(scheduled), seq_ids=np.asarray(seq_ids, dtype=np.int64),
        is_decode=np.asarray(decode, dtype=bool),
        num_scheduled_tokens=np.asarray(scheduled, dtype=np.int64),
        context_lens=np.asarray(context, dtype=np.int64),
        block_tables=np.arange(n * blocks, dtype=np.int64).reshape(n, blocks),
        # 3 is the token verify() emits: a row re-feeding emitted positions feeds them.
        token_ids=np.full(sum(scheduled), 3, dtype=np.int64), draft_token_ids=rows,
        num_drafts=np.asarray(counts if counts is not None else [K] * num_decode,
                              dtype=np.int64),
        draft_placeholder=placeholder)


def verify(seq_ids, accepted):
    """A clean contracts.VerifyOutput: accepted drafts, one token, then -1."""
    tokens = np.full((len(seq_ids), K + 1), -1, dtype=np.int64)
    for row, count in enumerate(accepted):
        tokens[row, : count + 1] = 3
    return contracts.VerifyOutput(mtp_k=K, vocab_size=VOCAB,
                                  seq_ids=np.asarray(seq_ids, dtype=np.int64),
                                  token_ids=tokens, num_accepted=np.asarray(accepted))


def drafter(seq_ids, rows):
    """A contracts.DrafterOutput with the given proposals."""
    return contracts.DrafterOutput(mtp_k=K, vocab_size=VOCAB,
                                   seq_ids=np.asarray(seq_ids, dtype=np.int64),
                                   draft_token_ids=np.asarray(rows, dtype=np.int64))


@pytest.fixture(autouse=True)
def _full_depth():
    """Relations are value checks: they run at full depth."""
    with contracts.checking(depth="full"):
        yield


def test_decode_advances_by_accepted_plus_one_and_prefill_by_its_chunk():
    """Seq 7 accepted 1 draft (advances 2), seq 8's chunk of 5 ends where its decode starts."""
    tracker = StepTracker()
    tracker.schedule(batch([7, 8], [20, 0], decode=[True, False]))
    tracker.verified(verify([7], [1]))
    links = tracker.schedule(batch([8, 7], [5, 22]))
    assert links.prev_rows.tolist() == [1, 0]


@pytest.mark.parametrize(("start", "left"), [(23, 22), (21, 22)])
def test_a_decode_seq_resuming_elsewhere_is_sg601(start, left):
    """Starting one position late or early after accepting 1 draft is SG601, naming the seq."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 7], [10, 20]))
    tracker.verified(verify([5, 7], [2, 1]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG601 a seq resumes where its previous step left off [StepTransition.starts, "
            f"scheduler → runner]: seq 7 at batch position 1: starts at position {start}, but "
            f"its previous step (row 1) left it at {left} (expected {left}; actual {start})")):
        tracker.schedule(batch([5, 7], [13, start]))


def test_a_prefill_chunk_skipping_tokens_is_sg601():
    """A second chunk starting past the end of the first skips prompt tokens: SG601."""
    tracker = StepTracker()
    tracker.schedule(batch([3], [0], decode=[False], chunks={3: 8}))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 3 at batch position 0: starts at position 9, but its previous step (row 0) "
            "left it at 8")):
        tracker.schedule(batch([3], [9], decode=[False], chunks={3: 8}))


def test_unknown_accepted_counts_are_not_guessed():
    """Without the verifier's counts a decode seq's next start is not checked."""
    tracker = StepTracker()
    tracker.schedule(batch([5], [10]))
    tracker.schedule(batch([5], [99]))


def test_progress_off_skips_sg601():
    """``progress=False`` (vLLM async scheduling) leaves positions unchecked."""
    tracker = StepTracker(progress=False)
    tracker.schedule(batch([5], [10]))
    tracker.verified(verify([5], [0]))
    tracker.schedule(batch([5], [50]))


def test_drafts_carried_are_the_ones_proposed():
    """Drafts proposed for seq 5 at step t are the ones it carries at step t+1."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    tracker.schedule(batch([6, 5], [11, 11], drafts=[[21, 22], [11, 12]]))


def test_drafts_of_the_neighbour_are_sg602():
    """Rows shifted onto the neighbouring seq are SG602 at the first wrong draft."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG602 drafts carried into a step are the ones proposed for the seq "
            "[StepTransition.draft_token_ids, scheduler → runner]: seq 5 at batch position 0: "
            "draft 0 is 21, but the previous step proposed 11 for this seq "
            "(expected 11; actual 21)")):
        tracker.schedule(batch([5, 6], [11, 11], drafts=[[21, 22], [11, 12]]))


def test_placeholder_slots_and_refilled_rows_are_not_compared():
    """A declared placeholder, slots past num_drafts and refilled rows are not drafts here."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    tracker.schedule(batch([5, 6], [11, 11], drafts=[[-1, -1], [99, 98]], placeholder=-1),
                     refilled=np.array([False, True]))


def _proposed_then(next_batch, *, tracker=None, refilled=None):
    """Seqs 5 and 6 decode, seq 6 gets drafts [21, 22] proposed, then ``next_batch``."""
    tracker = tracker or StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    tracker.schedule(next_batch, refilled=refilled)
    return tracker


@pytest.mark.parametrize("carried", [0, 1])
def test_a_seq_carrying_part_of_its_proposal_is_sg607(carried):
    """Seq 6 verified with fewer than the 2 drafts proposed for it is SG607, naming it."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG607 a seq with a proposal carries all of it [StepTransition.num_drafts, "
            "scheduler → runner]: seq 6 at batch position 1: carries "
            f"{carried} drafts, but the previous step proposed 2 for this seq "
            f"(expected 2; actual {carried})")) as caught:
        _proposed_then(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 1]],
                             counts=[2, carried]))
    assert caught.value.codes == ("SG607",)


def _partly_proposed(next_batch, *, refilled=None):
    """Seq 6's drafter proposed one of its two drafts; then ``next_batch``."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(contracts.DrafterOutput(
        mtp_k=K, vocab_size=VOCAB, seq_ids=np.array([5, 6]),
        draft_token_ids=np.array([[11, 12], [21, 0]]), num_proposed=np.array([2, 1])))
    tracker.schedule(next_batch, refilled=refilled)
    return tracker


def test_a_seq_carrying_more_drafts_than_were_proposed_is_sg660():
    """Seq 6's placeholder slot scheduled as a real draft is SG660, naming it; SG607 holds
    it to the one draft proposed, not to mtp_k."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG660 a seq carries no more real drafts than were proposed for it "
            "[StepTransition.num_drafts, scheduler → runner]: seq 6 at batch position 1: "
            "carries 2 real drafts, but the previous step proposed 1 for this seq "
            "(expected <= 1; actual 2)")) as caught:
        _partly_proposed(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 0]], counts=[2, 2]))
    assert caught.value.codes == ("SG660",)
    _partly_proposed(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 0]], counts=[2, 1]))
    with pytest.raises(contracts.ContractViolation, match="SG607"):
        _partly_proposed(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 0]], counts=[2, 0]))


def test_a_refilled_row_is_verified_whole_against_its_proposed_count():
    """The runner fills a refilled row whole from its buffer: a partial proposal is SG660."""
    partial = batch([5, 6], [11, 11], drafts=[[11, 12], [21, 0]], counts=[2, 1])
    with pytest.raises(contracts.ContractViolation, match="SG660") as caught:
        _partly_proposed(partial, refilled=np.array([False, True]))
    assert caught.value.violations[0].seq_id == 6


def test_a_drafter_that_reports_no_counts_proposes_whole_rows():
    """Without num_proposed every row is a whole proposal: nothing changes for engines
    whose drafter does not say."""
    tracker = _proposed_then(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 22]]))
    state = tracker.close()
    assert state is not None and state.num_proposed is not None
    assert state.num_proposed.tolist() == [K, K]


def test_seqs_without_a_proposal_may_carry_fewer_drafts():
    """No drafter output, a seq new to the batch, or a prefill row: nothing is required."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.schedule(batch([5, 6], [11, 11], counts=[0, 1]))  # no proposal was recorded
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    tracker.schedule(batch([9, 5, 6], [40, 12, 12], decode=[True, True, False],
                           drafts=[[1, 1], [11, 12]], counts=[0, 2]))
    state = tracker.close()
    assert state is not None and state.seq_ids.tolist() == [9, 5, 6]


def test_refilled_rows_and_trimming_engines_are_not_held_to_the_whole_proposal():
    """A refilled row is filled whole by the runner; ``whole_proposals=False`` skips SG607."""
    short = batch([5, 6], [11, 11], drafts=[[11, 12], [21, 1]], counts=[2, 1])
    _proposed_then(short, refilled=np.array([False, True]))
    _proposed_then(short, tracker=StepTracker(whole_proposals=False))
    with pytest.raises(contracts.ContractViolation, match="SG602"):
        _proposed_then(batch([5, 6], [11, 11], drafts=[[11, 12], [22, 1]], counts=[2, 1]),
                       tracker=StepTracker(whole_proposals=False))


def test_placeholders_of_a_seq_new_to_the_batch_are_sg603():
    """-1 placeholders for a seq absent from the previous forward reach the embedding: SG603."""
    tracker = StepTracker()
    tracker.schedule(batch([5], [10]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG603 rows refilled from the previous step were in the previous forward "
            "[StepTransition.draft_token_ids, scheduler → runner]: seq 9 at batch position 1: "
            "row is filled from the previous step's drafts, but the seq was not in the "
            "previous forward (expected a row in the previous forward)")):
        tracker.schedule(batch([5, 9], [10, 30], drafts=[[-1, -1], [-1, -1]], placeholder=-1))


def test_verify_rows_in_batch_order_pass_and_reordered_rows_are_sg604():
    """Verify rows must follow the decode seqs in batch order; a swap is SG604."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6, 8], [10, 10, 0], decode=[True, True, False]))
    tracker.verified(verify([5, 6], [1, 0]))
    tracker.schedule(batch([5, 6, 8], [12, 11, 5], decode=[True, True, False]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG604 verify rows follow the step's decode seqs in batch order "
            "[VerifyRows.seq_ids, verifier → drafter]: seq 5 at batch position 0: verify row 0 "
            "belongs to seq 6 (expected seq 5; actual seq 6)")):
        tracker.verified(verify([6, 5], [1, 0]))


def test_a_missing_verify_row_is_sg604():
    """One verify row for two decode seqs names the seq without a row."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 6 at batch position 1: 1 verify rows for 2 seqs")):
        tracker.verified(verify([5], [1]))


def test_accepting_more_than_the_real_drafts_is_sg605():
    """A row with one real draft cannot accept two (the placeholder was accepted): SG605."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10], counts=[2, 1]))
    tracker.verified(verify([5, 6], [2, 1]))
    tracker.schedule(batch([5, 6], [13, 12], counts=[2, 1]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG605 a row accepts at most the real drafts it carried [VerifyRows.num_accepted, "
            "verifier → drafter]: seq 6 at batch position 1: accepted 2 drafts, but the row "
            "carried 1 real drafts (expected <= 1)")):
        tracker.verified(verify([5, 6], [0, 2]))


def test_drafter_rows_follow_the_batch_and_reordered_rows_are_sg606():
    """Drafter rows in batch order pass; padded or reordered rows are SG606."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 10]))
    tracker.drafted(drafter([5, 6], [[1, 2], [3, 4]]))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG606 drafter rows are the step's seqs, in batch order [DraftRows.seq_ids, "
            "drafter → scheduler]: seq 5 at batch position 0: drafter row 0 belongs to seq 6")):
        tracker.drafted(drafter([6, 5], [[1, 2], [3, 4]]))


def test_state_is_the_previous_step_only_and_sized_by_its_batch():
    """The tracker keeps O(batch) arrays of one step: nothing of older steps survives."""
    tracker = StepTracker()
    tracker.schedule(batch(list(range(40)), [10] * 40))
    tracker.schedule(batch([1, 2, 3], [12, 12, 12]))
    state = tracker.close()
    assert state is not None and state.step == 1
    assert state.seq_ids.tolist() == [1, 2, 3]
    assert {a.shape[0] for a in (state.starts, state.advance, state.drafted, state.proposals)} \
        == {3}


def test_links_are_atom_locations():
    """Deferred and new positions, and previous rows, as ATOM's get_token_locations names them."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6, 7], [10, 10, 10]))
    links = tracker.schedule(batch([7, 9, 5], [10, 10, 10]))
    assert isinstance(links, StepLinks)
    assert (links.deferred.tolist(), links.new.tolist(), links.previous_positions.tolist()) \
        == ([0, 2], [1], [2, 0])


def test_metadata_depth_and_mode_off_check_no_relation():
    """Relations run at full depth only, and mode off tracks nothing at all."""
    tracker = StepTracker()
    with contracts.checking(depth="metadata"):
        tracker.schedule(batch([5], [10]))
        tracker.verified(verify([5], [0]))
        tracker.schedule(batch([5], [40]))
    with contracts.checking(mode="off"):
        tracker.schedule(batch([5], [90]))
    assert tracker.previous is None


@pytest.mark.parametrize(("settings", "watching"), [
    ({"mode": "off"}, False), ({"depth": "metadata"}, False), ({"depth": "essential"}, True),
    ({"depth": "full"}, True), ({"mode": "warn"}, True)])
def test_a_tracker_watches_where_one_of_its_rules_runs(settings, watching):
    with contracts.checking(**settings):
        assert StepTracker().watching() is watching


def test_warn_mode_logs_and_keeps_tracking(caplog):
    """In warn mode a broken relation is logged and the next step is still checked."""
    tracker = StepTracker()
    with contracts.checking(mode="warn"), caplog.at_level(logging.WARNING, "specguard"):
        tracker.schedule(batch([5], [10]))
        tracker.verified(verify([5], [0]))
        tracker.schedule(batch([5], [40]))
        tracker.verified(verify([5], [0]))
        tracker.schedule(batch([5], [41]))
    assert [r.getMessage()[:16] for r in caplog.records] == ["specguard: SG601"]


def test_device_counts_are_not_read_without_sync():
    """Accepted counts on a device (here torch's data-less meta device) are not read: the
    next start goes unchecked rather than forcing a host sync."""
    import torch

    tracker = StepTracker()
    tracker.schedule(batch([5], [10]))
    on_device = {"device": "meta", "dtype": torch.int64}
    with contracts.checking(depth="metadata"):
        out = contracts.VerifyOutput(
            mtp_k=K, vocab_size=VOCAB, seq_ids=torch.tensor([5], **on_device),
            token_ids=torch.full((1, K + 1), -1, **on_device),
            num_accepted=torch.zeros(1, **on_device))
    tracker.verified(out)
    tracker.schedule(batch([5], [99]))
    state = tracker.close()
    assert state is not None and state.advance.tolist() == [-1]


def _skipped_for_a_step(resume_at):
    """Seq 7 accepts 1 draft at 20 (left at 22), sits out a step beside seq 5, comes back."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 7], [10, 20]))
    tracker.verified(verify([5, 7], [0, 1]))
    tracker.schedule(batch([5], [11]))
    tracker.verified(verify([5], [0]))
    tracker.schedule(batch([5, 7], [12, resume_at]))


def test_a_seq_back_from_a_skipped_step_resumes_where_it_left_off():
    """A seq absent from the previous forward is checked against its last known step."""
    _skipped_for_a_step(22)


def test_a_seq_back_from_a_skipped_step_elsewhere_is_sg601():
    """Coming back two positions late after sitting out a step is SG601, naming the seq."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 7 at batch position 1: starts at position 24, but its previous step (row -1) "
            "left it at 22 (expected 22; actual 24)")):
        _skipped_for_a_step(24)


def _recomputed_after_prefill(feed):
    """Seq 5 prefills 6 tokens (0..5) and samples 42 for position 6, is preempted before
    its first decode, and comes back as a prefill of 7 tokens feeding ``feed`` at 6."""
    tracker = StepTracker()
    tracker.schedule(batch([5], [0], decode=[False], chunks={5: 6}))
    tracker.record_sampled(np.asarray([5]), np.asarray([42]))
    recompute = batch([5], [0], decode=[False], chunks={5: 7})
    recompute.token_ids[6] = feed  # the prompt is 3s (not compared), then position 6
    tracker.schedule(recompute)


def test_a_recompute_re_feeding_the_token_sampled_at_prefill_is_clean():
    """The token a prefill sampled is history: fed back at its position, it is fine."""
    _recomputed_after_prefill(42)


def test_a_recompute_feeding_a_placeholder_where_the_prefill_sampled_is_sg608():
    """An EOS where the prefill's sampled token belongs is SG608, naming the position."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 5 at batch position 0: re-feeds token 2 at position 6, where the engine "
            "sampled 42 (expected 42; actual 2)")):
        _recomputed_after_prefill(2)


def test_a_sample_the_engine_drops_is_not_history():
    """A middle chunk's sample (not kept) is no history: the next chunk feeds the prompt."""
    tracker = StepTracker()
    tracker.schedule(batch([5], [0], decode=[False], chunks={5: 6}))
    tracker.record_sampled(np.asarray([5]), np.asarray([42]), np.asarray([False]))
    tracker.schedule(batch([5], [6], decode=[False], chunks={5: 6}))


def _middle_chunk_not_kept(resume_at):
    """Seq 5 decodes beside seq 7's first chunk (0..4); seq 7's next chunk (5..9) runs in
    a batch the runner does not keep as its previous forward; then seq 7 resumes."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 7], [10, 0], decode=[True, False]))
    tracker.verified(verify([5], [0]))
    tracker.schedule(batch([7], [5], decode=[False]), forwarded=False)
    tracker.schedule(batch([7], [resume_at], decode=[False]))


def test_a_chunk_after_a_batch_not_kept_as_previous_resumes_where_that_batch_left_it():
    """Seq 7 was in the previous forward, but the batch after it moved it on to 10."""
    _middle_chunk_not_kept(10)


def test_a_chunk_ignoring_a_batch_not_kept_as_previous_is_sg601():
    """Resuming past where that batch left seq 7 is SG601 against that point."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 7 at batch position 0: starts at position 15, but its previous step (row 1) "
            "left it at 10 (expected 10; actual 15)")):
        _middle_chunk_not_kept(15)


def test_no_forward_yet_is_known_until_one_is_scheduled_or_the_tracker_resets():
    """before_first_forward: True for a new tracker, False once a batch was forwarded (not
    for one that was not), False after a reset (which cannot tell)."""
    tracker = StepTracker()
    assert tracker.before_first_forward
    tracker.schedule(batch([7], [0], decode=[False]), forwarded=False)
    assert tracker.before_first_forward
    tracker.schedule(batch([7], [5], decode=[False]))
    assert not tracker.before_first_forward
    fresh = StepTracker()
    fresh.reset()
    assert not fresh.before_first_forward


def test_a_seq_back_after_sitting_out_is_held_to_its_last_short_proposal():
    """Seq 6's drafter proposed 1 of 2; seq 6 sits out a step (seq 5 alone) and comes back
    with 2 real drafts: SG660, against the step that last drafted for it. Back with its
    one draft, it is clean; a full proposal since clears what was remembered."""
    def sat_out(final_counts, *, refreshed=False):
        tracker = _partly_proposed(batch([5, 6], [11, 11], drafts=[[11, 12], [21, 0]],
                                         counts=[2, 1]))
        tracker.verified(verify([5, 6], [0, 0]))
        tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]) if refreshed else
                        contracts.DrafterOutput(
                            mtp_k=K, vocab_size=VOCAB, seq_ids=np.array([5, 6]),
                            draft_token_ids=np.array([[11, 12], [21, 0]]),
                            num_proposed=np.array([2, 1])))
        tracker.schedule(batch([5], [12], drafts=[[11, 12]]))
        tracker.verified(verify([5], [0]))
        tracker.drafted(drafter([5], [[11, 12]]))
        tracker.schedule(batch([5, 6], [13, 12], drafts=[[11, 12], [21, 22]],
                               counts=final_counts))

    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 6 at batch position 1: carries 2 real drafts, but the last step that "
            "drafted for it proposed 1 for this seq (expected <= 1; actual 2)")):
        sat_out([2, 2])
    sat_out([2, 1])
    sat_out([2, 2], refreshed=True)


def _last_chunk_short(back_counts, *, drafted_again=None):
    """Seq 6's last prompt chunk (0..4) is drafted for, but its drafter proposed nothing
    (past its context limit, say). Seq 6 then sits out a step and comes back to decode
    with ``back_counts[1]`` real drafts. ``drafted_again`` first runs it once more as a
    decode (0 real drafts): with the drafter's rows of that step (a list of counts) or
    none told to the tracker (an empty list)."""
    tracker = StepTracker()
    tracker.schedule(batch([5, 6], [10, 0], decode=[True, False]))
    tracker.verified(verify([5], [0]))
    tracker.drafted(contracts.DrafterOutput(
        mtp_k=K, vocab_size=VOCAB, seq_ids=np.array([5, 6]),
        draft_token_ids=np.array([[11, 12], [0, 0]]), num_proposed=np.array([2, 0])))
    start5, start6 = 11, 5
    if drafted_again is not None:
        tracker.schedule(batch([5, 6], [11, 5], drafts=[[11, 12], [0, 0]], counts=[2, 0]))
        tracker.verified(verify([5, 6], [0, 0]))
        if drafted_again:
            tracker.drafted(contracts.DrafterOutput(
                mtp_k=K, vocab_size=VOCAB, seq_ids=np.array([5, 6]),
                draft_token_ids=np.array([[11, 12], [21, 22]]),
                num_proposed=np.array(drafted_again)))
        start5, start6 = 12, 6
    tracker.schedule(batch([5], [start5], drafts=[[11, 12]]))
    tracker.verified(verify([5], [0]))
    tracker.drafted(drafter([5], [[11, 12]]))
    tracker.schedule(batch([5, 6], [start5 + 1, start6], drafts=[[11, 12], [21, 22]],
                           counts=back_counts))


def test_a_seq_back_after_its_last_prompt_chunk_is_held_to_that_chunk_s_proposal():
    """A chunk that ends its prompt is drafted for like a decode row: seq 6 back with 2 real
    drafts, where that chunk's drafter proposed none, is SG660; back with none, clean."""
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "seq 6 at batch position 1: carries 2 real drafts, but the last step that "
            "drafted for it proposed 0 for this seq (expected <= 0; actual 2)")) as caught:
        _last_chunk_short([2, 2])
    assert caught.value.codes == ("SG660",)
    _last_chunk_short([2, 0])


def test_a_later_proposal_or_an_untold_one_replaces_a_short_one():
    """Seq 6 decodes once more after its short chunk: a whole proposal then lets it come
    back with 2 real drafts, a short one holds it to that, and a step whose drafter rows
    the tracker never heard of leaves nothing to hold it to (no false alarm)."""
    _last_chunk_short([2, 2], drafted_again=[2, 2])
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "carries 2 real drafts, but the last step that drafted for it proposed 1")):
        _last_chunk_short([2, 2], drafted_again=[2, 1])
    _last_chunk_short([2, 2], drafted_again=[])
