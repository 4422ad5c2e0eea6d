"""The clearances of numpy ``VerifyOutput``, ``DrafterOutput``, ``RequestOutput`` and
``LogitsRows``.

Each is handed over once per step, and each has a few rules that read the same rows: a
verify row's layout and its accepted count, a request's emitted tokens, its stop ids and
its limit, a request's logits rows and its rows of per-row data. One pass answers for
all of them on a clean object, sharing the masks the rules would each build (a row's
real columns, where a stop id sits). See :mod:`._clearance` for the contract a
clearance keeps: True only where every covered rule passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._seq_ids import unique_non_negative
from specguard.contracts._core._clearance import clearance
from specguard.contracts._core._compiled import verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import maximum_of as _maximum
from specguard.contracts._core._numpy_calls import minimum_of as _minimum
from specguard.contracts._core._values import all_within

__all__: list[str] = []

_NONE = -1  # what pads a row past its real tokens


def _prefix_layout(tokens: np.ndarray, real: np.ndarray, vocab: int) -> bool:
    """Vocabulary ids exactly where ``real``, ``-1`` everywhere else."""
    if not tokens.size:
        return True
    if bool(_minimum(tokens, None) < _NONE) or bool(_maximum(tokens, None) >= vocab):
        return False
    return not _count_nonzero((tokens != _NONE) != real)


def _compiled_verify_output(out: Any) -> bool | None:
    return verdict("verify_output", out.seq_ids, out.num_accepted, int(out.mtp_k),
                   out.token_ids, int(out.vocab_size))


@clearance("VerifyOutput", covers=("SG010", "SG201", "SG202"), compiled=_compiled_verify_output)
def _clear_verify_output(out: Any) -> bool:
    accepted, width = out.num_accepted, int(out.mtp_k) + 1
    if not unique_non_negative(out.seq_ids) or not all_within(accepted, width):
        return False  # SG010, SG201
    real = np.arange(width)[None, :] <= accepted[:, None]
    return _prefix_layout(out.token_ids, real, int(out.vocab_size))  # SG202


def _compiled_drafter_output(out: Any) -> bool | None:
    return verdict("drafter_output", out.seq_ids, out.draft_token_ids, int(out.vocab_size),
                   out.num_proposed, int(out.mtp_k))


@clearance("DrafterOutput", covers=("SG010", "SG108", "SG116"),
           compiled=_compiled_drafter_output)
def _clear_drafter_output(out: Any) -> bool:
    counts = out.num_proposed
    return (unique_non_negative(out.seq_ids)
            and all_within(out.draft_token_ids, int(out.vocab_size))  # SG108
            and (counts is None or all_within(counts, int(out.mtp_k) + 1)))  # SG116


def _compiled_request_output(out: Any) -> bool | None:
    return verdict("request_output", out.seq_ids, out.token_ids, out.num_emitted,
                   out.num_generated, out.stop_token_ids, int(out.vocab_size),
                   out.max_new_tokens, out.finished)


@clearance("RequestOutput", covers=("SG010", "SG401", "SG402", "SG403", "SG404"),
           compiled=_compiled_request_output)
def _clear_request_output(out: Any) -> bool:
    tokens, counts, given = out.token_ids, out.num_emitted, out.num_generated
    stops, vocab = out.stop_token_ids, int(out.vocab_size)
    width = tokens.shape[1]
    if not unique_non_negative(out.seq_ids) or not all_within(counts, width + 1):
        return False  # SG010, SG401's counts
    if given.size and bool(_minimum(given, None) < 0):
        return False  # SG401
    if stops.size and (bool(_minimum(stops, None) < _NONE) or bool(_maximum(stops, None) >= vocab)):
        return False  # SG401's stop ids
    columns = np.arange(width)[None, :]
    if not _prefix_layout(tokens, columns < counts[:, None], vocab):
        return False  # SG401: so the real tokens are exactly the emitted ones
    total = given + counts
    if _count_nonzero(total > out.max_new_tokens):
        return False  # SG403
    hits = np.zeros(tokens.shape, dtype=bool)
    for column in range(stops.shape[1]):  # a few stop ids: one pass each
        stop = stops[:, column:column + 1]
        hits |= (tokens == stop) & (stop >= 0)
    last = counts[:, None] - 1
    if _count_nonzero(hits & (columns < last)):
        return False  # SG402: a stop with more tokens after it
    done = ((hits & (columns == last)).any(1) | (total >= out.max_new_tokens)) & (counts > 0)
    return not _count_nonzero(done & ~out.finished)  # SG404


def _compiled_logits_rows(rows: Any) -> bool | None:
    return verdict("logits_rows", rows.seq_ids, rows.num_drafts, rows.row_starts,
                   rows.row_counts, int(rows.num_logits), int(rows.num_rows))


@clearance("LogitsRows", covers=("SG010", "SG311", "SG312"), compiled=_compiled_logits_rows)
def _clear_logits_rows(rows: Any) -> bool:
    drafts, starts, counts = rows.num_drafts, rows.row_starts, rows.row_counts
    n = drafts.shape[0]
    if not unique_non_negative(rows.seq_ids):
        return False  # SG010
    if n and (bool(_minimum(drafts, None) < 0) or bool(_minimum(starts, None) < -1)):
        return False  # SG311's counts, SG312's starts
    if drafts.sum() + n != rows.num_logits:
        return False  # SG311
    covered = starts >= 0
    if not _count_nonzero(covered):  # no per-row data for any request (no grammar here)
        return not _count_nonzero(counts)  # SG312
    if _count_nonzero(covered & (counts != drafts + 1)) \
            or _count_nonzero(~covered & (counts != 0)):
        return False  # SG312: each covered request's 1 + K rows, none for the others
    ends = starts + counts
    if _count_nonzero(covered & (ends > rows.num_rows)):
        return False  # SG312: inside the data
    first = starts[covered]
    order = np.argsort(first, kind="stable")
    first, last = first[order], ends[covered][order]
    return not _count_nonzero(first[1:] < last[:-1])  # SG312: no request's rows shared
