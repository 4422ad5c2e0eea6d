"""``ScheduledBatch``: what the scheduler hands the runner for one step."""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._backend_neutral import (
    arange_like,
    clip_columns,
    host_value,
    last_block,
    number_text,
    row_col,
    row_entries,
    value_text,
    within_columns,
)
from specguard.contracts._boundaries._types import Array, Bool, Index
from specguard.contracts._core._arrays import array_kind, dtype_name, is_host
from specguard.contracts._core._compiled import verdict
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks, scalar_mask
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
    drafts_handed_over: Bool[Array, "num_decode"] | None = None
    """Decode rows whose drafts another instance's drafter proposed and handed over with
    the seq (a P/D consumer's first decode of a remotely prefilled seq, as ATOM's
    ``kv_transfer_params`` carry them): real drafts this engine's drafter never saw."""

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
# The C functions themselves: the array methods wrap them in Python-level calls.
_add = np.add.reduce


@rule("SG103", "decode seqs are scheduled exactly mtp_k+1 tokens",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"is_decode", "num_scheduled_tokens", "mtp_k"},
      bug="ATOM pre-#219: a draft-less seq yielded 1 token where mtp_k+1 slots were reserved.")
def _decode_width(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """Every decode seq owns a contiguous span of mtp_k+1 tokens: its anchor and its
    drafts. The runner reshapes the decode tokens to (num_decode, mtp_k+1), positions are
    tiled from it, and CUDA graphs are keyed by it; one seq with another count shifts
    every later span."""
    width = int(batch.mtp_k) + 1  # a numpy int8 mtp_k of 127 would wrap to -128
    bad = batch.is_decode & (batch.num_scheduled_tokens != width)
    return values.any_true(bad, lambda i: Finding(
        f"decode seq scheduled {host_value(batch.num_scheduled_tokens, i)} tokens",
        "num_scheduled_tokens", position=i, expected=f"mtp_k+1={width}"))


@rule("SG106", "num_tokens is the sum of the per-seq counts",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"num_scheduled_tokens", "num_tokens"},
      bug="vLLM SchedulerOutput: total_num_scheduled_tokens == sum(...) stated only in a comment.")
def _token_total(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """The runner allocates and slices its flat buffers by the total, and each seq's
    span by the per-seq counts; when they disagree the last spans read stale tokens or
    run past the end. Each count is first held to [0, num_tokens]: then the int64 sum
    cannot wrap round to num_tokens (huge counts, or negative ones, could)."""
    counts = batch.num_scheduled_tokens
    found = values.outside(counts, 0, int(batch.num_tokens) + 1, lambda i: Finding(
        f"seq scheduled{number_text(counts, i)} tokens", "num_scheduled_tokens",
        position=i, expected=f"0..num_tokens={batch.num_tokens}"))
    if found:
        return found
    # np.add.reduce is what ndarray.sum() calls, without its Python-level wrapper.
    total = _add(counts, None) if type(counts) is np.ndarray else counts.sum()
    return values.any_true(total != batch.num_tokens, lambda _: Finding(
        "sum(num_scheduled_tokens) differs from num_tokens", "num_scheduled_tokens",
        expected=f"num_tokens={batch.num_tokens}", actual=str(host_value(total, 0))))


@rule("SG107", "phases agree with num_decode; prefill seqs schedule at least one token",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"is_decode", "num_decode", "num_scheduled_tokens"},
      bug="ATOM C1/C15: partial prefills scheduled into decode batches.")
