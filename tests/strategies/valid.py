"""Valid boundary objects over the whole space.

Empty batches, one seq, thousands; all-prefill, all-decode and mixed batches; seqs without
drafts at the front, middle and tail; ``mtp_k`` 1..8; int32, int64 or both in one object;
numpy or torch on the CPU, in every layout of :mod:`strategies.cases`. Values come from a
seeded numpy generator, so an example with thousands of seqs costs Hypothesis a handful
of draws; the structure (sizes, phases, patterns, layouts) is drawn explicitly and
shrinks well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from specguard import contracts
from specguard.contracts import (
    ArrayField,
    DrafterInput,
    DrafterOutput,
    DraftTokens,
    LogitsRows,
    ModelInput,
    RequestOutput,
    ScheduledBatch,
    TokensAcrossRanks,
    VerifyOutput,
    fields_of,
)
from strategies.cases import (
    BACKENDS,
    ID_DTYPES,
    INT32_MAX,
    MAX_SEQS,
    STYLES,
    Case,
    Draw,
    MappingCase,
    Rng,
    seeded_rng,
)


def _counts(min_value: int = 0, max_value: int = MAX_SEQS) -> st.SearchStrategy[int]:
    """Batch sizes: empty, one, a few, a hundred or so, thousands (bounded)."""
    sizes = st.one_of(st.just(0), st.just(1), st.integers(2, 12), st.integers(2, 12),
                      st.integers(13, 200), st.integers(1000, MAX_SEQS))
    return sizes.map(lambda n: max(min(n, max_value), min_value))


def _vocab_sizes() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([1, 2, 7, 32000, 129280, INT32_MAX]),
                     st.integers(1, 2**20))


def _unique_ids(rng: Rng, n: int, high: int) -> np.ndarray:
    """``n`` distinct non-negative ids below ``high`` (at least ``n``), in random order."""
    high = max(high, n)
    if high > 4 * n + 64:
        ids = np.unique(rng.integers(0, high, 2 * n + 8))[:n]
        while ids.shape[0] < n:  # collisions are rare; top up deterministically
            ids = np.unique(np.concatenate([ids, np.arange(n) + ids.max(initial=0) + 1]))[:n]
        return rng.permutation(ids).astype(np.int64)
    return rng.permutation(high)[:n].astype(np.int64)


def _layout(draw: Draw, cls: type[contracts.BoundaryObject]) -> dict[str, Any]:
    """Backend, per-field id dtypes and per-field memory styles of one object."""
    names = [f.name for f in fields_of(cls) if isinstance(f, ArrayField)]
    mode = draw(st.sampled_from(("int32", "int64", "mixed")))
    dtypes = {n: draw(st.sampled_from(ID_DTYPES)) if mode == "mixed" else mode for n in names}
    uniform = draw(st.booleans())
    style = draw(st.sampled_from(STYLES))
    styles = {n: style if uniform else draw(st.sampled_from(STYLES)) for n in names}
    return {"backend": draw(st.sampled_from(BACKENDS)), "dtypes": dtypes, "styles": styles}


def _pattern_rows(draw: Draw, rng: Rng, rows: int) -> np.ndarray:
    """A boolean mask over ``rows``: none, all, or a run at the front, middle or tail."""
    where = draw(st.sampled_from(("none", "all", "front", "middle", "tail", "random")))
    mask = np.zeros(rows, dtype=bool)
    if rows == 0 or where == "none":
        return mask
    run = int(rng.integers(1, rows + 1))
    if where == "all":
        mask[:] = True
    elif where == "front":
        mask[:run] = True
    elif where == "tail":
        mask[rows - run :] = True
    elif where == "middle":
        start = rows // 2
        mask[start : start + max(1, min(run, rows - start - 1))] = True
    else:
        mask = rng.random(rows) < 0.4
    return mask


def _draft_rows(rng: Rng, counts: np.ndarray, mtp_k: int, vocab: int,
                fill: np.ndarray) -> np.ndarray:
    """Rows of ``mtp_k`` slots: ``counts[i]`` real drafts, then ``fill[i]``."""
    real = rng.integers(0, vocab, (counts.shape[0], mtp_k))
    columns = np.arange(mtp_k)[None, :]
    return np.where(columns < counts[:, None], real, fill[:, None]).astype(np.int64)


# ------------------------------------------------------------------ valid objects


def _phases(draw: Draw, rng: Rng, n: int, min_decode: int, min_prefill: int) -> np.ndarray:
    """``is_decode`` for ``n`` seqs: all prefill, all decode, mixed, or either phase first."""
    lo, hi = min_decode, n - min_prefill
    kind = draw(st.sampled_from(("prefill", "decode", "mixed", "decode_first", "prefill_first")))
    decode = lo if kind == "prefill" else hi if kind == "decode" else draw(st.integers(lo, hi))
    flags = np.zeros(n, dtype=bool)
    if kind == "mixed":
        flags[rng.permutation(n)[:decode]] = True
    elif kind == "prefill_first":
        flags[n - decode :] = True
    else:
        flags[:decode] = True
    return flags


@st.composite
def scheduled_batches(draw: Draw, min_seqs: int = 0, min_decode: int = 0,
                      min_prefill: int = 0) -> Case:
    """Valid ``ScheduledBatch`` cases over the whole space."""
    rng = seeded_rng(draw)
    n = draw(_counts(max(min_seqs, min_decode + min_prefill)))
    mtp_k, vocab = draw(st.integers(1, 8)), draw(_vocab_sizes())
    is_decode = _phases(draw, rng, n, min_decode, min_prefill)
    d = int(is_decode.sum())
    chunk = draw(st.integers(1, 64 if n <= 200 else 8))
    scheduled = np.where(is_decode, mtp_k + 1, rng.integers(1, chunk + 1, n)).astype(np.int64)
    # A decode seq has at least one prompt token before its span (SG111).
    context = scheduled + is_decode + rng.integers(0, draw(st.integers(0, 300)) + 1, n)
    block_size = draw(st.one_of(st.sampled_from([1, 2, 16, 64, 256]), st.integers(1, 1024)))
    tables = _block_tables(draw, rng, context, block_size)
    counts = np.where(_pattern_rows(draw, rng, d), 0, rng.integers(1, mtp_k + 1, d))
    placeholder, fill = _placeholder(draw, rng, d, vocab)
    slots = rng.integers(0, 4 * n + 1, n) if draw(st.booleans()) else None
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab, "block_size": block_size, "num_decode": d,
        "num_tokens": int(scheduled.sum()),
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "is_decode": is_decode, "num_scheduled_tokens": scheduled, "context_lens": context,
        "block_tables": tables,
        "token_ids": rng.integers(0, vocab, int(scheduled.sum())),
        "draft_token_ids": _draft_rows(rng, counts, mtp_k, vocab, fill),
        "num_drafts": counts.astype(np.int64), "state_slots": slots,
        "draft_placeholder": placeholder,
        "draft_seq_ids": None,
    }
    if draw(st.booleans()):  # the producer says whose rows they are
        values["draft_seq_ids"] = values["seq_ids"][is_decode]
    values["drafts_handed_over"] = rng.random(d) < 0.25 if draw(st.booleans()) else None
    return Case(ScheduledBatch, values, **_layout(draw, ScheduledBatch))


def _block_tables(draw: Draw, rng: Rng, context: np.ndarray, block_size: int) -> np.ndarray:
    """Tables covering each context, padded with -1 after a random number of spare blocks."""
    needed = -(-context // block_size)
    width = int(needed.max(initial=0)) + draw(st.integers(0, 3))
    allocated = needed + rng.integers(0, width - needed + 1) if needed.size else needed
    columns = np.arange(width)[None, :]
    blocks = rng.integers(0, 10**6, (context.shape[0], width))
    return np.where(columns < allocated[:, None], blocks, -1).astype(np.int64)


def _placeholder(draw: Draw, rng: Rng, rows: int, vocab: int) -> tuple[int | None, np.ndarray]:
    """``(draft_placeholder, per-row fill)``: 0, a valid token per row, or a declared value."""
    kind = draw(st.sampled_from(("zero", "token", "declared")))
    if kind == "zero":
        return None, np.zeros(rows, dtype=np.int64)
    if kind == "token":
        return None, rng.integers(0, vocab, rows)
    declared = draw(st.sampled_from((-1, vocab, 0, vocab - 1, -(2**31))))
    return declared, np.full(rows, declared, dtype=np.int64)


@st.composite
def draft_tokens(draw: Draw, min_seqs: int = 0, max_seqs: int = MAX_SEQS, **_: int) -> Case:
    """Valid ``DraftTokens`` cases (the dense form)."""
    rng = seeded_rng(draw)
    d, mtp_k = draw(_counts(min_seqs, max_seqs)), draw(st.integers(1, 8))
    vocab = draw(_vocab_sizes())
    counts = np.where(_pattern_rows(draw, rng, d), 0, rng.integers(1, mtp_k + 1, d))
    fill = _placeholder(draw, rng, d, vocab)[1]
    fill = np.where((fill >= 0) & (fill < vocab), fill, 0)
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, d, draw(st.integers(d, INT32_MAX))),
        "draft_token_ids": _draft_rows(rng, counts, mtp_k, vocab, fill),
        "num_drafts": counts.astype(np.int64),
    }
    return Case(DraftTokens, values, **_layout(draw, DraftTokens))


@st.composite
def verify_outputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``VerifyOutput`` cases: left-packed rows, then -1 padding."""
    rng = seeded_rng(draw)
    d, mtp_k, vocab = draw(_counts(min_seqs)), draw(st.integers(1, 8)), draw(_vocab_sizes())
    kind = draw(st.sampled_from(("none", "all", "random")))
    accepted: dict[str, np.ndarray] = {"none": np.zeros(d, dtype=np.int64),
                                       "all": np.full(d, mtp_k, dtype=np.int64)}
    drawn: np.ndarray = rng.integers(0, mtp_k + 1, d)
    num_accepted = accepted.get(kind, drawn)
    tokens = rng.integers(0, vocab, (d, mtp_k + 1))
    tokens[np.arange(mtp_k + 1)[None, :] > num_accepted[:, None]] = contracts.PLACEHOLDER
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, d, draw(st.integers(d, INT32_MAX))),
        "token_ids": tokens, "num_accepted": num_accepted.astype(np.int64),
    }
    return Case(VerifyOutput, values, **_layout(draw, VerifyOutput))


