"""vLLM V1 speculative decoding, read by duck typing and checked against the contracts.

vLLM is not imported: :class:`VllmView` reads a ``SchedulerOutput``, the rejection
sampler's output and the drafter's ``propose()`` inputs through vLLM's own names::

    view = VllmView(mtp_k=3, vocab_size=129280, async_scheduling=True, version="0.33.0")
    step = view.schedule(scheduler_output, req_ids=input_batch.req_ids)
    view.verified(step, sampled_token_ids)            # (batch, max_spec_len+1), -1 padded
    view.drafter_input(step, target_token_ids=..., target_positions=...,
                       next_token_ids=..., last_token_indices=...,
                       common_attn_metadata=...)     # what the MTP head will embed
    view.drafted(step, draft_token_ids)               # (batch, K_t), K_t <= k
    view.logits_rows(step, grammar_output,            # the grammar bitmask's rows
                     num_logits=logits.shape[0])      # against the 1 + K logits rows

vLLM's conventions are checked as vLLM's runner reads them (recorded from vLLM 0.11.0,
0.11.1 and 0.33.0 in the conformance corpus): a request's drafts are the tail of its
scheduled tokens, behind at least one token (SG621); ``last_token_indices=None`` samples
each request's last token; ``-1`` draft slots are vLLM's placeholders where the runner
deals with them (async scheduling: overwritten from the previous step, SG603 with a
tracker; from 0.33.0 also clamped before any embedding), and never reach an embedding
(SG301). Request ids are strings: contract seq ids are batch positions, and every message
also names the request id. :func:`specguard.adapters.engines.vllm.install.install` wires a view
into a live ``GPUModelRunner``. Model Runner V2 (``vllm/v1/worker/gpu/``) has its own
view, :class:`~specguard.adapters.engines.vllm.mrv2.view.Mrv2View` (SG623-SG631).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.adapters._step_rules import VERIFY, VerifyRows, runs
from specguard.adapters._tracked_names import TrackedNames
from specguard.adapters.engines.vllm._drafter import attention_fields, drafter_fields
from specguard.adapters.engines.vllm._drafts import dense_drafts, draft_tokens, listed_rows
from specguard.adapters.engines.vllm._readers import (
    batch_order,
    check_keys,
    computed_tokens,
    counts_of,
    draft_width,
    in_order,
    listed,
    listed_counts,
    read_mapping,
    rows_of,
)
from specguard.adapters.engines.vllm.layout import VllmSchedule
from specguard.adapters.engines.vllm.release import (
    KNOWN_VERSIONS,
    LATEST,
    MASKING_SINCE,
    STRIDED_BITMASK_SINCE,
    parse_version,
)
from specguard.adapters.step_tracker import StepPlan, StepTracker
from specguard.contracts import (
    Boundary,
    DeliveryContext,
    Depth,
    DrafterInput,
    DrafterOutput,
    DraftTokens,
    Finding,
    LogitsRows,
    VerifyOutput,
    current_config,
    describe,
    report,
)
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts.ops import PLACEHOLDER, arange_like

__all__ = ["KNOWN_VERSIONS", "LATEST", "PLACEHOLDER", "VllmSchedule", "VllmStep", "VllmView",
           "parse_version"]


class StepEntries(NamedTuple):
    """A ``SchedulerOutput``'s per-request entries, read into arrays in batch order."""

    num_scheduled: np.ndarray
    num_draft_tokens: np.ndarray
    draft_tokens: DraftTokens
    listed: tuple[np.ndarray, np.ndarray | None]
    """The batch positions with drafts, and their drafts as listed (``-1`` kept) when
    every one lists ``mtp_k`` integers (:func:`dense_drafts`)."""