def _phases(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """``num_decode`` sizes the draft rows and the verifier's output; it must count the
    seqs flagged decode. A prefill seq scheduled no tokens has no span and breaks the
    cumulative offsets of every seq after it."""
    flags = batch.is_decode
    # On the host count_nonzero is a plain C loop, where sum() adds the flags as int64.
    count = _count_nonzero(flags) if type(flags) is np.ndarray else flags.sum()
    found = values.any_true(count != batch.num_decode, lambda _: Finding(
        "is_decode marks a different number of decode seqs", "is_decode",
        expected=f"num_decode={batch.num_decode}", actual=str(host_value(count, 0))))
    if found or (type(flags) is np.ndarray and count == flags.shape[0]):
        return found  # an all-decode batch has no prefill seq to check
    empty = ~flags & (batch.num_scheduled_tokens < 1)
    return values.any_true(empty, lambda i: Finding(
        "prefill seq scheduled no tokens", "num_scheduled_tokens", position=i, expected=">= 1"))


@rule("SG108", "draft token ids are valid vocabulary ids",
      boundary=Boundary.SCHEDULE, applies_to=("ScheduledBatch", "DraftTokens", "DrafterOutput"),
      fields={"draft_token_ids", "vocab_size", "draft_placeholder"}, depth=Depth.ESSENTIAL,
      bug="vLLM #37629/#40768: stale -1 draft placeholders reaching F.embedding.")
def _draft_ids(obj: Any, values: ValueChecks) -> Finding | None:
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
    bad = scalar_mask(drafts, "ne", placeholder) & (
        scalar_mask(drafts, "lt", 0) | scalar_mask(drafts, "ge", obj.vocab_size))
    return values.any_true(bad, explain)


@rule("SG109", "real-draft counts are within [0, mtp_k]",
      boundary=Boundary.SCHEDULE, applies_to=("ScheduledBatch", "DraftTokens"),
      fields={"num_drafts", "mtp_k"},
      bug="ATOM C16: SpecStats KeyError when an accepted length falls outside [1, k+1].")
def _draft_counts(obj: Any, values: ValueChecks) -> Finding | None:
    """A row holds at most mtp_k real drafts; the count tells the verifier how many slots
    may be accepted and how many are placeholders."""
    counts = obj.num_drafts
    locate = getattr(obj, "_sg_decode_row_position", None)
    return values.outside(counts, 0, int(obj.mtp_k) + 1, lambda i: Finding(
        f"row {i} claims {host_value(counts, i)} drafts", "num_drafts",
        position=locate(i) if locate else i, expected=f"0..mtp_k={obj.mtp_k}"))


@rule("SG110", "block tables are not empty and cover the context",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"block_tables", "context_lens", "block_size"},
      bug="ATOM C11/C12: empty block tables filtered out; context not covered by the table.",
      deeper="The default depth reads each seq's first and last needed block, in "
      "O(num_seqs): where an empty, compacted or short table shows. Full depth also reads "
      "every block in between (one minimum per seq over its middle blocks): about 480 µs "
      "for 8192 decode seqs with 4096-token tables on a 2-core CI machine, against 3 µs "
      "for the ends, so a hole in the middle of a table is found at full depth only.")
def _block_tables(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """Attention builds slot mappings from the block table truncated to
    cdiv(context_len, block_size) blocks; a missing block points the kernel at padding.
    The first and the last needed block are checked first, in O(num_seqs), because that
    is where a short table shows; at full depth every block between them too."""
    tables, lens = batch.block_tables, batch.context_lens
    num_seqs, max_blocks = tables.shape[0], tables.shape[1]
    # The clean answer in one compiled pass (the middle blocks too at full depth, up to a
    # table of _COMPILED_MIDDLE entries; past it numpy's per-seq minimum is faster);
    # anything but yes is explained by the numpy check below.
    full = values.full
    if type(tables) is np.ndarray and type(lens) is np.ndarray \
            and (not full or num_seqs * max_blocks <= _COMPILED_MIDDLE) \
            and verdict("block_tables", tables, lens, int(batch.block_size), full):
        return None
    last = last_block(lens, batch.block_size)
    # Every seq normally needs 1..max_blocks blocks: when one maximum shows that on the
    # host, no seq is short and no column needs clipping.
    if not within_columns(last, max_blocks):
        found = values.above(last, max_blocks - 1, lambda i: Finding(
            f"context needs {_count_text(last, i)} blocks, table has {max_blocks} columns",
            "block_tables", position=i))
        if found or num_seqs == 0:
            return found
        if max_blocks == 0:
            return Finding("block tables have no columns", "block_tables", position=0)
        last = clip_columns(last, max_blocks)
    # One strided column and one gather, never the padded table; for integers,
    # a | b is negative exactly when a or b is.
    first_or_last = tables[:, 0] | row_entries(tables, last)
    found = values.below(first_or_last, 0, lambda i: Finding(
        "block table is empty or ends before the context does", "block_tables", position=i))
    if found or not values.full:
        return found
    return _padding_inside(tables, last, values)


def _padding_inside(tables: Any, last: Any, values: ValueChecks) -> Finding | None:
    """The first seq with padding between its first and its last needed block.

    On the host: a table whose columns all alias column 0 (a broadcast view) has been
    checked already; a small one takes a mask of the columns some seq needs; a large
    C-contiguous one takes one minimum per seq over exactly its middle blocks
    (``reduceat``: nothing as large as the table is allocated); any other, the mask. On
    a device the mask spans every column, since reading the widest need would sync.
    """
    max_blocks = tables.shape[1]
    host = isinstance(tables, np.ndarray) and isinstance(last, np.ndarray)
    if host and (tables.strides[1] == 0 or tables.shape[0] == 0):
        return None
    end = int(np.maximum.reduce(last, None)) if host else max_blocks
    if end <= 1:
        return None  # no seq needs a block between its first and its last
    width = end - 1
    small = host and tables.shape[0] * width <= _SMALL_REGION
    if host and not small and tables.flags.c_contiguous:
        return _padding_inside_rows(tables, last, values)
    middle = tables[:, 1:end]
    columns = _MIDDLE_COLUMNS[:width] if small else arange_like(tables, width) + 1
    inner = columns[None, :] < last[:, None]

    def explain(i: int) -> Finding:
        row, col = row_col(i, width)
        return _padding_finding(row, col + 1, host_value(middle, i), last)

    return values.any_true(inner & (middle < 0), explain)


# Up to this many table entries the compiled check reads the middle blocks itself.
_COMPILED_MIDDLE = 1 << 16
# Up to this many middle blocks a mask is cheapest; past it, one minimum per seq.
_SMALL_REGION = 4096
_MIDDLE_COLUMNS = np.arange(1, _SMALL_REGION + 1)


def _padding_inside_rows(tables: np.ndarray, last: np.ndarray,
                         values: ValueChecks) -> Finding | None:
    rows = np.flatnonzero(last > 1)
    if rows.shape[0] == 0:
        return None
    starts = rows * tables.shape[1] + 1
    bounds = np.empty(2 * rows.shape[0], dtype=np.intp)
    bounds[0::2] = starts
    bounds[1::2] = starts + last[rows] - 1  # each seq's middle: columns 1 .. last - 1
    lowest = np.minimum.reduceat(tables.reshape(-1), bounds)[0::2]

    def explain(j: int) -> Finding:
        row = int(rows[j])
        col = 1 + int(np.flatnonzero(tables[row, 1 : int(last[row])] < 0)[0])
        return _padding_finding(row, col, int(tables[row, col]), last)

    return values.below(lowest, 0, explain)


def _padding_finding(row: int, col: int, value: int | None, last: Any) -> Finding:
    shown = "" if value is None else f" is {value}"
    return Finding(f"block {col}{shown}, padding inside the {_count_text(last, row)} blocks "
                   "the context needs", "block_tables", position=row)


def _count_text(last: Any, i: int) -> str:
    """How many blocks seq ``i`` needs, when readable on the host."""
    index = host_value(last, i)
    return "more" if index is None else str(index + 1)


@rule("SG111", "context lengths cover the scheduled tokens",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"context_lens", "num_scheduled_tokens", "is_decode"},
      bug="ATOM C11: decode context_lens minus num_rejected must stay >= mtp_k+1.")
