"""The clearances of the step tracker's objects: ``StepTransition``'s six rules between
two steps in one pass, and the verifier's and the drafter's rows against the step.

The step tracker builds a transition every step, in every engine, and its six rules
(SG601, SG602, SG603, SG607, SG660, SG661) each read a few of the same per-row arrays.
On a clean transition one pass answers for all of them, sharing the masks they would
each build (which rows carry drafts, which the runner refills); a rule runs, and names
its offender, only when this says no. See ``specguard.contracts._core._clearance`` for
the contract it keeps: True only where every covered rule passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.adapters._step_rules import DRAFTER, TRANSITION, VERIFY
from specguard.contracts._core._clearance import clearance
from specguard.contracts._core._compiled import int_or_none, verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import same_ids

__all__: list[str] = []


@clearance("StepTransition", covers=TRANSITION)
def _clear_transition(step: Any) -> bool:
    starts, expected = step.starts, step.expected_starts
    found = verdict(
        "step_transition", starts, expected, step.refilled, step.num_drafts,
        step.decode_positions, step.draft_token_ids,
        int_or_none(step.draft_placeholder), step.has_proposal, step.proposed,
        step.prev_rows, step.expected_num_drafts, step.num_proposed, int(step.mtp_k),
        step.first_seen, step.drafts_handed_over)
    if found is not None:
        return found
    if _count_nonzero((expected >= 0) & (starts >= 0) & (starts != expected)):
        return False  # SG601
    refilled, num_drafts = step.refilled, step.num_drafts
    read = ~refilled  # rows whose drafts the batch itself carries
    if step.decode_positions.shape[0] == 0:
        return True  # every other rule reads decode rows only
    drafts, placeholder = step.draft_token_ids, step.draft_placeholder
    carried = step.has_proposal & read
    if _count_nonzero(carried):  # SG602
        compared = (np.arange(drafts.shape[1])[None, :] < num_drafts[:, None]) \
            & carried[:, None] & (drafts != step.proposed)
        if placeholder is not None:
            compared &= drafts != placeholder
        if _count_nonzero(compared):
            return False
    needs = refilled if placeholder is None \
        else refilled | (drafts == placeholder).any(axis=1)
    if _count_nonzero(needs) \
            and _count_nonzero(needs & (step.prev_rows.take(step.decode_positions) < 0)):
        return False  # SG603
    wanted = step.expected_num_drafts
    if _count_nonzero((wanted >= 0) & (num_drafts < wanted)):
        return False  # SG607
    proposed = step.num_proposed
    if proposed is not None:  # SG660
        real = np.where(refilled, int(step.mtp_k), num_drafts)
        if _count_nonzero((proposed >= 0) & (real > proposed)):
            return False
    first = step.first_seen
    if first is not None:  # SG661
        unmade = first & (num_drafts > 0) & read
        handed = step.drafts_handed_over
        if handed is not None:
            unmade &= ~handed
        if _count_nonzero(unmade):
            return False
    return True


def _rows_follow(batch_ids: np.ndarray, seq_ids: np.ndarray) -> bool:
    """One row per seq of the step, in its order: one comparison of their bytes."""
    return seq_ids.shape == batch_ids.shape and same_ids(seq_ids, batch_ids)


@clearance("VerifyRows", covers=VERIFY)
def _clear_verify_rows(rows: Any) -> bool:
    """SG604 and SG605 on the verifier's rows, read once a step by every tracked engine:
    the rows are the decode seqs in order, and none accepts more drafts than it carried."""
    if not _rows_follow(rows.batch_ids, rows.seq_ids):
        return False  # SG604
    accepted, drafts = rows.num_accepted, rows.num_drafts
    return accepted.shape != drafts.shape or not _count_nonzero(accepted > drafts)  # SG605


@clearance("DraftRows", covers=DRAFTER)
def _clear_draft_rows(rows: Any) -> bool:
    """SG606: the drafter's rows are the step's seqs, in batch order."""
    return _rows_follow(rows.batch_ids, rows.seq_ids)
