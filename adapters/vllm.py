"""vLLM V1 speculative decoding, read by duck typing and checked against the contracts.

vLLM is not imported: :class:`VllmView` reads a ``SchedulerOutput``, the rejection
sampler's output and the drafter's ``propose()`` inputs through vLLM's own names::

    view = VllmView(mtp_k=3, vocab_size=129280, async_scheduling=True)
    step = view.schedule(scheduler_output, req_ids=input_batch.req_ids)
    view.verified(step, sampled_token_ids)            # (batch, max_spec_len+1), -1 padded
    view.drafter_input(step, target_token_ids=..., target_positions=...,
                       next_token_ids=..., last_token_indices=...,
                       common_attn_metadata=...)     # what the MTP head will embed
    view.drafted(step, draft_token_ids)               # (batch, k)

vLLM's conventions are checked as vLLM states them: a request's drafts are the tail of its
scheduled tokens (``num_scheduled = 1 + len(drafts)``, SG621); ``-1`` placeholders may
stand in ``scheduled_spec_decode_tokens`` under async scheduling (the runner overwrites
them from the previous step: SG603 with a tracker) but never reach an embedding (SG301).
Request ids are strings: contract seq ids are batch positions, and every message also
names the request id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.adapters._step_rules import VerifyRows
from specguard.adapters._vllm_drafter import drafter_fields
from specguard.adapters._vllm_drafts import draft_tokens, listed_rows
from specguard.adapters._vllm_schedule import VllmSchedule
from specguard.adapters.step_tracker import StepPlan, StepTracker
from specguard.contracts import (
    Boundary,
    DrafterInput,
    DrafterOutput,
    DraftTokens,
    Finding,
    VerifyOutput,
    report,
)
from specguard.contracts.ops import PLACEHOLDER, arange_like, is_int

__all__ = ["PLACEHOLDER", "VllmSchedule", "VllmStep", "VllmView"]

_SUBJECT = "vLLM SchedulerOutput"


@dataclass(frozen=True)
class VllmStep:
    """One checked ``SchedulerOutput`` in batch order, for the later views of the step."""

    req_ids: tuple[str, ...]
    """Request ids in batch order: contract seq id ``i`` is ``req_ids[i]``."""
    num_scheduled: np.ndarray
    """Scheduled tokens per request."""
    num_draft_tokens: np.ndarray
    """Drafts listed per request (``-1`` placeholders included), 0 when none."""
    draft_tokens: DraftTokens
    """The drafts as dense contract rows, one per request that has drafts."""
    tracker_ids: np.ndarray
    """Integer ids the step tracker follows across steps (batch positions without one)."""


class VllmView:
    """Validates what crosses vLLM's spec-decode boundaries; one per engine (it keeps state).

    ``async_scheduling`` allows ``-1`` placeholders in the scheduler's drafts, as vLLM
    does, and turns off the position check of the tracker (the async scheduler counts
    drafts as computed until the rejections come back). The tracker never requires a
    request to carry its whole proposal (SG607): vLLM's scheduler trims drafts to the
    token budget and ``max_model_len``, and structured output drops grammar-invalid ones.
    """

    def __init__(self, *, mtp_k: int, vocab_size: int, async_scheduling: bool = False,
                 tracker: StepTracker | None = None) -> None:
        self.mtp_k = mtp_k
        self.vocab_size = vocab_size
        self.async_scheduling = async_scheduling
        self.tracker = tracker
        if tracker is not None:
            tracker.whole_proposals = False
            if async_scheduling:
                tracker.progress = False
        self._ids: dict[str, int] = {}
        self._next_id = 0

    def schedule(self, scheduler_output: Any, *, req_ids: Sequence[str] | None = None) -> VllmStep:
        """Check a ``SchedulerOutput``; ``req_ids`` is the runner's batch order (default:
        the order of ``num_scheduled_tokens``)."""
        counts = _mapping(scheduler_output, "num_scheduled_tokens")
        drafts = _mapping(scheduler_output, "scheduled_spec_decode_tokens")
        order = tuple(req_ids) if req_ids is not None else tuple(counts)
        scheduled = _counts([counts.get(r) for r in order], order)
        listed = np.array([_length(drafts.get(r)) for r in order], dtype=np.int64)
        build(VllmSchedule, {
            "num_tokens": getattr(scheduler_output, "total_num_scheduled_tokens", None),
            "seq_ids": np.arange(len(order)), "num_scheduled_tokens": scheduled,
            "num_listed_drafts": listed}, names=order)
        rows = draft_tokens(order, drafts, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                            async_scheduling=self.async_scheduling)
        step = VllmStep(order, scheduled, listed, rows,
                        self._stable_ids(order) if self.tracker is not None
                        else np.arange(len(order)))
        if self.tracker is not None:
            self.tracker.schedule(self._plan(scheduler_output, step, drafts))
        return step

    def verified(self, step: VllmStep, sampled_token_ids: Any) -> VerifyOutput | None:
        """Check the rejection sampler's ``(batch, max_spec_len + 1)`` rows, ``-1`` padded.

        Returns None for a step without drafts (a single column has nothing to verify).
        """
        shape = tuple(getattr(sampled_token_ids, "shape", ()))
        if len(shape) == 2 and shape[1] == 1:
            return None
        accepted = (sampled_token_ids != PLACEHOLDER).sum(1) - 1 if len(shape) == 2 else None
        out = build(VerifyOutput, {
            "mtp_k": shape[1] - 1 if len(shape) == 2 else self.mtp_k,
            "vocab_size": self.vocab_size,
            "seq_ids": arange_like(sampled_token_ids, _rows(sampled_token_ids)),
            "token_ids": sampled_token_ids, "num_accepted": accepted}, names=step.req_ids)
        if accepted is None:
            return out
        host = host_array(accepted)
        if host is not None:
            positions = np.arange(len(step.req_ids))
            build(VerifyRows, {
                "batch_ids": positions, "positions": positions,
                "num_drafts": step.num_draft_tokens, "seq_ids": np.arange(shape[0]),
                "num_accepted": host.astype(np.int64)}, names=step.req_ids)
            if self.tracker is not None and host.shape[0] == positions.shape[0]:
                decode = step.num_draft_tokens > 0
                self.tracker.record_accepted(step.tracker_ids[decode], host[decode])
        return out

    def drafted(self, step: VllmStep, draft_token_ids: Any) -> DrafterOutput:
        """Check the drafter's proposals, ``(batch, k)``, one row per request in order."""
        rows = _rows(draft_token_ids)
        out = build(DrafterOutput, {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
            "seq_ids": arange_like(draft_token_ids, rows),
            "draft_token_ids": draft_token_ids}, names=step.req_ids)
        if self.tracker is not None and rows == len(step.req_ids):
            self.tracker.draft_rows(step.tracker_ids, draft_token_ids)
        return out

    def drafter_input(self, step: VllmStep, *, target_token_ids: Any, target_positions: Any,
                      next_token_ids: Any, last_token_indices: Any,
                      common_attn_metadata: Any) -> DrafterInput:
        """What ``EagleProposer.propose`` embeds: the target ids shifted left by one, with
        ``next_token_ids`` written at ``last_token_indices`` (vLLM ``eagle.py``)."""
        fields = drafter_fields(
            vocab_size=self.vocab_size, target_token_ids=target_token_ids,
            target_positions=target_positions, next_token_ids=next_token_ids,
            last_token_indices=last_token_indices,
            query_start_loc=getattr(common_attn_metadata, "query_start_loc", None))
        return build(DrafterInput, fields, names=step.req_ids)

    def _stable_ids(self, order: tuple[str, ...]) -> np.ndarray:
        """Integer ids that stay the same while a request stays in consecutive batches."""
        kept: dict[str, int] = {}
        for request in order:
            number = self._ids.get(request)
            if number is None:
                number, self._next_id = self._next_id, self._next_id + 1
            kept[request] = number
        self._ids = kept
        return np.array([kept[r] for r in order], dtype=np.int64)

    def _plan(self, output: Any, step: VllmStep, drafts: Mapping[Any, Any]) -> StepPlan:
        decode = np.flatnonzero(step.num_draft_tokens > 0)
        rows = listed_rows([drafts.get(step.req_ids[p]) for p in decode.tolist()], self.mtp_k)
        return StepPlan(
            mtp_k=self.mtp_k, seq_ids=step.tracker_ids,
            is_decode=step.num_draft_tokens > 0, starts=_computed(output, step.req_ids),
            num_scheduled=step.num_scheduled, draft_token_ids=rows,
            num_drafts=np.minimum(step.num_draft_tokens[decode], self.mtp_k),
            draft_placeholder=PLACEHOLDER if self.async_scheduling else None)