def _spans(draw: Draw, rng: Rng, n: int, shortest: int, min_seqs: int) -> np.ndarray:
    """Span offsets of ``n`` seqs; with ``min_seqs`` the stream is never empty."""
    longest = draw(st.integers(max(shortest, 1), 40 if n <= 200 else 4))
    lengths = rng.integers(shortest, longest + 1, n)
    if min_seqs and n:
        lengths[0] = max(int(lengths[0]), 1)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _positions(rng: Rng, starts: np.ndarray) -> np.ndarray:
    """Each token's position: its seq's context offset plus its index in the span."""
    lengths = np.diff(starts)
    offsets = rng.integers(0, 5000, lengths.shape[0])
    owner = np.repeat(np.arange(lengths.shape[0]), lengths)
    return (offsets[owner] + np.arange(int(starts[-1])) - starts[:-1][owner]).astype(np.int64)


def _model_len(draw: Draw, positions: np.ndarray) -> int | None:
    """No ``max_model_len``, or one just past (or well past) the largest position."""
    if not draw(st.booleans()):
        return None
    return int(positions.max(initial=0)) + 1 + draw(st.sampled_from((0, 1, 10**6)))


@st.composite
def model_inputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``ModelInput`` cases; some spans may be empty."""
    rng = seeded_rng(draw)
    n, vocab = draw(_counts(min_seqs)), draw(_vocab_sizes())
    starts = _spans(draw, rng, n, draw(st.sampled_from((0, 1))), min_seqs)
    total = int(starts[-1])
    num_slots = draw(st.integers(1, 10**6))
    values = {
        "vocab_size": vocab, "num_slots": num_slots, "num_tokens": total,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "input_ids": rng.integers(0, vocab, total), "positions": _positions(rng, starts),
        "slot_mapping": rng.integers(-1, num_slots, total), "query_start_loc": starts,
    }
    values["max_model_len"] = _model_len(draw, values["positions"])
    values.update(_padding(draw, rng, values))
    return Case(ModelInput, values, **_layout(draw, ModelInput))


def _padding(draw: Draw, rng: Rng, values: dict[str, Any]) -> dict[str, Any]:
    """No padding declared, or trailing padding rows (token 0 at position 0, the padding
    slot: -1, or a reserved slot 0) after real rows that all write KV."""
    num_slots = values["num_slots"]
    if not draw(st.booleans()):
        return {"num_padding": None, "padding_slot_id": None}
    rows = draw(st.integers(0, 6))
    pad_id = draw(st.sampled_from((None, 0))) if num_slots > 1 else None
    slot = -1 if pad_id is None else 0
    real = rng.integers(slot + 1, num_slots, values["num_tokens"])
    return {
        "num_tokens": values["num_tokens"] + rows, "num_padding": rows,
        "padding_slot_id": pad_id,
        "input_ids": np.concatenate([values["input_ids"], np.zeros(rows, dtype=np.int64)]),
        "positions": np.concatenate([values["positions"], np.zeros(rows, dtype=np.int64)]),
        "slot_mapping": np.concatenate([real, np.full(rows, slot, dtype=np.int64)]),
    }


@st.composite
def drafter_inputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``DrafterInput`` cases: every seq samples from its own (non-empty) span."""
    rng = seeded_rng(draw)
    n, vocab = draw(_counts(min_seqs)), draw(_vocab_sizes())
    starts = _spans(draw, rng, n, 1, min_seqs)
    total = int(starts[-1])
    picks = starts[:-1] + (rng.random(n) * np.diff(starts)).astype(np.int64)
    values = {
        "vocab_size": vocab, "num_tokens": total,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "input_ids": rng.integers(0, vocab, total), "positions": _positions(rng, starts),
        "query_start_loc": starts, "sample_indices": picks,
    }
    values["max_model_len"] = _model_len(draw, values["positions"])
    values.update(_attention(draw, values))
    return Case(DrafterInput, values, **_layout(draw, DrafterInput))


