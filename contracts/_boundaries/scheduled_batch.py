"""``ScheduledBatch``: what the scheduler hands the runner for one step."""

from __future__ import annotations

from typing import Any

import numpy as np
from specguard.contracts._boundaries._ops import (
    ceil_div,
    clip_columns,
    host_value,
    row_col,
    row_entries,
    value_text,
    within_columns,
)
from specguard.contracts._boundaries._types import Array, Bool, Index
from specguard.contracts._core._arrays import array_kind, dtype_name, is_host
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import Values
from specguard.contracts._core._violation import Finding

__all__ = ["ScheduledBatch"]


@boundary_object(
    Boundary.SCHEDULE,
    minimums={"mtp_k": 1, "vocab_size": 1, "block_size": 1, "num_decode": 0, "num_tokens": 0},
)
class ScheduledBatch(BoundaryObject):
    """One step's batch, as the scheduler hands it to the runner.

    Every per-seq array is aligned with ``seq_ids`` (batch order). Decode seqs are
    scheduled ``mtp_k + 1`` tokens (the anchor and ``mtp_k`` drafts) and own one draft
    row each, in batch order, whether or not they have drafts yet.
    """

    mtp_k: int
    """Draft tokens per decode seq (``num_speculative_tokens``)."""
    vocab_size: int
    """Size of the target model's vocabulary; every embedded id is in ``[0, vocab_size)``."""
    block_size: int
    """Tokens per KV-cache block."""
    num_decode: int
    """How many seqs of the batch are in the decode phase."""
    num_tokens: int
    """Total scheduled tokens: the length of the flat token stream."""
    seq_ids: Index[Array, "num_seqs"]
    """Sequence ids in batch order; unique and non-negative."""
    is_decode: Bool[Array, "num_seqs"]
    """Phase of each seq: True for decode, False for (chunked) prefill."""
    num_scheduled_tokens: Index[Array, "num_seqs"]
    """Tokens scheduled per seq this step: a prefill chunk, or ``mtp_k + 1`` for decode."""
    context_lens: Index[Array, "num_seqs"]
    """Tokens in each seq's KV context after this step, scheduled tokens included."""
    block_tables: Index[Array, "num_seqs max_blocks"]
    """KV-cache block ids per seq, padded with -1; the first entry is never padding."""
    token_ids: Index[Array, "num_tokens"]
    """The flat scheduled token ids in batch order; each seq's span is contiguous."""
    draft_token_ids: Index[Array, "num_decode mtp_k"]
    """One draft row per decode seq, in batch order; placeholders are valid ids."""
    num_drafts: Index[Array, "num_decode"]
    """Real drafts in each row, in ``[0, mtp_k]``; the rest of the row is placeholder."""
    state_slots: Index[Array, "num_seqs"] | None = None
    """Per-request state slot (hybrid/linear-attention models), when the model has one."""
    draft_seq_ids: Index[Array, "num_decode"] | None = None
    """The seq each draft row was made for (``DraftTokens.seq_ids``), when known: row
    ``i`` must belong to the ``i``-th decode seq in batch order."""
    draft_placeholder: int | None = None
    """A draft value the runner overwrites before embedding (e.g. vLLM's async ``-1``)."""

    def decode_positions(self) -> Any:
        """Batch positions of the decode seqs, in batch order (reads ``is_decode``)."""
        if isinstance(self.is_decode, np.ndarray):
            return np.flatnonzero(self.is_decode)
        return self.is_decode.nonzero().reshape(-1)

    def _host_decode_positions(self) -> np.ndarray | None:
        """Decode positions when ``is_decode`` is a host bool vector, else None (no sync)."""
        flags: Any = self.is_decode
        if array_kind(flags) is None or not is_host(flags):
            return None
        if flags.ndim != 1 or dtype_name(flags) != "bool":
            return None
        return np.flatnonzero(np.asarray(flags))

    def _sg_locate_missing(self, dim: str, index: int) -> tuple[int, int | None, str] | None:
        """Where the first seq without an entry sits, for short per-seq or draft arrays."""
        if dim == "num_seqs":
            return index, host_value(self.seq_ids, index), "that seq has no entry"
        if dim != "num_decode":
            return None
        positions = self._host_decode_positions()
        if positions is None:
            return None
        row, detail = self._missing_draft_row(index, positions.shape[0])
        if row >= positions.shape[0]:
            return None
        position = int(positions[row])
        return position, host_value(self.seq_ids, position), detail

    def _missing_draft_row(self, rows: int, num_decode: int) -> tuple[int, str]:
        """The decode row (in decode order) of the seq whose entry is missing.

        A compacted draft array drops the rows of the seqs without drafts, so the row
        that is missing is not the last one. When ``num_drafts`` still holds one count
        per decode seq, the seqs it marks draft-less are exactly the missing rows;
        otherwise the first decode seq past the end of the array is named.
        """
        counts: Any = self.num_drafts
        if (
            array_kind(counts) is not None
            and is_host(counts)
            and counts.ndim == 1
            and counts.shape[0] == num_decode
        ):
            draftless = np.flatnonzero(np.asarray(counts) == 0)
            if draftless.shape[0] == num_decode - rows:
                return int(draftless[0]), "decode seq has no drafts and no draft row"
        return rows, "decode seq without a draft row"

    def _sg_token_position(self, token: int) -> int | None:
        counts: Any = self.num_scheduled_tokens
        if array_kind(counts) is None or not is_host(counts) or counts.ndim != 1:
            return None
        counts = np.asarray(counts)
        position = int(np.searchsorted(np.cumsum(counts), token, side="right"))
        return position if position < counts.shape[0] else None

    def _sg_decode_row_position(self, row: int) -> int | None:
        positions = self._host_decode_positions()
        if positions is None or not 0 <= row < positions.shape[0]:
            return None
        return int(positions[row])


