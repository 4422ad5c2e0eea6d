"""vLLM Model Runner V2's hand-overs as boundary objects, with rules SG623-SG631.

Model Runner V2 (``vllm/v1/worker/gpu/``, vLLM 0.33) reads the same ``SchedulerOutput``
as V1 (:meth:`~specguard.adapters.engines.vllm.view.VllmView.schedule` checks it), then keeps every
request's state on the device and builds the step's ``InputBatch`` with triton kernels.
Its drafts never leave the device: the scheduler gets ``[-1] * K`` per request, and
``combine_sampled_and_draft_tokens`` copies ``req_states.draft_tokens`` into the tail of
each request's span. What the contracts can see without a sync is the ``InputBatch``'s
host arrays (``*_np``), the shapes of its device tensors, and device verdicts read later.

Four objects, one per hand-over and backend (an object's arrays share one device):

* :class:`Mrv2InputBatch`: the host arrays of ``prepare_inputs``' output, how the step is
  cut into spans and logits rows;
* :class:`Mrv2TargetInput`: its device tensors, what the target model embeds and where
  its logits are read;
* :class:`Mrv2Sampled`: the rejection sampler's ``(num_reqs, S + 1)`` rows with
  ``num_sampled`` and ``num_rejected``; unlike V1 the rows are not ``-1`` padded (MRV2
  allocates them with ``new_empty``), so only the first ``num_sampled`` columns mean
  anything;
* :class:`Mrv2Drafts`: the speculator's ``(num_reqs, S)`` proposals as stored in
  ``req_states.draft_tokens``, ``-1`` past the step's ``K_t`` (dynamic K).

What MRV2 asserts itself, and is therefore not a rule here: ``num_scheduled_tokens >=
num_draft_tokens + 1`` per request (``prepare_inputs``; SG621 checks it earlier, at the
scheduler's output). What is legal in MRV2 and raises nothing: draft slots of a row still
inside its prefill (the fully cached prompt's ``[-1] * k``, a first chunk with drafts):
the kernel fills them from the request's zeroed device row or leaves prompt tokens
there, and ``gather_draft_sampled`` turns them into ``-1`` so that the rejection sampler
rejects them; nothing embeds a ``-1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts import (
    Array,
    Bool,
    Boundary,
    BoundaryObject,
    Depth,
    Finding,
    Index,
    ValueChecks,
    boundary_object,
    rule,
)
from specguard.contracts.ops import (
    arange_like,
    host_value,
    number_text,
    row_col,
    unique_non_negative,
    value_text,
)

__all__ = ["Mrv2Drafts", "Mrv2InputBatch", "Mrv2Sampled", "Mrv2TargetInput"]


@boundary_object(Boundary.SCHEDULE, minimums={
    "mtp_k": 0, "num_tokens": 1, "num_state_rows": 1})
class Mrv2InputBatch(BoundaryObject):
    """The host arrays of one ``InputBatch`` of Model Runner V2, per request in its sorted
    batch order: how ``prepare_inputs`` cuts the step into spans and logits rows."""

    mtp_k: int
    """``num_speculative_steps``: the width of each request's device draft row."""
    num_tokens: int
    """``num_tokens``: the scheduled tokens, without cuda-graph padding."""
    num_state_rows: int | None
    """``max_num_reqs``, the rows of the request-state tensors, when known."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions (messages name the request ids)."""
    idx_mapping: Index[Array, "num_seqs"]
    """``idx_mapping_np``: the request-state row of each batch position."""
    num_scheduled_tokens: Index[Array, "num_seqs"]
    """Scheduled tokens per request, drafts included."""
    num_draft_tokens: Index[Array, "num_seqs"]
    """``num_draft_tokens_per_req`` (zeros when None): draft slots per request."""
    query_start_loc: Index[Array, "num_seqs+1"]
    """``query_start_loc_np`` without its cuda-graph padding rows."""
    cu_num_logits: Index[Array, "num_seqs+1"]
    """``cu_num_logits_np``: where each request's logits rows start."""


