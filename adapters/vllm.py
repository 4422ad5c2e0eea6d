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

vLLM's conventions are checked as vLLM's runner reads them (recorded from vLLM 0.11.0,
0.11.1 and 0.33.0 in the conformance corpus): a request's drafts are the tail of its
scheduled tokens, behind at least one token (SG621); ``last_token_indices=None`` samples
each request's last token; ``-1`` draft slots are vLLM's placeholders where the runner
deals with them (async scheduling: overwritten from the previous step, SG603 with a
tracker; from 0.33.0 also clamped before any embedding), and never reach an embedding
(SG301). Request ids are strings: contract seq ids are batch positions, and every message
also names the request id. :func:`specguard.adapters.vllm_install.install` wires a view
into a live ``GPUModelRunner``. Model Runner V2 (``vllm/v1/worker/gpu/``) has its own
hand-overs: ``mrv2_input_batch``, ``mrv2_sampled`` and ``mrv2_drafted`` (SG623-SG631).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any, NamedTuple, overload

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import host_array
from specguard.adapters._step_rules import VerifyRows
from specguard.adapters._vllm_drafter import drafter_fields
from specguard.adapters._vllm_drafts import dense_drafts, draft_tokens, listed_rows
from specguard.adapters._vllm_schedule import VllmSchedule
from specguard.adapters._vllm_v2 import Mrv2Drafts, Mrv2Sampled
from specguard.adapters._vllm_v2_view import Mrv2Batch, drafts_of, input_batch_of, sampled_of
from specguard.adapters.step_tracker import StepPlan, StepTracker
from specguard.contracts import (
    Boundary,
    Depth,
    DrafterInput,
    DrafterOutput,
    DraftTokens,
    Finding,
    VerifyOutput,
    current_config,
    report,
)
from specguard.contracts.ops import PLACEHOLDER, arange_like, is_int

__all__ = ["KNOWN_VERSIONS", "PLACEHOLDER", "VllmSchedule", "VllmStep", "VllmView"]

_SUBJECT = "vLLM SchedulerOutput"