_BATCH = ("ScheduledBatch",)


@rule("SG103", "decode seqs are scheduled exactly mtp_k+1 tokens",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"is_decode", "num_scheduled_tokens", "mtp_k"},
      bug="ATOM pre-#219: a draft-less seq yielded 1 token where mtp_k+1 slots were reserved.")
def _decode_width(batch: ScheduledBatch, values: Values) -> Finding | None:
    """Every decode seq owns a contiguous span of mtp_k+1 tokens: its anchor and its
    drafts. The runner reshapes the decode tokens to (num_decode, mtp_k+1), positions are
    tiled from it, and CUDA graphs are keyed by it; one seq with another count shifts
    every later span."""
    width = batch.mtp_k + 1
    bad = batch.is_decode & (batch.num_scheduled_tokens != width)
    return values.any_true(bad, lambda i: Finding(
        f"decode seq scheduled {host_value(batch.num_scheduled_tokens, i)} tokens",
        "num_scheduled_tokens", position=i, expected=f"mtp_k+1={width}"))


@rule("SG106", "num_tokens is the sum of the per-seq counts",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"num_scheduled_tokens", "num_tokens"},
      bug="vLLM SchedulerOutput: total_num_scheduled_tokens == sum(...) stated only in a comment.")
def _token_total(batch: ScheduledBatch, values: Values) -> Finding | None:
    """The runner allocates and slices its flat buffers by the total, and each seq's
    span by the per-seq counts; when they disagree the last spans read stale tokens or
    run past the end."""
    total = batch.num_scheduled_tokens.sum()
    return values.any_true(total != batch.num_tokens, lambda _: Finding(
        "sum(num_scheduled_tokens) differs from num_tokens", "num_scheduled_tokens",
        expected=f"num_tokens={batch.num_tokens}", actual=str(host_value(total, 0))))


@rule("SG107", "phases agree with num_decode; prefill seqs schedule at least one token",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"is_decode", "num_decode", "num_scheduled_tokens"},
      bug="ATOM C1/C15: partial prefills scheduled into decode batches.")
def _phases(batch: ScheduledBatch, values: Values) -> Finding | None:
    """``num_decode`` sizes the draft rows and the verifier's output; it must count the
    seqs flagged decode. A prefill seq scheduled no tokens has no span and breaks the
    cumulative offsets of every seq after it."""
    flags = batch.is_decode
    # On the host count_nonzero is a plain C loop, where sum() adds the flags as int64.
    count = np.intp(np.count_nonzero(flags)) if isinstance(flags, np.ndarray) else flags.sum()
    found = values.any_true(count != batch.num_decode, lambda _: Finding(
        "is_decode marks a different number of decode seqs", "is_decode",
        expected=f"num_decode={batch.num_decode}", actual=str(host_value(count, 0))))
    if found or (isinstance(flags, np.ndarray) and count == flags.shape[0]):
        return found  # an all-decode batch has no prefill seq to check
    empty = ~flags & (batch.num_scheduled_tokens < 1)
    return values.any_true(empty, lambda i: Finding(
        "prefill seq scheduled no tokens", "num_scheduled_tokens", position=i, expected=">= 1"))


