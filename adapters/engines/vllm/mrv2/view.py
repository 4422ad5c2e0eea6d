"""Model Runner V2's view: its own hand-overs, read into the boundary objects of
:mod:`~specguard.adapters.engines.vllm.mrv2.layout`.

Duck typing on vLLM 0.33's names (``InputBatch``, ``SamplerOutput``, the speculator's
draft tensor); vLLM is not imported. Only host arrays (``*_np``) and tensor shapes are
read here; device values are compared on their device and give deferred verdicts::

    view = Mrv2View(mtp_k=3, vocab_size=129280)
    batch = view.schedule(input_batch, max_num_reqs=runner.max_num_reqs,
                          scheduler_output=scheduler_output)   # after prepare_inputs
    view.verified(batch, sampler_output)     # (n, S + 1) rows; only num_sampled are read
    view.drafted(batch, draft_tokens, num_speculative_tokens=k_t)   # (n, S), -1 past K_t
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import holds_integers
from specguard.adapters.engines.vllm.mrv2.layout import (
    Mrv2Drafts,
    Mrv2InputBatch,
    Mrv2Sampled,
    Mrv2TargetInput,
)
from specguard.adapters.engines.vllm.view import VllmView
from specguard.contracts import Boundary, Depth, Finding, Mode, current_config, report
from specguard.contracts.ops import arange_like, is_int

__all__ = ["Mrv2Batch", "Mrv2View", "drafts_of", "input_batch_of", "like", "sampled_of"]


@dataclass(frozen=True)
class Mrv2Batch:
    """One checked ``InputBatch``, for the later hand-overs of the step."""

    req_ids: tuple[str, ...]
    """Request ids in MRV2's sorted batch order (batch position ``i`` is ``req_ids[i]``)."""
    num_logits: np.ndarray
    """Logits rows per request: ``1 + num_draft_tokens``."""
    mid_prefill: np.ndarray
    """Requests whose prefill goes on after this step (they sample nothing)."""
    verifies: bool
    """Whether the step has drafts, so the rejection sampler runs (``(n, S + 1)`` rows)."""


class Mrv2View:
    """Validates what crosses Model Runner V2's hand-overs; one per runner.

    MRV2's scheduler lists only ``-1`` drafts (the real ones stay on the device), so
    there is nothing to follow from step to step at the scheduler's boundary: the view
    keeps no step tracker (``tracker`` is always None). ``scheduler_view`` checks the
    ``SchedulerOutput`` of each step in the batch's own order when :meth:`schedule` is
    handed one (default: a :class:`~specguard.adapters.engines.vllm.view.VllmView` of
    the same configuration).
    """

    tracker = None

    def __init__(self, *, mtp_k: int, vocab_size: int,
                 scheduler_view: VllmView | None = None) -> None:
        self.mtp_k = mtp_k
        self.vocab_size = vocab_size
        self.scheduler_view = scheduler_view or VllmView(mtp_k=mtp_k, vocab_size=vocab_size)

    def schedule(self, input_batch: Any, *, max_num_reqs: int | None = None,
                 scheduler_output: Any = None) -> Mrv2Batch:
        """Check MRV2's ``InputBatch`` (``GPUModelRunner.prepare_inputs``): spans, logits
        rows, request-state rows and draft counts from its host arrays; the embedded ids
        and the logits rows as deferred verdicts on a device. With ``scheduler_output``,
        the ``SchedulerOutput`` is checked first, in the batch's sorted order."""
        if scheduler_output is not None:
            self.scheduler_view.schedule(
                scheduler_output, req_ids=list(_list(getattr(input_batch, "req_ids", ()))))
        return input_batch_of(input_batch, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                              num_state_rows=max_num_reqs)[1]

    def verified(self, batch: Mrv2Batch, sampler_output: Any) -> Mrv2Sampled:
        """Check MRV2's ``SamplerOutput`` for the batch: counts, and the sampled ids the
        scheduler takes (the first ``num_sampled`` of each row; the rest is unset)."""
        return sampled_of(batch, sampler_output, mtp_k=self.mtp_k, vocab_size=self.vocab_size)

    def drafted(self, batch: Mrv2Batch, draft_tokens: Any, *,
                num_speculative_tokens: int) -> Mrv2Drafts:
        """Check the ``(num_reqs, S)`` drafts MRV2 stores on the device for the next step:
        the first ``K_t`` columns in the vocabulary, ``-1`` allowed after."""
        return drafts_of(batch, draft_tokens, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
                         num_speculative_tokens=num_speculative_tokens)


