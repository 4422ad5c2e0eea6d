"""What the overlap worker's relay carries into a step, against what the step before made.

``EAGLEWorkerV2`` hands each request's bonus token and first draft to the next step
through its future buffers: the draft extend writes them (``next_draft_input``), the next
entry gathers them back by ``future_indices``. A request must get back the two tokens its
own previous step made (SG602), or the verify forward starts from another request's
tokens.

That is one rule between two steps, on two tokens per request, so the view keeps the
relay itself: the previous forward's ids and the rows its draft extend made. A clean
entry costs one comparison of the rows (by request id, or row by row when the batch is
the previous one in its order). Only a mismatch builds the :class:`StepTransition` a
:class:`~specguard.adapters.StepTracker` would have built, whose rule then names the
request and its row. Like the tracker, the relay relates a step to the previous forward
only: a request absent from it is not compared.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._step_plan import UNKNOWN, IdLookup
from specguard.adapters._step_rules import StepTransition, runs
from specguard.contracts import Mode, current_config

__all__ = ["CARRIED", "Relay"]

#: Tokens a request carries from one step into the next: its bonus token and first draft.
CARRIED = 2

#: The rule the relay checks.
_RULE = "SG602"


class _Forward:
    """One forward as the relay remembers it: its ids, and the rows its draft extend made."""

    __slots__ = ("lookup", "made")

    def __init__(self, lookup: IdLookup) -> None:
        self.lookup = lookup
        self.made: np.ndarray | None = None  # (num_seqs, CARRIED) int64, once drafted


class Relay:
    """The relay between consecutive forwards of one worker: :meth:`entered` at each
    entry, :meth:`made` after its draft extend, :meth:`reset` when the view stops
    following the steps."""

    __slots__ = ("_current",)

    def __init__(self) -> None:
        self._current: _Forward | None = None

    @property
    def previous_ids(self) -> np.ndarray | None:
        """The ids of the forward the next entry is compared with (None: none)."""
        return None if self._current is None else self._current.lookup.reference

    @staticmethod
    def watching() -> bool:
        """Whether SG602 runs under the current settings."""
        return current_config().mode is not Mode.OFF and runs(_RULE)

    def reset(self) -> None:
        """Forget the previous forward: the next entry is compared with nothing."""
        self._current = None

    def entered(self, ids: np.ndarray, carried: np.ndarray | None, *, starts: np.ndarray,
                names: Sequence[str]) -> None:
        """A forward entered with ``ids`` (int64, distinct, in batch order). ``carried``
        is a decode batch's ``(num_seqs, CARRIED)`` rows as the entry gathered them (None
        for an extend batch, which carries nothing); each is checked against the row the
        previous forward made for the same request. ``starts`` are the committed tokens
        per request, for the message."""
        previous = self._current
        self._current = _Forward(IdLookup(
            ids, like=previous.lookup if previous is not None else None))
        if carried is None or previous is None or previous.made is None:
            return
        rows, same = previous.lookup.links(ids)
        made = previous.made
        if same:
            if not (carried != made).any():
                return
            has = np.ones(ids.shape[0], dtype=bool)
        else:
            has = rows >= 0
            made = made.take(np.maximum(rows, 0), axis=0)
            if not ((carried != made).any(axis=1) & has).any():
                return
        self._report(ids, rows, carried, made, has, starts, names)

    def made(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """The draft extend of the forward in flight made ``rows`` (``(num_seqs,
        CARRIED)`` int64) for ``ids``, its own ids in its order; anything else is not
        this forward's and is not kept."""
        current = self._current
        if current is None or rows.shape != (ids.shape[0], CARRIED):
            return
        reference = current.lookup.reference
        if ids is not reference and not np.array_equal(ids, reference):
            return
        current.made = rows

    @staticmethod
    def _report(ids: np.ndarray, rows: np.ndarray, carried: np.ndarray, made: np.ndarray,
                has: np.ndarray, starts: np.ndarray, names: Sequence[str]) -> None:
        """The StepTransition of this entry, as a step tracker relates it: its rule
        names the request whose carried row is not the one made for it."""
        n = ids.shape[0]
        unknown = np.full(n, UNKNOWN, dtype=np.int64)
        required = np.where(has, CARRIED, UNKNOWN).astype(np.int64)
        build(StepTransition, {
            "mtp_k": CARRIED, "draft_placeholder": None, "seq_ids": ids, "prev_rows": rows,
            "starts": starts, "expected_starts": unknown,
            "decode_positions": np.arange(n, dtype=np.int64),
            "draft_token_ids": carried, "num_drafts": np.full(n, CARRIED, dtype=np.int64),
            "proposed": made,
            "has_proposal": has, "refilled": np.zeros(n, dtype=bool),
            "expected_num_drafts": required, "num_proposed": required,
        }, names=names)