def _mapping(output: Any, name: str) -> Mapping[Any, Any]:
    value = getattr(output, name, None)
    if isinstance(value, Mapping):
        return value
    report(_SUBJECT, [("SG001", Finding(
        f"{name} must be a dict keyed by request id, got {type(value).__name__}", name))],
        boundary=Boundary.SCHEDULE.value)
    return {}


def _counts(values: list[Any], order: tuple[str, ...]) -> np.ndarray:
    if all(type(v) is int for v in values):
        return np.array(values, dtype=np.int64).reshape(len(values))
    return np.array([_count(v, r) for v, r in zip(values, order, strict=True)], dtype=np.int64)


def _count(value: Any, request: str) -> int:
    if is_int(value):
        return int(value)
    if value is not None:
        report(_SUBJECT, [("SG002", Finding(
            f"request {request!r}: scheduled token count {value!r} is not an integer",
            "num_scheduled_tokens"))], boundary=Boundary.SCHEDULE.value)
    return 0


def _length(drafts: Any) -> int:
    if type(drafts) is list:
        return len(drafts)
    try:
        return len(drafts) if drafts is not None else 0
    except TypeError:
        return 0


def _rows(array: Any) -> int:
    shape = tuple(getattr(array, "shape", ()))
    return int(shape[0]) if shape else 0


def _computed(output: Any, order: tuple[str, ...]) -> np.ndarray:
    """``num_computed_tokens`` per request (new and cached), -1 where not given."""
    computed: dict[str, int] = {}
    for new in _listed(getattr(output, "scheduled_new_reqs", None)):
        value, request = getattr(new, "num_computed_tokens", None), getattr(new, "req_id", None)
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    cached = getattr(output, "scheduled_cached_reqs", None)
    ids = _listed(getattr(cached, "req_ids", None))
    values = _listed(getattr(cached, "num_computed_tokens", None))
    for request, value in zip(ids, values, strict=False):
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    return np.array([computed.get(r, -1) for r in order], dtype=np.int64)


def _listed(value: Any) -> list[Any] | tuple[Any, ...]:
    """A list or tuple as it is; anything else (vLLM never sends it) as empty."""
    return value if isinstance(value, list | tuple) else ()