def _attention(draw: Draw, values: dict[str, Any]) -> dict[str, Any]:
    """No attention metadata, or each span's last position + 1 and a max that covers it."""
    if not draw(st.booleans()):
        return {"seq_lens": None, "max_seq_len": None, "draft_step": None}
    starts = values["query_start_loc"]
    seq_lens = values["positions"][starts[1:] - 1] + 1
    longest = int(seq_lens.max(initial=0)) + draw(st.sampled_from((0, 1, 7)))
    return {"seq_lens": seq_lens.astype(np.int64),
            "max_seq_len": draw(st.sampled_from((None, longest))),
            "draft_step": draw(st.sampled_from((None, 0, 3)))}


@st.composite
def drafter_outputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``DrafterOutput`` cases."""
    rng = seeded_rng(draw)
    n, mtp_k, vocab = draw(_counts(min_seqs)), draw(st.integers(1, 8)), draw(_vocab_sizes())
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "draft_token_ids": rng.integers(0, vocab, (n, mtp_k)),
        "num_proposed": rng.integers(0, mtp_k + 1, n) if draw(st.booleans()) else None,
    }
    return Case(DrafterOutput, values, **_layout(draw, DrafterOutput))


@st.composite
def logits_rows(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``LogitsRows`` cases: a random subset of requests covered, their rows laid
    out in a random order, with or without unused rows between them."""
    rng = seeded_rng(draw)
    n, mtp_k = draw(_counts(min_seqs)), draw(st.integers(1, 8))
    drafts = np.where(_pattern_rows(draw, rng, n), 0, rng.integers(0, mtp_k + 1, n))
    covered = rng.random(n) < draw(st.sampled_from((0.0, 0.5, 1.0)))
    counts = np.where(covered, drafts + 1, 0)
    gaps = rng.integers(0, 2 if draw(st.booleans()) else 1, n) * covered
    order = rng.permutation(n)
    ends = np.cumsum((counts + gaps)[order])
    starts = np.full(n, -1, dtype=np.int64)
    starts[order] = ends - counts[order]
    starts[~covered] = -1
    values = {
        "num_logits": int(n + drafts.sum()), "num_rows": int(ends[-1]) if n else 0,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "num_drafts": drafts.astype(np.int64), "row_starts": starts,
        "row_counts": counts.astype(np.int64),
    }
    return Case(LogitsRows, values, **_layout(draw, LogitsRows))


