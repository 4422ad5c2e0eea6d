"""vLLM's own scheduling conventions, as a boundary object with rules SG621-SG622.

vLLM V1 schedules a request's drafts as the tail of its scheduled tokens (``1 + len(drafts)``
tokens for a decode, more when a final prefill chunk carries drafts); the runner locates
logits, draft slots and the drafter's sample index from that convention alone. The object
holds the per-request counts of one ``SchedulerOutput`` in batch order; seq ids are batch
positions.
"""

from __future__ import annotations

from specguard.contracts import (
    Array,
    Boundary,
    BoundaryObject,
    Finding,
    Index,
    ValueChecks,
    boundary_object,
    rule,
)
from specguard.contracts.ops import host_value

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


@rule("SG621", "a request's drafts fit at the tail of its scheduled tokens",
      boundary=Boundary.SCHEDULE, applies_to=_SCHEDULE,
      fields={"num_scheduled_tokens", "num_listed_drafts"},
      bug="vLLM I1: logits_indices start at cu_num_scheduled_tokens - num_sampled; a span "
      "shorter than its drafts plus one takes logits and drafts from the neighbouring "
      "request's range.")
def _tail(schedule: VllmSchedule, values: ValueChecks) -> Finding | None:
    """What the runner reads, in vLLM 0.11.0, 0.11.1 and 0.33.0 alike
    (``GPUModelRunner._calc_spec_decode_metadata``): the logits of the last
    ``len(drafts) + 1`` positions of each request's span, and the drafts from its last
    ``len(drafts)`` positions; ``_prepare_input_ids`` fills the async placeholders at the
    same tail. So a request with drafts needs ``num_scheduled >= 1 + len(drafts)``: its
    drafts and at least one token before them. More is valid: vLLM 0.11.x schedules the
    drafts proposed for a discarded prefill chunk with the final chunk
    (``num_scheduled = remaining prompt + len(drafts)``), and the runner verifies them
    against the last prompt token. Fewer reads another request's tokens: Model Runner V2
    (0.33.0, ``prepare_inputs``) asserts the same bound before placing logits rows at the
    end of each query."""
    drafts, scheduled = schedule.num_listed_drafts, schedule.num_scheduled_tokens
    bad = (drafts > 0) & (scheduled < drafts + 1)
    return values.any_true(bad, lambda i: Finding(
        f"scheduled {host_value(scheduled, i)} tokens with {host_value(drafts, i)} drafts",
        "num_scheduled_tokens", position=i,
        expected=f">= 1 + {host_value(drafts, i)} drafts = {(host_value(drafts, i) or 0) + 1}",
        actual=str(host_value(scheduled, i))))


@rule("SG622", "every request is scheduled tokens, and the total is their sum",
      boundary=Boundary.SCHEDULE, applies_to=_SCHEDULE,
      fields={"num_scheduled_tokens", "num_tokens"},
      bug="vLLM I5d: when the drafter did not run, the runner strips drafts by mutating "
      "total_num_scheduled_tokens, num_scheduled_tokens and scheduled_spec_decode_tokens.")
def _totals(schedule: VllmSchedule, values: ValueChecks) -> Finding | None:
    """The runner sizes its flat buffers from the total and cuts spans from the counts; a
    request with no tokens has no span, and a total that is not the sum leaves stale
    tokens in the buffer or cuts the last span short."""
    scheduled = schedule.num_scheduled_tokens
    found = values.any_true(scheduled < 1, lambda i: Finding(
        f"request is in the batch with {host_value(scheduled, i)} scheduled tokens",
        "num_scheduled_tokens", position=i, expected=">= 1"))
    if found:
        return found
    total = int(scheduled.sum())
    if total != schedule.num_tokens:
        return Finding("total_num_scheduled_tokens differs from the per-request sum",
                       "num_tokens", expected=str(total), actual=str(schedule.num_tokens))
    return None
