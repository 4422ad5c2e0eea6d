"""What ATOM's runner assumes about a batch beyond the contract: rules SG611-SG613.

ATOM's ``tokenIDProcessor.prepare_input_ids`` splits a decode batch into seqs that were
in the previous forward (*deferred*: their anchor and drafts exist only on the device)
and seqs that were not (*new*: read from the batch), and writes their spans as two
contiguous blocks. Attention metadata is built in batch order, so the two agree only
when the batch itself is laid out that way.
"""

from __future__ import annotations

import numpy as np

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

__all__ = ["AtomLayout"]


@boundary_object(Boundary.SCHEDULE, minimums={
    "mtp_k": 1, "num_spec_step": 0, "seqs_prefill": 0, "seqs_decode": 0})
class AtomLayout(BoundaryObject):
    """The layout facts of one ATOM batch that its runner relies on."""

    mtp_k: int
    """The drafter's configured ``mtp_k``."""
    num_spec_step: int
    """The batch's ``num_spec_step``."""
    seqs_prefill: int
    """The batch's ``total_seqs_num_prefill``."""
    seqs_decode: int
    """The batch's ``total_seqs_num_decode``."""
    previous_was_prefill: bool
    """Whether the previous forward was a prefill batch."""
    seq_ids: Index[Array, "num_seqs"]
    """The batch's ``req_ids``, in batch order."""
    prev_rows: Index[Array, "num_seqs"]
    """Each seq's row in the previous forward, or -1 (a *new* seq)."""
    blocks_by_origin: bool = True
    """Whether the runner writes deferred and new spans as two blocks (ATOM before
    ROCm/ATOM#1771); from #1771 on it addresses each span by its batch position."""


_LAYOUT = ("AtomLayout",)


@rule("SG611", "an ATOM batch is all prefill or all decode",
      boundary=Boundary.SCHEDULE, applies_to=_LAYOUT,
      fields={"seqs_prefill", "seqs_decode", "seq_ids"},
      bug="ATOM C1: mixed batches are a TODO; the [deferred | new] index math new_curr*q "
      "ignores the prefill token offset.")
def _homogeneous(layout: AtomLayout, values: ValueChecks) -> Finding | None:
    """ATOM's runner returns early for prefill batches and computes decode spans as
    ``position * (mtp_k + 1)``; a prefill chunk in a decode batch shifts every span after
    it, and phase counts that do not add up to the batch size size every buffer wrong."""
    size = layout.seq_ids.shape[0]
    if layout.seqs_prefill + layout.seqs_decode != size:
        return Finding(
            f"{layout.seqs_prefill} prefill + {layout.seqs_decode} decode seqs in a batch of "
            f"{size}", "seq_ids", expected=f"{size} seqs", actual=str(
                layout.seqs_prefill + layout.seqs_decode))
    if layout.seqs_prefill and layout.seqs_decode:
        return Finding(
            f"batch mixes {layout.seqs_prefill} prefill and {layout.seqs_decode} decode seqs",
            "seq_ids", position=layout.seqs_prefill, expected="one phase per batch")
    return None


@rule("SG612", "deferred seqs come first in an ATOM decode batch",
      boundary=Boundary.SCHEDULE, applies_to=_LAYOUT, fields={"prev_rows", "seqs_decode"},
      bug="ATOM prepare_input_ids L511-533: deferred spans written as one block at "
      "input_ids[0 : n_def*q] while positions follow batch order (silent misfeed, fixed "
      "upstream by per-request addressing in #1771).")
def _deferred_first(layout: AtomLayout, values: ValueChecks) -> Finding | None:
    """The runner writes the spans of deferred seqs first and new seqs after them; only
    after a prefill step may new seqs lead (``[new | deferred]``). Any other interleaving
    feeds each seq from the first misplaced one onwards another seq's tokens at its own
    positions: no error, wrong output.

    Applies to ATOM's runner before ROCm/ATOM#1771 (``80b5b02be``, ``26ba9913d``):
    ``AtomView(layout="pre-1771")``. From #1771 on each span is addressed by its own
    batch position, any order is valid, and the rule checks nothing."""
    if not layout.blocks_by_origin or layout.seqs_prefill or not layout.seqs_decode:
        return None
    deferred = layout.prev_rows >= 0
    count = int(deferred.sum())
    if deferred[:count].all():
        return None
    fresh = ~deferred
    if layout.previous_was_prefill and fresh[: fresh.shape[0] - count].all():
        return None
    first_new = int(np.argmax(fresh))
    misplaced = values.any_true(deferred & (np.arange(deferred.shape[0]) > first_new),
                                lambda i: Finding(
        f"was in the previous forward (row {host_value(layout.prev_rows, i)}) but comes after new "
        f"seq {host_value(layout.seq_ids, first_new)} at position {first_new}", "prev_rows",
        position=i, expected="deferred seqs first, then new ones"))
    return misplaced


@rule("SG613", "num_spec_step equals the drafter's mtp_k on decode batches",
      boundary=Boundary.SCHEDULE, applies_to=_LAYOUT,
      fields={"num_spec_step", "mtp_k", "seqs_decode"},
      bug="ATOM C3: the MLA builder uses drafter.mtp_k+1 while MHA/V4 builders use "
      "batch.num_spec_step+1.")
def _spec_steps(layout: AtomLayout, values: ValueChecks) -> Finding | None:
    """Some attention builders size decode spans from the batch and others from the
    drafter; when the two disagree the spans, positions and CUDA-graph keys disagree."""
    if layout.seqs_decode and layout.num_spec_step != layout.mtp_k:
        return Finding(f"decode batch has num_spec_step={layout.num_spec_step}", "num_spec_step",
                       expected=f"mtp_k={layout.mtp_k}", actual=str(layout.num_spec_step))
    return None