@st.composite
def request_outputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``RequestOutput`` cases: some rows end at a stop id, some at the limit,
    some neither; finished wherever one of the two was reached (and at random else)."""
    rng = seeded_rng(draw)
    n, width = draw(_counts(min_seqs)), draw(st.integers(1, 9))
    num_stops, vocab = draw(st.integers(0, 3)), draw(st.integers(1, 2**20))
    # Stop ids are the top ids of the vocabulary and rows emit the others, so a stop
    # appears only where one is placed (with no id left for rows, there are no stops).
    stopping = min(5, vocab - 1)
    num_stops = num_stops if stopping else 0
    stops = rng.integers(vocab - stopping, vocab, (n, num_stops))
    stops[rng.random((n, num_stops)) < 0.3] = -1
    emitted = rng.integers(0, width + 1, n)
    tokens = rng.integers(0, vocab - stopping, (n, width))
    tokens[np.arange(width)[None, :] >= emitted[:, None]] = -1
    has_stop = (stops >= 0).any(axis=1) & (emitted > 0) & (rng.random(n) < 0.5)
    rows = np.flatnonzero(has_stop)
    first_stop = stops[rows, np.argmax(stops[rows] >= 0, axis=1)] if num_stops else rows
    tokens[rows, emitted[rows] - 1] = first_stop
    generated = rng.integers(0, 1000, n)
    max_new = generated + emitted + rng.integers(0, 3, n)
    hit = has_stop | ((generated + emitted >= max_new) & (emitted > 0))
    values = {
        "vocab_size": vocab, "seq_ids": _unique_ids(rng, n, draw(st.integers(n, INT32_MAX))),
        "token_ids": tokens, "num_emitted": emitted.astype(np.int64),
        "num_generated": generated.astype(np.int64), "max_new_tokens": max_new.astype(np.int64),
        "stop_token_ids": stops, "finished": hit | (rng.random(n) < 0.2),
    }
    return Case(RequestOutput, values, **_layout(draw, RequestOutput))


@st.composite
def tokens_across_ranks(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``TokensAcrossRanks`` cases: one rank of a group of 1 to 64."""
    rng = seeded_rng(draw)
    size = draw(st.integers(1, 64))
    rank = draw(st.integers(0, size - 1))
    across = rng.integers(0, draw(st.sampled_from((1, 17, 2**20))), size)
    values = {"dp_size": size, "dp_rank": rank, "own_tokens": int(across[rank]),
              "tokens_across_ranks": across}
    return Case(TokensAcrossRanks, values, **_layout(draw, TokensAcrossRanks))


