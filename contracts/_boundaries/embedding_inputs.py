"""Objects whose token ids are about to be embedded: ``ModelInput`` and ``DrafterInput``."""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._backend_neutral import host_value, number_text, value_text
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._arrays import array_kind, is_host
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks
from specguard.contracts._core._violation import Finding

__all__ = ["DrafterInput", "ModelInput"]


class _TokenStream(BoundaryObject):
    """A flat token stream split into per-seq spans by ``query_start_loc``."""

    __slots__ = ()

    def _sg_token_position(self, token: int) -> int | None:
        starts: Any = getattr(self, "query_start_loc", None)
        if array_kind(starts) is None or not is_host(starts) or starts.ndim != 1:
            return None
        starts = np.asarray(starts)
        position = int(np.searchsorted(starts, token, side="right")) - 1
        return position if 0 <= position < starts.shape[0] - 1 else None


@boundary_object(Boundary.MODEL_INPUT, minimums={
    "vocab_size": 1, "num_slots": 1, "num_tokens": 0, "max_model_len": 1})
class ModelInput(_TokenStream):
    """What the runner feeds the target model: flat ids, positions and KV slots."""

    vocab_size: int
    """Rows of the target model's embedding table."""
    num_slots: int
    """KV-cache slots (blocks × block size); slot ``-1`` means "do not write"."""
    num_tokens: int
    """Length of the flat token stream."""
    seq_ids: Index[Array, "num_seqs"]
    """Sequences in batch order."""
    input_ids: Index[Array, "num_tokens"]
    """Token ids to embed, every one in ``[0, vocab_size)``."""
    positions: Index[Array, "num_tokens"]
    """Position of each token in its sequence."""
    slot_mapping: Index[Array, "num_tokens"]
    """KV-cache slot each token writes, or ``-1`` for padding."""
    query_start_loc: Index[Array, "num_seqs+1"]
    """Start of each seq's span in the flat stream, then ``num_tokens``."""
    max_model_len: int | None = None
    """The model's context limit (its rotary table's length), when the runner knows it:
    every position is below it."""


@boundary_object(Boundary.DRAFT_INPUT, minimums={
    "vocab_size": 1, "num_tokens": 0, "max_model_len": 1})
class DrafterInput(_TokenStream):
    """What the MTP head embeds: shifted ids, positions and the index to sample from."""

    vocab_size: int
    """Rows of the MTP head's own ``embed_tokens``."""
    num_tokens: int
    """Length of the flat token stream."""
    seq_ids: Index[Array, "num_seqs"]
    """Sequences in batch order (discarded chunked-prefill rows included)."""
    input_ids: Index[Array, "num_tokens"]
    """Token ids the MTP head embeds, every one in ``[0, vocab_size)``: no ``-1``."""
    positions: Index[Array, "num_tokens"]
    """Position of each token in its sequence."""
    query_start_loc: Index[Array, "num_seqs+1"]
    """Start of each seq's span in the flat stream, then ``num_tokens``."""
    sample_indices: Index[Array, "num_seqs"]
    """Per seq, the flat index of the token whose hidden state drafts the next token."""
    max_model_len: int | None = None
    """The drafter's context limit (its rotary table's length), when the runner knows it:
    every position is below it."""


_EMBEDDED = ("ModelInput", "DrafterInput")


@rule("SG301", "no sentinel reaches an embedding",
      boundary=Boundary.DRAFT_INPUT, applies_to=_EMBEDDED, fields={"input_ids", "vocab_size"},
      bug="vLLM #26231: a -1 from a discarded chunked-prefill row reached the MTP head's "
      "embed_tokens (device assert at TP=1, silent zero embedding at TP>1).",
      depth=Depth.ESSENTIAL)
def _embedded_ids(obj: Any, values: ValueChecks) -> Finding | None:
    """Padded speculation marks discarded rows with -1, and async scheduling leaves -1
    placeholders. Embedding layers mask out-of-range ids only at TP>1, so a sentinel is a
    device-side assert on one GPU and a silent zero embedding on many. Checked at the
    hand-over, before any lookup, at the default depth: one maximum over the ids on the
    host, a deferred verdict (no sync) on a device."""
    ids = obj.input_ids
    return values.outside(ids, 0, obj.vocab_size, lambda i: Finding(
        f"input id{value_text(ids, i)}", "input_ids", token=i,
        expected=f"0 <= id < vocab_size={obj.vocab_size}"))


@rule("SG302", "each seq samples from a token of its own span",
      boundary=Boundary.DRAFT_INPUT, applies_to=("DrafterInput",),
      fields={"sample_indices", "query_start_loc"},
      bug="vLLM I3: token_indices_to_sample = query_start_loc[1:] - 1 - num_rejected landing "
      "in the previous request.")