#: vLLM releases whose traffic the conformance corpus holds, oldest first.
KNOWN_VERSIONS = ("0.11.0", "0.11.1", "0.33.0")
#: The release a view reads by default: the newest known one.
LATEST = KNOWN_VERSIONS[-1]
#: The first recorded release whose ``GPUModelRunner`` clamps ``-1`` draft slots to 0
#: before the target embeds them (``_preprocess``), whose rejection sampler rejects a
#: ``-1`` draft, and whose scheduler pads a fully cached new request with ``[-1] * k``.
MASKING_SINCE = (0, 33, 0)


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

    __slots__ = ("_entries", "_read", "draft_width", "req_ids", "tracker_ids")

    def __init__(self, req_ids: tuple[str, ...], tracker_ids: np.ndarray,
                 read: Callable[[], StepEntries], draft_width: int = 0,
                 entries: StepEntries | None = None) -> None:
        self.req_ids = req_ids
        """Request ids in batch order: contract seq id ``i`` is ``req_ids[i]``."""
        self.tracker_ids = tracker_ids
        """Integer ids the step tracker follows across steps (batch positions without one)."""
        self.draft_width = draft_width
        """Drafts the drafter proposes per request this step: ``num_spec_tokens_to_schedule``
        (vLLM 0.33 dynamic K, ``K_t <= mtp_k``) or ``mtp_k``."""
        self._read = read
        self._entries = entries  # None until read

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

    def schedule(self, scheduler_output: Any, *, req_ids: Sequence[str] | None = None) -> VllmStep:
        """Check a ``SchedulerOutput``; ``req_ids`` is the runner's batch order (default:
        the order of ``num_scheduled_tokens``).

        Below ``full`` depth without a tracker, the dicts' entries are values no rule
        reads (SG621 and SG622 run at full depth, and what the MTP head embeds is
        :meth:`drafter_input`'s): only their types and keys are checked (every request
        of the batch has a count, drafts belong to requests of the batch), in C-level
        set operations, and the step reads its entries on first use.
        """
        counts = _mapping(scheduler_output, "num_scheduled_tokens")
        drafts = _mapping(scheduler_output, "scheduled_spec_decode_tokens")
        order = _batch_order(req_ids, counts)
        width = _draft_width(scheduler_output, self.mtp_k)

        def read() -> StepEntries:
            return self._read_entries(scheduler_output, order, counts, drafts)

        if self.tracker is None and current_config().depth is not Depth.FULL:
            _check_keys(scheduler_output, order, counts, drafts, ordered=req_ids is None)
            return VllmStep(order, np.arange(len(order)), read, width)
        entries = read()
        # A SchedulerOutput without requests runs no forward: the runner returns early
        # (kv_connector_no_forward under a KV connector) and keeps its previous-step
        # buffers, so the next batch is linked to the last step that ran one, by the ids
        # of that step.
        step = VllmStep(order, self._stable_ids(order) if self.tracker is not None and order
                        else np.arange(len(order)), read, width, entries)
        if self.tracker is not None:
            self.tracker.schedule(self._plan(scheduler_output, step, drafts, entries.listed),
                                  names=_TrackedNames(self._names), forwarded=bool(order))
        return step

    def _read_entries(self, output: Any, order: tuple[str, ...], counts: Mapping[Any, Any],
                 drafts: Mapping[Any, Any]) -> StepEntries:
        """Read the output's dicts into arrays in batch order, and check them."""
        scheduled = _counts(_in_order(counts, order), order)
        dense = dense_drafts(order, drafts, self.mtp_k)
        listed = _listed_counts(drafts, order, dense, self.mtp_k)
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
            "seq_ids": arange_like(sampled_token_ids, _rows(sampled_token_ids)),
            "token_ids": sampled_token_ids, "num_accepted": accepted}, names=step.req_ids)
        if accepted is None or (self.tracker is None
                                and current_config().depth is not Depth.FULL):
            return out  # the rows against the step's drafts are full-depth rules
        host = host_array(accepted)
        if host is not None:
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

    def drafted(self, step: VllmStep, draft_token_ids: Any) -> DrafterOutput:
        """Check the drafter's proposals, ``(batch, K_t)``, one row per request in order.

        ``K_t`` is the step's ``num_spec_tokens_to_schedule`` where the scheduler sets it
        (vLLM 0.33 dynamic speculative decoding: ``propose(num_speculative_tokens=K_t)``),
        else ``mtp_k``; rows of any other width are SG102.
        """
        rows = _rows(draft_token_ids)
        width = step.draft_width if step.draft_width >= 1 else self.mtp_k
        out = build(DrafterOutput, {
            "mtp_k": width, "vocab_size": self.vocab_size,
            "seq_ids": arange_like(draft_token_ids, rows),
            "draft_token_ids": draft_token_ids}, names=step.req_ids)
        if self.tracker is not None and rows == len(step.req_ids):
            self.tracker.draft_rows(step.tracker_ids, _widen(draft_token_ids, self.mtp_k),
                                    names=_TrackedNames(self._names))
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
        if order == self._order:  # the previous batch again, in the same order
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
            starts=_computed(output, step.req_ids, unique=self._order == step.req_ids),
            num_scheduled=step.num_scheduled, draft_token_ids=rows, num_drafts=counts,
            draft_placeholder=PLACEHOLDER if refills else None,
            num_before_drafts=np.maximum(step.num_scheduled[decode] - listed, 0))

    # -- Model Runner V2 (vLLM 0.33, vllm/v1/worker/gpu/): see specguard.adapters._vllm_v2
    def mrv2_input_batch(self, input_batch: Any, *, max_num_reqs: int | None = None) -> Mrv2Batch:
        """Check Model Runner V2's ``InputBatch`` (``GPUModelRunner.prepare_inputs``):
        spans, logits rows, request-state rows and draft counts from its host arrays;
        the embedded ids and the logits rows as deferred verdicts on a device."""
        return input_batch_of(input_batch, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                              num_state_rows=max_num_reqs)[1]

    def mrv2_sampled(self, batch: Mrv2Batch, sampler_output: Any) -> Mrv2Sampled:
        """Check MRV2's ``SamplerOutput`` for the batch: counts, and the sampled ids the
        scheduler takes (the first ``num_sampled`` of each row; the rest is unset)."""
        return sampled_of(batch, sampler_output, mtp_k=self.mtp_k, vocab_size=self.vocab_size)

    def mrv2_drafted(self, batch: Mrv2Batch, draft_tokens: Any, *,
                     num_speculative_tokens: int) -> Mrv2Drafts:
        """Check the ``(num_reqs, S)`` drafts MRV2 stores on the device for the next step:
        the first ``K_t`` columns in the vocabulary, ``-1`` allowed after."""
        return drafts_of(batch, draft_tokens, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                         num_speculative_tokens=num_speculative_tokens)