class VllmStep:
    """One checked ``SchedulerOutput`` in batch order, for the later views of the step.

    The per-request entries (``num_scheduled``, ``num_draft_tokens``, ``draft_tokens``)
    are vLLM's Python dicts read into arrays. Below ``full`` depth without a tracker,
    where no rule reads them, :meth:`VllmView.schedule` checks only the dicts' types and
    keys, and the entries are read (and checked at the depth then in force) on first use.
    """

    __slots__ = ("_entries", "_listed", "_read", "draft_width", "req_ids", "tracker_ids")

    def __init__(self, req_ids: tuple[str, ...], tracker_ids: np.ndarray,
                 read: Callable[[], StepEntries], draft_width: int = 0,
                 entries: StepEntries | None = None,
                 listed: np.ndarray | None = None) -> None:
        self.req_ids = req_ids
        """Request ids in batch order: contract seq id ``i`` is ``req_ids[i]``."""
        self.tracker_ids = tracker_ids
        """Integer ids the step tracker follows across steps (batch positions without one)."""
        self.draft_width = draft_width
        """Drafts the drafter proposes per request this step: ``num_spec_tokens_to_schedule``
        (vLLM 0.33 dynamic K, ``K_t <= mtp_k``) or ``mtp_k``."""
        self._read = read
        self._entries = entries  # None until read
        self._listed = listed  # the drafts listed per request, when counted without them

    def entries(self) -> StepEntries:
        """The per-request entries, read once."""
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    @property
    def num_scheduled(self) -> np.ndarray:
        """Scheduled tokens per request."""
        return self.entries().num_scheduled

    @property
    def num_draft_tokens(self) -> np.ndarray:
        """Drafts listed per request (``-1`` placeholders included), 0 when none."""
        if self._listed is not None:
            return self._listed
        return self.entries().num_draft_tokens

    @property
    def draft_tokens(self) -> DraftTokens:
        """The drafts as dense contract rows, one per request that has drafts."""
        return self.entries().draft_tokens

    def __repr__(self) -> str:
        return f"VllmStep(req_ids=<{len(self.req_ids)} requests>, draft_width={self.draft_width})"


