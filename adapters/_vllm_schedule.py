"""vLLM's own scheduling conventions, as a boundary object with rules SG621-SG622.

vLLM V1 schedules a decode request ``1 + len(drafts)`` tokens and its drafts are the tail
of those tokens; the runner locates logits, draft slots and the drafter's sample index
from that convention alone. The object holds the per-request counts of one
``SchedulerOutput`` in batch order; seq ids are batch positions.
"""

from __future__ import annotations

from specguard.contracts import (
    Array,
    Boundary,
    BoundaryObject,
    Finding,
    Index,
    Values,
    boundary_object,
    rule,
)
from specguard.contracts.ops import host_value as int_at

__all__ = ["VllmSchedule"]


@boundary_object(Boundary.SCHEDULE, minimums={"num_tokens": 0})
class VllmSchedule(BoundaryObject):
    """The token counts of one vLLM ``SchedulerOutput``, per request in batch order."""

    num_tokens: int
    """``total_num_scheduled_tokens``."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions (vLLM request ids are strings; messages name them)."""
    num_scheduled_tokens: Index[Array, "num_seqs"]
    """``num_scheduled_tokens[req_id]``: drafts included."""
    num_listed_drafts: Index[Array, "num_seqs"]
    """``len(scheduled_spec_decode_tokens[req_id])`` (``-1`` placeholders included), or 0."""


_SCHEDULE = ("VllmSchedule",)


@rule("SG621", "a request's drafts are the tail of its scheduled tokens",
      boundary=Boundary.SCHEDULE, applies_to=_SCHEDULE,
      fields={"num_scheduled_tokens", "num_listed_drafts"},
      bug="vLLM I1: logits_indices start at cu_num_scheduled_tokens - num_sampled; when the "
      "drafts are not the tail, logits come from the neighbouring request's range.")
def _tail(schedule: VllmSchedule, values: Values) -> Finding | None:
    """A request that verifies drafts is scheduled its anchor and then exactly its drafts:
    ``num_scheduled = 1 + len(drafts)``. The runner takes the last ``len(drafts) + 1``
    positions of each request's span as the ones to sample, so any other count samples
    prompt tokens as drafts or reads past the span."""
    drafts, scheduled = schedule.num_listed_drafts, schedule.num_scheduled_tokens
    bad = (drafts > 0) & (scheduled != drafts + 1)
    return values.any_true(bad, lambda i: Finding(
        f"scheduled {int_at(scheduled, i)} tokens with {int_at(drafts, i)} drafts",
        "num_scheduled_tokens", position=i,
        expected=f"1 + {int_at(drafts, i)} drafts = {(int_at(drafts, i) or 0) + 1}",
        actual=str(int_at(scheduled, i))))


@rule("SG622", "every request is scheduled tokens, and the total is their sum",
      boundary=Boundary.SCHEDULE, applies_to=_SCHEDULE,
      fields={"num_scheduled_tokens", "num_tokens"},
      bug="vLLM I5d: when the drafter did not run, the runner strips drafts by mutating "
      "total_num_scheduled_tokens, num_scheduled_tokens and scheduled_spec_decode_tokens.")
def _totals(schedule: VllmSchedule, values: Values) -> Finding | None:
    """The runner sizes its flat buffers from the total and cuts spans from the counts; a
    request with no tokens has no span, and a total that is not the sum leaves stale
    tokens in the buffer or cuts the last span short."""
    scheduled = schedule.num_scheduled_tokens
    found = values.any_true(scheduled < 1, lambda i: Finding(
        f"request is in the batch with {int_at(scheduled, i)} scheduled tokens",
        "num_scheduled_tokens", position=i, expected=">= 1"))
    if found:
        return found
    total = int(scheduled.sum())
    if total != schedule.num_tokens:
        return Finding("total_num_scheduled_tokens differs from the per-request sum",
                       "num_tokens", expected=str(total), actual=str(schedule.num_tokens))
    return None