def input_batch_of(input_batch: Any, *, mtp_k: int, vocab_size: int,
                   num_state_rows: int | None = None) -> tuple[Mrv2TargetInput, Mrv2Batch]:
    """Check one ``InputBatch`` of ``GPUModelRunner.prepare_inputs``: its host arrays,
    then its device tensors."""
    req_ids = tuple(_list(getattr(input_batch, "req_ids", ())))
    num_reqs = len(req_ids)
    counts = _host(input_batch, "num_scheduled_tokens")
    drafts = getattr(input_batch, "num_draft_tokens_per_req", None)
    drafts = np.zeros(num_reqs, dtype=np.int64) if drafts is None else _vector(drafts)
    starts = _host(input_batch, "query_start_loc_np")[: num_reqs + 1]
    cu = _host(input_batch, "cu_num_logits_np")
    num_tokens = getattr(input_batch, "num_tokens", None)
    build(Mrv2InputBatch, {
        "mtp_k": mtp_k, "num_tokens": num_tokens, "num_state_rows": num_state_rows,
        "seq_ids": np.arange(num_reqs), "idx_mapping": _host(input_batch, "idx_mapping_np"),
        "num_scheduled_tokens": counts, "num_draft_tokens": drafts,
        "query_start_loc": starts, "cu_num_logits": cu}, names=req_ids)
    rows = getattr(input_batch, "logits_indices", None)
    ids = getattr(input_batch, "input_ids", None)
    if ids is not None and _sliceable(ids) and isinstance(num_tokens, int):
        ids = ids[:num_tokens]  # a view: the cuda-graph padding is not embedded as input
    device_starts = getattr(input_batch, "query_start_loc", None)
    if device_starts is not None and _sliceable(device_starts):
        device_starts = device_starts[: num_reqs + 1]
    target = build(Mrv2TargetInput, {
        "vocab_size": vocab_size, "num_tokens": num_tokens,
        "seq_ids": arange_like(ids, num_reqs) if _sliceable(ids) else np.arange(num_reqs),
        "input_ids": ids, "query_start_loc": device_starts, "logits_indices": rows,
        "tail_rows": _tail_rows(rows, starts, cu) if _value_rules_run() else rows},
        names=req_ids)
    computed = _host(input_batch, "num_computed_tokens_np")
    prefill = _host(input_batch, "prefill_len_np")
    mid = np.zeros(num_reqs, dtype=bool)
    if computed.shape == prefill.shape == counts.shape == (num_reqs,) \
            and holds_integers(computed, prefill, counts):
        mid = computed.astype(np.int64) + counts < prefill
    # What the next hand-overs read of the batch: only counts that are counts (warn mode
    # hands on what the contract refused above; its rows are then one per request).
    if not isinstance(drafts, np.ndarray) or drafts.shape != (num_reqs,) \
            or not holds_integers(drafts):
        drafts = np.zeros(num_reqs, dtype=np.int64)
    logits = drafts.astype(np.int64) + 1
    return target, Mrv2Batch(req_ids, logits, mid, bool(drafts.shape[0] and drafts.any()))


def sampled_of(batch: Mrv2Batch, sampler_output: Any, *, mtp_k: int,
               vocab_size: int) -> Mrv2Sampled:
    """Check a ``SamplerOutput``: ``sampled_token_ids``, ``num_sampled``, ``num_rejected``."""
    tokens = getattr(sampler_output, "sampled_token_ids", None)
    logits, mid = batch.num_logits, batch.mid_prefill
    if _value_rules_run():
        logits, mid = like(tokens, logits), like(tokens, mid)
    elif tokens is not None and _sliceable(tokens):  # shapes only: built where they live
        logits = arange_like(tokens, len(batch.req_ids))
        mid = logits < 0
    return build(Mrv2Sampled, {
        "vocab_size": vocab_size, "num_columns": mtp_k + 1 if batch.verifies else 1,
        "seq_ids": arange_like(tokens, len(batch.req_ids)) if tokens is not None
        else np.arange(len(batch.req_ids)),
        "sampled_token_ids": tokens,
        "num_sampled": getattr(sampler_output, "num_sampled", None),
        "num_rejected": getattr(sampler_output, "num_rejected", None),
        "num_logits": logits, "mid_prefill": mid},
        names=batch.req_ids)