@rule("SG108", "draft token ids are valid vocabulary ids",
      boundary=Boundary.SCHEDULE, applies_to=("ScheduledBatch", "DraftTokens", "DrafterOutput"),
      fields={"draft_token_ids", "vocab_size", "draft_placeholder"},
      bug="vLLM #37629/#40768: stale -1 draft placeholders reaching F.embedding.")
def _draft_ids(obj: Any, values: Values) -> Finding | None:
    """Draft slots are fed to the target model and read back as the drafts to verify.
    A placeholder for a seq without drafts must itself be a valid id (0, or the seq's own
    token); only a declared placeholder the runner overwrites may fall outside."""
    drafts = obj.draft_token_ids
    placeholder = getattr(obj, "draft_placeholder", None)

    def explain(i: int) -> Finding:
        row, col = row_col(i, drafts.shape[1])  # the rows' own width: mtp_k may be broken
        locate = getattr(obj, "_sg_decode_row_position", None)
        position = locate(row) if locate else row
        return Finding(f"draft {col} of row {row}{value_text(drafts, i)}", "draft_token_ids",
                       position=position, expected=f"0 <= id < vocab_size={obj.vocab_size}")

    if placeholder is None:
        return values.outside(drafts, 0, obj.vocab_size, explain)
    bad = (drafts != placeholder) & ((drafts < 0) | (drafts >= obj.vocab_size))
    return values.any_true(bad, explain)


@rule("SG109", "real-draft counts are within [0, mtp_k]",
      boundary=Boundary.SCHEDULE, applies_to=("ScheduledBatch", "DraftTokens"),
      fields={"num_drafts", "mtp_k"},
      bug="ATOM C16: SpecStats KeyError when an accepted length falls outside [1, k+1].")
def _draft_counts(obj: Any, values: Values) -> Finding | None:
    """A row holds at most mtp_k real drafts; the count tells the verifier how many slots
    may be accepted and how many are placeholders."""
    counts = obj.num_drafts
    locate = getattr(obj, "_sg_decode_row_position", None)
    return values.outside(counts, 0, obj.mtp_k + 1, lambda i: Finding(
        f"row {i} claims {host_value(counts, i)} drafts", "num_drafts",
        position=locate(i) if locate else i, expected=f"0..mtp_k={obj.mtp_k}"))


@rule("SG110", "block tables are not empty and cover the context",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"block_tables", "context_lens", "block_size"},
      bug="ATOM C11/C12: empty block tables filtered out; context not covered by the table.")
def _block_tables(batch: ScheduledBatch, values: Values) -> Finding | None:
    """Attention builds slot mappings from the block table truncated to
    cdiv(context_len, block_size) blocks; a missing block points the kernel at padding.
    Checked in O(num_seqs): the first and the last needed block of each seq."""
    tables, lens = batch.block_tables, batch.context_lens
    num_seqs, max_blocks = tables.shape[0], tables.shape[1]
    needed = ceil_div(lens, batch.block_size)
    last = needed - 1
    # Every seq normally needs 1..max_blocks blocks: when one maximum shows that on the
    # host, no seq is short and no column needs clipping.
    if not within_columns(last, max_blocks):
        found = values.above(needed, max_blocks, lambda i: Finding(
            f"context needs {host_value(needed, i)} blocks, table has {max_blocks} columns",
            "block_tables", position=i))
        if found or num_seqs == 0:
            return found
        if max_blocks == 0:
            return Finding("block tables have no columns", "block_tables", position=0)
        last = clip_columns(last, max_blocks)
    # One strided column and one gather, never the padded table; for integers,
    # a | b is negative exactly when a or b is.
    first_or_last = tables[:, 0] | row_entries(tables, last)
    return values.below(first_or_last, 0, lambda i: Finding(
        "block table is empty or ends before the context does", "block_tables", position=i))


@rule("SG111", "context lengths cover the scheduled tokens",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"context_lens", "num_scheduled_tokens"},
      bug="ATOM C11: decode context_lens minus num_rejected must stay >= mtp_k+1.")