@boundary_object(Boundary.MODEL_INPUT, minimums={"vocab_size": 1, "num_tokens": 1})
class Mrv2TargetInput(BoundaryObject):
    """The device side of one MRV2 ``InputBatch``: what the target model embeds and where
    its logits are read. Values on a device are checked as deferred verdicts."""

    vocab_size: int
    """Rows of the target model's embedding table."""
    num_tokens: int
    """``num_tokens``: the scheduled tokens, without cuda-graph padding."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions."""
    input_ids: Index[Array, "num_tokens"]
    """The ids the target model embeds (``input_ids[:num_tokens]``)."""
    query_start_loc: Index[Array, "num_seqs+1"]
    """``query_start_loc[:num_reqs + 1]``: each request's span."""
    logits_indices: Index[Array, "num_logits"]
    """Flat token index of each logits row."""
    tail_rows: Index[Array, "num_logits"]
    """The rows MRV2 means to read, from the host arrays, on ``logits_indices``' device:
    ``query_end - num_logits + j`` for the ``j``-th row of each request (below full
    depth, where SG625 does not run, the view passes ``logits_indices`` itself)."""

    def _sg_token_position(self, token: int) -> int | None:
        starts = self.query_start_loc
        if not isinstance(starts, np.ndarray) or starts.ndim != 1:
            return None  # on a device, locating the request would need a sync
        position = int(np.searchsorted(starts, token, side="right")) - 1
        return position if 0 <= position < starts.shape[0] - 1 else None


@boundary_object(Boundary.VERIFY, minimums={"vocab_size": 1, "num_columns": 1})
class Mrv2Sampled(BoundaryObject):
    """The sampler's output of one MRV2 step: ``SamplerOutput`` of the rejection sampler
    (``(num_reqs, S + 1)``) or of the plain sampler (``(num_reqs, 1)``)."""

    vocab_size: int
    """Vocabulary size: every sampled token the scheduler takes is in ``[0, vocab)``."""
    num_columns: int
    """``S + 1`` when the step verified drafts, else 1."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions."""
    sampled_token_ids: Index[Array, "num_seqs num_columns"]
    """Per request, ``num_sampled`` tokens then whatever the buffer held."""
    num_sampled: Index[Array, "num_seqs"]
    """Tokens sampled per request: accepted drafts plus one, 0 for a prefill chunk."""
    num_rejected: Index[Array, "num_seqs"]
    """Logits rows rejected per request: ``num_logits - num_sampled``, 0 for a chunk."""
    num_logits: Index[Array, "num_seqs"]
    """Logits rows of each request this step (``diff(cu_num_logits_np)``, on the rows'
    device)."""
    mid_prefill: Bool[Array, "num_seqs"]
    """Whether the request's prefill goes on after this step (from the host arrays, on
    the rows' device)."""


@boundary_object(Boundary.DRAFT_OUTPUT, minimums={"mtp_k": 1, "vocab_size": 1})
class Mrv2Drafts(BoundaryObject):
    """The speculator's proposals as MRV2 stores them in ``req_states.draft_tokens``."""

    mtp_k: int
    """``num_speculative_steps``: columns of each row."""
    vocab_size: int
    """Rows of the target's embedding table: the next step embeds these ids."""
    num_speculative_tokens: int
    """``K_t``: the columns proposed this step (the rest are ``-1``)."""
    seq_ids: Index[Array, "num_seqs"]
    """Batch positions."""
    draft_tokens: Index[Array, "num_seqs mtp_k"]
    """Proposals, ``-1`` past ``K_t``."""


_BATCH = ("Mrv2InputBatch",)
_TARGET = ("Mrv2TargetInput",)


@rule("SG623", "query_start_loc is the running sum of the scheduled tokens",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"query_start_loc", "num_scheduled_tokens", "num_tokens"},
      bug="vLLM MRV2: every kernel of prepare_inputs cuts spans from query_start_loc; a "
      "span that disagrees with the request's count reads another request's tokens.")
