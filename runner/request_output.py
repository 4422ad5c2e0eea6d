"""What each request is finally given at the end of a step: the verified tokens, trimmed.

A forward's rows hold every token the verifier confirmed, up to ``mtp_k + 1`` per seq: an
end-of-sequence token the drafts guessed, and tokens after it, included, and more than a
request needs to reach its ``max_tokens``. The scheduler gives each request the tokens
of its row up to and including its first stop id, and no more than it still needs; the
request is finished when it got either. :func:`given_tokens` works that out for the
whole forward at once (no loop over seqs) and builds the hand-over's
:class:`specguard.contracts.RequestOutput`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specguard import contracts
from specguard.runner import faults
from specguard.runner._timing import CLOCK

__all__ = ["GivenTokens", "given_tokens"]


@dataclass(frozen=True)
class GivenTokens:
    """Per row of a forward: how many of its tokens the request is given, and whether it
    is finished with them."""

    num_given: np.ndarray
    """``[n]`` tokens of each row the request is given, from the row's first column."""
    finished: np.ndarray
    """``[n]`` whether the request is finished once it has them."""


def given_tokens(
    *, seq_ids: np.ndarray, token_ids: np.ndarray, num_generated: np.ndarray,
    max_tokens: np.ndarray, stop_token_ids: np.ndarray, vocab_size: int,
    fault: str | None = None,
) -> GivenTokens:
    """Trim each row of a forward (``token_ids``, ``-1`` padded) to what its request is
    given: through its first stop id (``stop_token_ids``, ``-1`` padded per row), within
    ``max_tokens - num_generated``. Builds the step's ``RequestOutput`` (unless off).

    ``untrimmed-output`` gives every verified token and finishes a request only by its
    length, as the engines whose trim was written for one token per step do.
    """
    width = token_ids.shape[1]
    columns = np.arange(width)
    real = token_ids >= 0
    counts = real.sum(axis=1)
    is_stop = np.zeros(token_ids.shape, dtype=bool)
    for column in range(stop_token_ids.shape[1]):  # a request has one or two stop ids
        stop = stop_token_ids[:, column:column + 1]
        is_stop |= (token_ids == stop) & (stop >= 0)
    is_stop &= real
    stops_at = np.where(is_stop.any(axis=1), is_stop.argmax(axis=1) + 1, width + 1)
    room = np.maximum(max_tokens - num_generated, 0)
    if fault == faults.UNTRIMMED_OUTPUT:
        given = counts
        finished = num_generated + given >= max_tokens
    else:
        given = np.minimum(np.minimum(counts, room), stops_at)
        finished = (given > 0) & ((given == stops_at) | (num_generated + given >= max_tokens))
    rows = np.where(columns[None, :] < given[:, None], token_ids, contracts.PLACEHOLDER)
    CLOCK.build(contracts.RequestOutput, vocab_size=vocab_size, seq_ids=seq_ids, token_ids=rows,
                num_emitted=given, num_generated=num_generated, max_new_tokens=max_tokens,
                stop_token_ids=stop_token_ids, finished=finished)
    return GivenTokens(given, finished)