def drafts_of(batch: Mrv2Batch, draft_tokens: Any, *, mtp_k: int, vocab_size: int,
              num_speculative_tokens: int) -> Mrv2Drafts:
    """Check the ``(num_reqs, S)`` drafts ``sample_tokens`` stores on the device.

    ``K_t`` outside ``[0, mtp_k]`` (or not an integer) is SG102 at every depth: the columns
    the next step reads would be unknown, so they are not guessed by clamping."""
    if not is_int(num_speculative_tokens) or not 0 <= int(num_speculative_tokens) <= mtp_k:
        report("Mrv2Drafts", [("SG102", Finding(
            f"num_speculative_tokens={num_speculative_tokens!r} is not a count in "
            f"[0, mtp_k={mtp_k}]",
            "num_speculative_tokens", expected=f"0 <= K_t <= {mtp_k}",
            actual=repr(num_speculative_tokens)))], boundary=Boundary.DRAFT_OUTPUT.value)
        num_speculative_tokens = mtp_k  # warn mode: the whole row is checked
    return build(Mrv2Drafts, {
        "mtp_k": mtp_k, "vocab_size": vocab_size,
        "num_speculative_tokens": num_speculative_tokens,
        "seq_ids": arange_like(draft_tokens, len(batch.req_ids))
        if _sliceable(draft_tokens) else np.arange(len(batch.req_ids)),
        "draft_tokens": draft_tokens},
        names=batch.req_ids)


def _tail_rows(rows: Any, starts: np.ndarray, cu: np.ndarray) -> Any:
    """``query_end - num_logits + j`` per logits row, on ``rows``' backend and device, or
    ``rows`` itself when the host arrays cannot say (the contract reports them)."""
    if rows is None or starts.ndim != 1 or cu.ndim != 1 or starts.shape != cu.shape \
            or cu.shape[0] < 1 or not holds_integers(starts, cu):
        return rows
    bounds: np.ndarray = cu.astype(np.int64)
    per_request: np.ndarray = bounds[1:] - bounds[:-1]
    total = int(cu[-1]) if cu.shape[0] else 0
    if (per_request < 0).any() or total != int(getattr(rows, "shape", (0,))[0]):
        return rows  # SG624 or the shape check speaks for it
    owner = np.repeat(np.arange(per_request.shape[0]), per_request)
    local = np.arange(total) - np.repeat(bounds[:-1], per_request)
    tail = starts[1:].astype(np.int64)[owner] - per_request[owner] + local
    return like(rows, tail)


def _host(obj: Any, name: str) -> np.ndarray:
    """A host array field of MRV2's ``InputBatch`` (a vector), or an empty one for the
    contract to report."""
    value = getattr(obj, name, None)
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return np.asarray(value)
    return np.zeros(0, dtype=np.int64)


def _vector(value: Any) -> Any:
    """``num_draft_tokens_per_req`` as an array when numpy reads it as one, else as it is
    (the contract reports it)."""
    try:
        array = np.asarray(value)
    except Exception:  # a hostile sequence: the contract says what it is
        return value
    return array if array.ndim == 1 else value


def _value_rules_run() -> bool:
    """Whether the value rules that compare device values with host arrays run (SG625,
    SG629, at the default depth and at full): only then are the host arrays copied to
    the device (a few values per request, ``non_blocking``: no wait on the device)."""
    config = current_config()
    return config.mode is not Mode.OFF and config.depth is not Depth.METADATA


def like(reference: Any, host: np.ndarray) -> Any:
    """``host`` on the backend and device of ``reference`` (integers in its dtype).

    For a device tensor this is a ``non_blocking`` host-to-device copy of a few values
    per request, which waits on no kernel; it is made only where value rules run.
    """
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(reference, torch.Tensor):
        return host
    dtype = reference.dtype if host.dtype.kind in "iu" else None
    return torch.from_numpy(np.ascontiguousarray(host)).to(
        reference.device, dtype=dtype, non_blocking=True)


def _sliceable(value: Any) -> bool:
    """A numpy array or a tensor of one dimension or more."""
    return hasattr(value, "dtype") and len(getattr(value, "shape", ())) >= 1


def _list(value: Any) -> Sequence[str]:
    return value if isinstance(value, list | tuple) else ()