def _spans(batch: Mrv2InputBatch, values: ValueChecks) -> Finding | None:
    """``prepare_inputs`` writes ``query_start_loc_np[1:] = cumsum(num_scheduled_tokens)``
    and copies it to the device; ``prepare_prefill_inputs``, ``prepare_pos_seq_lens`` and
    ``combine_sampled_and_draft_tokens`` all cut each request's span from it. It starts at
    0, each span is the request's count, and it ends at ``num_tokens``."""
    starts, counts = batch.query_start_loc, batch.num_scheduled_tokens
    found = values.any_true(starts[:1] != 0, lambda _: Finding(
        f"the first span starts at {host_value(starts, 0)}", "query_start_loc",
        expected="0"))
    found = found or values.any_true((starts[1:] - starts[:-1]) != counts, lambda i: Finding(
        f"span of {_int(starts, i + 1) - _int(starts, i)} tokens for "
        f"{host_value(counts, i)} scheduled", "query_start_loc", position=i,
        expected=f"{host_value(counts, i)} tokens"))
    if found:
        return found
    end = host_value(starts, starts.shape[0] - 1)
    if end is not None and end != batch.num_tokens:
        return Finding(f"spans end at {end}", "query_start_loc",
                       expected=f"num_tokens={batch.num_tokens}")
    return None


@rule("SG624", "cu_num_logits gives each request one row plus one per draft",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"cu_num_logits", "num_draft_tokens"},
      bug="vLLM MRV2: the rejection sampler reads request i's drafts and target logits "
      "at rows cu_num_logits[i]..cu_num_logits[i+1]; a wrong count verifies one "
      "request's drafts against its neighbour's logits.")
def _logits_counts(batch: Mrv2InputBatch, values: ValueChecks) -> Finding | None:
    """``prepare_inputs`` sets ``cu_num_logits = cumsum(num_draft_tokens + 1)`` (one
    bonus row per request, ``num_new_sampled_tokens_per_step``); the combine kernel, the
    expanded index mapping, the rejection sampler and ``get_num_sampled_and_rejected``
    all take each request's rows from it."""
    cu, drafts = batch.cu_num_logits, batch.num_draft_tokens
    found = values.any_true(cu[:1] != 0, lambda _: Finding(
        f"the first request's logits start at row {host_value(cu, 0)}", "cu_num_logits",
        expected="0"))
    return found or values.any_true((cu[1:] - cu[:-1]) != drafts + 1, lambda i: Finding(
        f"{_int(cu, i + 1) - _int(cu, i)} logits rows for {host_value(drafts, i)} drafts",
        "cu_num_logits", position=i, expected=f"1 + {host_value(drafts, i)} rows"))


@rule("SG625", "logits rows are the tail of each request's span",
      boundary=Boundary.MODEL_INPUT, applies_to=_TARGET,
      fields={"logits_indices", "tail_rows"},
      bug="vLLM I1: logits_indices start at query_end - num_logits; a row elsewhere "
      "samples from another position or another request's hidden state.")
def _logits_rows(batch: Mrv2TargetInput, values: ValueChecks) -> Finding | None:
    """``combine_sampled_and_draft_tokens`` writes request ``i``'s logits rows as
    ``query_end - num_logits + j``: the last sampled token and the drafts, which it writes
    at the same tail. The rows are a device tensor; the verdict is deferred."""
    rows, tail = batch.logits_indices, batch.tail_rows
    return values.any_true(rows != tail, lambda flat: Finding(
        f"logits row {flat} reads token{number_text(rows, flat)}", "logits_indices",
        token=host_value(tail, flat), expected=f"token {host_value(tail, flat)}"))


@rule("SG626", "each batch position has its own request-state row",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"idx_mapping", "num_state_rows"},
      bug="vLLM MRV2: every kernel reads and post_update writes request state at "
      "idx_mapping[i]; two positions on one row mix two requests' tokens and counts.")
