"""Objects whose token ids are about to be embedded: ``ModelInput`` and ``DrafterInput``."""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._backend_neutral import host_value, number_text, value_text
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._arrays import array_kind, is_host
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
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
    "vocab_size": 1, "num_slots": 1, "num_tokens": 0, "max_model_len": 1, "num_padding": 0})
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
    num_padding: int | None = None
    """Trailing rows of the stream that belong to no seq (a captured graph's padding, or
    every row of an idle data-parallel rank's dummy run), when the runner says: they
    write no KV and nothing samples them, and every other row is a real token. None when
    the runner does not say which rows are padding."""
    padding_slot_id: int | None = None
    """The slot padding rows write to, when it is not ``-1`` (vLLM's ``PADDING_SLOT_ID``,
    which the KV write skips): a slot no seq owns (SGLang reserves slot 0)."""


@boundary_object(Boundary.DRAFT_INPUT, minimums={
    "vocab_size": 1, "num_tokens": 0, "max_model_len": 1, "draft_step": 0,
    "max_seq_len": 0})
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
    seq_lens: Index[Array, "num_seqs"] | None = None
    """Per seq, the context its attention reads in this pass, when the runner builds
    attention metadata: through the last token of its span (that token's position + 1).
    Every draft step advances it by one with the positions."""
    max_seq_len: int | None = None
    """The longest context the attention kernel is sized for in this pass: at least every
    ``seq_lens`` entry. A kernel told less reads a truncated context."""
    draft_step: int | None = None
    """Which pass of the drafter this is, when the runner builds one object per pass: 0
    over the target's stream, then one per further draft token (one token per seq, fed
    the previous draft)."""


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
      fields={"positions", "query_start_loc", "max_model_len", "num_padding"},
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
    count = positions.shape[0] - _padding(obj)  # padding rows belong to no span
    if found or count < 2:
        return found
    steps = steps_within_spans(positions[:count], obj.query_start_loc, count)
    if steps is None:
        return None  # spans SG304 rejects say nothing about where positions restart
    return values.any_true(steps != 1, lambda i: Finding(
        f"position{value_text(positions, i)} follows{number_text(positions, i - 1)} in the "
        "same span", "positions", token=i, expected="the previous position + 1"))


_minimum = np.minimum


def sound_spans(starts: np.ndarray, end: int) -> bool:
    """Whether host span offsets run from 0 to ``end`` without going back (what SG304
    asks, read without padding): the frame the other stream rules read spans in."""
    return bool(starts.shape[0] > 0 and starts[0] == 0 and starts[-1] == end
                and not _count_nonzero(starts[1:] < starts[:-1]))


def steps_within_spans(positions: Any, starts: Any, count: int) -> Any:
    """Per token, its position minus the previous token's, and 1 where a span begins.

    Positions are in range by then, so no difference can wrap. Spans must be sound
    (SG304's verdict): on the host unsound ones give None; on a device, where reading
    the verdict would sync, every step is forced to 1 instead.
    """
    if isinstance(positions, np.ndarray):
        if not sound_spans(starts, count):
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
      fields={"query_start_loc", "num_tokens", "num_padding"},
      bug="SGLang #14536: spec_info length mismatch after filter_batch misaligned the drafts.")
def _spans(obj: Any, values: ValueChecks) -> Finding | None:
    """Span offsets are cumulative counts: they start at 0, never decrease and end at
    the stream's length; anything else gives a seq a negative or overlapping span. A
    stream with trailing padding rows ends its spans where the padding starts (a span
    reaching into the padding is SG309's)."""
    starts = obj.query_start_loc
    padding = _padding(obj)
    if padding:
        real = int(obj.num_tokens) - padding
        ends_wrong = (starts[0] != 0) | (starts[-1] < real)
        expected = f"0 and num_tokens - num_padding={real}"
    else:
        ends_wrong = (starts[0] != 0) | (starts[-1] != obj.num_tokens)
        expected = f"0 and num_tokens={obj.num_tokens}"
    found = values.any_true(ends_wrong, lambda _: Finding(
        f"spans start at {host_value(starts, 0)} and end at "
        f"{host_value(starts, starts.shape[0] - 1)}", "query_start_loc",
        expected=expected))
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


def _padding(obj: Any) -> int:
    """The trailing padding rows an object declares (0 when it declares none)."""
    return int(getattr(obj, "num_padding", None) or 0)


def _agree_at_span_ends(obj: Any) -> bool:
    """Whether every seq_len is the position at its span's end + 1, reading each end
    capped at the stream's (an empty first span reads the last token): a yes needs no
    soundness check (unsound spans are SG304's to report, empty ones are not checked),
    a no is explained by the full check."""
    count = obj.num_tokens
    if count == 0:
        return False
    ends = _minimum(obj.query_start_loc[1:], count) - 1
    return not _count_nonzero(obj.seq_lens - 1 != obj.positions[ends])