#: The valid-case strategy of every boundary class.
VALID: dict[type[contracts.BoundaryObject], Callable[..., st.SearchStrategy[Case]]] = {
    ScheduledBatch: scheduled_batches,
    DraftTokens: draft_tokens,
    ModelInput: model_inputs,
    VerifyOutput: verify_outputs,
    DrafterInput: drafter_inputs,
    DrafterOutput: drafter_outputs,
    LogitsRows: logits_rows,
    RequestOutput: request_outputs,
    TokensAcrossRanks: tokens_across_ranks,
}


def valid_cases(cls: type[contracts.BoundaryObject] | None = None, *, min_seqs: int = 0,
                min_decode: int = 0, min_prefill: int = 0) -> st.SearchStrategy[Case]:
    """Valid cases of ``cls`` (or of any boundary class) with at least so many seqs.

    For objects without phases, ``min_decode`` counts as seqs.
    """
    classes = [cls] if cls is not None else list(contracts.BOUNDARY_OBJECTS)
    options = []
    for each in classes:
        if each is ScheduledBatch:
            options.append(scheduled_batches(min_seqs, min_decode, min_prefill))
        else:
            options.append(VALID[each](max(min_seqs, min_decode)))
    return st.one_of(options)


@st.composite
def mapping_cases(draw: Draw, min_seqs: int = 0, max_seqs: int = MAX_SEQS) -> MappingCase:
    """Valid ``from_mapping`` arguments: drafts as lists, tuples, arrays or tensors."""
    dense = draw(draft_tokens(min_seqs, max_seqs))
    values = dense.values
    rows, counts = values["draft_token_ids"], values["num_drafts"]
    form = draw(st.sampled_from(("list", "tuple", "numpy", "torch")))
    empty = draw(st.sampled_from(("missing", "empty", "none")))
    drafts: dict[int, Any] = {}
    for seq_id, row, count in zip(values["seq_ids"].tolist(), rows, counts.tolist(),
                                  strict=True):
        if count == 0 and empty != "empty":
            if empty == "none":
                drafts[seq_id] = None
            continue
        drafts[seq_id] = _draft_form(row[:count], form)
    per_seq = draw(st.booleans())
    placeholder: Any = rows[:, 0].copy() if per_seq else 0
    ids_form = draw(st.sampled_from(("list", "numpy")))
    ids = values["seq_ids"].tolist() if ids_form == "list" else values["seq_ids"].copy()
    return MappingCase(ids, drafts, values["mtp_k"], values["vocab_size"], placeholder,
                       draw(st.sampled_from((np.int32, np.int64))))


def _draft_form(row: np.ndarray, form: str) -> Any:
    if form == "list":
        return row.tolist()
    if form == "tuple":
        return tuple(row.tolist())
    if form == "torch":
        return torch.from_numpy(row.copy())
    return row.copy()