def _state_rows(batch: Mrv2InputBatch, values: ValueChecks) -> Finding | None:
    """``idx_mapping`` maps batch positions to rows of ``RequestState`` (token history,
    computed counts, the device draft row, the last sampled token). A row outside the
    tensors is an illegal access, and a row shared by two positions makes ``post_update``
    write both requests' results into one."""
    rows, limit = batch.idx_mapping, batch.num_state_rows
    hi = int(limit) if limit is not None else 2**62
    found = values.outside(rows, 0, hi, lambda i: Finding(
        f"request-state row{value_text(rows, i)}", "idx_mapping", position=i,
        expected=f"0 <= row < max_num_reqs={limit}" if limit is not None else "row >= 0"))
    if found or rows.shape[0] < 2:
        return found
    if isinstance(rows, np.ndarray) and unique_non_negative(rows):
        return None  # the common answer, without the sort that locates a repeat
    return values.any_true(_repeated(rows), lambda i: Finding(
        f"request-state row{number_text(rows, i)} is another position's row too",
        "idx_mapping", position=i, expected="one row per request"))


@rule("SG627", "no request is scheduled more drafts than its device row holds",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"num_draft_tokens", "mtp_k"},
      bug="vLLM MRV2: combine_sampled_and_draft_tokens reads draft_tokens[row, :n] with "
      "stride num_speculative_steps; n past it reads the next request's drafts.")
def _draft_counts(batch: Mrv2InputBatch, values: ValueChecks) -> Finding | None:
    """Each request's drafts live in one row of ``req_states.draft_tokens``, of width
    ``num_speculative_steps``; the combine kernel copies the first ``n`` of them into
    the span, masked only by ``n``."""
    drafts = batch.num_draft_tokens
    return values.outside(drafts, 0, int(batch.mtp_k) + 1, lambda i: Finding(
        f"{host_value(drafts, i)} draft slots", "num_draft_tokens", position=i,
        expected=f"0..num_speculative_steps={batch.mtp_k}"))


@rule("SG628", "no sentinel reaches the target's embedding (MRV2 input_ids)",
      boundary=Boundary.MODEL_INPUT, applies_to=_TARGET, fields={"input_ids", "vocab_size"},
      bug="vLLM #26231 family: a -1 draft reaching an embedding (device assert at TP=1, "
      "silent zero embedding at TP>1). In MRV2 the drafts are copied from the device "
      "row, whose columns past K_t are -1.",
      depth=Depth.ESSENTIAL)
def _embedded(batch: Mrv2TargetInput, values: ValueChecks) -> Finding | None:
    """SG301 for the stream Model Runner V2 embeds, checked where it is built: MRV2 has no
    clamp before the embedding (V1's ``_preprocess`` has one), so a ``-1`` copied from a
    device draft row (dynamic K leaves ``-1`` past ``K_t``) or a stale sampled token
    reaches ``embed_tokens``. One device reduction, a deferred verdict: no sync."""
    ids = batch.input_ids
    return values.outside(ids, 0, batch.vocab_size, lambda token: Finding(
        f"input id{value_text(ids, token)}", "input_ids", token=token,
        expected=f"0 <= id < vocab_size={batch.vocab_size}"))


_SAMPLED = ("Mrv2Sampled",)


@rule("SG629", "each request samples its accepted drafts plus one, none mid-prefill",
      boundary=Boundary.VERIFY, applies_to=_SAMPLED,
      fields={"num_sampled", "num_rejected", "num_logits", "mid_prefill"},
      bug="vLLM MRV2: post_update advances num_computed_tokens by query_len - "
      "num_rejected and appends num_sampled tokens; a wrong count desynchronises the "
      "device state from the scheduler's.")