def span_end_positions(obj: Any) -> tuple[Any, Any] | None:
    """Per seq, the position of the last token of its span, and whether the span has one.

    Spans must be sound (SG304's verdict): on the host unsound ones give None; on a
    device, where reading the verdict would sync, every span is treated as empty instead.
    """
    starts, positions, count = obj.query_start_loc, obj.positions, obj.num_tokens
    if count == 0 or starts.shape[0] < 2:
        return None
    if isinstance(starts, np.ndarray):
        if not sound_spans(starts, count):
            return None
        nonempty = starts[1:] > starts[:-1]
        return positions[np.maximum(starts[1:] - 1, 0)], nonempty
    import torch

    sound = (starts[0] == 0) & (starts[-1] == count) & (starts[1:] >= starts[:-1]).all()
    nonempty = (starts[1:] > starts[:-1]) & sound
    last = (starts[1:] - 1).clamp(0, count - 1).long()
    return torch.index_select(positions, 0, last), nonempty


@rule("SG306", "each seq's seq_len reaches the last position of its span",
      boundary=Boundary.DRAFT_INPUT, applies_to=("DrafterInput",),
      fields={"seq_lens", "positions", "query_start_loc", "num_tokens", "draft_step",
              "max_model_len"},
      bug="vLLM EagleProposer.propose: every draft step advances positions and seq_lens "
      "together (seq_lens += 1, rows past max_model_len clamped to position 0 and seq_len "
      "1); a seq_len left behind by a step attends to a context one token short.",
      depth=Depth.ESSENTIAL)
def _seq_lens(obj: DrafterInput, values: ValueChecks) -> Finding | None:
    """Attention takes each seq's context length from ``seq_lens``, not from the
    positions: a draft pass whose seq_lens were not advanced with its positions (a draft
    step that skipped the increment, the first pass fed the target's lengths before its
    rejected tokens were taken off) reads a context that stops short of the token being
    drafted, or runs past it into stale KV. The drafts stay in the vocabulary and nothing
    crashes; only acceptance falls. Checked at the default depth: one gather and one
    comparison per seq."""
    seq_lens = obj.seq_lens
    if seq_lens is None:
        return None
    if isinstance(seq_lens, np.ndarray) and _agree_at_span_ends(obj):
        return None  # the usual answer, in four numpy calls; anything else explains
    ends = span_end_positions(obj)
    if ends is None:
        return None  # spans SG304 rejects say nothing about where a seq's context ends
    last, nonempty = ends
    checked = nonempty & (last >= 0)  # a position out of range is SG303's
    if obj.max_model_len is not None:
        checked &= last < obj.max_model_len
    bad = checked & (seq_lens - 1 != last)  # no overflow at the largest position
    step = _step_text(obj)
    return values.any_true(bad, lambda i: Finding(
        f"seq_len{value_text(seq_lens, i)}{step}, but its span ends at "
        f"position{number_text(last, i)}", "seq_lens", position=i,
        expected=f"{_plus_one(last, i)}", actual=str(host_value(seq_lens, i))))


def _step_text(obj: DrafterInput) -> str:
    return "" if obj.draft_step is None else f" at draft step {obj.draft_step}"


def _padding_slot(obj: ModelInput) -> int:
    return -1 if obj.padding_slot_id is None else int(obj.padding_slot_id)


def _plus_one(a: Any, i: int) -> str:
    value = host_value(a, i)
    return "the last position + 1" if value is None else str(int(value) + 1)


@rule("SG307", "max_seq_len covers every seq_len",
      boundary=Boundary.DRAFT_INPUT, applies_to=("DrafterInput",),
      fields={"max_seq_len", "seq_lens", "draft_step"},
      bug="vLLM 0.11.1 EagleProposer.propose advances seq_lens every draft step but "
      "leaves the metadata's max_seq_len at the first pass's (later releases add "
      "max_seq_len + 1 per step): kernels sized by it read too short a context.",
      depth=Depth.ESSENTIAL)
def _max_seq_len(obj: DrafterInput, values: ValueChecks) -> Finding | None:
    """Attention kernels size their work (split-KV tiles, the blocks they read) by
    ``max_seq_len``; one computed before a draft step's increment, or left at the first
    pass's, is below the longest context, and the kernel silently drops the newest keys
    of that seq. Checked at the default depth: one comparison per seq."""
    seq_lens, limit = obj.seq_lens, obj.max_seq_len
    if seq_lens is None or limit is None:
        return None
    return values.any_true(seq_lens > limit, lambda i: Finding(
        f"seq_len{value_text(seq_lens, i)}{_step_text(obj)} is longer than "
        f"max_seq_len={limit}", "max_seq_len", position=i,
        expected=f">= {host_value(seq_lens, i)}", actual=str(limit)))