def _context(batch: ScheduledBatch, values: Values) -> Finding | None:
    """Positions are computed as context_len - scheduled + arange(scheduled); a context
    shorter than the scheduled tokens yields negative positions."""
    bad = batch.context_lens < batch.num_scheduled_tokens
    return values.any_true(bad, lambda i: Finding(
        f"context length {host_value(batch.context_lens, i)} is shorter than the "
        f"{host_value(batch.num_scheduled_tokens, i)} scheduled tokens", "context_lens",
        position=i))


@rule("SG112", "scheduled token ids are valid vocabulary ids",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"token_ids", "vocab_size"},
      bug="vLLM #47029: -1 padding placeholders from PD first decode reaching embeddings.")
def _token_ids(batch: ScheduledBatch, values: Values) -> Finding | None:
    """Scheduled tokens are embedded by the target model; a sentinel here is a
    device-side assert at TP=1 and a silent zero embedding at TP>1."""
    tokens = batch.token_ids
    return values.outside(tokens, 0, batch.vocab_size, lambda i: Finding(
        f"token id{value_text(tokens, i)}", "token_ids", token=i,
        expected=f"0 <= id < vocab_size={batch.vocab_size}"))


@rule("SG113", "state slots are real slots",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH, fields={"state_slots"},
      bug="ATOM C13: DeepSeek-V4 falling back to slot 0 for every seq when the list is short.")
def _state_slots(batch: ScheduledBatch, values: Values) -> Finding | None:
    """Hybrid models read a per-request state slot by batch position; a negative slot
    aliases another request's recurrent state."""
    slots = batch.state_slots
    if slots is None:
        return None
    return values.below(slots, 0, lambda i: Finding(
        f"state slot{value_text(slots, i)}", "state_slots", position=i, expected=">= 0"))




@rule("SG115", "draft row i belongs to decode seq i",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"draft_seq_ids", "seq_ids", "is_decode"}, depth=Depth.ESSENTIAL,
      bug="ATOM seed family: draft rows keyed by the wrong anchor; right count, rows "
      "permuted between seqs, so each seq verifies another seq's drafts.")
def _draft_owners(batch: ScheduledBatch, values: Values) -> Finding | None:
    """The runner reads draft row ``i`` for the ``i``-th decode seq in batch order. Rows
    with the right count but in another order pass every shape check, and each seq then
    verifies a neighbour's drafts: acceptance collapses, or a wrong token is accepted.
    When the batch says which seq each row was made for, the order is checked at the
    default depth: one gather and one comparison, a deferred verdict on a device."""
    owners = batch.draft_seq_ids
    if owners is None:
        return None
    flags, ids = batch.is_decode, batch.seq_ids
    if isinstance(flags, np.ndarray):
        decoding = int(np.count_nonzero(flags))
        if decoding != owners.shape[0]:
            return Finding(
                f"is_decode marks {decoding} decode seqs for {owners.shape[0]} draft rows",
                "draft_seq_ids", expected=f"{owners.shape[0]} decode seqs",
                actual=str(decoding))
        if decoding == flags.shape[0]:  # an all-decode batch: row i is seq i, no gather
            return values.any_true(ids != owners, lambda row: _foreign_row(batch, row, row))
        positions = np.flatnonzero(flags)
        return values.any_true(ids[positions] != owners, lambda row: _foreign_row(
            batch, row, int(positions[row])))
    if owners.shape[0] == 0:
        return values.any_true(flags, lambda p: Finding(
            "decode seq without a draft row", "draft_seq_ids", position=p))
    # No sync on a device: decode position p reads row cumsum(is_decode)[p] - 1.
    rows = (flags.cumsum(0) - 1).clamp(0, owners.shape[0] - 1)
    wrong = flags & (owners[rows] != ids)
    return values.any_true(wrong, lambda p: Finding(
        "draft row belongs to another seq", "draft_seq_ids", position=p))


def _foreign_row(batch: ScheduledBatch, row: int, position: int) -> Finding:
    owner = host_value(batch.draft_seq_ids, row)
    seq_id = host_value(batch.seq_ids, position)
    return Finding(f"draft row {row} belongs to seq {owner}", "draft_seq_ids",
                   position=position, seq_id=seq_id, expected=f"seq {seq_id}",
                   actual=f"seq {owner}")
