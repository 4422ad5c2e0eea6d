"""SG661: a seq the runner has never run carries no drafts it was not handed over.

The tracker knows a seq is new only where that is certain: it has watched the engine
from its first step (no decode seq in its first batch, no reset, ``sees_every_seq``), or
the engine says so itself (``StepPlan.first_scheduled``). Anything less is silence, not
a false alarm.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_step_relations import K, batch, drafter, verify

from specguard import contracts
from specguard.adapters import StepPlan, StepTracker
from specguard.adapters._seen_seqs import SeenSeqs

MESSAGE = ("SG661 a seq new to the runner carries no drafts it was not handed "
           "[StepTransition.num_drafts, scheduler → runner]: seq 9 at batch position 1: "
           "first seen at this decode, it carries 2 real drafts that no drafter of this "
           "engine proposed for it and none handed over (expected placeholders (0 real "
           "drafts), or drafts marked as handed over; actual 2)")


def _prefilled(tracker: StepTracker | None = None) -> StepTracker:
    """The engine's first step: seqs 5 and 6 prefill 5 tokens, then propose drafts."""
    tracker = tracker or StepTracker()
    tracker.schedule(batch([5, 6], [0, 0], decode=[False, False]))
    tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
    return tracker


def _with_newcomer(**changes) -> contracts.ScheduledBatch:
    """Seqs 5 and 6 decode their proposals; seq 9, never seen, decodes beside them."""
    fields = {"drafts": [[11, 12], [0, 0], [21, 22]]}
    fields.update(changes)
    out = batch([5, 9, 6], [5, 30, 5], **fields)
    return out


def test_a_seq_first_seen_at_decode_with_real_drafts_is_sg661():
    """Seq 9's first step is a decode whose row of zeros is scheduled as two real drafts."""
    tracker = _prefilled()
    with contracts.checking(depth="essential"), pytest.raises(
            contracts.ContractViolation, match=re.escape(MESSAGE)) as caught:
        tracker.schedule(_with_newcomer())
    assert caught.value.codes == ("SG661",)
    assert caught.value.violations[0].seq_id == 9


def test_a_newcomer_whose_slots_are_placeholders_is_clean():
    """A remotely prefilled seq's first decode with no real draft, as vLLM schedules it."""
    _prefilled().schedule(_with_newcomer(counts=[2, 0, 2]))


def test_drafts_handed_over_with_the_seq_are_real_drafts():
    """ATOM's P/D consumer feeds the drafts the prefill instance's drafter proposed."""
    handed = dataclasses.replace(_with_newcomer(),
                                 drafts_handed_over=np.array([False, True, False]))
    _prefilled().schedule(handed)
    with pytest.raises(contracts.ContractViolation, match=r"SG661 .*seq 9 at batch position 1"):
        _prefilled().schedule(dataclasses.replace(
            _with_newcomer(), drafts_handed_over=np.array([True, False, True])))


def test_a_seq_seen_at_any_earlier_step_is_not_new():
    """Seq 9 prefilled two steps ago and skipped one step is no newcomer, whatever the
    depth the earlier steps were checked at."""
    tracker = StepTracker()
    with contracts.checking(depth="metadata"):
        tracker.schedule(batch([5, 6, 9], [0, 0, 0], decode=[False] * 3))
    tracker.drafted(drafter([5, 6, 9], [[11, 12], [21, 22], [0, 0]]))
    tracker.schedule(batch([5, 6], [5, 5], drafts=[[11, 12], [21, 22]]))
    tracker.verified(verify([5, 6], [0, 0]))
    tracker.schedule(batch([5, 9, 6], [6, 5, 6], drafts=[[1, 1], [0, 0], [1, 1]]))


@pytest.mark.parametrize("blind", ["decode first", "reset", "attached late"])
def test_a_tracker_that_may_have_missed_seqs_says_nothing(blind):
    """Decode seqs in its first batch, a reset, or ``sees_every_seq=False``: a seq it
    has not seen may have run while it was not looking."""
    tracker = StepTracker(sees_every_seq=blind != "attached late")
    if blind == "decode first":
        tracker.schedule(batch([5, 6], [4, 4]))
        tracker.drafted(drafter([5, 6], [[11, 12], [21, 22]]))
        tracker.schedule(_with_newcomer(drafts=[[11, 12], [0, 0], [21, 22]]))
        return
    _prefilled(tracker)
    if blind == "reset":
        tracker.reset()
        _prefilled(tracker)
    tracker.schedule(_with_newcomer())