def _counts(out: Mrv2Sampled, values: ValueChecks) -> Finding | None:
    """``get_num_sampled_and_rejected``: a request whose prefill goes on samples nothing
    and rejects nothing; any other samples ``1..num_logits`` tokens and rejects the rest
    of its logits rows."""
    sampled, rejected = out.num_sampled, out.num_rejected
    mid, rows = out.mid_prefill, out.num_logits
    low = ~mid & (sampled < 1)
    bad = (mid & (sampled != 0)) | low | (sampled > rows)
    found = values.any_true(bad, lambda i: Finding(
        f"{host_value(sampled, i)} tokens sampled from {host_value(out.num_logits, i)} "
        "logits rows", "num_sampled", position=i,
        expected="0 (prefill goes on)" if host_value(mid, i)
        else f"1..{host_value(out.num_logits, i)}"))
    if found:
        return found
    wrong = rejected != (rows - sampled) * (~mid)
    return values.any_true(wrong, lambda i: Finding(
        f"{host_value(rejected, i)} rows rejected", "num_rejected", position=i,
        expected="num_logits - num_sampled (0 mid-prefill)"))


@rule("SG630", "the tokens the scheduler takes are in the vocabulary",
      boundary=Boundary.VERIFY, applies_to=_SAMPLED,
      fields={"sampled_token_ids", "num_sampled", "vocab_size"},
      bug="vLLM MRV2: AsyncOutput keeps sampled_token_ids[i, :num_sampled[i]] as the "
      "request's output and post_update stores the last as the next step's input.")
def _sampled_ids(out: Mrv2Sampled, values: ValueChecks) -> Finding | None:
    """Only the first ``num_sampled`` columns are tokens: MRV2 allocates the rows with
    ``new_empty`` and never pads them, so the rest is never read (no ``-1`` layout as in
    V1). Those tokens become output and, the last of them, the next step's input id."""
    tokens, width = out.sampled_token_ids, int(out.num_columns)
    columns = arange_like(tokens, width)
    taken = columns[None, :] < out.num_sampled[:, None]
    bad = taken & ((tokens < 0) | (tokens >= out.vocab_size))

    def explain(flat: int) -> Finding:
        row, col = row_col(flat, width)
        return Finding(f"column {col}{value_text(tokens, flat)}", "sampled_token_ids",
                       position=row, expected=f"0 <= id < vocab_size={out.vocab_size}")

    return values.any_true(bad, explain)


@rule("SG631", "the drafts the next step may read are in the vocabulary",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=("Mrv2Drafts",),
      fields={"draft_tokens", "num_speculative_tokens", "vocab_size"},
      bug="vLLM MRV2: combine_sampled_and_draft_tokens copies the device draft row into "
      "the next step's input_ids with no clamp.")
def _drafts(out: Mrv2Drafts, values: ValueChecks) -> Finding | None:
    """The first ``K_t`` columns are proposals the next step embeds; ``sample_tokens``
    sets the columns past ``K_t`` to ``-1`` (the scheduler never schedules them)."""
    tokens, width = out.draft_tokens, int(out.mtp_k)
    proposed = min(max(int(out.num_speculative_tokens), 0), width)
    columns = arange_like(tokens, width)
    bad = (columns[None, :] < proposed) & ((tokens < 0) | (tokens >= out.vocab_size))

    def explain(flat: int) -> Finding:
        row, col = row_col(flat, width)
        return Finding(f"draft {col}{value_text(tokens, flat)}", "draft_tokens",
                       position=row, expected=f"0 <= id < vocab_size={out.vocab_size} in "
                       f"the first K_t={proposed} columns")

    return values.any_true(bad, explain)


def _repeated(rows: Any) -> Any:
    """Per position, whether an earlier position (in sorted order) holds the same row:
    one sort on the array's own backend and device."""
    if isinstance(rows, np.ndarray):
        order = np.argsort(rows, kind="stable")
        repeated = np.zeros(rows.shape[0], dtype=bool)
        repeated[order[1:]] = rows[order[1:]] == rows[order[:-1]]
        return repeated
    ordered, order = rows.sort(stable=True)
    same = ordered[1:] == ordered[:-1]
    return (ordered < ordered).index_put((order[1:],), same)


def _int(array: Any, index: int) -> int:
    value = host_value(array, index)
    return int(value) if value is not None else 0