class VllmView:
    """Validates what crosses vLLM's spec-decode boundaries; one per engine (it keeps state).

    ``async_scheduling`` allows ``-1`` placeholders in the scheduler's drafts, as vLLM
    does, and turns off the position check of the tracker (the async scheduler counts
    drafts as computed until the rejections come back). The tracker never requires a
    request to carry its whole proposal (SG607): vLLM's scheduler trims drafts to the
    token budget and ``max_model_len``, and structured output drops grammar-invalid ones.

    ``version`` is the vLLM release whose runner the traffic goes to (default: the newest
    known, :data:`LATEST`). From 0.33.0 on (``masks_placeholders``, which can also be set
    on its own) the runner clamps ``-1`` draft slots to 0 before the target embeds them and
    its rejection sampler rejects them, so a ``-1`` draft slot is legal under sync
    scheduling too and needs no previous-step row (no SG108, no SG603); before 0.33.0 a
    ``-1`` slot the runner does not overwrite reaches the embedding (vLLM #37629). What
    the drafter embeds is checked in every version (SG301).

    A ``SchedulerOutput`` that schedules no request is not a forward for the tracker:
    ``GPUModelRunner.execute_model`` returns before the model runs and leaves
    ``prev_req_id_to_index``, ``prev_sampled_token_ids`` and the async drafts as the last
    forward left them. That happens under async scheduling when every request waits for
    its results, and on a P/D decode instance while KV loads are in flight. A request
    scheduled after such a step is refilled from the last forward (SG603 links it there).
    """

    def __init__(self, *, mtp_k: int, vocab_size: int, async_scheduling: bool = False,
                 tracker: StepTracker | None = None, version: str = LATEST,
                 masks_placeholders: bool | None = None) -> None:
        self.mtp_k = mtp_k
        self.vocab_size = vocab_size
        self.async_scheduling = async_scheduling
        self.tracker = tracker
        self.version = version
        self.masks_placeholders = (parse_version(version) >= MASKING_SINCE
                                   if masks_placeholders is None else masks_placeholders)
        if tracker is not None:
            tracker.whole_proposals = False
            if async_scheduling:
                tracker.progress = False
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._next_id = 0
        self._order: tuple[str, ...] | None = None  # the last batch without a repeated id
        self._numbers = np.zeros(0, dtype=np.int64)  # and its stable ids
        # What the view itself reports keeps the output being scheduled in a snapshot.
        self._scheduling: tuple[Any, Any] = (None, None)
        self._kept = DeliveryContext(None, "VllmSchedule", None, None,
                                     lambda: _schedule_fields(*self._scheduling))

    def schedule(self, scheduler_output: Any, *, req_ids: Sequence[str] | None = None) -> VllmStep:
        """Check a ``SchedulerOutput``; ``req_ids`` is the runner's batch order (default:
        the order of ``num_scheduled_tokens``).

        Below ``full`` depth without a tracker, the dicts' entries are values no rule
        reads (SG621 and SG622 run at full depth, and what the MTP head embeds is
        :meth:`drafter_input`'s): only their types and keys are checked (every request
        of the batch has a count, drafts belong to requests of the batch), in C-level
        set operations, and the step reads its entries on first use.
        """
        self._scheduling = (scheduler_output, req_ids)
        try:
            return self._kept.run(self._schedule, scheduler_output, req_ids)
        finally:
            self._scheduling = (None, None)  # keep no engine object past its hand-over

    def _schedule(self, scheduler_output: Any, req_ids: Sequence[str] | None) -> VllmStep:
        counts = read_mapping(scheduler_output, "num_scheduled_tokens")
        drafts = read_mapping(scheduler_output, "scheduled_spec_decode_tokens")
        order = batch_order(req_ids, counts)
        own = req_ids is None  # then the order is tuple(counts)
        width = draft_width(scheduler_output, self.mtp_k)

        def read() -> StepEntries:
            kept = DeliveryContext(None, "VllmSchedule", None, None,
                                   functools.partial(_schedule_fields, scheduler_output, req_ids))
            return kept.run(self._read_entries, scheduler_output, order, counts, drafts, own)

        if current_config().depth is Depth.METADATA:
            check_keys(scheduler_output, order, counts, drafts, ordered=req_ids is None)
            if self.tracker is None:
                return VllmStep(order, np.arange(len(order)), read, width)
            # At metadata depth the tracker links the steps and keeps their progress, but
            # compares no drafts: the plan takes the counts and positions, not the lists.
            step = VllmStep(order, self._stable_ids(order) if order else np.arange(0),
                            read, width, listed=listed_counts(drafts, order))
            self.tracker.schedule(self._counted_plan(scheduler_output, step, counts, own),
                                  names=TrackedNames(self._names), forwarded=bool(order))
            return step
        entries = read()
        # A SchedulerOutput without requests runs no forward: the runner returns early
        # (kv_connector_no_forward under a KV connector) and keeps its previous-step
        # buffers, so the next batch is linked to the last step that ran one, by the ids
        # of that step.
        step = VllmStep(order, self._stable_ids(order) if self.tracker is not None and order
                        else np.arange(len(order)), read, width, entries)
        if self.tracker is not None:
            self.tracker.schedule(self._plan(scheduler_output, step, drafts, entries.listed),
                                  names=TrackedNames(self._names), forwarded=bool(order))
        return step

    def _read_entries(self, output: Any, order: tuple[str, ...], counts: Mapping[Any, Any],
                      drafts: Mapping[Any, Any], own: bool = False) -> StepEntries:
        """Read the output's dicts into arrays in batch order, and check them (``own``:
        the order is the counts' own, see :func:`in_order`)."""
        scheduled = counts_of(in_order(counts, order, own=own), order)
        dense = dense_drafts(order, drafts, self.mtp_k)
        listed = listed_counts(drafts, order, dense, self.mtp_k)
        build(VllmSchedule, {
            "num_tokens": getattr(output, "total_num_scheduled_tokens", None),
            "seq_ids": np.arange(len(order)), "num_scheduled_tokens": scheduled,
            "num_listed_drafts": listed}, names=order)
        rows = draft_tokens(order, drafts, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                            placeholders=self.async_scheduling or self.masks_placeholders,
                            listed=dense)
        return StepEntries(scheduled, listed, rows, dense)

    def verified(self, step: VllmStep, sampled_token_ids: Any) -> VerifyOutput | None:
        """Check the rejection sampler's ``(batch, max_spec_len + 1)`` rows, ``-1`` padded.

        Returns None for a step without drafts (a single column has nothing to verify).
        """
        shape: tuple[Any, ...] = tuple(getattr(sampled_token_ids, "shape", ()))
        if len(shape) == 2 and shape[1] == 1:
            return None
        accepted = (sampled_token_ids != PLACEHOLDER).sum(1) - 1 if len(shape) == 2 else None
        out = build(VerifyOutput, {
            "mtp_k": shape[1] - 1 if len(shape) == 2 else self.mtp_k,
            "vocab_size": self.vocab_size,
            "seq_ids": arange_like(sampled_token_ids, rows_of(sampled_token_ids)),
            "token_ids": sampled_token_ids, "num_accepted": accepted}, names=step.req_ids)
        checked = runs(*VERIFY)
        if accepted is None or (self.tracker is None and not checked):
            return out  # no rule of the depth reads the rows against the step's drafts
        host = host_array(accepted)
        if host is not None and not checked:  # the tracker keeps the progress, unchecked
            if self.tracker is not None and host.shape[0] == len(step.req_ids):
                decode = step.num_draft_tokens > 0
                self.tracker.record_accepted(step.tracker_ids[decode], host[decode])
        elif host is not None:
            positions = np.arange(len(step.req_ids))
            # Under async scheduling the runner fills placeholders with real drafts; in
            # sync mode a -1 slot (0.33's padding) is never a draft the sampler accepts.
            carried = step.num_draft_tokens if self.async_scheduling else _real_counts(step)
            build(VerifyRows, {
                "batch_ids": positions, "positions": positions,
                "num_drafts": carried, "seq_ids": np.arange(shape[0]),
                "num_accepted": host.astype(np.int64)}, names=step.req_ids)
            if self.tracker is not None and host.shape[0] == positions.shape[0]:
                decode = step.num_draft_tokens > 0
                self.tracker.record_accepted(step.tracker_ids[decode], host[decode])
        return out

    def logits_rows(self, step: VllmStep, grammar_output: Any, *,
                    num_draft_tokens: Any = None, num_logits: int | None = None) -> LogitsRows:
        """Check a ``GrammarOutput``'s bitmask rows against the step's logits rows.

        Read as ``apply_grammar_bitmask`` reads them: the bitmask's requests in
        ``structured_output_request_ids`` order, each with ``1 + K`` rows (``K`` its
        entry of ``scheduled_spec_decode_tokens``), packed one after the other before
        0.33.0 and in blocks of ``rows // requests`` from it on; a request no longer in
        the batch keeps its rows. ``num_draft_tokens`` is the runner's own count per
        request when it differs from the scheduler's (drafts trimmed in the runner),
        ``num_logits`` the logits' rows (default: one per request plus its drafts).
        """
        order = step.req_ids
        scheduled = step.num_draft_tokens
        runner = scheduled if num_draft_tokens is None else host_array(num_draft_tokens)
        listed = getattr(grammar_output, "structured_output_request_ids", None)
        requests = list(listed) if isinstance(listed, Sequence | Mapping) else []
        unhashable = next((r for r in requests if not _hashable(r)), None)
        if unhashable is not None:
            report(_GRAMMAR, [("SG001", Finding(
                f"structured_output_request_ids holds {describe(unhashable)}, which cannot "
                "be a request id", "structured_output_request_ids",
                expected="request ids (str)"))], boundary=Boundary.MODEL_INPUT.value)
            requests = [r for r in requests if _hashable(r)]
        num_rows = rows_of(getattr(grammar_output, "grammar_bitmask", None))
        starts = np.full(len(order), -1, dtype=np.int64)
        counts = np.zeros(len(order), dtype=np.int64)
        at = {req_id: i for i, req_id in enumerate(order)}
        stride = num_rows // len(requests) if requests else 0
        strided = parse_version(self.version) >= STRIDED_BITMASK_SINCE
        first = 0
        for index, req_id in enumerate(requests):
            i = at.get(req_id)
            rows = 1 + (int(scheduled[i]) if i is not None else 0)
            if i is not None:
                starts[i], counts[i] = (index * stride if strided else first), rows
            first += rows
        total = len(order) + int(runner.sum()) if isinstance(runner, np.ndarray) \
            and runner.ndim == 1 and np.issubdtype(runner.dtype, np.integer) else 0
        return build(LogitsRows, {
            "num_logits": total if num_logits is None else num_logits, "num_rows": num_rows,
            "seq_ids": np.arange(len(order)), "num_drafts": runner, "row_starts": starts,
            "row_counts": counts}, names=order)

    def drafted(self, step: VllmStep, draft_token_ids: Any) -> DrafterOutput:
        """Check the drafter's proposals, ``(batch, K_t)``, one row per request in order.

        ``K_t`` is the step's ``num_spec_tokens_to_schedule`` where the scheduler sets it
        (vLLM 0.33 dynamic speculative decoding: ``propose(num_speculative_tokens=K_t)``),
        else ``mtp_k``; rows of any other width are SG102.
        """
        rows = rows_of(draft_token_ids)
        width = step.draft_width if step.draft_width >= 1 else self.mtp_k
        out = build(DrafterOutput, {
            "mtp_k": width, "vocab_size": self.vocab_size,
            "seq_ids": arange_like(draft_token_ids, rows),
            "draft_token_ids": draft_token_ids}, names=step.req_ids)
        if self.tracker is not None and rows == len(step.req_ids):
            self.tracker.draft_rows(step.tracker_ids, _widen(draft_token_ids, self.mtp_k),
                                    names=TrackedNames(self._names))
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
        fields.update(attention_fields(common_attn_metadata))
        return build(DrafterInput, fields, names=step.req_ids)

    def _stable_ids(self, order: tuple[str, ...]) -> np.ndarray:
        """Integer ids that stay the same while a request stays in consecutive batches."""
        if order == self._order:  # the previous batch again, in the same order
            self._order = order  # this very tuple: later checks of the step compare by `is`
            same: np.ndarray = self._numbers.copy()
            return same
        if len(set(order)) != len(order):
            return self._stable_ids_one_by_one(order)  # a request twice in the batch
        numbers = np.fromiter(map(self._ids.get, order, repeat(-1)), dtype=np.int64,
                              count=len(order))
        new = numbers < 0
        fresh = int(new.sum())
        if fresh or len(self._ids) != len(order):  # else the same requests: kept as they are
            numbers[new] = np.arange(self._next_id, self._next_id + fresh)
            self._next_id += fresh
            listed = numbers.tolist()
            self._ids = dict(zip(order, listed, strict=True))
            self._names = dict(zip(listed, order, strict=True))
        self._order, self._numbers = order, numbers.copy()
        return numbers

    def _stable_ids_one_by_one(self, order: tuple[str, ...]) -> np.ndarray:
        self._order = None
        kept: dict[str, int] = {}
        for request in order:
            number = self._ids.get(request)
            if number is None:
                number, self._next_id = self._next_id, self._next_id + 1
            kept[request] = number
        self._ids = kept
        self._names = {number: request for request, number in kept.items()}
        return np.array([kept[r] for r in order], dtype=np.int64)

    def _counted_plan(self, output: Any, step: VllmStep, counts: Mapping[Any, Any],
                      own: bool = False) -> StepPlan:
        """The step's plan from the dicts' counts alone (no draft is read): what the
        tracker keeps below full depth, where no rule compares drafts."""
        order = step.req_ids
        listed = step.num_draft_tokens
        decode = listed > 0
        num_decode = int(_count_nonzero(decode))
        before = listed[decode]
        scheduled = counts_of(in_order(counts, order, own=own), order)
        return StepPlan(
            mtp_k=self.mtp_k, seq_ids=step.tracker_ids, is_decode=decode,
            starts=computed_tokens(output, order,
                                   unique=self._order is order or self._order == order),
            num_scheduled=scheduled,
            draft_token_ids=np.zeros((num_decode, self.mtp_k), dtype=np.int64),
            num_drafts=np.minimum(before, self.mtp_k),
            num_before_drafts=np.maximum(scheduled[decode] - before, 0),
            first_scheduled=self._first_scheduled(output, step), stable_ids=False)

    def _plan(self, output: Any, step: VllmStep, drafts: Mapping[Any, Any],
              dense: tuple[np.ndarray, np.ndarray | None]) -> StepPlan:
        decode = np.flatnonzero(step.num_draft_tokens > 0)
        positions, listed_dense = dense
        if listed_dense is not None and np.array_equal(decode, positions):
            rows = listed_dense  # the drafts as listed, read once by dense_drafts
        else:
            rows = listed_rows([drafts.get(step.req_ids[p]) for p in decode.tolist()],
                               self.mtp_k)
        listed = step.num_draft_tokens[decode]
        # A runner that masks -1 slots needs no previous-step row for them (no SG603), and
        # its -1 slots are not drafts to compare with the proposals (SG602).
        refills = self.async_scheduling and not self.masks_placeholders
        counts = np.minimum(listed, self.mtp_k)
        if not refills:
            counts = np.minimum(counts, _real_counts(step)[decode])
        return StepPlan(
            mtp_k=self.mtp_k, seq_ids=step.tracker_ids,
            is_decode=step.num_draft_tokens > 0,
            starts=computed_tokens(output, step.req_ids, unique=self._order is step.req_ids
                                   or self._order == step.req_ids),
            num_scheduled=step.num_scheduled, draft_token_ids=rows, num_drafts=counts,
            draft_placeholder=PLACEHOLDER if refills else None,
            num_before_drafts=np.maximum(step.num_scheduled[decode] - listed, 0),
            first_scheduled=self._first_scheduled(output, step), stable_ids=False)

    def _first_scheduled(self, output: Any, step: VllmStep) -> np.ndarray:
        """Per request, whether the output lists it among ``scheduled_new_reqs``: its first
        step on this worker. The view numbers only the requests of consecutive batches,
        so vLLM's own word, not the tracker's memory, tells a new request (SG661)."""
        first = np.zeros(len(step.req_ids), dtype=bool)
        names = (getattr(request, "req_id", None)
                 for request in listed(getattr(output, "scheduled_new_reqs", None)))
        new = [self._ids.get(name, -1) for name in names if isinstance(name, str)]
        if new:
            first = np.isin(step.tracker_ids, np.asarray(new, dtype=np.int64))
        return first