@rule("SG308", "padding rows write no KV: their slot is the padding slot id",
      boundary=Boundary.MODEL_INPUT, applies_to=("ModelInput",),
      fields={"slot_mapping", "num_padding", "padding_slot_id", "num_tokens"},
      bug="rvllm #32 and Diffulex #44: padded CUDA-graph rows kept a live KV slot (slot 0, "
      "or the stale tail of the previous step's slot_mapping) and overwrote another "
      "request's keys; vLLM #43810: a -1 padding slot used as an index wrote the last slot.",
      depth=Depth.ESSENTIAL)
def _padding_slots(obj: ModelInput, values: ValueChecks) -> Finding | None:
    """A padding row still runs through every layer, and its K/V are written wherever its
    slot points. The only harmless slot is the padding slot id (the one the KV write
    skips, or a slot no seq owns): a padding row left with a real slot (a captured
    graph's buffer not reset after a longer step, a dummy run given a real block table)
    overwrites a live seq's keys, and every later token of that seq attends to garbage.
    Checked at the default depth: one comparison over the padding rows."""
    padding = _padding(obj)
    if not padding:
        return None
    real = int(obj.num_tokens) - padding
    if real < 0:
        return Finding(f"num_padding={padding} is more than the stream's "
                       f"num_tokens={obj.num_tokens}", "num_padding",
                       expected=f"<= num_tokens={obj.num_tokens}", actual=str(padding))
    slots, pad_id = obj.slot_mapping[real:], _padding_slot(obj)
    return values.any_true(slots != pad_id, lambda i: Finding(
        f"padding row {real + i}'s slot{value_text(slots, i)}", "slot_mapping",
        token=real + i, expected=f"padding_slot_id={pad_id}"))


@rule("SG309", "padding rows are not sampled: no seq's span reaches into them",
      boundary=Boundary.MODEL_INPUT, applies_to=("ModelInput",),
      fields={"query_start_loc", "num_padding", "num_tokens"},
      bug="tokenspeed #969: padded prefill graph inputs seen as real tokens, so cu_seqlens "
      "gave padding rows to a request; vLLM's uniform-decode padding must keep padded "
      "requests' spans empty.",
      depth=Depth.ESSENTIAL)
def _padding_unsampled(obj: ModelInput, values: ValueChecks) -> Finding | None:
    """A seq samples from the end of its span. A span that runs into the padding makes a
    padding row that seq's last token: its logits are sampled as the seq's next token,
    and the seq's real context is cut at the padding. Checked at the default depth: one
    comparison."""
    padding = _padding(obj)
    real = int(obj.num_tokens) - padding
    if not padding or real < 0:
        return None  # SG308 reports padding longer than the stream
    starts = obj.query_start_loc
    last = starts.shape[0] - 1
    return values.any_true(starts[last:] > real, lambda _: Finding(
        f"spans end at {host_value(starts, last)}, inside the {padding} padding rows "
        f"starting at {real}", "query_start_loc", position=last - 1 if last else None,
        expected=f"<= num_tokens - num_padding={real}"))


@rule("SG310", "real rows write KV: none uses the padding slot",
      boundary=Boundary.MODEL_INPUT, applies_to=("ModelInput",),
      fields={"slot_mapping", "num_padding", "padding_slot_id", "num_tokens"},
      bug="vLLM PADDING_SLOT_ID: a real token given the padding slot (a slot mapping "
      "masked too widely, padding counted from the wrong end) writes no KV, and the "
      "seq's next step attends to a hole.",
      depth=Depth.ESSENTIAL)
def _real_slots(obj: ModelInput, values: ValueChecks) -> Finding | None:
    """Every real token of the target's forward writes its K/V for the tokens after it
    to read. Where the runner says which rows are padding, a real row with the padding
    slot writes nothing: the step looks right, and the seq's next steps read whatever
    the slot held before. Checked at the default depth: one comparison over the real
    rows."""
    if obj.num_padding is None:
        return None  # no padding declared
    real = int(obj.num_tokens) - _padding(obj)
    if real < 0:
        return None  # SG308's
    slots, pad_id = obj.slot_mapping[:real], _padding_slot(obj)
    return values.any_true(slots == pad_id, lambda i: Finding(
        f"real token {i} has the padding slot {pad_id}", "slot_mapping", token=i,
        expected="a KV-cache slot"))