class _TrackedNames(Sequence[str]):
    """Request ids by tracker id, for naming the tracker's violations: ``names[id]``."""

    def __init__(self, names: dict[int, str]) -> None:
        self._by_id = names
        self._length: int | None = None  # read only when a violation is named

    def __len__(self) -> int:
        if self._length is None:
            self._length = max(self._by_id, default=-1) + 1
        return self._length

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._by_id.get(index, f"#{index}")


def parse_version(version: str) -> tuple[int, int, int]:
    """``"0.11.1"``, ``"0.33.0+cu130"`` or ``"0.12.0rc1"`` as ``(0, 11, 1)`` and so on."""
    parts = str(version).split("+")[0].split(".")
    numbers = []
    for part in [*parts, "0", "0", "0"][:3]:
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        numbers.append(int(digits or 0))
    return numbers[0], numbers[1], numbers[2]


def _draft_width(output: Any, mtp_k: int) -> int:
    """The step's ``num_spec_tokens_to_schedule`` (0.33 dynamic K), or ``mtp_k``; a K_t
    above ``mtp_k`` is SG102."""
    width = getattr(output, "num_spec_tokens_to_schedule", None)
    if not is_int(width):
        return mtp_k
    if not 0 <= int(width) <= mtp_k:
        report(_SUBJECT, [("SG102", Finding(
            f"num_spec_tokens_to_schedule={int(width)} is outside [0, mtp_k={mtp_k}]",
            "num_spec_tokens_to_schedule", expected=f"0 <= K_t <= {mtp_k}",
            actual=str(int(width))))], boundary=Boundary.SCHEDULE.value)
        return mtp_k
    return int(width)


def _real_counts(step: VllmStep) -> np.ndarray:
    """Per request, its listed drafts without their trailing ``-1`` slots."""
    counts = np.zeros(len(step.req_ids), dtype=np.int64)
    rows = step.draft_tokens
    ids, real = host_array(rows.seq_ids), host_array(rows.num_drafts)
    if ids is not None and real is not None and ids.shape == real.shape:
        inside = (ids >= 0) & (ids < counts.shape[0])
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


def _mapping(output: Any, name: str) -> Mapping[Any, Any]:
    value = getattr(output, name, None)
    if isinstance(value, Mapping):
        return value
    report(_SUBJECT, [("SG001", Finding(
        f"{name} must be a dict keyed by request id, got {type(value).__name__}", name))],
        boundary=Boundary.SCHEDULE.value)
    return {}


def _batch_order(req_ids: Any, counts: Mapping[Any, Any]) -> tuple[Any, ...]:
    """The runner's batch order as a tuple of request ids, or the order of
    ``num_scheduled_tokens`` when none is given (or, reported as SG001, when what is
    given is not a sequence of request ids)."""
    if req_ids is None:
        return tuple(counts)
    reason = None
    if isinstance(req_ids, str | bytes) or not isinstance(req_ids, Sequence):
        reason = f"req_ids must be a sequence of request ids, got {type(req_ids).__name__}"
    else:
        order = tuple(req_ids)
        try:
            set(order)
        except TypeError as error:
            reason = f"req_ids holds an entry that cannot be a request id: {error}"
        else:
            return order
    report(_SUBJECT, [("SG001", Finding(reason, "req_ids",
                                        expected="a sequence of request ids (str)"))],
           boundary=Boundary.SCHEDULE.value)
    return tuple(counts)  # warn mode: carry on in the scheduler's own order


def _check_keys(output: Any, order: tuple[str, ...], counts: Mapping[Any, Any],
                drafts: Mapping[Any, Any], *, ordered: bool) -> None:
    """What ``metadata`` depth checks of the dicts, by their keys alone (C-level set
    operations; no entry is read): every request of the batch has a scheduled count
    (SG105), every request with drafts is in the batch (SG114), and the total is an int."""
    total = getattr(output, "total_num_scheduled_tokens", None)
    if not is_int(total):
        report(_SUBJECT, [("SG001", Finding(
            f"total_num_scheduled_tokens must be an int, got {type(total).__name__}",
            "total_num_scheduled_tokens"))], boundary=Boundary.SCHEDULE.value)
    batch: Any = counts.keys() if ordered else set(order)
    if not ordered and not batch <= counts.keys():
        at, request = next((i, r) for i, r in enumerate(order) if r not in counts)
        report(_SUBJECT, [("SG105", Finding(
            f"request {request!r} is in the batch without a scheduled token count",
            "num_scheduled_tokens", position=at))], boundary=Boundary.SCHEDULE.value)
    if not drafts.keys() <= batch:
        request = next(r for r in drafts if r not in batch)
        report(_SUBJECT, [("SG114", Finding(
            f"request {request!r} has drafts but is not in the batch",
            "scheduled_spec_decode_tokens"))], boundary=Boundary.SCHEDULE.value)


