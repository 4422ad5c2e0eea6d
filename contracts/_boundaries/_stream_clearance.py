"""The clearances of numpy ``DrafterInput`` and ``ModelInput``: their value rules in one pass.

A token stream is checked by six or seven rules that share most of what they read: the
span offsets (SG304) are the frame every other rule reads positions, samples and slots
in. Answered together, the offsets are checked once, the ids, positions and slots take
one unsigned maximum each, and the within-span steps one subtraction. The engine builds
several of these objects per step (the target's forward and each drafter pass), so this
is most of the default depth's per-step cost. See :mod:`._clearance` for the contract a
clearance keeps: True only where every covered rule passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._seq_ids import unique_non_negative
from specguard.contracts._boundaries.embedding_inputs import (
    sound_spans,
    span_end_positions,
    steps_within_spans,
)
from specguard.contracts._core._clearance import clearance
from specguard.contracts._core._compiled import int_or_none, verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import maximum_of as _maximum
from specguard.contracts._core._numpy_calls import minimum_of as _minimum
from specguard.contracts._core._values import all_within

__all__: list[str] = []


def _positions_step_by_one(positions: np.ndarray, starts: np.ndarray, count: int) -> bool:
    """SG303's second half on sound spans: inside each span a position is the previous
    one plus one (range checked by the caller, so no difference wraps)."""
    if count < 2:
        return True
    return not _count_nonzero(steps_within_spans(positions[:count], starts, count) != 1)


def _positions_in_range(positions: np.ndarray, limit: int | None) -> bool:
    if limit is None:
        return not positions.size or bool(_minimum(positions, None) >= 0)
    return all_within(positions, int(limit))


def _compiled_drafter_input(d: Any) -> bool | None:
    return verdict("drafter_input", d.seq_ids, d.query_start_loc, int(d.num_tokens),
                   d.input_ids, int(d.vocab_size), d.sample_indices, d.positions,
                   int_or_none(d.max_model_len), d.seq_lens, int_or_none(d.max_seq_len))


@clearance("DrafterInput", covers=("SG010", "SG301", "SG302", "SG303", "SG304", "SG306",
                                   "SG307"), compiled=_compiled_drafter_input)
def _clear_drafter_input(d: Any) -> bool:
    ids, starts, count = d.seq_ids, d.query_start_loc, int(d.num_tokens)
    positions = d.positions
    if not unique_non_negative(ids):
        return False  # SG010
    if not sound_spans(starts, count):
        return False  # SG304
    if not all_within(d.input_ids, int(d.vocab_size)):
        return False  # SG301
    picks = d.sample_indices
    if _count_nonzero((picks < starts[:-1]) | (picks >= starts[1:])):
        return False  # SG302
    limit = d.max_model_len
    if not _positions_in_range(positions, limit) \
            or not _positions_step_by_one(positions, starts, count):
        return False  # SG303
    seq_lens = d.seq_lens
    if seq_lens is None:
        return True
    ends = span_end_positions(d)  # SG306, on the sound spans above
    if ends is not None:
        last, checked = ends
        if limit is not None:
            checked &= last < limit  # a position past the limit is SG303's (rejected above)
        if _count_nonzero(checked & (seq_lens - 1 != last)):
            return False
    bound = d.max_seq_len
    return bound is None or not seq_lens.size or bool(_maximum(seq_lens, None) <= bound)


def _compiled_model_input(m: Any) -> bool | None:
    return verdict("model_input", m.seq_ids, m.query_start_loc, int(m.num_tokens),
                   int_or_none(m.num_padding), m.input_ids, int(m.vocab_size), m.positions,
                   int_or_none(m.max_model_len), m.slot_mapping, int(m.num_slots),
                   int_or_none(m.padding_slot_id))


@clearance("ModelInput", covers=("SG010", "SG301", "SG303", "SG304", "SG305", "SG308",
                                 "SG309", "SG310"), compiled=_compiled_model_input)
def _clear_model_input(m: Any) -> bool:
    ids, starts, count = m.seq_ids, m.query_start_loc, int(m.num_tokens)
    if not unique_non_negative(ids):
        return False  # SG010
    padding = int(m.num_padding or 0)
    real = count - padding
    if real < 0 or not sound_spans(starts, real):
        return False  # SG304 (padded: spans end where the padding starts, SG309), SG308
    if not all_within(m.input_ids, int(m.vocab_size)):
        return False  # SG301
    positions = m.positions
    if not _positions_in_range(positions, m.max_model_len) \
            or not _positions_step_by_one(positions, starts, real):
        return False  # SG303
    slots = m.slot_mapping
    if slots.size and (bool(_minimum(slots, None) < -1)
                       or bool(_maximum(slots, None) >= m.num_slots)):
        return False  # SG305
    if m.num_padding is None:
        return True
    pad_id = -1 if m.padding_slot_id is None else int(m.padding_slot_id)
    return not (_count_nonzero(slots[real:] != pad_id)  # SG308
                or _count_nonzero(slots[:real] == pad_id))  # SG310