def _context(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """Positions are computed as context_len - scheduled + arange(scheduled); a context
    shorter than the scheduled tokens yields negative positions. A decode seq continues
    a prompt that was prefilled in earlier steps, so its context holds at least one token
    before its mtp_k+1 scheduled ones: a decode context of exactly mtp_k+1 has no prompt
    at all (its anchor was sampled from nothing) and is rejected. A first prefill chunk
    may fill its whole context."""
    context, scheduled = batch.context_lens, batch.num_scheduled_tokens
    bad = (context < scheduled) | (batch.is_decode & (context == scheduled))

    def explain(i: int) -> Finding:
        length, count = host_value(context, i), host_value(scheduled, i)
        if length is not None and length == count:
            return Finding(f"decode seq has context length {length}, only its {count} "
                           "scheduled tokens: no prompt before them", "context_lens",
                           position=i, expected=f"> {count}")
        return Finding(f"context length {length} is shorter than the {count} scheduled "
                       "tokens", "context_lens", position=i)

    return values.any_true(bad, explain)


@rule("SG112", "scheduled token ids are valid vocabulary ids",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH,
      fields={"token_ids", "vocab_size"},
      bug="vLLM #47029: -1 padding placeholders from PD first decode reaching embeddings.")
def _token_ids(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
    """Scheduled tokens are embedded by the target model; a sentinel here is a
    device-side assert at TP=1 and a silent zero embedding at TP>1."""
    tokens = batch.token_ids
    return values.outside(tokens, 0, batch.vocab_size, lambda i: Finding(
        f"token id{value_text(tokens, i)}", "token_ids", token=i,
        expected=f"0 <= id < vocab_size={batch.vocab_size}"))


@rule("SG113", "state slots are real slots",
      boundary=Boundary.SCHEDULE, applies_to=_BATCH, fields={"state_slots"},
      bug="ATOM C13: DeepSeek-V4 falling back to slot 0 for every seq when the list is short.")
def _state_slots(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
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
def _draft_owners(batch: ScheduledBatch, values: ValueChecks) -> Finding | None:
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
