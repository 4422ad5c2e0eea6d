"""The clearances of the step tracker's objects: ``StepTransition``'s six rules between
two steps in one pass, and the verifier's and the drafter's rows against the step; and
the tracker's fused hand-overs, which answer for an object before it is derived.

The step tracker builds a transition every step, in every engine, and its six rules
(SG601, SG602, SG603, SG607, SG660, SG661) each read a few of the same per-row arrays.
On a clean transition one pass answers for all of them, sharing the masks they would
each build (which rows carry drafts, which the runner refills); a rule runs, and names
its offender, only when this says no. See ``specguard.contracts._core._clearance`` for
the contract it keeps: True only where every covered rule passes.

The fused hand-overs go one step further, where the compiled kernels are at hand: one
call derives what the tracker would build from the previous step and the batch, checks
it, and (for the verifier's and the drafter's rows) folds it into the step in flight.
Their True stands for building and validating the object, so it is asked only where the
object would run exactly the rules the kernel checks; anything else (False, a decline,
no kernels) leaves the tracker's numpy path to build it and name the offender.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.adapters._step_plan import StepLinks, StepPlan
from specguard.adapters._step_rules import (
    DRAFTER,
    TRANSITION,
    VERIFY,
    DraftRows,
    StepTransition,
    VerifyRows,
)
from specguard.contracts import BoundaryObject, current_config
from specguard.contracts._core._clearance import clearance
from specguard.contracts._core._compiled import int_or_none, verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import same_ids

__all__ = ["fused_draft_rows", "fused_transition", "fused_verify_rows"]


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


#: Per tuple of rules a class runs at some depth (kept, so that its id is not reused):
#: whether they are exactly the rules a fused kernel checks.
_EXACTLY: dict[int, tuple[tuple[Any, ...], bool]] = {}


def _runs_exactly(cls: type[BoundaryObject], codes: tuple[str, ...]) -> bool:
    """Whether ``cls`` runs exactly the rules ``codes`` under the current settings."""
    rules = cls.__sg_plan__.by_depth[current_config().depth]
    found = _EXACTLY.get(id(rules))
    if found is None or found[0] is not rules:
        found = _EXACTLY[id(rules)] = (rules, {r.code for r in rules} == set(codes))
    return found[1]


def fused_transition(previous: Any, plan: StepPlan, links: StepLinks, refilled: np.ndarray,
                     progress: bool, whole: bool, remembered: np.ndarray, ends: np.ndarray,
                     last_short: np.ndarray | None, first_seen: np.ndarray | None) -> bool:
    """Whether the StepTransition the tracker would derive from ``previous`` (the tracker's
    own StepState) and ``plan`` certainly passes every rule it runs: then it need not be
    derived nor built. False where that is not certain."""
    placeholder = plan.draft_placeholder
    if (placeholder is not None and type(placeholder) is not int) \
            or not _runs_exactly(StepTransition, TRANSITION):
        return False
    return verdict(
        "transition", previous.starts, previous.advance, previous.drafted,
        previous.proposals, previous.num_proposed, previous.mtp_k, plan.is_decode,
        plan.starts, plan.num_drafts, plan.draft_token_ids, placeholder, plan.mtp_k,
        plan.drafts_handed_over, links.prev_rows, links.same_order, refilled, remembered,
        ends, last_short, first_seen, progress, whole) is True


def fused_verify_rows(plan: StepPlan, ids: np.ndarray, accepted: np.ndarray,
                      before: np.ndarray, advance: np.ndarray) -> bool:
    """Whether the verifier's rows certainly pass SG604 and SG605 against the step in
    flight (``plan``); if so, their accepted counts are folded into ``advance`` already."""
    if not _runs_exactly(VerifyRows, VERIFY):
        return False
    return verdict("verify_rows", plan.seq_ids, plan.is_decode, plan.num_drafts, ids,
                   accepted, plan.mtp_k, before, advance) is True


def fused_draft_rows(plan: StepPlan, ids: np.ndarray, drafts: np.ndarray,
                     num_proposed: np.ndarray | None, proposals: np.ndarray,
                     drafted: np.ndarray, counts: np.ndarray) -> bool:
    """Whether the drafter's rows certainly pass SG606 against the step in flight
    (``plan``); if so, their drafts are kept as the step's proposals already."""
    if not _runs_exactly(DraftRows, DRAFTER):
        return False
    return verdict("draft_rows", plan.seq_ids, ids, drafts, num_proposed, plan.mtp_k,
                   proposals, drafted, counts) is True