def _real_counts(step: VllmStep) -> np.ndarray:
    """Per request, its listed drafts without their trailing ``-1`` slots."""
    counts = np.zeros(len(step.req_ids), dtype=np.int64)
    rows = step.draft_tokens
    ids, real = host_array(rows.seq_ids), host_array(rows.num_drafts)
    if ids is not None and real is not None and ids.shape == real.shape:
        inside = (ids >= 0) & (ids < counts.shape[0])
        if inside.all():  # every row of the batch's own (boolean selection costs more)
            counts[ids] = real
        else:
            counts[ids[inside]] = real[inside]
    result: np.ndarray = np.minimum(counts, step.num_draft_tokens)
    return result


def _widen(array: Any, width: int) -> Any:
    """``(n, K_t)`` rows zero-padded to ``(n, width)`` on their own backend, for the
    tracker (only the first ``K_t`` columns are ever compared)."""
    shape = tuple(getattr(array, "shape", ()))
    if len(shape) != 2 or shape[1] >= width:
        return array
    if isinstance(array, np.ndarray):
        return np.pad(array, ((0, 0), (0, width - shape[1])))
    import torch

    if not isinstance(array, torch.Tensor):
        return array
    return torch.nn.functional.pad(array, (0, width - shape[1]))


def _schedule_fields(output: Any, req_ids: Any) -> dict[str, Any]:
    """What a snapshot keeps of ``output``: its counts as a ``VllmSchedule``, read without
    reporting, only when a violation is delivered."""
    counts, drafts = (getattr(output, name, None) for name in (
        "num_scheduled_tokens", "scheduled_spec_decode_tokens"))
    counts = counts if isinstance(counts, Mapping) else {}
    drafts = drafts if isinstance(drafts, Mapping) else {}
    order = tuple(counts) if req_ids is None or isinstance(req_ids, str | bytes) \
        else tuple(req_ids)
    scheduled: Any = in_order(counts, order)
    if set(map(type, scheduled)) <= {int} and all(-(2**63) <= c < 2**63 for c in scheduled):
        scheduled = np.array(scheduled, dtype=np.int64).reshape(len(order))
    return {"num_tokens": getattr(output, "total_num_scheduled_tokens", None),
            "seq_ids": np.arange(len(order)), "num_scheduled_tokens": scheduled,
            "num_listed_drafts": listed_counts(drafts, order)}


#: The engine object of the logits rows' violations.
_GRAMMAR = "vLLM GrammarOutput"


def _hashable(value: Any) -> bool:
    """Whether ``value`` can key a dict (a request id can; a list, or a tuple holding
    one, cannot)."""
    try:
        hash(value)
    except Exception:  # a list's TypeError, or whatever a hostile __hash__ raises
        return False
    return True