def _sample_indices(obj: DrafterInput, values: ValueChecks) -> Finding | None:
    """The drafter takes each seq's hidden state at one flat index; an index outside the
    seq's span silently drafts from a neighbour's context."""
    starts, picks = obj.query_start_loc, obj.sample_indices
    bad = (picks < starts[:-1]) | (picks >= starts[1:])
    return values.any_true(bad, lambda i: Finding(
        f"sample index{number_text(picks, i)} is outside the seq's span "
        f"[{host_value(starts, i)}, {host_value(starts, i + 1)})", "sample_indices", position=i))


@rule("SG303", "positions are within max_model_len and contiguous in each span",
      boundary=Boundary.DRAFT_INPUT, applies_to=_EMBEDDED,
      fields={"positions", "query_start_loc", "max_model_len"},
      bug="vLLM #21986: drafter positions beyond its max_model_len (device assert at .tolist()).")
def _positions(obj: Any, values: ValueChecks) -> Finding | None:
    """Positions index rotary tables; a negative position wraps to the end of the table
    in Python indexing and reads garbage on the device, and one at or past
    ``max_model_len`` (when the object carries it) reads past the table. Inside one seq's
    span the tokens are consecutive, so each position is the previous one plus one; a
    gap or a repeat gives a token another token's rotary phase."""
    positions, limit = obj.positions, obj.max_model_len
    expected = ">= 0" if limit is None else f"0 <= position < max_model_len={limit}"
    def explain(i: int) -> Finding:
        return Finding(f"position{value_text(positions, i)}", "positions", token=i,
                       expected=expected)

    found = values.below(positions, 0, explain) if limit is None \
        else values.outside(positions, 0, int(limit), explain)
    count = positions.shape[0]
    if found or count < 2:
        return found
    steps = _steps_within_spans(positions, obj.query_start_loc, count)
    if steps is None:
        return None  # spans SG304 rejects say nothing about where positions restart
    return values.any_true(steps != 1, lambda i: Finding(
        f"position{value_text(positions, i)} follows{number_text(positions, i - 1)} in the "
        "same span", "positions", token=i, expected="the previous position + 1"))


_count_nonzero = np.count_nonzero


def _steps_within_spans(positions: Any, starts: Any, count: int) -> Any:
    """Per token, its position minus the previous token's, and 1 where a span begins.

    Positions are in range by then, so no difference can wrap. Spans must be sound
    (SG304's verdict): on the host unsound ones give None; on a device, where reading
    the verdict would sync, every step is forced to 1 instead.
    """
    if isinstance(positions, np.ndarray):
        if starts[0] != 0 or starts[-1] != count or _count_nonzero(starts[1:] < starts[:-1]):
            return None
        host = np.empty(count + 1, dtype=positions.dtype)
        np.subtract(positions[1:], positions[:-1], out=host[1:count])
        host[starts] = 1  # the first token of every span (and both ends) starts afresh
        return host
    import torch

    steps = torch.ones(count + 1, dtype=positions.dtype, device=positions.device)
    steps[1:count] = positions[1:] - positions[:-1]
    steps.index_fill_(0, starts.clamp(0, count).long(), 1)
    sound = (starts[0] == 0) & (starts[-1] == count) & (starts[1:] >= starts[:-1]).all()
    return torch.where(sound, steps, torch.ones_like(steps))


@rule("SG304", "query_start_loc runs from 0 to num_tokens without going back",
      boundary=Boundary.DRAFT_INPUT, applies_to=_EMBEDDED,
      fields={"query_start_loc", "num_tokens"},
      bug="SGLang #14536: spec_info length mismatch after filter_batch misaligned the drafts.")
def _spans(obj: Any, values: ValueChecks) -> Finding | None:
    """Span offsets are cumulative counts: they start at 0, never decrease and end at
    the stream's length; anything else gives a seq a negative or overlapping span."""
    starts = obj.query_start_loc
    ends_wrong = (starts[0] != 0) | (starts[-1] != obj.num_tokens)
    found = values.any_true(ends_wrong, lambda _: Finding(
        f"spans start at {host_value(starts, 0)} and end at "
        f"{host_value(starts, starts.shape[0] - 1)}", "query_start_loc",
        expected=f"0 and num_tokens={obj.num_tokens}"))
    if found:
        return found
    return values.any_true(starts[1:] < starts[:-1], lambda i: Finding(
        "span offsets decrease", "query_start_loc", position=i))


@rule("SG305", "slots are within the KV cache or -1",
      boundary=Boundary.MODEL_INPUT, applies_to=("ModelInput",),
      fields={"slot_mapping", "num_slots"},
      bug="vLLM I10: PADDING_SLOT_ID=-1 must be the only out-of-cache slot a KV write sees.")
def _slots(obj: ModelInput, values: ValueChecks) -> Finding | None:
    """The attention kernel writes each token's K/V at its slot; a slot past the cache is
    an illegal memory access, and -1 is the only value kernels skip."""
    slots = obj.slot_mapping
    return values.outside(slots, -1, obj.num_slots, lambda i: Finding(
        f"slot{value_text(slots, i)}", "slot_mapping", token=i,
        expected=f"-1 <= slot < num_slots={obj.num_slots}"))