def _in_order(counts: Mapping[Any, Any], order: tuple[str, ...]) -> list[Any]:
    """``counts[r]`` (None when absent) for each request of ``order``: one C-level pass, or
    none when ``order`` is the dict's own order."""
    if len(counts) == len(order) and tuple(counts) == order:
        return list(counts.values())
    return list(map(counts.get, order))


def _counts(values: list[Any], order: tuple[str, ...]) -> np.ndarray:
    if set(map(type, values)) <= {int}:
        try:
            return np.array(values, dtype=np.int64).reshape(len(values))
        except OverflowError:  # a count past int64: reported one by one below
            pass
    return np.array([_count(v, r) for v, r in zip(values, order, strict=True)], dtype=np.int64)


def _count(value: Any, request: str) -> int:
    if is_int(value):
        return int(value)
    if value is not None:
        report(_SUBJECT, [("SG002", Finding(
            f"request {request!r}: scheduled token count {value!r} is not an integer",
            "num_scheduled_tokens"))], boundary=Boundary.SCHEDULE.value)
    return 0


def _listed_counts(drafts: Mapping[Any, Any], order: tuple[str, ...],
                   dense: tuple[np.ndarray, np.ndarray | None] | None = None,
                   mtp_k: int = 0) -> np.ndarray:
    """``len(drafts[r])`` per request of ``order``, 0 when it has none: C-level passes, or
    one request at a time when some entry has no length. ``dense`` is
    :func:`dense_drafts` of the same drafts: when every request of ``order`` has its
    ``mtp_k`` drafts there, the counts are known without reading the lists again."""
    if not drafts:
        return np.zeros(len(order), dtype=np.int64)
    if dense is not None and dense[1] is not None and dense[0].shape[0] == len(order):
        return np.full(len(order), mtp_k, dtype=np.int64)
    try:
        return np.fromiter(map(len, map(drafts.get, order, repeat(()))), dtype=np.int64,
                           count=len(order))
    except TypeError:  # None or a value without a length: counted as no drafts
        return np.array([_length(drafts.get(r)) for r in order], dtype=np.int64)


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


def _computed(output: Any, order: tuple[str, ...], *, unique: bool = False,
              plain: bool = True) -> np.ndarray:
    """``num_computed_tokens`` per request (new and cached), -1 where not given.

    ``unique`` says that no request is twice in ``order``: when the cached requests are
    then exactly ``order``, their list is the answer as it stands. ``plain=False`` reads
    one request at a time."""
    cached = getattr(output, "scheduled_cached_reqs", None)
    ids = _listed(getattr(cached, "req_ids", None))
    values = _listed(getattr(cached, "num_computed_tokens", None))
    if plain and unique and len(values) == len(ids) == len(order) and tuple(ids) == order \
            and set(map(type, values)) <= {int}:
        try:  # the cached requests are the batch, in order (so their ids are strings)
            return np.array(values, dtype=np.int64).reshape(len(order))
        except OverflowError:
            pass  # a count beyond int64: read as below
    plain = plain and set(map(type, ids)) <= {str} and set(map(type, values)) <= {int}
    computed: dict[str, int] = {}
    for new in _listed(getattr(output, "scheduled_new_reqs", None)):
        value, request = getattr(new, "num_computed_tokens", None), getattr(new, "req_id", None)
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    if plain:
        computed.update(zip(ids, values, strict=False))  # what vLLM sends: one C-level pass
        try:
            return np.fromiter(map(computed.get, order, repeat(-1)), dtype=np.int64,
                               count=len(order))
        except OverflowError:  # a count past int64: left unread, as one by one leaves it
            return _computed(output, order, plain=False)
    for request, value in zip(ids, values, strict=False):
        if is_int(value) and isinstance(request, str):
            computed[request] = int(value)
    return np.array([computed.get(r, -1) for r in order], dtype=np.int64)


def _listed(value: Any) -> list[Any] | tuple[Any, ...]:
    """A list or tuple as it is; anything else (vLLM never sends it) as empty."""
    return value if isinstance(value, list | tuple) else ()