def _plan(out: contracts.ScheduledBatch, **changes) -> StepPlan:
    plan = StepPlan.of(out)
    assert plan is not None
    return dataclasses.replace(plan, **changes)


def test_the_engines_word_decides_where_it_gives_one():
    """vLLM names its new requests: that decides, and a view whose ids are not stable
    without it leaves the rule silent."""
    new = np.array([False, True, False])
    with pytest.raises(contracts.ContractViolation, match=r"SG661 .*seq 9"):
        _prefilled(StepTracker(sees_every_seq=False)).schedule(
            _plan(_with_newcomer(), first_scheduled=new, stable_ids=False))
    _prefilled().schedule(_plan(_with_newcomer(), first_scheduled=np.zeros(3, dtype=bool)))
    _prefilled().schedule(_plan(_with_newcomer(), stable_ids=False))


def test_the_rule_is_off_at_metadata_depth():
    with contracts.checking(depth="metadata"):
        _prefilled().schedule(_with_newcomer())


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=300),
       st.lists(st.integers(-2**63, 2**63 - 1), max_size=50))
def test_the_filter_never_calls_a_seen_seq_unseen(seen, asked):
    """False positives ("seen") may miss a newcomer; a false "unseen" would be a false
    alarm, so there is none."""
    filter_ = SeenSeqs(1 << 8)
    filter_.add(np.asarray(seen, dtype=np.int64))
    assert not filter_.unseen(np.asarray(seen, dtype=np.int64)).any()
    unseen = filter_.unseen(np.asarray(asked, dtype=np.int64))
    assert not unseen[np.isin(asked, seen)].any()


def test_the_filter_tells_most_new_seqs_apart_at_its_stated_load():
    """At slots / 16 seqs (the docstring's 1 in 70), nearly every new seq reads unseen."""
    filter_ = SeenSeqs(1 << 12)
    filter_.add(np.arange(256, dtype=np.int64) * 7919)
    fresh = filter_.unseen(np.arange(10_000, 20_000, dtype=np.int64))
    assert fresh.mean() > 0.95


def test_the_filter_size_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="slots must be a power of two of at least 64, not 100"):
        SeenSeqs(100)
    assert SeenSeqs(1 << 10).nbytes == 1024
    assert K == 2  # the batches above are built for two drafts per seq


def _vllm_remote_first_decode(drafts: list[int]):
    """req-a decodes; then req-r, prefilled on another instance, enters as a new request
    with one token and ``drafts`` listed for it (vLLM 0.33 lists ``[-1] * k``)."""
    from vllm_engine import NewRequestData, scheduler_output

    from specguard.adapters import VllmView

    view = VllmView(mtp_k=2, vocab_size=1000, tracker=StepTracker(), version="0.33.0")
    view.schedule(scheduler_output({"req-a": [5, 6]}, computed={"req-a": 40}))
    out = scheduler_output({"req-a": [7, 8]}, computed={"req-a": 43})
    out.scheduled_new_reqs.append(NewRequestData(
        "req-r", list(range(30)), [], None, None, ([3],), 30))
    out.num_scheduled_tokens["req-r"] = 1 + len(drafts)
    out.total_num_scheduled_tokens += 1 + len(drafts)
    out.scheduled_spec_decode_tokens["req-r"] = drafts
    return view.schedule(out)


def test_vllm_names_its_new_requests_and_a_new_one_with_real_drafts_is_sg661():
    """The vLLM view renumbers requests, so scheduled_new_reqs, not the tracker's memory,
    says which request is new: placeholders pass, real drafts are SG661."""
    with contracts.checking(depth="essential"):
        _vllm_remote_first_decode([-1, -1])
        with pytest.raises(contracts.ContractViolation, match=re.escape(
                "SG661 a seq new to the runner carries no drafts it was not handed "
                "[StepTransition.num_drafts, scheduler → runner]: seq 1 at batch position "
                "1: request 'req-r': first seen at this decode, it carries 2 real drafts")):
            _vllm_remote_first_decode([0, 0])
